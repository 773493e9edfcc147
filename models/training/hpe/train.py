"""Training the pose model: the paper's three strategies under five privacy modes.

Strategies (Sivangi et al.):
- ``frozen``: the backbone keeps its initial weights (ImageNet file if present); only the SimCC
  head trains. With no augmentation the backbone's output is a fixed function of each crop, so
  it is computed once (for the crops, their blurred copies and the public set) and every step
  runs only the head: the same gradients for a fraction of the compute.
- ``finetune``: everything trains, from the same initial weights.
- ``scratch``: everything trains from a random backbone.

Modes (all DP modes share Poisson sampling at rate q, per-sample clipping to C, Gaussian noise
of std sigma*C on the clipped sum, division by the EXPECTED batch size q*N, and one accountant
step per batch, empty batches included; the pieces come from models/training/privacy):
- ``nonprivate``: mean loss over the (Poisson) batch, no clipping or noise.
- ``dpsgd``: DP-SGD (``dpsgd_gradients``).
- ``projdp``: projected DP-SGD (PDP-SGD): the noisy private sum is projected onto the top-k
  eigen-subspace of per-sample gradients of a small PUBLIC set (``PublicSubspace``), recomputed
  every K steps at the current weights; no public loss.
- ``featdp``: feature DP: the noisy private sum of DP-SGD plus the noise-free gradient of the
  loss on public features psi(x) (Gaussian blur of the crop, as in the paper) with no projection.
- ``fpdp``: Feature-Projective DP, both of the above (``fpdp_parts``).
What is public: the blurred crops psi(x) (the paper's threat model: the fine detail that
identifies a person is what blur removes) and the held-out public crops (data.split_public, or
any crops passed as ``public``, e.g. anonymized renders). The guarantee covers the raw pixels of
the private crops; labels are treated as public, as in the privacy module.

The record (what one epsilon protects) is a VIDEO by default (``record="track"``: one person's
track in one video): Poisson sampling draws records, every crop of a drawn record enters the
batch, and the record's gradient (the mean over its crops) is clipped once, so epsilon is per
video, never per frame. Noise, private sampling and the psi batch come from three independent
streams (models/training/privacy/seeds.py), seeded from the OS unless fixed explicitly and pairwise
differently.

Per-sample gradients use torch.func (models/training/privacy/clipping.py), not Opacus: TinyViT's attention
keeps a trainable bias table on a module whose children also train, which Opacus' hooks would
get wrong (``check_opacus_compatible``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from anonymask.models.training.privacy.accountant import Accountant, sigma_for_epsilon
from anonymask.models.training.privacy.clipping import summed_grads, write_grads
from anonymask.models.training.privacy.fpdp import PublicSubspace, check_psi_blur, gaussian_blur_video
from anonymask.models.training.privacy.mechanism import Inputs, PrivateStep, StepParts
from anonymask.models.training.privacy.report import PrivacyReport
from anonymask.models.training.privacy.sampler import PoissonBatchSampler, epochs_to_steps, record_groups
from anonymask.models.training.privacy.seeds import check_fixed_seeds, resolve_streams, seeds_record

from .data import PoseCrops
from .metrics import mean_error, pck_bbox, pckh
from .model import STRATEGIES, PoseModel, decode, simcc_loss_fn

MODES = ("nonprivate", "dpsgd", "projdp", "featdp", "fpdp")
RECORDS = ("video", "track")
PRIVATE_MODES = MODES[1:]
NEEDS_PUBLIC_SET = ("projdp", "fpdp")
NEEDS_PSI = ("featdp", "fpdp")


@dataclass
class HPETrainConfig:
    strategy: str = "finetune"
    mode: str = "nonprivate"
    epochs: float = 10.0
    batch_size: float = 32.0  # EXPECTED number of RECORDS per step, q*N (Poisson sampling in every mode)
    record: str = "video"  # what epsilon protects: a video, or one person's track in a video
    lr: float = 1e-3
    optimizer: str = "adam"  # adam | sgd
    momentum: float = 0.9
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0  # C
    noise_multiplier: float | None = None  # sigma; None: calibrated to target_epsilon
    target_epsilon: float | None = None
    delta: float = 1e-5
    accountant: str = "rdp"
    subspace_k: int = 16  # rank of the public gradient subspace
    subspace_refresh: int = 10  # recompute it every K steps
    subspace_samples: int = 64  # public samples per recomputation
    blur_sigma: float | None = None  # psi: Gaussian blur std in input pixels (None: the paper's, scaled)
    blur_allow_weak: bool = False  # accept a blur weaker than the paper's (the report says so)
    public_weight: float = 1.0
    adjacency: str = "add_remove"  # add/remove one crop's raw pixels (psi(x) and labels public)
    accounting: str = "sound"  # "paper": psi term on the private batch itself (not valid DP)
    seed: int = 0  # public-set draws for the subspace (public data, not secret)
    sampling_seed: int | None = None  # private Poisson sampling; None: OS entropy (a real private run)
    public_seed: int | None = None  # the psi batch's own sampler; None: OS entropy
    noise_seed: int | None = None  # None: OS entropy (a real private run); fixed seeds pairwise different
    chunk_size: int | None = None  # vmap chunk (memory bound of per-sample gradients)
    eval_every: int = 1  # epochs between test evaluations (0: only at the end)
    device: str = "auto"

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.strategy!r}; choose one of {STRATEGIES}")
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}; choose one of {MODES}")
        if self.optimizer not in ("adam", "sgd"):
            raise ValueError(f"optimizer must be 'adam' or 'sgd', got {self.optimizer!r}")
        if self.mode in PRIVATE_MODES and self.noise_multiplier is None and self.target_epsilon is None:
            raise ValueError(f"mode {self.mode!r} needs noise_multiplier or target_epsilon")
        if self.epochs <= 0 or self.batch_size <= 0:
            raise ValueError("epochs and batch_size must be > 0")
        if self.adjacency not in ("add_remove", "replace"):
            raise ValueError(f"adjacency must be add_remove or replace, got {self.adjacency!r}")
        if self.accounting not in ("sound", "paper"):
            raise ValueError(f"accounting must be sound or paper, got {self.accounting!r}")
        if self.accounting == "paper" and self.mode not in NEEDS_PSI:
            raise ValueError(f"accounting=paper reproduces the same-batch psi term of {NEEDS_PSI}, not {self.mode}")
        if self.record not in RECORDS:
            raise ValueError(f"record must be one of {RECORDS}, got {self.record!r}")
        check_fixed_seeds({"noise": self.noise_seed, "sampling": self.sampling_seed, "public": self.public_seed})


@dataclass
class HPETrainResult:
    model: PoseModel
    config: HPETrainConfig
    history: list[dict] = field(default_factory=list)  # one row per epoch
    privacy: dict = field(default_factory=dict)  # PrivacyReport.to_dict()
    sigma: float = 0.0
    steps: int = 0
    sample_rate: float = 0.0
    seconds: float = 0.0
    final: dict = field(default_factory=dict)  # last evaluation on the test crops

    def summary(self) -> dict[str, Any]:
        eps = self.privacy.get("epsilon", "inf")
        return {
            "strategy": self.config.strategy, "mode": self.config.mode, "epsilon": eps,
            "sigma": self.sigma, "q": self.sample_rate, "steps": self.steps, "C": self.config.max_grad_norm,
            "seconds": round(self.seconds, 2), **self.final,
        }  # fmt: skip


# --------------------------------------------------------------------------- helpers
def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def blur_images(x: Tensor, sigma: float) -> Tensor:
    """psi: Gaussian blur of (B, C, H, W) images (the privacy module's video blur, one frame)."""
    return gaussian_blur_video(x.unsqueeze(2), sigma).squeeze(2)


@torch.no_grad()
def backbone_features(model: PoseModel, x: Tensor, batch: int = 64) -> Tensor:
    """Frozen-backbone outputs of ``x`` in batches (same device as the model)."""
    device = next(model.parameters()).device
    out = [model.features(x[i : i + batch].to(device)) for i in range(0, x.shape[0], batch)]
    if not out:
        h, w = model.config.input_size
        return model.features(torch.zeros(0, 3, h, w, device=device))
    return torch.cat(out)


@torch.no_grad()
def predict(model: PoseModel, x: Tensor, batch: int = 64, soft: bool = False) -> tuple[Tensor, Tensor]:
    """(keypoints (N,K,2) in crop pixels, logits loss-ready (N,K,Wx+Wy)) on the model's device."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    logits = [model(x[i : i + batch].to(device)).cpu() for i in range(0, x.shape[0], batch)]
    model.train(was_training)
    logits_t = torch.cat(logits) if logits else torch.zeros(0, model.config.num_keypoints, sum(model.config.bins))
    return decode(logits_t, model.config, soft=soft)[0], logits_t


def evaluate_pose_model(model: PoseModel, crops: PoseCrops, batch: int = 64) -> dict[str, float]:
    """PCKh@0.5, PCK@0.2 (bbox), mean pixel error and mean SimCC loss on ``crops``."""
    x, y = crops.tensors()
    pred, logits = predict(model, x, batch)
    loss = simcc_loss_fn(model.config)(logits, y)
    return {
        "pckh": pckh(pred, crops.keypoints, crops.visible, crops.head_size),
        "pck_bbox": pck_bbox(pred, crops.keypoints, crops.visible, crops.bbox_size),
        "mean_error_px": mean_error(pred, crops.keypoints, crops.visible),
        "loss": float(loss.mean()) if len(crops) else float("nan"),
    }


def _ledger_kind(cfg: HPETrainConfig) -> tuple[str, str]:
    """(accountant, adjacency): the paper's accounting is RDP under add/remove, whatever is set."""
    return ("rdp", "add_remove") if cfg.accounting == "paper" else (cfg.accountant, cfg.adjacency)


def calibrate_sigma(cfg: HPETrainConfig, sample_rate: float, steps: int) -> float:
    if cfg.mode == "nonprivate":
        return 0.0
    if cfg.noise_multiplier is not None:
        return float(cfg.noise_multiplier)
    accountant, adjacency = _ledger_kind(cfg)
    return sigma_for_epsilon(sample_rate, steps, float(cfg.target_epsilon), cfg.delta, accountant, adjacency=adjacency)


def psi_description(cfg: HPETrainConfig, input_size: tuple[int, int]) -> tuple[float, dict]:
    """psi's blur sigma (the paper's blur scaled to the input when unset) and its report entry."""
    from anonymask.models.training.privacy.fpdp import blur_floor

    sigma = cfg.blur_sigma if cfg.blur_sigma is not None else blur_floor(input_size)
    return sigma, check_psi_blur(sigma, input_size, cfg.blur_allow_weak)


def _noise_generator(seed: int, device: torch.device) -> torch.Generator:
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    return gen


def _psi_batch_records(cfg: HPETrainConfig, n: int, q: float, steps: int, seed: int):
    """Records of the public psi batch of each step: an independent Poisson draw from the public
    stream (sound), or None when the private batch itself is used (the paper's accounting)."""
    if cfg.mode not in NEEDS_PSI or cfg.accounting == "paper":
        return None
    return iter(PoissonBatchSampler(n, q, steps=steps, seed=seed))


def expand_records(records: list[int], groups: list[list[int]]) -> tuple[list[int], list[int], list[float]]:
    """(crop indices, local record id 0..R-1 of each crop, weight 1/|record| of each crop) of the
    drawn ``records``: every crop of a drawn record goes in, and the weights make a record's loss
    the mean over its crops."""
    idx, local, weights = [], [], []
    for j, r in enumerate(records):
        g = groups[r]
        idx += g
        local += [j] * len(g)
        weights += [1.0 / len(g)] * len(g)
    return idx, local, weights


# --------------------------------------------------------------------------- one step's gradient
@dataclass
class StepInputs:
    """What one step sees (the net's inputs: images, or backbone features when frozen)."""

    x: Tensor
    y: Tensor
    weights: Tensor | None = None  # 1/|record| per crop (a record's loss = mean over its crops)
    records: Tensor | None = None  # local record id per crop: the clip bounds a record
    psi_x: Tensor | None = None  # public features psi(x) of the PUBLIC batch (featdp, fpdp)
    psi_y: Tensor | None = None
    psi_weights: Tensor | None = None
    public_x: Tensor | None = None  # public set (for the subspace), drawn when due
    public_y: Tensor | None = None


class GradientRule:
    """Turns one Poisson batch into the final gradient of ``mode``: the non-private mean, or the
    privacy module's one private step (models/training/privacy/mechanism.py) for every DP mode."""

    def __init__(self, cfg: HPETrainConfig, loss_fn: Callable, sigma: float, expected_batch_size: float,
                 device: torch.device, ledger: Accountant | None = None, sample_rate: float | None = None,
                 noise_seed: int | None = None):  # fmt: skip
        """``noise_seed``: the noise stream's generator seed (default: the config's, stream-derived,
        or OS entropy)."""
        self.cfg, self.loss_fn, self.sigma, self.eb = cfg, loss_fn, sigma, expected_batch_size
        self.mode = cfg.mode
        self.step_fn: PrivateStep | None = None
        self.last_records: list[int] | None = None  # records of the last private batch (tests only)
        self.last_psi_records: list[int] | None = None
        if noise_seed is None:
            noise_seed = resolve_streams(cfg.noise_seed, None, None)["noise"]
        if self.mode in PRIVATE_MODES:
            self.step_fn = PrivateStep(
                self.mode, max_grad_norm=cfg.max_grad_norm, noise_multiplier=sigma,
                expected_batch_size=expected_batch_size, generator=_noise_generator(noise_seed, device),
                subspace_k=cfg.subspace_k, subspace_refresh=cfg.subspace_refresh, public_weight=cfg.public_weight,
                loss_fn=loss_fn, chunk_size=cfg.chunk_size, accountant=ledger, sample_rate=sample_rate,
            )  # fmt: skip
        self.last_parts: StepParts | None = None  # pieces of the last private step (tests/diagnostics)

    @property
    def subspace(self) -> PublicSubspace | None:
        return self.step_fn.subspace if self.step_fn is not None else None

    def needs_public_set(self, step: int) -> bool:
        return self.step_fn is not None and self.step_fn.needs_subspace_set()

    def __call__(self, net: nn.Module, params: dict[str, Tensor], inp: StepInputs, step: int) -> dict[str, Tensor]:
        if self.step_fn is None:  # non-private: mean over the realised batch
            n = max(int(inp.x.shape[0]), 1)
            return {k: g / n for k, g in summed_grads(net, inp.x, inp.y, params, loss_fn=self.loss_fn).items()}
        public = Inputs(inp.psi_x, inp.psi_y, weights=inp.psi_weights) if self.step_fn.needs_public_batch else None
        subspace_set = Inputs(inp.public_x, inp.public_y) if inp.public_x is not None else None
        private = Inputs(inp.x, inp.y, weights=inp.weights, records=inp.records)
        self.last_parts = self.step_fn.parts(net, params, private, public, subspace_set)
        return self.last_parts.combined(self.eb)


# --------------------------------------------------------------------------- the loop
def _optimizer(cfg: HPETrainConfig, params: list[Tensor]) -> torch.optim.Optimizer:
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)


