"""Settings of an action-training run: the dataset's defaults (config/datasets.py), then the
user's overrides.

Every setting is a field of ``TrainSettings`` (models/training/action/settings.py, typed and
range-checked).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import ValidationError

from anonymask.config.datasets import dataset_defaults
from anonymask.core.errors import SettingsError  # noqa: F401 - raised here, imported from here by callers
from anonymask.models.training.action.settings import TrainSettings, normalize_mode, settings_error


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
    values: dict[str, Any] = dict(dataset_defaults(dataset).training)
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
