"""Pipeline configuration: per-dataset defaults and ``stage.key=value`` overrides on top of the
stages' typed settings (config/stages.py, the backends' in core/registry.py).

:func:`pipeline_config` validates every stage's section before any work starts, so a typo or a
bad value is one :class:`SettingsError` line naming it. A stage's record stores the hash of its
own validated section, so changing ``inpaint.backend`` recomputes inpainting and everything
downstream of it, and nothing else.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from anonymask.config.datasets import dataset_defaults
from anonymask.core.errors import SettingsError
from anonymask.core.registry import validate_model


class RunnerSettings(BaseModel):
    """How videos are scheduled; not part of any stage's record, so changing it recomputes nothing."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    workers: int = Field(2, ge=1, description="Dask worker processes for --runner dask")
    video_memory_gb: float | None = Field(None, gt=0, description="memory budget of one video: the Dask "
                                          "worker's memory limit (a worker above it is restarted and its "
                                          "video retried, then failed)")
    video_timeout_s: float | None = Field(None, gt=0, description="wall-clock budget of one video, checked "
                                          "between stages (a video past it fails with what it finished "
                                          "kept; a running stage is never interrupted)")


def runner_config(overrides: dict[str, Any] | None = None, **kw: Any) -> RunnerSettings:
    """The runner's defaults, then ``overrides``, then keyword arguments that are not None."""
    values = dict(overrides or {})
    values.update({k: v for k, v in kw.items() if v is not None})
    return validate_model(RunnerSettings, values, "runner")


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in (extra or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def parse_value(text: str) -> Any:
    """``8`` -> 8, ``true`` -> True, ``none`` -> None, ``[1,2]`` -> list, else the string."""
    low = text.strip().lower()
    if low in ("none", "null"):
        return None
    if low in ("true", "false"):
        return low == "true"
    try:
        return json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return text


def parse_overrides(items: list[str] | None) -> dict[str, Any]:
    """``["refine.backend=animatediff", "segment.grow=6"]`` -> nested dict."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, eq, value = item.partition("=")
        parts = key.strip().split(".")
        if not eq or not all(parts):
            raise SettingsError(f"--set {item!r}: expected key=value (stage.key=value for the pipeline, e.g. "
                                f"segment.threshold=0.6)")
        d = out
        for p in parts[:-1]:
            d = d.setdefault(p, {})
        d[parts[-1]] = parse_value(value)
    return out


def pipeline_config(dataset: str, overrides: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Every stage's settings: their defaults, then the dataset's defaults (a dataset without any,
    such as ``folder``, is fine), then the user's overrides; validated and complete."""
    from anonymask.config.stages import validate_pipeline

    return validate_pipeline(deep_merge(dataset_defaults(dataset).pipeline, overrides or {}))
