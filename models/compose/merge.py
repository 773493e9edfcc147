"""Merge: composite the avatar render h over the inpainted video x_dot with the render mask r."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from anonymask.models.segment.masks import as_alpha, uint8_scale

FRAME_BLOCK = 16


def blend(base: np.ndarray, top: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """(1 - a) * base + a * top in float32, rounded to uint8.

    Written as a weighted sum (not base + a * (top - base)) so that a == 0 gives ``base`` and a == 1
    gives ``top`` bit for bit: a fully synthetic pixel never carries a rounding trace of the real one.
    """
    a = alpha[..., None] if alpha.ndim == base.ndim - 1 else alpha
    out = (1.0 - a) * base.astype(np.float32) + a * np.asarray(top, np.float32)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


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
            np.copyto(out, layer, where=mask[..., None])
            continue
        scale = uint8_scale(mask)
        for t0 in range(0, x_dot.shape[0], FRAME_BLOCK):
            sl = slice(t0, t0 + FRAME_BLOCK)
            out[sl] = blend(out[sl], layer[sl], as_alpha(mask[sl], scale))
    return out
