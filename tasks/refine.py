"""Stage ``refine``: ``none`` keeps the render (the paper's "Render" variant); ``animatediff``
refines each tubelet with AnimateDiff + depth/pose/face ControlNets (weights from
ANONYMASK_WEIGHTS) -> ``tubelets/<j>/refined``."""

from __future__ import annotations

from typing import Any

import numpy as np

from anonymask.config.stages import RefineSettings
from anonymask.models.anonymizer.refine.segments import refine_long
from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.storage.tracks import TRACK_SHARD_BYTES
from anonymask.storage.windows import frame_windows
from anonymask.tasks.tubelets import tubelet_ids

_REFINERS: dict[str, Any] = {}


def get_refiner(cfg: RefineSettings):
    """The refine backend of these settings, one per worker process (a diffusion pipeline on the
    device is built once and reused by every video)."""
    from anonymask.config.stages import stage_backend
    from anonymask.storage.hashing import config_hash

    key = config_hash({k: v for k, v in cfg.to_dict().items() if k not in RefineSettings.model_fields
                       or k == "backend"})
    if key not in _REFINERS:
        _REFINERS[key] = stage_backend("refine", cfg)
    return _REFINERS[key]


# declared in config/stages.py (settings, deps, versions)
def run(entry: VideoEntry, cfg: RefineSettings, w: StageWriter) -> None:
    """``none``: the crops as they are (copied window by window). ``animatediff``: segments of
    ``segment_frames`` (default 256) frames, overlapping by ``window`` frames and cross-faded, so a
    long tubelet never sits in memory whole; within a segment the refiner's own temporal
    windows (``window``/``stride``) apply."""
    refiner = None if cfg.backend == "none" else get_refiner(cfg)
    for j in tubelet_ids(entry):
        rgb = entry.array(f"tubelets/{j}/rgb")
        with w.frames(f"tubelets/{j}/refined", rgb.shape[1:], np.uint8, int(rgb.shape[0]),
                      shard_bytes=TRACK_SHARD_BYTES) as out:
            if refiner is None:
                for win in frame_windows(int(rgb.shape[0]), cfg.copy_window):
                    out.write(np.asarray(rgb[win.core]))
                continue
            conds = {k: entry.array(f"tubelets/{j}/cond_{k}") for k in ("depth", "pose", "face")}
            refine_long(refiner, rgb, conds, cfg.seed, cfg.segment_frames, cfg.window, out)
