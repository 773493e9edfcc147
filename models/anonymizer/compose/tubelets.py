"""Tubelets: one square, temporally smooth box per frame around ONE person, crops and pastes.

Boxes are (T,4) float (x0, y0, x1, y1) in pixel-edge coordinates: pixel (i, j) spans
[j, j+1) x [i, i+1), so a mask occupying columns a..b has x0 = a, x1 = b + 1. A crop of size S maps
the box onto an S x S grid of pixel centres; ``crop_tubelet`` and ``paste_tubelet`` use the same
affine map in both directions, so paste(crop(x)) ~ x inside the box.
"""

from __future__ import annotations

import math

import cv2
import numpy as np
from scipy.ndimage import gaussian_filter1d, maximum_filter1d

from anonymask.core.errors import NoPersonError
from anonymask.models.anonymizer.segment.masks import as_bool

_BORDERS = {"replicate": cv2.BORDER_REPLICATE, "constant": cv2.BORDER_CONSTANT, "reflect": cv2.BORDER_REFLECT_101}
_INTERP = {"linear": cv2.INTER_LINEAR, "nearest": cv2.INTER_NEAREST, "cubic": cv2.INTER_CUBIC}


def mask_extents(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-frame tight boxes (T,4) of a (T,H,W) mask and a (T,) bool 'person present'."""
    m = as_bool(mask)
    _, h, w = m.shape
    rows = m.any(axis=2)
    cols = m.any(axis=1)
    present = rows.any(axis=1)
    y0 = rows.argmax(axis=1)
    y1 = h - rows[:, ::-1].argmax(axis=1)
    x0 = cols.argmax(axis=1)
    x1 = w - cols[:, ::-1].argmax(axis=1)
    ext = np.stack([x0, y0, x1, y1], -1).astype(np.float64)
    ext[~present] = np.nan
    return ext, present


def tubelet_boxes(
    mask: np.ndarray,
    margin: float = 0.1,
    sigma: float = 3.0,
    min_size: float = 16.0,
    keep_inside: bool = True,
    constant_size: bool = False,
) -> np.ndarray:
    """Square, temporally smooth boxes (T,4) that always contain ``mask`` (T,H,W) of one person.

    Pass the union of that person's render mask r_j and person mask q_j (with its feathered band),
    so the crop holds everything reintegration will paste back.

    - frames without the person: the tight box is linearly interpolated between the nearest frames
      that have it (held constant before the first and after the last one);
    - centre: Gaussian-smoothed over time (``sigma`` frames);
    - half side: the half side needed to contain the tight box around the SMOOTHED centre, plus
      ``margin`` of it (0.1 = 10 %), at least ``min_size``/2; then a running max over +-2 sigma frames
      (so growth starts before it is needed), Gaussian-smoothed, and finally never below what this
      frame needs: the person is never cut, and the side changes smoothly except where that last
      guarantee has to step in;
    - ``keep_inside``: boxes no larger than the frame are shifted into it (this keeps containment and
      bounded frame-to-frame motion); larger ones are centred on the frame and padded by the crop;
    - ``constant_size``: one side for the whole clip (the largest), for backends that want a fixed
      scale.
    Raises NoPersonError if the mask is empty in every frame.
    """
    m = as_bool(mask)
    if m.ndim != 3:
        raise ValueError(f"tubelet_boxes: mask must be (T,H,W), got {m.shape}")
    _, h, w = m.shape
    ext, present = mask_extents(m)
    return boxes_from_extents(ext, present, (h, w), margin=margin, sigma=sigma, min_size=min_size,
                              keep_inside=keep_inside, constant_size=constant_size)


def boxes_from_extents(
    ext: np.ndarray,
    present: np.ndarray,
    frame_hw: tuple[int, int],
    margin: float = 0.1,
    sigma: float = 3.0,
    min_size: float = 16.0,
    keep_inside: bool = True,
    constant_size: bool = False,
) -> np.ndarray:
    """:func:`tubelet_boxes` from the per-frame tight boxes (T,4) and 'present' (T,) of
    :func:`mask_extents`: a few numbers per frame, so a long video's extents can be gathered
    window by window and the boxes smoothed over the whole video at once."""
    ext = np.array(ext, np.float64)
    present = np.asarray(present, bool)
    t_len = ext.shape[0]
    h, w = frame_hw
    if not present.any():
        raise NoPersonError("tubelet_boxes: the person's mask is empty in every frame")
    t = np.arange(t_len, dtype=np.float64)
    for k in range(4):
        ext[:, k] = np.interp(t, t[present], ext[present, k])
    x0, y0, x1, y1 = ext.T
    cx = 0.5 * (x0 + x1)
    cy = 0.5 * (y0 + y1)
    if sigma > 0 and t_len > 1:
        cx = gaussian_filter1d(cx, sigma, mode="nearest")
        cy = gaussian_filter1d(cy, sigma, mode="nearest")
    need = np.maximum.reduce([cx - x0, x1 - cx, cy - y0, y1 - cy])
    need = np.maximum(need * (1.0 + margin), 0.5 * min_size)
    half = need
    if constant_size:
        half = np.full_like(need, need.max())
    elif sigma > 0 and t_len > 1:
        reach = max(1, math.ceil(2 * sigma))
        half = maximum_filter1d(need, size=2 * reach + 1, mode="nearest")
        half = gaussian_filter1d(half, sigma, mode="nearest")
        half = np.maximum(half, need)
    if keep_inside:
        cx = np.clip(cx, np.minimum(half, w / 2), np.maximum(w - half, w / 2))
        cy = np.clip(cy, np.minimum(half, h / 2), np.maximum(h - half, h / 2))
    return np.stack([cx - half, cy - half, cx + half, cy + half], -1)


def _crop_to_frame(box: np.ndarray, size: int, origin: tuple[float, float] = (0.0, 0.0)) -> np.ndarray:
    """2x3 affine from crop pixel centres to frame pixel centres (relative to ``origin``)."""
    x0, y0, x1, y1 = (float(v) for v in box)
    kx = (x1 - x0) / size
    ky = (y1 - y0) / size
    return np.array(
        [[kx, 0.0, x0 - origin[0] + 0.5 * kx - 0.5], [0.0, ky, y0 - origin[1] + 0.5 * ky - 0.5]], np.float64
    )


def _frame_to_crop(box: np.ndarray, size: int, origin: tuple[float, float] = (0.0, 0.0)) -> np.ndarray:
    """Inverse of ``_crop_to_frame``, computed in closed form."""
    x0, y0, x1, y1 = (float(v) for v in box)
    kx = (x1 - x0) / size
    ky = (y1 - y0) / size
    return np.array(
        [[1 / kx, 0.0, (origin[0] - x0 + 0.5) / kx - 0.5], [0.0, 1 / ky, (origin[1] - y0 + 0.5) / ky - 0.5]],
        np.float64,
    )


def _warp(img: np.ndarray, inv_map: np.ndarray, dsize: tuple[int, int], interp: int, border: int, value):
    """cv2.warpAffine with an inverse map, for any number of channels (cv2 handles at most 4)."""
    flags = interp | cv2.WARP_INVERSE_MAP
    if np.isscalar(value):
        value = (float(value),) * 4  # cv2 reads a scalar border value as channel 0 only
    if img.ndim == 2 or img.shape[-1] <= 4:
        out = cv2.warpAffine(img, inv_map, dsize, flags=flags, borderMode=border, borderValue=value)
        if img.ndim == 3 and out.ndim == 2:
            out = out[..., None]
        return out
    parts = [_warp(img[..., c : c + 4], inv_map, dsize, interp, border, value) for c in range(0, img.shape[-1], 4)]
    return np.concatenate(parts, -1)


def _check_boxes(boxes: np.ndarray, t_len: int) -> np.ndarray:
    b = np.asarray(boxes, np.float64)
    if b.shape != (t_len, 4):
        raise ValueError(f"boxes must be (T,4) with T={t_len}, got {b.shape}")
    if not np.all(np.isfinite(b)) or np.any(b[:, 2] <= b[:, 0]) or np.any(b[:, 3] <= b[:, 1]):
        raise ValueError("boxes must be finite with x1 > x0 and y1 > y0")
    return b


def crop_tubelet(
    video: np.ndarray,
    boxes: np.ndarray,
    out_size: int,
    border: str = "replicate",
    value: float = 0.0,
    interpolation: str = "linear",
) -> np.ndarray:
    """Resample every frame's box to an S x S crop: (T,S,S,C) from (T,H,W,C), (T,S,S) from (T,H,W).

    Box parts outside the frame are padded (``border`` = replicate, constant with ``value``, or
    reflect). uint8 stays uint8 (OpenCV rounding), float stays float32, bool masks become float32
    alpha (so soft edges survive the resampling).
    """
    v = np.asarray(video)
    if v.dtype == bool:
        v = v.astype(np.float32)
    elif v.dtype not in (np.uint8, np.float32):
        v = v.astype(np.float32)
    b = _check_boxes(boxes, v.shape[0])
    s = int(out_size)
    mode, interp = _BORDERS[border], _INTERP[interpolation]
    out = np.empty((v.shape[0], s, s) + v.shape[3:], v.dtype)
    for t in range(v.shape[0]):
        out[t] = _warp(v[t], _crop_to_frame(b[t], s), (s, s), interp, mode, value)
    return out


def paste_region(box: np.ndarray, frame_hw: tuple[int, int]) -> tuple[slice, slice] | None:
    """Frame rows/cols a pasted box can touch (one pixel of slack for interpolation); None if outside."""
    h, w = frame_hw
    x0, y0, x1, y1 = (float(v) for v in box)
    c0, c1 = max(0, math.floor(x0) - 1), min(w, math.ceil(x1) + 1)
    r0, r1 = max(0, math.floor(y0) - 1), min(h, math.ceil(y1) + 1)
    if c1 <= c0 or r1 <= r0:
        return None
    return slice(r0, r1), slice(c0, c1)


def paste_frame(
    crop: np.ndarray, box: np.ndarray, frame_hw: tuple[int, int], interpolation: str = "linear"
) -> tuple[tuple[slice, slice], np.ndarray, np.ndarray] | None:
    """Map one crop (S,S[,C]) back into frame coordinates, restricted to the box's region.

    Returns (region, values float32, valid bool) or None when the box misses the frame. ``valid``
    marks pixels whose interpolation footprint lies entirely inside the crop; others must not be
    used (their value would mix in the zero padding).
    """
    region = paste_region(box, frame_hw)
    if region is None:
        return None
    rows, cols = region
    s = crop.shape[0]
    inv = _frame_to_crop(box, s, origin=(cols.start, rows.start))
    dsize = (cols.stop - cols.start, rows.stop - rows.start)
    interp = _INTERP[interpolation]
    values = _warp(np.asarray(crop, np.float32), inv, dsize, interp, cv2.BORDER_CONSTANT, 0.0)
    ones = np.full(crop.shape[:2], 255, np.uint8)
    # uint8 warps use integer weights that sum to exactly 2^15: 255 out <=> no padding weight.
    valid = _warp(ones, inv, dsize, interp, cv2.BORDER_CONSTANT, 0) == 255
    if valid.ndim == 3:
        valid = valid[..., 0]
    return region, values, valid


def paste_tubelet(
    crops: np.ndarray, boxes: np.ndarray, frame_hw: tuple[int, int], interpolation: str = "linear"
) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of ``crop_tubelet``: (T,H,W[,C]) float32 values and (T,H,W) bool valid mask.

    Pixels outside the box (or too close to its edge to interpolate without padding) are 0 and not
    valid. For long full-resolution videos prefer ``paste_frame`` frame by frame (as reintegrate
    does): this materialises the whole float video.
    """
    c = np.asarray(crops)
    b = _check_boxes(boxes, c.shape[0])
    h, w = frame_hw
    values = np.zeros((c.shape[0], h, w) + c.shape[3:], np.float32)
    valid = np.zeros((c.shape[0], h, w), bool)
    for t in range(c.shape[0]):
        res = paste_frame(c[t], b[t], (h, w), interpolation)
        if res is None:
            continue
        region, vals, ok = res
        values[t][region] = vals
        valid[t][region] = ok
    return values, valid


def points_to_crop(points: np.ndarray, boxes: np.ndarray, size: int) -> np.ndarray:
    """Frame pixel coordinates (T,K,2) -> crop pixel coordinates, with the map ``crop_tubelet`` uses.

    Both in OpenCV's convention (pixel (row i, col j) has its centre at x=j, y=i). NaN stays NaN.
    """
    p = np.asarray(points, np.float64)
    b = np.asarray(boxes, np.float64)
    if p.ndim != 3 or p.shape[-1] != 2 or b.shape != (p.shape[0], 4):
        raise ValueError(f"points_to_crop: points (T,K,2) and boxes (T,4) expected, got {p.shape}, {b.shape}")
    k = np.stack([b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]], -1)[:, None, :] / size
    return (p - b[:, None, :2] + 0.5) / k - 0.5


def tubelet_span(first: int, present: np.ndarray, context: int, t_len: int) -> tuple[int, int]:
    """[start, stop) of a tubelet: its person's first to last present frame, ``context`` frames
    wider (clipped to the video)."""
    idx = np.flatnonzero(present)
    return max(0, first + int(idx[0]) - context), min(t_len, first + int(idx[-1]) + 1 + context)
