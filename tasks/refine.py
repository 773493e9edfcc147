"""Stage ``refine``: ``none`` keeps the render (the paper's "Render" variant); ``animatediff``
refines each tubelet with AnimateDiff + depth/pose/face ControlNets (weights from
ANONYMASK_WEIGHTS) -> ``tubelets/<j>/refined``."""

from __future__ import annotations

from typing import Any

import numpy as np

from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.storage.windows import WINDOW_FRAMES, frame_windows
from anonymask.tasks.common import stage
from anonymask.tasks.tubelets import tubelet_ids

_REFINERS: dict[tuple, Any] = {}


def get_refiner(cfg: dict[str, Any]):
    """One refiner (pipeline on the device) per worker process and config."""
    from anonymask.models.refine.animatediff import AnimateDiffRefiner

    key = tuple(sorted((k, str(v)) for k, v in cfg.items() if k != "seed"))
    if key not in _REFINERS:
        _REFINERS[key] = AnimateDiffRefiner(
            weights_root=cfg.get("weights"), num_inference_steps=int(cfg.get("steps", 8)),
            strength=float(cfg.get("strength", 0.6)), window=int(cfg.get("window", 16)),
            stride=int(cfg.get("stride", 8)),
        )
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


@stage("refine", deps=("tubelets", "conditions"))
def run(entry: VideoEntry, cfg: dict[str, Any], w: StageWriter) -> None:
    """``none``: the crops as they are (copied window by window). ``animatediff``: segments of
    ``segment_frames`` (default 256) frames, overlapping by ``window`` frames and cross-faded, so a
    long tubelet never sits in memory whole; within a segment the refiner's own temporal
    windows (``window``/``stride``) apply."""
    backend = cfg.get("backend", "none")
    if backend not in ("none", "animatediff"):
        raise ValueError(f"unknown refine backend {backend!r} (none, animatediff)")
    refiner = get_refiner(cfg) if backend == "animatediff" else None
    for j in tubelet_ids(entry):
        rgb = entry.array(f"tubelets/{j}/rgb")
        with w.frames(f"tubelets/{j}/refined", rgb.shape[1:], np.uint8, int(rgb.shape[0])) as out:
            if refiner is None:
                for win in frame_windows(int(rgb.shape[0]), int(cfg.get("copy_window", 4 * WINDOW_FRAMES))):
                    out.write(np.asarray(rgb[win.core]))
                continue
            conds = {k: entry.array(f"tubelets/{j}/cond_{k}") for k in ("depth", "pose", "face")}
            refine_long(refiner, rgb, conds, int(cfg.get("seed", 0)), int(cfg.get("segment_frames", 256)),
                        int(cfg.get("window", 16)), out)
