"""Stage ``refine``: ``none`` keeps the render (the paper's "Render" variant); ``animatediff``
refines each tubelet with AnimateDiff + depth/pose/face ControlNets (weights from
ANONYMASK_WEIGHTS) -> ``tubelets/<j>/refined``."""

from __future__ import annotations

from typing import Any

import numpy as np

from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.storage.tracks import TRACK_SHARD_BYTES
from anonymask.storage.windows import frame_windows
from anonymask.tasks.tubelets import tubelet_ids

_REFINERS: dict[str, Any] = {}


def get_refiner(cfg: dict[str, Any]):
    """The refine backend of these settings, one per worker process (a diffusion pipeline on the
    device is built once and reused by every video)."""
    from anonymask.config.stages import RefineSettings, stage_backend
    from anonymask.storage.hashing import config_hash

    key = config_hash({k: v for k, v in cfg.items() if k not in RefineSettings.model_fields
                       or k == "backend"})
    if key not in _REFINERS:
        _REFINERS[key] = stage_backend("refine", cfg)
    return _REFINERS[key]


def segments(t_len: int, length: int, overlap: int) -> list[tuple[int, int]]:
    """[start, stop) segments of at most ``length`` frames covering ``t_len``, neighbours sharing
    ``overlap`` frames (the last one ends at the last frame)."""
    if t_len <= length:
        return [(0, t_len)]
    step = max(1, length - overlap)
    starts = list(range(0, t_len - length, step)) + [t_len - length]
    return [(s, s + length) for s in sorted(set(starts))]


def refine_long(refiner, rgb, conds: dict[str, Any], seed: int, length: int, overlap: int, out) -> None:
    """Refine a tubelet of any length segment by segment (each at most ``length`` frames, read
    from the store when needed) and write it to ``out`` in order; where segments overlap the
    result fades linearly from one to the next. Memory: two segments."""
    pending: tuple[int, np.ndarray] | None = None  # (first frame, refined frames not written yet)
    for s0, s1 in segments(int(rgb.shape[0]), length, overlap):
        cur = refiner.refine(np.asarray(rgb[s0:s1]), {k: np.asarray(v[s0:s1]) for k, v in conds.items()},
                             seed=seed)
        if pending is None:
            pending = (s0, cur)
            continue
        p0, prev = pending
        shared = p0 + len(prev) - s0  # frames both segments refined
        out.write(prev[: s0 - p0])
        if shared > 0:
            wgt = ((np.arange(shared) + 1.0) / (shared + 1.0))[:, None, None, None]
            blend = (1.0 - wgt) * prev[s0 - p0 :].astype(np.float32) + wgt * cur[:shared].astype(np.float32)
            out.write(np.clip(np.rint(blend), 0, 255).astype(np.uint8))
        pending = (s0 + shared, cur[shared:])
    if pending is not None:
        out.write(pending[1])


# declared in config/stages.py (settings, deps, versions)
def run(entry: VideoEntry, cfg: dict[str, Any], w: StageWriter) -> None:
    """``none``: the crops as they are (copied window by window). ``animatediff``: segments of
    ``segment_frames`` (default 256) frames, overlapping by ``window`` frames and cross-faded, so a
    long tubelet never sits in memory whole; within a segment the refiner's own temporal
    windows (``window``/``stride``) apply."""
    refiner = None if cfg["backend"] == "none" else get_refiner(cfg)
    for j in tubelet_ids(entry):
        rgb = entry.array(f"tubelets/{j}/rgb")
        with w.frames(f"tubelets/{j}/refined", rgb.shape[1:], np.uint8, int(rgb.shape[0]),
                      shard_bytes=TRACK_SHARD_BYTES) as out:
            if refiner is None:
                for win in frame_windows(int(rgb.shape[0]), cfg["copy_window"]):
                    out.write(np.asarray(rgb[win.core]))
                continue
            conds = {k: entry.array(f"tubelets/{j}/cond_{k}") for k in ("depth", "pose", "face")}
            refine_long(refiner, rgb, conds, cfg["seed"], cfg["segment_frames"], cfg["window"], out)
