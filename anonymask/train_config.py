"""Settings of an action-training run: the paper's defaults per dataset, then the user's overrides.

One flat dict of named settings (``epochs``, ``batch_size``, ``variant``, ...) so that every one
of them can be overridden the same way (``--set epochs=20 lr=0.05`` on the CLI, ``overrides=`` on
the flow). Defaults follow the MaskDP paper's fine-tuning recipe for the real datasets (batch 128,
C = 1, lr 0.01, 150 epochs on NTU / Toyota Smarthome and 300 on UCF-101, 20 warmup epochs then
cosine, delta 1e-6 on NTU and 1e-5 otherwise, MViTv2-S from Kinetics-400 with the normalisation
layers of the last two blocks + head trainable). The bundled synthetic sets get a tiny network and a
few epochs so a run finishes in seconds to minutes on a laptop CPU.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from typing import Any

#: CLI/deployment mode names -> the trainer's strategy names
MODE_ALIASES = {"nonprivate": "nonprivate", "dp": "dpsgd", "dpsgd": "dpsgd", "maskdp": "maskdp", "fpdp": "fpdp"}
VARIANTS = ("real", "render", "rend_diff")

DEFAULTS: dict[str, Any] = {
    # data
    "protocol": "xsub",
    "train_split": "train",
    "eval_split": "test",
    "variant": "render",  # real | render | rend_diff (the rows of the paper's tables)
    "mask_source": "auto",  # r | q | none | auto (maskdp: q on real = "Real*", r otherwise; else none)
    "q_threshold": 0,
    "clip_len": 16,
    "frame_stride": 2,
    "size": [224, 224],
    "clips_per_video": 1,
    "eval_clips_per_video": 1,
    # model
    "arch": "mvit_v2_s",
    "weights": "kinetics400",  # kinetics400 | random | path of a torchvision state dict
    "trainable": "last_blocks_norm",
    "tiny_blocks": 4,
    "model_seed": 0,
    # optimisation (paper)
    "epochs": 150,
    "batch_size": 128,  # expected batch size under Poisson sampling (every DP mode)
    "lr": 0.01,
    "momentum": 0.9,
    "weight_decay": 0.0,
    "warmup_epochs": 20,
    "min_lr_ratio": 0.0,
    "seed": 0,
    # privacy
    "epsilon": 8.0,  # target epsilon of the DP modes (ignored by nonprivate)
    "delta": 1e-5,
    "max_grad_norm": 1.0,
    "noise_multiplier": None,  # None: calibrated for epsilon with `accountant` under `adjacency`
    "accountant": "rdp",  # as in the paper (Theorem 1); the tight one is reported beside it
    "compare_accountants": ["pld"],
    # what neighbouring datasets differ in: auto = the mode's claim (maskdp: replace one record's
    # private tokens, the paper's Definition 2; dp and fpdp: add/remove one record's private part)
    "adjacency": "auto",
    # sound: MaskDP's / FP-DP's public term on a batch drawn independently of the private one;
    # paper: on the private batch itself with Theorem 1 (reproduces the paper; NOT a valid guarantee)
    "accounting": "sound",
    "noise_seed": None,  # None: OS entropy (real runs); fix only for reproducible experiments
    "sampling_seed": None,
    "public_seed": None,
    # FP-DP
    "fpdp_k": 16,
    "fpdp_refresh_every": 50,
    # psi: paper_blur (the paper's blur, sigma 10 px at 256 px, scaled to `size`), blur_<sigma>
    # (at least that strong unless fpdp_psi_allow_weak), or public (synthetic tokens only)
    "fpdp_psi": "paper_blur",
    "fpdp_psi_allow_weak": False,
    "fpdp_public_weight": 1.0,
    "fpdp_public": "holdout:0.1",  # holdout:<fraction of train videos> | split:<split name>
    "fpdp_public_size": 64,
    # execution
    "feature_cache": True,  # frozen-prefix features cached in the store (trainable != all)
    "cache_batch_size": 16,
    "num_workers": 4,
    "micro_batch": None,
    "eval_every": 10,
    "eval_batch_size": None,
    "device": None,  # None: cuda when present, else cpu
    "amp": True,
    "log_every": 10,
}

_TINY = {
    "arch": "tiny",
    "weights": "random",
    "clip_len": 8,
    "frame_stride": 4,
    "size": [48, 64],
    "epochs": 10,
    "batch_size": 16,
    "lr": 0.1,
    "warmup_epochs": 1,
    "epsilon": 8.0,
    "fpdp_k": 8,
    "fpdp_refresh_every": 20,
    "fpdp_public_size": 32,
    "num_workers": 0,
    "eval_every": 1,
    "log_every": 1,
}

DATASET_DEFAULTS: dict[str, dict[str, Any]] = {
    "ntu": {"delta": 1e-6, "epochs": 150},
    "ntu120": {"delta": 1e-6, "epochs": 150},
    "tsh": {"delta": 1e-5, "epochs": 150},
    "ucf101": {"delta": 1e-5, "epochs": 300, "protocol": "split1"},
    "hmdb51": {"delta": 1e-5, "epochs": 300, "protocol": "split1"},
    "demo": dict(_TINY),
    "synthetic": dict(_TINY),
}

#: settings that change how a run executes but not what it computes (left out of the run's hash)
EXECUTION_ONLY = frozenset(
    {"num_workers", "micro_batch", "eval_every", "eval_batch_size", "log_every", "cache_batch_size", "device"}
)


def normalize_mode(mode: str) -> str:
    try:
        return MODE_ALIASES[mode]
    except KeyError:
        raise ValueError(f"unknown training mode {mode!r}; choose one of nonprivate, dp, maskdp, fpdp") from None


def resolve_mask_source(mode: str, variant: str, mask_source: str | None) -> str | None:
    """``auto``: MaskDP needs a pixel mask (q on raw video = the paper's Real*, r on anonymized
    video); FP-DP with the public-token feature map too; the other modes need none."""
    if mask_source in (None, "none", ""):
        return None
    if mask_source != "auto":
        if mask_source not in ("r", "q"):
            raise ValueError(f"unknown mask_source {mask_source!r}; choose r, q, none or auto")
        return mask_source
    if mode == "maskdp":
        return "q" if variant == "real" else "r"
    return None


def train_settings(
    mode: str,
    dataset: str,
    *,
    epsilon: float | None = None,
    variant: str | None = None,
    mask_source: str | None = None,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Defaults, then the dataset's, then ``overrides``, then the explicit arguments.

    Returns the resolved settings with ``mode`` (trainer name) and ``dataset``; unknown keys raise.
    """
    s = copy.deepcopy(DEFAULTS)
    s.update(copy.deepcopy(DATASET_DEFAULTS.get(dataset, {})))
    unknown = set(overrides or {}) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"unknown training setting(s): {', '.join(sorted(unknown))} (known: {', '.join(DEFAULTS)})")
    s.update(copy.deepcopy(overrides or {}))
    if epsilon is not None:
        s["epsilon"] = float(epsilon)
    if variant is not None:
        s["variant"] = variant
    if mask_source is not None:
        s["mask_source"] = mask_source
    mode = normalize_mode(mode)
    if s["variant"] not in VARIANTS:
        raise ValueError(f"unknown variant {s['variant']!r}; choose one of {', '.join(VARIANTS)}")
    s["mask_source"] = resolve_mask_source(mode, s["variant"], s["mask_source"])
    if mode == "fpdp" and s["fpdp_psi"] == "public" and s["mask_source"] is None:
        s["mask_source"] = "q" if s["variant"] == "real" else "r"
    if mode == "maskdp" and s["mask_source"] is None:
        raise ValueError("maskdp needs a pixel mask: mask_source r (anonymized video) or q (raw video, Real*)")
    if s["variant"] == "real" and s["mask_source"] == "r":
        raise ValueError("variant real has no synthetic pixels: use mask_source q (Real*) or none")
    if s["variant"] != "real" and s["mask_source"] == "q":
        raise ValueError(f"mask_source q (Real*: the person public) applies to variant real only, not {s['variant']}")
    if mode == "nonprivate":
        s["epsilon"] = math.inf
    elif s["noise_multiplier"] is None and not (s["epsilon"] and float(s["epsilon"]) > 0):
        raise ValueError(f"mode {mode} needs a target epsilon > 0 (or a noise_multiplier)")
    s["size"] = [int(v) for v in (s["size"] if isinstance(s["size"], (list, tuple)) else [s["size"]] * 2)]
    if s["accounting"] not in ("sound", "paper"):
        raise ValueError(f"accounting must be sound or paper, got {s['accounting']!r}")
    if s["accounting"] == "paper" and mode not in ("maskdp", "fpdp"):
        raise ValueError(f"accounting=paper reproduces MaskDP's / FP-DP's same-batch public term, not {mode}")
    if s["adjacency"] == "auto":
        s["adjacency"] = "replace" if mode == "maskdp" else "add_remove"
    if s["adjacency"] not in ("add_remove", "replace"):
        raise ValueError(f"adjacency must be auto, add_remove or replace, got {s['adjacency']!r}")
    if mode == "fpdp":
        from anonymask.models.action.trainer import resolve_psi

        s["fpdp_psi"] = resolve_psi(str(s["fpdp_psi"]), s["size"])
    if isinstance(s["compare_accountants"], str):
        s["compare_accountants"] = [a for a in s["compare_accountants"].split(",") if a]
    s["mode"] = mode
    s["dataset"] = dataset
    return s


def settings_hash(settings: dict[str, Any]) -> str:
    """Short hash of everything that determines the run's result (execution-only keys left out)."""
    core = {k: v for k, v in settings.items() if k not in EXECUTION_ONLY and k != "store"}
    text = json.dumps(core, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _eps_tag(eps: float) -> str:
    if math.isinf(eps):
        return "inf"
    return f"{eps:g}".replace(".", "p")


def default_run_name(settings: dict[str, Any]) -> str:
    """``<dataset>-<row>-<mode>[-paper]-eps<e>-<hash>``: a changed setting starts a new run, the
    same settings resume the old one."""
    row = settings["variant"] + ("-q" if settings["mask_source"] == "q" else "")
    mode = settings["mode"] + ("-paper" if settings.get("accounting") == "paper" else "")
    return f"{settings['dataset']}-{row}-{mode}-eps{_eps_tag(float(settings['epsilon']))}-{settings_hash(settings)}"
