"""Settings of an action-training run: the paper's defaults per dataset, then the user's overrides.

Every setting is a field of ``TrainSettings`` (models/training/action/settings.py, typed and range-checked);
this module only says which defaults each dataset starts from. Defaults follow the MaskDP paper's
fine-tuning recipe for the real datasets (batch 128, C = 1, lr 0.01, 150 epochs on NTU / Toyota
Smarthome and 300 on UCF-101, 20 warmup epochs then cosine, delta 1e-6 on NTU and 1e-5 otherwise,
MViTv2-S from Kinetics-400 with the normalisation layers of the last two blocks + head trainable).
The bundled synthetic sets get a tiny network and a few epochs so a run finishes in seconds to
minutes on a laptop CPU.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import ValidationError

from anonymask.core.errors import SettingsError  # noqa: F401 - raised here, imported from here by callers
from anonymask.models.training.action.settings import TrainSettings, normalize_mode, settings_error

_TINY: dict[str, Any] = {
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


def train_settings(
    mode: str,
    dataset: str,
    *,
    epsilon: float | None = None,
    variant: str | None = None,
    mask_source: str | None = None,
    overrides: dict[str, Any] | None = None,
) -> TrainSettings:
    """Defaults, then the dataset's, then ``overrides``, then the explicit arguments: validated and
    resolved (every ``auto`` decided). Unknown or bad settings raise ``SettingsError``."""
    values: dict[str, Any] = dict(DATASET_DEFAULTS.get(dataset, {}))
    values.update(overrides or {})
    if epsilon is not None:
        values["epsilon"] = float(epsilon)
    if variant is not None:
        values["variant"] = variant
    if mask_source is not None:
        values["mask_source"] = mask_source
    try:
        values["mode"] = normalize_mode(mode)
        values["dataset"] = dataset
        settings = TrainSettings(**values).resolved()
    except ValidationError as err:
        raise SettingsError(settings_error(err)) from None
    except ValueError as err:
        raise SettingsError(str(err)) from None
    if settings.mode.private and settings.noise_multiplier is None and not math.isfinite(settings.epsilon):
        raise SettingsError(f"mode {settings.mode} needs a finite target epsilon > 0 (or a noise_multiplier)")
    return settings


def settings_hash(settings: TrainSettings) -> str:
    """Short hash of everything that determines the run's result (execution-only keys left out)."""
    return settings.run_hash()


def _eps_tag(eps: float) -> str:
    if math.isinf(eps):
        return "inf"
    return f"{eps:g}".replace(".", "p")


def default_run_name(settings: TrainSettings) -> str:
    """``<dataset>-<row>-<mode>[-paper]-eps<e>-<hash>``: a changed setting starts a new run, the
    same settings resume the old one. A private mode run with noise_multiplier = 0 is named
    ``sigma0`` instead of ``eps<e>``: it has no guarantee whatever target its settings carry."""
    row = settings.variant + ("-q" if settings.mask_source == "q" else "")
    mode = settings.mode.value + ("-paper" if settings.accounting == "paper" else "")
    budget = f"eps{_eps_tag(float(settings.epsilon))}"
    if settings.mode.private and settings.noise_multiplier == 0:
        budget = "sigma0"
    return f"{settings.dataset}-{row}-{mode}-{budget}-{settings_hash(settings)}"
