"""Merge: composite the avatar render h over the inpainted video x_dot with the render mask r."""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from anonymask.models.anonymizer.segment.masks import as_alpha, uint8_scale


def nonzero_region(a: np.ndarray) -> tuple[slice, slice] | None:
    """Bounding rows/cols of a 2-D array's non-zero pixels (None if all zero): work only there."""
    nz = a > 0
    rows = np.flatnonzero(nz.any(axis=1))
    if rows.size == 0:
        return None
    cols = np.flatnonzero(nz.any(axis=0))
    return slice(int(rows[0]), int(rows[-1]) + 1), slice(int(cols[0]), int(cols[-1]) + 1)


def blend(base: np.ndarray, top: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """(1 - a) * base + a * top in float32, rounded to uint8.

    Written as a weighted sum (not base + a * (top - base)) so that a == 0 gives ``base`` and a == 1
    gives ``top`` bit for bit: a fully synthetic pixel never carries a rounding trace of the real one.
    """
    a = np.asarray(alpha, np.float32)
    if a.ndim == base.ndim - 1:
        a = np.repeat(a[..., None], base.shape[-1], -1)  # explicit: broadcasting a trailing 1 is slow
    out = base.astype(np.float32)
    out *= 1.0 - a
    out += a * np.asarray(top, np.float32)
    np.rint(out, out=out)
    np.clip(out, 0, 255, out=out)
    return out.astype(np.uint8)


def merge(
    x_dot: np.ndarray,
    h: np.ndarray | Sequence[np.ndarray],
    r: np.ndarray | Sequence[np.ndarray],
) -> np.ndarray:
    """x_ddot = r * h + (1 - r) * x_dot per pixel.

    x_dot (T,H,W,3) uint8 inpainted video; h (T,H,W,3) uint8 render of all avatars (the renderer
    resolves occlusions between them) with r its mask (T,H,W) bool / uint8 / float alpha. Per-track
    renders may be given as lists instead; they are composited in list order (later on top).
    A bool mask selects pixels exactly; r == 0 returns x_dot unchanged.
    """
    x_dot = np.asarray(x_dot)
    if x_dot.ndim != 4 or x_dot.dtype != np.uint8:
        raise ValueError(f"merge: x_dot must be (T,H,W,3) uint8, got {x_dot.shape} {x_dot.dtype}")
    if isinstance(h, np.ndarray) and h.ndim == 4:
        layers, masks = [h], [r]
    else:
        layers, masks = list(h), list(r)
    if len(layers) != len(masks):
        raise ValueError(f"merge: {len(layers)} renders but {len(masks)} masks")
    out = x_dot.copy()
    for layer, mask in zip(layers, masks):
        layer = np.asarray(layer)
        mask = np.asarray(mask)
        if layer.shape != x_dot.shape or mask.shape != x_dot.shape[:3]:
            raise ValueError(f"merge: render {layer.shape} / mask {mask.shape} do not match {x_dot.shape}")
        if mask.dtype == bool:
            for t in range(out.shape[0]):
                cv2.copyTo(layer[t], mask[t].view(np.uint8), out[t])
            continue
        scale = uint8_scale(mask)
        for t in range(x_dot.shape[0]):
            a = as_alpha(mask[t], scale)
            region = nonzero_region(a)
            if region is not None:
                out[t][region] = blend(out[t][region], layer[t][region], a[region])
    return out
