"""Box-level person masks: the privacy backstop for weak segmenters.

Offline segmenters miss parts of small or still people (a standing person is invisible to motion
cues and to a portrait-trained segmenter alike); whatever they miss stays visible after
inpainting. Filling each person's box (around their detection and their fitted avatar, with a
margin) removes them whole, at the cost of inpainting more background.
"""

from __future__ import annotations

import warnings

import numpy as np


def box_of(mask: np.ndarray) -> np.ndarray | None:
    """x0, y0, x1, y1 (exclusive) of a 2-D mask, or None if empty."""
    ys, xs = np.nonzero(mask)
    if len(xs) == 0:
        return None
    return np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1], np.float32)


def box_masks(
    shape: tuple[int, int, int],
    silhouettes: np.ndarray | None = None,
    boxes: np.ndarray | None = None,
    margin: float = 0.15,
) -> np.ndarray:
    """(T,H,W) bool: per frame, the union over people of the box around (silhouette | detection
    box), grown by ``margin`` of its size on every side.

    silhouettes (T,N,H,W) bool (e.g. the fitted avatars' render masks); boxes (N,T,4) with NaN
    where a person is absent (e.g. pose4d's tracked detection boxes).
    """
    t_len, h, w = shape
    out = np.zeros(shape, bool)
    n = max(silhouettes.shape[1] if silhouettes is not None else 0, boxes.shape[0] if boxes is not None else 0)
    for t in range(t_len):
        for j in range(n):
            parts = []
            if silhouettes is not None and j < silhouettes.shape[1]:
                b = box_of(silhouettes[t, j])
                if b is not None:
                    parts.append(b)
            if boxes is not None and j < boxes.shape[0] and np.all(np.isfinite(boxes[j, t])):
                parts.append(boxes[j, t])
            if not parts:
                continue
            p = np.stack(parts)
            x0, y0 = p[:, 0].min(), p[:, 1].min()
            x1, y1 = p[:, 2].max(), p[:, 3].max()
            mx, my = margin * (x1 - x0), margin * (y1 - y0)
            xa, ya = int(max(0, np.floor(x0 - mx))), int(max(0, np.floor(y0 - my)))
            xb, yb = int(min(w, np.ceil(x1 + mx))), int(min(h, np.ceil(y1 + my)))
            out[t, ya:yb, xa:xb] = True
    return out


def window_box_masks(shape: tuple[int, int, int], boxes: np.ndarray, t0: int, margin: float,
                     fill: np.ndarray | None = None) -> np.ndarray:
    """(n,H,W) bool for frames t0..t0+n-1: each person's box (``boxes`` (N,T,4), NaN where absent)
    grown by ``margin``, in the frames where ``fill`` (N,T) bool says so (None: every frame)."""
    sel = np.asarray(boxes)[:, t0 : t0 + shape[0]]
    if fill is not None:
        sel = np.where(np.asarray(fill, bool)[:, t0 : t0 + shape[0], None], sel, np.nan).astype(sel.dtype)
    return box_masks(shape, boxes=sel, margin=margin)


def median_boxes(boxes: np.ndarray, frames: int) -> np.ndarray:
    """(N, T, 4) boxes (NaN where a track has none), each coordinate the median over the ``frames``
    frames centred on each frame where the track has a box (those of them where it has one; a frame
    without a box keeps none). ``frames`` 1: the boxes as they are. A box that jumps out and back
    within one frame (a followed box that slid for a frame) takes its neighbours' place; a box that
    moves steadily stays where it is, and one that moves or grows for good does so in the same frame
    (the frames after agree with it); at a track's first and last frame the window is shorter."""
    boxes = np.asarray(boxes, np.float32)
    k = int(frames) // 2
    if k <= 0 or boxes.ndim != 3 or boxes.shape[1] == 0:
        return boxes
    n, t_len, _ = boxes.shape
    padded = np.full((n, t_len + 2 * k, 4), np.nan, np.float32)
    padded[:, k:k + t_len] = boxes
    stack = np.stack([padded[:, i:i + t_len] for i in range(2 * k + 1)])
    present = np.isfinite(boxes[..., :1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN windows: frames without a box
        out = np.nanmedian(stack, axis=0)
    return np.where(present, out, np.nan).astype(np.float32)
