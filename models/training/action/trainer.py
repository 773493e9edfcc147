"""Training loop of the action model for every mode (non-private, DP-SGD, MaskDP-SGD, FP-DP).

The loop is mode-agnostic: a gradient strategy (strategies.py) turns each batch into final
gradients, the trainer applies them with SGD (momentum, warmup + cosine schedule), evaluates,
reports progress and writes resumable checkpoints. Only the trainable tail runs with autograd:
when the prefix is frozen, clips go through it once per variant without gradients (or its
features come from the store's cache, see models/training/action/feature_cache.py), and the strategy sees the
tail; when everything trains, the strategy sees the whole model and (clip, token_keep) pairs.

Batches: fixed-size shuffled batches for the non-private mode; Poisson sampling with rate
q = batch_size / N for the DP modes (batch_size is then the EXPECTED size; an empty batch is a
valid step). In the DP modes a record is a VIDEO: the sampler draws videos and takes one of a
video's clips at random, so several clips per video never multiply a video's contribution.
MaskDP and FP-DP also get a PUBLIC batch for their noise-free term, drawn by a second Poisson
sampler that is independent of the private one (``accounting="paper"`` reuses the private batch,
as the MaskDP paper does; its report then says it is not a valid guarantee). Sampling seeds come
from the OS unless fixed for tests, and derive per epoch, so a resumed run repeats exactly what
an uninterrupted one does. Noise draws come from the strategy's own generator, saved in the
checkpoint with the accountant's ledger.

Caveat on what is released: in the DP modes only the noisy gradients (and the model) are private
releases; the trainer therefore reports no training loss/accuracy for them (computing those on
private clips would be a non-private release). Evaluation metrics are computed on the eval split.
"""

from __future__ import annotations

import hashlib
import math
import os
import random
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

from anonymask.models.training.action.clips import make_loader
from anonymask.models.training.action.feature_cache import feature_key, variant_input
from anonymask.models.training.action.metrics import classification_metrics
from anonymask.models.training.action.mvit import ActionModel, ActionModelConfig
from anonymask.models.training.action.prefix import FrozenPrefix, TrainableTail, feature_shape
from anonymask.models.training.action.settings import Mode, TrainSettings, resolve_psi
from anonymask.models.training.action.strategies import STRATEGIES, StepBatch
from anonymask.models.training.action.token_masks import model_public_tokens

CHECKPOINT_FORMAT = "anonymask-action-train-v1"
MODES = tuple(m.value for m in Mode)


def _derived_seed(*parts: Any) -> int:
    h = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return int.from_bytes(h[:8], "little") >> 1


def _is_cached(dataset: Dataset) -> bool:
    return hasattr(dataset, "feature_shape") and hasattr(dataset, "variants")


def lr_lambda(step: int, warmup_steps: int, total_steps: int, min_ratio: float) -> float:
    """Linear warmup to 1, then cosine decay to ``min_ratio`` at ``total_steps``."""
    if warmup_steps > 0 and step < warmup_steps:
        return (step + 1) / warmup_steps
    span = max(total_steps - warmup_steps, 1)
    t = min(max(step - warmup_steps, 0) / span, 1.0)
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * t))


