"""Frames scaled to a working size (ingest, its ground truth, and the scripts that read a video
the way ingest does). Imports nothing of the project."""

from __future__ import annotations

import cv2
import numpy as np


def target_size(h: int, w: int, max_side: int | None) -> tuple[int, int]:
    """(h, w) scaled so the long side is <= max_side, both even (codecs and 2x2 pooling like that)."""
    s = 1.0 if not max_side or max(h, w) <= max_side else max_side / max(h, w)
    return max(2, int(round(h * s / 2)) * 2), max(2, int(round(w * s / 2)) * 2)


def resize_video(frames: np.ndarray, hw: tuple[int, int], nearest: bool = False) -> np.ndarray:
    if frames.shape[1:3] == hw:
        return frames
    interp = cv2.INTER_NEAREST if nearest else cv2.INTER_AREA
    out = [cv2.resize(f, (hw[1], hw[0]), interpolation=interp) for f in frames]
    return np.stack(out).astype(frames.dtype, copy=False)