def _privacy_report(cfg: HPETrainConfig, ledger: Accountant | None, steps: int, q: float,
                    psi: dict | None = None, disclosures: dict | None = None) -> dict:  # fmt: skip
    """The run's report. No dataset fingerprint and no realised counts: both are functions of the
    private data outside the accountant (DESIGN.md invariant 12)."""
    seeds = seeds_record(cfg.noise_seed, cfg.sampling_seed, cfg.public_seed)
    if cfg.mode == "nonprivate" or ledger is None:
        rep = PrivacyReport.nonprivate(steps, "", q)
        rep.record, rep.seeds = cfg.record, seeds
        return rep.to_dict()
    public_term = None
    if cfg.mode in NEEDS_PSI:
        drawn = (f"an independent Poisson batch of the {cfg.record}s (its own random stream)"
                 if cfg.accounting == "sound" else "the private batch itself")  # fmt: skip
        public_term = f"psi(x) (Gaussian blur), noise-free, on {drawn}"
    rep = PrivacyReport.from_accountant(
        cfg.mode, ledger, cfg.delta, cfg.max_grad_norm, accounting=cfg.accounting, record=cfg.record,
        public_term=public_term, psi=psi, compare_with=(), seeds=seeds, disclosures=disclosures,
        fixed_seeds=tuple(name for name in ("noise_seed", "sampling_seed") if getattr(cfg, name) is not None),
    )  # fmt: skip
    return rep.to_dict()


