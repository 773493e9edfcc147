"""Boxes over time: overlap, where a box lies in the frame, gaps filled. One place for the
geometry that person discovery, segmentation and the audit share (it imports nothing of the
project). Boxes are (x0, y0, x1, y1) in pixels; a track's boxes are (T, 4) with NaN where absent."""

from __future__ import annotations

import numpy as np


def box_iou(a, b) -> float:
    """Intersection over union of two boxes; 0 when they do not overlap."""
    x0, y0 = max(a[0], b[0]), max(a[1], b[1])
    x1, y1 = min(a[2], b[2]), min(a[3], b[3])
    inter = max(0.0, x1 - x0) * max(0.0, y1 - y0)
    ua = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return float(inter / ua) if ua > 0 else 0.0


def inside_frame(box: np.ndarray, hw: tuple[int, int], edge: float) -> bool:
    """The box keeps at least ``edge`` of the frame's size from every border (someone there did not
    just enter or leave). A box with NaN is not inside."""
    h, w = hw
    return bool(box[0] >= edge * w and box[1] >= edge * h and box[2] <= (1 - edge) * w and box[3] <= (1 - edge) * h)


def touching_borders(box: np.ndarray, hw: tuple[int, int], edge: float) -> np.ndarray:
    """(4,) bool: whether the box lies within ``edge`` of the frame's size of its left, top, right
    and bottom border (the sides :func:`inside_frame` keeps away from)."""
    h, w = hw
    return np.array([box[0] <= edge * w, box[1] <= edge * h, box[2] >= (1 - edge) * w, box[3] >= (1 - edge) * h])


def box_union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The smallest box (x0, y0, x1, y1) holding both boxes."""
    return np.concatenate([np.minimum(a[:2], b[:2]), np.maximum(a[2:], b[2:])])


def box_intersection(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The part of box ``a`` inside box ``b`` (inverted, x1 < x0 or y1 < y0, where they do not meet)."""
    return np.concatenate([np.maximum(a[:2], b[:2]), np.minimum(a[2:], b[2:])])


def box_cover_share(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Share of ``box``'s area that each of ``others`` (..., 4) covers; a NaN box covers nothing."""
    ix = np.clip(np.minimum(box[2], others[..., 2]) - np.maximum(box[0], others[..., 0]), 0.0, None)
    iy = np.clip(np.minimum(box[3], others[..., 3]) - np.maximum(box[1], others[..., 1]), 0.0, None)
    area = max(float((box[2] - box[0]) * (box[3] - box[1])), 1e-6)
    return np.nan_to_num(ix * iy / area, nan=0.0)


def fill_gaps(boxes: np.ndarray, max_gap: int) -> tuple[np.ndarray, np.ndarray]:
    """Linear interpolation of a track's boxes over gaps of at most ``max_gap`` frames between
    present rows. Returns (boxes, gap (T,) bool: the rows filled)."""
    out = boxes.copy()
    gap = np.zeros(len(boxes), bool)
    idx = np.nonzero(np.isfinite(boxes[:, 0]))[0]
    for a, b in zip(idx[:-1], idx[1:]):
        if 1 < b - a <= max_gap + 1:
            for t in range(a + 1, b):
                s = (t - a) / (b - a)
                out[t] = (1 - s) * boxes[a] + s * boxes[b]
                gap[t] = True
    return out, gap