class Trainer:
    """``Trainer(model, train_data, config, eval_data=..., progress=...).fit(resume_from=None)``.

    ``train_data``/``eval_data``: a ClipDataset (clips) or a CachedFeatureDataset (prefix features
    from the store's cache; its split point must be the model's). ``public_data``: FP-DP's public
    set (same kinds). ``progress(event)`` gets dicts with ``event`` = "step" or "epoch".
    """

    def __init__(
        self,
        model: ActionModel,
        train_data: Dataset,
        config: TrainSettings,
        *,
        eval_data: Dataset | None = None,
        public_data: Dataset | None = None,
        progress: Callable[[dict], None] | None = None,
        checkpoint_path: str | os.PathLike | None = None,
        disclosures: dict | None = None,
    ):
        """``disclosures``: data the run uses WITHOUT protection (e.g. FP-DP's holdout video ids),
        stated in the privacy report (run.py's ``unprotected_data``)."""
        self.model = model
        self.disclosures = dict(disclosures or {})
        self.cfg = config = config.resolved()
        self.train_data = train_data
        self.eval_data = eval_data
        self.progress = progress
        self.checkpoint_path = Path(checkpoint_path) if checkpoint_path else None
        self.device = torch.device(config.device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.model.to(self.device)
        self.split = model.split_index()
        self.prefix = FrozenPrefix(model) if self.split > 0 else None
        self.net: nn.Module = TrainableTail(model) if self.split > 0 else model
        self.params = {n: p for n, p in self.net.named_parameters() if p.requires_grad}
        if not self.params:
            raise ValueError("the model has no trainable parameters")
        for name, ds in (("train", train_data), ("eval", eval_data), ("public", public_data)):
            if ds is not None and _is_cached(ds) and int(ds.split) != self.split:
                raise ValueError(
                    f"{name} features were cached at split {ds.split}, the model trains from split {self.split}"
                )
        self.num_samples = len(train_data)
        self.num_classes = model.config.num_classes
        self.groups: list[list[int]] | None = None
        if config.mode == Mode.NONPRIVATE:
            self.num_records = self.num_samples
            self.steps_per_epoch = math.ceil(self.num_samples / config.batch_size)
            self.sample_rate = None
        else:
            from anonymask.models.training.privacy.sampler import epochs_to_steps, record_groups

            groups = record_groups([c[0] for c in train_data.clips])  # a record is a video
            self.num_records = len(groups)
            self.groups = groups if any(len(g) > 1 for g in groups) else None
            self.sample_rate = min(config.batch_size / self.num_records, 1.0)
            self.public_rate = min((config.public_batch_size or config.batch_size) / self.num_records, 1.0)
            self.steps_per_epoch = max(epochs_to_steps(1.0, self.sample_rate), 1)
        self.total_steps = self.steps_per_epoch * config.epochs
        self.optimizer = torch.optim.SGD(
            list(self.params.values()), lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay
        )
        warmup = int(round(config.warmup_epochs * self.steps_per_epoch))
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: lr_lambda(s, warmup, self.total_steps, config.min_lr_ratio)
        )
        self.strategy = self._build_strategy(public_data)
        from anonymask.models.training.privacy.sampler import os_seed

        self.sampling_seed = config.sampling_seed if config.sampling_seed is not None else os_seed()
        self.public_seed = config.public_seed if config.public_seed is not None else os_seed()
        self._private_data, self._public_data = self._loader_datasets()
        self.epoch = 0
        self.step = 0
        self.history: list[dict] = []

    # ------------------------------------------------------------------ setup
    def _autocast(self):
        if self.cfg.amp and self.device.type == "cuda":
            return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
        return nullcontext()

    def _mask_source(self) -> str | None:
        ds = self.train_data
        if _is_cached(ds):
            return ds.clip_spec.get("mask_source")
        return getattr(ds, "mask_source", None)

    def fingerprint(self) -> str:
        from anonymask.models.training.privacy.report import dataset_fingerprint

        ds = self.train_data
        clips = [(c[0], int(c[1])) for c in ds.clips]
        return dataset_fingerprint([(v, c, int(y)) for (v, c), y in zip(clips, ds.labels)])

    def _build_strategy(self, public_data: Dataset | None):
        cfg = self.cfg
        cls = STRATEGIES[cfg.mode]
        if cfg.mode == Mode.NONPRIVATE:
            return cls(micro_batch=cfg.micro_batch)
        from anonymask.models.training.privacy.protects import protection_key
        from anonymask.models.training.privacy.seeds import ACTION_DERIVATION, seeds_record

        if cfg.accounting == "paper":  # Theorem 1 of the MaskDP paper: RDP, add/remove, sensitivity C
            accountant, adjacency = "rdp", "add_remove"
        else:
            accountant, adjacency = cfg.accountant, cfg.adjacency
        sigma = cfg.noise_multiplier
        if sigma is None:
            if cfg.target_epsilon is None:
                raise ValueError(f"mode {cfg.mode!r} needs noise_multiplier or target_epsilon")
            from anonymask.models.training.privacy.accountant import sigma_for_epsilon

            sigma = sigma_for_epsilon(self.sample_rate, self.total_steps, cfg.target_epsilon, cfg.delta, accountant,
                                      adjacency=adjacency)  # fmt: skip
        source = self._mask_source()
        if cfg.mode == Mode.MASKDP and source is None:
            raise ValueError("MaskDP needs a pixel mask: build the training data with mask_source 'r' (or 'q' for Real*)")
        mask_policy = None
        if source == "r":
            mask_policy = "mask_source=r: a token is public iff its whole patch is synthetic (render mask r)"
        elif source == "q":
            mask_policy = "mask_source=q: the real person's region (q) is public (the paper's Real* row)"
        kw: dict[str, Any] = dict(
            max_grad_norm=cfg.max_grad_norm,
            noise_multiplier=float(sigma),
            sample_rate=self.sample_rate,
            num_samples=self.num_records,
            public_rate=self.public_rate if cfg.accounting == "sound" else self.sample_rate,
            accountant=accountant,
            adjacency=adjacency,
            delta=cfg.delta,
            noise_seed=cfg.noise_seed,
            chunk_size=cfg.micro_batch,
            device=self.device,
            accounting=cfg.accounting,
            record="video",
            mask_policy=mask_policy,
            dataset_fingerprint=self.fingerprint(),
            fixed_seeds=tuple(
                name for name in ("noise_seed", "sampling_seed") if getattr(cfg, name) is not None
            ),
            # DP-SGD ignores the mask (every pixel is private): mask q voids only the masked modes
            not_private_reason=(
                "mask_source=q treats the real person's pixels as public (the paper's Real* row: an upper "
                "bound, not a private run)"
                if source == "q" and cfg.mode != Mode.DPSGD
                else None
            ),
            seeds=seeds_record(cfg.noise_seed, cfg.sampling_seed, cfg.public_seed, ACTION_DERIVATION),
            protection=protection_key(cfg.mode.value, adjacency, cfg.variant, source)
            if not (cfg.mode == Mode.FPDP and cfg.fpdp_psi == "public")
            else protection_key("maskdp", adjacency, cfg.variant, source),
            disclosures=self.disclosures,
        )
        if cfg.mode == Mode.FPDP:
            if public_data is None:
                raise ValueError("FP-DP needs public_data: the subspace is estimated from public samples only")
            psi_variant, psi = self._psi()
            kw.update(
                public_set=self._public_set(public_data),
                k=cfg.fpdp_k,
                refresh_every=cfg.fpdp_refresh_every,
                psi_variant=psi_variant,
                psi=psi,
                public_weight=cfg.fpdp_public_weight,
            )
        return cls(cfg.mode.value, **kw)

    def _psi(self) -> tuple[str, dict]:
        """FP-DP's public feature variant and its description (a blur at least the paper's)."""
        from anonymask.models.training.privacy.fpdp import check_psi_blur

        name = resolve_psi(self.cfg.fpdp_psi, self.model.config.size)
        if name == "public":
            if self._mask_source() is None:
                raise ValueError("fpdp_psi=public needs a pixel mask (mask_source r)")
            return name, {"kind": "public_tokens", "mask_source": self._mask_source()}
        from anonymask.models.training.action.feature_cache import blur_sigma

        sigma = blur_sigma(name)
        if sigma is None:
            raise ValueError(f"unknown fpdp_psi {self.cfg.fpdp_psi!r}: use paper_blur, blur_<sigma> or public")
        return name, check_psi_blur(sigma, self.model.config.size, self.cfg.fpdp_psi_allow_weak)

    def _loader_datasets(self) -> tuple[Dataset, Dataset | None]:
        """What the private and the public loaders read (cached data: only the variants needed)."""
        st = self.strategy
        public_variants = getattr(st, "public_variants", ())
        private_variants = tuple(getattr(st, "private_variants", st.variants))
        if self.cfg.accounting == "paper":
            private_variants += tuple(public_variants)
        ds = self.train_data
        pick = (lambda v: ds.with_variants(v)) if hasattr(ds, "with_variants") else (lambda v: ds)  # noqa: E731
        return pick(private_variants), (pick(tuple(public_variants)) if public_variants else None)

    def _public_set(self, public_data: Dataset):
        n = min(self.cfg.fpdp_public_size, len(public_data))
        shapes = public_data.sample_shapes() if hasattr(public_data, "sample_shapes") else None
        from anonymask.models.training.action.clips import Collate

        raw = Collate(shapes)([public_data[i] for i in range(n)])
        sb = self._step_batch(raw, ("full",))
        return sb.inputs["full"], sb.y

    # ------------------------------------------------------------------ batches
    def _step_batch(self, raw: dict, variants: tuple[str, ...]) -> StepBatch:
        y = raw["label"].to(self.device)
        needs_tokens = any(v in ("private", "public") for v in variants)
        inputs: dict[str, tuple[torch.Tensor, torch.Tensor | None]] = {}
        pub = None
        if "video" in raw:
            x = raw["video"].to(self.device, non_blocking=True)
            if needs_tokens:
                pub = model_public_tokens(self.model, raw["pixel_public"].to(self.device))
            for v in variants:
                xv, keep = variant_input(x, v, pub)
                if self.prefix is not None:
                    xv, keep = self._run_prefix(xv, keep), None
                inputs[v] = (xv, keep)
        else:
            for v in variants:
                key = feature_key(v)
                if key not in raw:
                    raise ValueError(f"the cached features lack variant {v!r} (build the cache with it)")
                inputs[v] = (raw[key].to(self.device, non_blocking=True), None)
            if needs_tokens:
                if "public_tokens" not in raw:
                    raise ValueError("the cached features carry no public-token masks")
                pub = raw["public_tokens"].to(self.device)
        return StepBatch(inputs, y, pub)

    def _run_prefix(self, x: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
        """Prefix features, in micro-batches when configured (bounds activation memory)."""
        step = self.cfg.micro_batch or max(x.shape[0], 1)
        outs = []
        with self._autocast():
            for lo in range(0, x.shape[0], step):
                outs.append(self.prefix(x[lo : lo + step], None if keep is None else keep[lo : lo + step]))
        if not outs:  # an empty Poisson batch
            return x.new_zeros((0, *feature_shape(self.model)))
        return torch.cat(outs)

    def _poisson_loader(self, dataset: Dataset, seed: int, rate: float | None = None):
        from anonymask.models.training.privacy.sampler import PoissonBatchSampler

        sampler = PoissonBatchSampler(self.num_records, rate or self.sample_rate, steps=self.steps_per_epoch,
                                      seed=seed, groups=self.groups)  # fmt: skip
        return make_loader(dataset, batch_sampler=sampler, num_workers=self.cfg.num_workers,
                           pin_memory=self.device.type == "cuda")  # fmt: skip

    def _batches(self, epoch: int):
        """(private raw batch, public raw batch or None) per step of ``epoch``."""
        if self.strategy.sampling != "poisson":
            for raw in self._train_loader(epoch):
                yield raw, None
            return
        private = self._poisson_loader(self._private_data, _derived_seed(self.sampling_seed, "poisson", epoch))
        if self._public_data is None:
            for raw in private:
                yield raw, None
        elif self.cfg.accounting == "paper":  # the paper's Algorithm 2: public term on the same records
            for raw in private:
                yield raw, raw
        else:  # sound: an independent Poisson draw, so the public term says nothing about the private batch
            public = self._poisson_loader(self._public_data, _derived_seed(self.public_seed, "public", epoch),
                                          self.public_rate)  # fmt: skip
            yield from zip(private, public, strict=True)

    def _train_loader(self, epoch: int):
        cfg = self.cfg
        pin = self.device.type == "cuda"
        seed = _derived_seed(cfg.seed, "epoch", epoch)
        return make_loader(
            self.train_data, batch_size=cfg.batch_size, shuffle=True, seed=seed, num_workers=cfg.num_workers,
            pin_memory=pin,
        )  # fmt: skip

    # ------------------------------------------------------------------ loop
    def fit(self, resume_from: str | os.PathLike | None = None, until_epoch: int | None = None) -> list[dict]:
        """Train to ``config.epochs`` (or stop after ``until_epoch``; the schedule stays the full run's)."""
        if resume_from is not None:
            self.load_checkpoint(resume_from)
        cfg = self.cfg
        stop = cfg.epochs if until_epoch is None else min(until_epoch, cfg.epochs)
        while self.epoch < stop:
            epoch = self.epoch
            # dropout / stochastic depth draw from the global generator: seeded per epoch, so a
            # resumed run repeats the uninterrupted one exactly
            torch.manual_seed(_derived_seed(cfg.seed, "torch", epoch))
            self.model.train()
            self.net.train()
            loss_sum, correct, seen = 0.0, 0, 0
            for raw, raw_public in self._batches(epoch):
                if raw_public is None:
                    sb = self._step_batch(raw, self.strategy.variants)
                    with self._autocast():
                        res = self.strategy(self.net, self.params, sb)
                else:
                    if raw_public is raw:  # accounting=paper
                        sb = pb = self._step_batch(raw, self.strategy.variants)
                    else:
                        sb = self._step_batch(raw, self.strategy.private_variants)
                        pb = self._step_batch(raw_public, self.strategy.public_variants)
                    with self._autocast():
                        res = self.strategy(self.net, self.params, sb, pb)
                for name, p in self.params.items():
                    p.grad = res.grads[name].detach().to(device=p.device, dtype=p.dtype)
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
                self.scheduler.step()
                self.step += 1
                seen += res.count
                if res.loss_sum is not None:
                    loss_sum += res.loss_sum
                    correct += int(res.correct or 0)
                if self.progress is not None and (self.step % max(cfg.log_every, 1) == 0):
                    self.progress(self._step_event(epoch, res))
            self.epoch = epoch + 1
            record: dict[str, Any] = {"epoch": self.epoch, "step": self.step}
            if self.strategy.sampling != "poisson":  # realised Poisson counts are private (invariant 12)
                record["samples"] = seen
            if self.cfg.mode == Mode.NONPRIVATE and seen:
                record.update(train_loss=loss_sum / seen, train_acc=correct / seen)
            if self.eval_data is not None and (self.epoch % max(cfg.eval_every, 1) == 0 or self.epoch == cfg.epochs):
                record["eval"] = self.evaluate(self.eval_data)
            if self.strategy.sampling == "poisson":
                record["epsilon"] = self.strategy.epsilon()
            self.history.append(record)
            if self.checkpoint_path is not None:
                self.save_checkpoint(self.checkpoint_path)
            if self.progress is not None:
                self.progress(dict(record, event="epoch"))
        return self.history

    def _step_event(self, epoch: int, res) -> dict:
        ev: dict[str, Any] = {
            "event": "step",
            "epoch": epoch,
            "step": self.step,
            "lr": self.optimizer.param_groups[0]["lr"],
        }
        if self.strategy.sampling != "poisson":  # a realised Poisson batch size is private (invariant 12)
            ev["batch_size"] = res.count
        if res.loss_sum is not None and res.count:
            ev.update(loss=res.loss_sum / res.count, accuracy=(res.correct or 0) / res.count)
        if self.strategy.sampling == "poisson":
            ev["epsilon"] = self.strategy.epsilon()
        ev.update(res.stats)
        return ev

    @torch.no_grad()
    def predict(self, dataset: Dataset) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
        """Logits, labels and video ids of every clip of ``dataset`` (eval mode, fixed order)."""
        self.model.eval()
        self.net.eval()
        bs = self.cfg.eval_batch_size or self.cfg.batch_size
        logits, labels, vids = [], [], []
        for raw in make_loader(dataset, batch_size=bs, num_workers=self.cfg.num_workers):
            sb = self._step_batch(raw, ("full",))
            x, keep = sb.inputs["full"]
            with self._autocast():
                out = self.net(x) if keep is None else self.net(x, token_keep=keep)
            logits.append(out.float().cpu())
            labels.append(sb.y.cpu())
            vids += list(raw["video_id"])
        return torch.cat(logits), torch.cat(labels), vids

    def evaluate(self, dataset: Dataset) -> dict:
        logits, labels, vids = self.predict(dataset)
        return classification_metrics(logits, labels, vids, self.num_classes)

    # ------------------------------------------------------------------ privacy report
    def privacy_report(self) -> dict:
        if self.cfg.mode == Mode.NONPRIVATE:
            from anonymask.models.training.privacy.report import PrivacyReport

            return PrivacyReport.nonprivate(self.step, self.fingerprint()).to_dict()
        return self.strategy.privacy_report(self.cfg.compare_accountants)

    # ------------------------------------------------------------------ checkpoints
    def _model_names(self) -> dict[int, str]:
        return {id(p): n for n, p in self.model.named_parameters()}

    def state_dict(self) -> dict:
        names = self._model_names()
        np_state = np.random.get_state()
        return {
            "format": CHECKPOINT_FORMAT,
            "model_config": self.model.config.to_dict(),
            "weights_id": self.model.weights_id,
            "frozen_hash": self.model.frozen_hash(),
            "trainable": {names[id(p)]: p.detach().cpu().clone() for p in self.params.values()},
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "strategy": self.strategy.state_dict(),
            "epoch": self.epoch,
            "step": self.step,
            "sampling_seed": self.sampling_seed,  # secret in DP runs: keep checkpoints private
            "public_seed": self.public_seed,
            "history": self.history,
            "train_config": self.cfg.to_json_dict(),
            "privacy": self.privacy_report(),
            "rng": {
                "torch": torch.get_rng_state(),
                "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
                "numpy": [np_state[0], torch.from_numpy(np_state[1].astype(np.int64)), *np_state[2:]],
                "python": random.getstate(),
            },
        }

    def save_checkpoint(self, path: str | os.PathLike) -> Path:
        """Atomic write (temp file + rename): a crash never leaves a half checkpoint."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        torch.save(self.state_dict(), tmp)
        os.replace(tmp, path)
        return path

    def load_checkpoint(self, path: str | os.PathLike) -> None:
        state = torch.load(path, map_location="cpu", weights_only=False)
        if state.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"{path}: not an action-training checkpoint")
        if ActionModelConfig.from_dict(state["model_config"]).resolved() != self.model.config:
            raise ValueError(f"{path}: checkpoint model config differs from this model's")
        if state["frozen_hash"] != self.model.frozen_hash():
            raise ValueError(f"{path}: checkpoint was trained on other frozen weights ({state['weights_id']})")
        if state["train_config"].get("mode") != self.cfg.mode.value:
            raise ValueError(f"{path}: checkpoint mode {state['train_config'].get('mode')!r} != {self.cfg.mode.value!r}")
        own = dict(self.model.named_parameters())
        with torch.no_grad():
            for name, t in state["trainable"].items():
                own[name].copy_(t.to(own[name].device))
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.strategy.load_state_dict(state["strategy"])
        self.epoch, self.step, self.history = int(state["epoch"]), int(state["step"]), list(state["history"])
        self.sampling_seed = int(state["sampling_seed"])
        self.public_seed = int(state.get("public_seed", self.public_seed))
        rng = state["rng"]
        torch.set_rng_state(rng["torch"])
        if rng["cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(rng["cuda"])
        n = rng["numpy"]
        np.random.set_state((n[0], n[1].numpy().astype(np.uint32), *n[2:]))
        random.setstate(rng["python"])