def train_pose_model(
    model: PoseModel,
    train: PoseCrops,
    cfg: HPETrainConfig,
    public: PoseCrops | None = None,
    test: PoseCrops | None = None,
    progress: Callable[[dict], None] | None = None,
    inspect: Callable[[int, GradientRule], None] | None = None,
    disclosures: dict | None = None,
) -> HPETrainResult:
    """Train ``model`` in place on the private ``train`` crops; evaluate on ``test`` per epoch.

    ``public`` is needed by projdp and fpdp (the subspace's public set). ``inspect(step, rule)``
    is called after every step (audits and tests read ``rule.last_parts``; never log it).
    ``disclosures``: data used without protection (e.g. training videos held out as the public
    set), stated in the privacy report. The returned history has,
    per epoch: steps, epsilon spent so far (DP modes), the mean train loss (non-private only: a DP
    run releases nothing but its noisy gradients) and the test metrics.
    """
    t0 = time.perf_counter()
    if len(train) == 0:
        raise ValueError("no training crops")
    if cfg.mode in NEEDS_PUBLIC_SET and (public is None or len(public) == 0):
        raise ValueError(f"mode {cfg.mode!r} needs a non-empty public set (data.split_public)")
    device = resolve_device(cfg.device)
    model.to(device).train()
    model.set_trainable(cfg.strategy)
    loss_fn = simcc_loss_fn(model.config)

    # crops of each record (video or track); non-private runs protect nothing and sample crops
    groups = [[i] for i in range(len(train))] if cfg.mode == "nonprivate" else record_groups(train.record_ids(cfg.record))
    n = len(groups)  # N counts RECORDS: q, the expected batch and epsilon are per record
    q = min(1.0, cfg.batch_size / n)
    steps = epochs_to_steps(cfg.epochs, q)
    steps_per_epoch = max(1, int(round(1.0 / q)))
    sigma = calibrate_sigma(cfg, q, steps)
    ledger = Accountant(*_ledger_kind(cfg)) if cfg.mode in PRIVATE_MODES else None
    streams = resolve_streams(cfg.noise_seed, cfg.sampling_seed, cfg.public_seed)
    rule = GradientRule(cfg, loss_fn, sigma, q * n, device, ledger, q, noise_seed=streams["noise"])

    # inputs of the trained net: images, or fixed backbone features under the frozen strategy
    x_all, y_all = train.tensors()
    pub_x = pub_y = None
    if public is not None and len(public) and cfg.mode in NEEDS_PUBLIC_SET:
        pub_x, pub_y = public.tensors()
    psi = None
    if cfg.mode in NEEDS_PSI:
        blur_sigma, psi = psi_description(cfg, tuple(model.config.input_size))
    psi_all = blur_images(x_all, blur_sigma) if cfg.mode in NEEDS_PSI else None
    if cfg.strategy == "frozen":
        net: nn.Module = model.head
        x_all = backbone_features(model, x_all)
        psi_all = backbone_features(model, psi_all) if psi_all is not None else None
        pub_x = backbone_features(model, pub_x) if pub_x is not None else None
    else:
        net = model
    x_all, y_all = x_all.to(device), y_all.to(device)
    psi_all = psi_all.to(device) if psi_all is not None else None
    pub_x = pub_x.to(device) if pub_x is not None else None
    pub_y = pub_y.to(device) if pub_y is not None else None

    params = {k: p for k, p in net.named_parameters() if p.requires_grad}
    optimizer = _optimizer(cfg, list(params.values()))
    sampler = PoissonBatchSampler(n, q, steps=steps, seed=streams["sampling"])  # records, not crops
    psi_batches = _psi_batch_records(cfg, n, q, steps, streams["public"])
    public_rng = np.random.default_rng([cfg.seed, 0x9B])  # the public set's draws (public data)

    def as_tensor(values, dtype=torch.long):
        return torch.as_tensor(values, dtype=dtype, device=device)

    history: list[dict] = []
    loss_sum, loss_count = 0.0, 0
    for step, records in enumerate(sampler):
        idx_list, local, weights = expand_records(records, groups)
        idx = as_tensor(idx_list)
        inp = StepInputs(x_all[idx], y_all[idx], as_tensor(weights, torch.float32), as_tensor(local))
        rule.last_records = rule.last_psi_records = records
        if psi_all is not None:  # the public psi batch: independent of the private one unless accounting=paper
            pidx, pweights = idx, inp.weights
            if psi_batches is not None:
                rule.last_psi_records = next(psi_batches)
                pidx_list, _, pw = expand_records(rule.last_psi_records, groups)
                pidx, pweights = as_tensor(pidx_list), as_tensor(pw, torch.float32)
            inp.psi_x, inp.psi_y, inp.psi_weights = psi_all[pidx], y_all[pidx], pweights
        if rule.needs_public_set(step):
            m = min(cfg.subspace_samples, pub_x.shape[0])
            pick = torch.as_tensor(np.sort(public_rng.choice(pub_x.shape[0], m, replace=False)), device=device)
            inp.public_x, inp.public_y = pub_x[pick], pub_y[pick]
        if cfg.mode == "nonprivate" and idx.numel():
            with torch.no_grad():
                loss_sum += float(loss_fn(net(inp.x), inp.y).sum())
            loss_count += int(idx.numel())
        grads = rule(net, params, inp, step)
        if cfg.mode != "nonprivate" or idx.numel():  # an empty DP batch still steps (noise only)
            optimizer.zero_grad(set_to_none=True)
            write_grads(params, grads)
            optimizer.step()
        if inspect is not None:
            inspect(step, rule)
        end_of_epoch = (step + 1) % steps_per_epoch == 0 or step + 1 == steps
        if end_of_epoch:
            epoch = math.ceil((step + 1) / steps_per_epoch)
            row: dict[str, Any] = {"epoch": epoch, "steps": step + 1}
            row["epsilon"] = ledger.epsilon(cfg.delta) if ledger is not None else math.inf
            if cfg.mode == "nonprivate":
                row["train_loss"] = loss_sum / max(loss_count, 1)
                loss_sum, loss_count = 0.0, 0
            last = step + 1 == steps
            if test is not None and len(test) and (last or (cfg.eval_every and epoch % cfg.eval_every == 0)):
                row.update({f"test_{k}": v for k, v in evaluate_pose_model(model, test).items()})
            history.append(row)
            if progress is not None:
                progress(row)

    final = {k[5:]: v for k, v in history[-1].items() if k.startswith("test_")} if history else {}
    return HPETrainResult(
        model=model, config=cfg, history=history, privacy=_privacy_report(cfg, ledger, steps, q, psi, disclosures),
        sigma=sigma, steps=steps, sample_rate=q, seconds=time.perf_counter() - t0, final=final,
    )  # fmt: skip
