"""Pipeline configuration: defaults per stage, per-dataset overrides, ``key.sub=value`` overrides.

A stage's record stores the hash of exactly its own section, so changing ``inpaint.backend``
recomputes inpainting and everything downstream of it, and nothing else.
"""

from __future__ import annotations

import copy
import json
from typing import Any

DEFAULTS: dict[str, dict[str, Any]] = {
    # max_frames: None keeps every frame (a cap, if set, is recorded per video and shown by status);
    # max_bad_frames: decode errors + frames lost tolerated before the video fails
    "ingest": {"max_side": 640, "max_frames": None, "max_bad_frames": 0},
    "pose4d": {"backend": "mediapipe", "min_visible_frames": 2, "max_gap": 10, "keyframe_every": 10,
               "tiles": False, "detect_every": 4, "scan": True, "scan_every": 16, "detector": "mediapipe",
               "detector_options": None},
    "motion": {"enabled": False, "checkpoint": None},
    "render": {"bank_size": 32, "bank_seed": 0},
    "segment": {"backend": "mediapipe", "threshold": 0.5, "unflicker": 1, "grow": "auto", "feather": 2.0,
                "box_fill": False, "box_margin": 0.15, "avatar_in_hole": False,
                "static_grow": 4, "static_frac": 0.8},
    "inpaint": {"backend": "temporal_median"},
    "merge": {},
    "tubelets": {"size": 128, "margin": 0.15, "smooth": 3.0},
    "conditions": {"backend": "render"},
    "refine": {"backend": "none", "steps": 8, "strength": 0.6, "window": 16, "stride": 8, "seed": 0},
    "reintegrate": {},
    "audit": {"detectors": ["face", "hog"], "every": 4, "min_outside": 0.6, "min_face_frames": 2,
              "min_body_frames": 3, "fail": True, "ground_truth": True, "max_gt_leak": 0.001},
}

#: per-dataset defaults on top of DEFAULTS (the deployments use these)
DATASET_DEFAULTS: dict[str, dict[str, dict[str, Any]]] = {
    "demo": {"ingest": {"max_side": 320}},
    "synthetic": {"ingest": {"max_side": 320}},
    "sample": {"ingest": {"max_side": 480}},
    "ntu": {"pose4d": {"backend": "ntu-skeleton"}, "ingest": {"max_side": 640}},
    "ntu120": {"pose4d": {"backend": "ntu-skeleton"}, "ingest": {"max_side": 640}},
    "tsh": {"ingest": {"max_side": 640}},
    "ucf101": {"ingest": {"max_side": 320}},
    "hmdb51": {"ingest": {"max_side": 320}},
}


#: how videos are scheduled; not part of any stage's record, so changing it recomputes nothing.
#: workers: Dask worker processes for ``--runner dask``; video_memory_gb: memory budget of one
#: video (the Dask worker's memory limit: a worker above it is restarted and its video retried,
#: then failed); video_timeout_s: wall-clock budget of one video, checked between stages (a video
#: past it fails with what it finished kept; a running stage is never interrupted).
RUNNER_DEFAULTS: dict[str, Any] = {"workers": 2, "video_memory_gb": None, "video_timeout_s": None}


def runner_config(overrides: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    """RUNNER_DEFAULTS, then ``overrides``, then keyword arguments that are not None."""
    cfg = dict(RUNNER_DEFAULTS)
    cfg.update(overrides or {})
    cfg.update({k: v for k, v in kw.items() if v is not None})
    unknown = set(cfg) - set(RUNNER_DEFAULTS)
    if unknown:
        raise ValueError(f"unknown runner setting(s): {', '.join(sorted(unknown))}")
    return cfg


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
        if "=" not in item:
            raise ValueError(f"override {item!r} is not of the form stage.key=value")
        key, value = item.split("=", 1)
        parts = key.strip().split(".")
        d = out
        for p in parts[:-1]:
            d = d.setdefault(p, {})
        d[parts[-1]] = parse_value(value)
    return out


def pipeline_config(dataset: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """DEFAULTS, then the dataset's defaults, then the user's overrides."""
    cfg = deep_merge(DEFAULTS, DATASET_DEFAULTS.get(dataset, {}))
    cfg = deep_merge(cfg, overrides or {})
    unknown = set(cfg) - set(DEFAULTS)  # a dataset name without defaults (folder, bench) is fine
    if unknown:
        raise ValueError(f"unknown pipeline stage(s) in config: {', '.join(sorted(unknown))}")
    return cfg
