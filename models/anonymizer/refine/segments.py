"""A tubelet of any length refined segment by segment: each at most a refiner's length, neighbours
overlapping and cross-faded, so a long tubelet never sits in memory whole (the refine stage)."""

from __future__ import annotations

from typing import Any

import numpy as np


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
