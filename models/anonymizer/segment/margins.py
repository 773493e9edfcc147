"""The segment stage's safety margin in pixels: a fixed number, or ``auto`` resolved from the
people's size (a fixed margin is a lot of background around a small person and little around a
large one)."""

from __future__ import annotations

from typing import Any

import numpy as np


def margin_pixels(grow, boxes: np.ndarray | None, frac: float, lo: int, hi: int) -> int:
    """The safety margin in pixels: a number, or ``"auto"``: ``frac`` x the median height of the
    people's boxes, clipped to [lo, hi] (a fixed margin is a lot of background around a small
    person and little around a large one)."""
    if grow != "auto":
        return int(grow)
    if boxes is None or not np.isfinite(boxes).any():
        return int(lo)
    heights = (boxes[..., 3] - boxes[..., 1])[np.isfinite(boxes[..., 3])]
    return int(np.clip(round(frac * float(np.median(heights))), lo, hi)) if heights.size else int(lo)


def grow_pixels(settings: Any, boxes: np.ndarray | None) -> int:
    """``segment.grow`` in pixels for a video whose people's boxes (N,T,4, NaN where absent) are
    ``boxes``: the setting itself, or (``auto``) ``grow_frac`` x their median height, clipped to
    [``grow_min``, ``grow_max``]. ``settings``: the segment stage's typed settings."""
    return margin_pixels(settings.grow, boxes, settings.grow_frac, settings.grow_min, settings.grow_max)
