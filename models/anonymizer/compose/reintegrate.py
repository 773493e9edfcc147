"""Reintegration: paste refined tubelet crops back over the inpainted video; the public mask r.

Per frame, starting from x_dot, each track j (in list order, later on top) is composited with
weight a_j = alpha_j * valid_j, where valid_j marks frame pixels that its pasted crop fully covers:
    out = (1 - a_j) * out + a_j * paste(crop_j)
so a_j == 0 keeps the pixel bit for bit and a_j == 1 replaces it bit for bit.

``public_mask`` says which output pixels are synthetic, i.e. hold no real pixel's value. That is
the mask MaskDP trusts (privacy invariant 1), so it is computed conservatively and exactly for the
compositing done here: see its docstring.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from anonymask.models.anonymizer.compose.tubelets import crop_tubelet, paste_frame
from anonymask.models.anonymizer.segment.masks import as_alpha, as_full, grow, uint8_scale


def _per_track(items, name: str, n: int) -> list:
    """Lists or stacked arrays (N, ...) of per-track items -> list of length n."""
    out = list(items)
    if len(out) != n:
        raise ValueError(f"reintegrate: {len(out)} {name} for {n} tracks")
    return out


def reintegrate(
    x_dot: np.ndarray,
    crops: Sequence[np.ndarray],
    boxes: Sequence[np.ndarray],
    alphas: Sequence[np.ndarray],
    interpolation: str = "linear",
    alpha_scale: int | None = None,
) -> np.ndarray:
    """x_tilde (T,H,W,3) uint8 from x_dot and, per track, crops (T,S,S,3), boxes (T,4), alphas (T,H,W).

    alphas are the feathered person masks in frame coordinates (float in [0,1], bool or uint8;
    ``alpha_scale=255`` reads uint8 alphas as 0..255 even where a block's values stay <= 1).
    Where a pasted crop does not fully cover a pixel (outside its box) the alpha is treated as 0, so
    nothing from outside a crop can appear; make the boxes contain the alpha's support
    (``tubelet_boxes`` on alpha > 0 does) or the soft edge is cut there.
    """
    x_dot = np.asarray(x_dot)
    if x_dot.ndim != 4 or x_dot.shape[-1] != 3 or x_dot.dtype != np.uint8:
        raise ValueError(f"reintegrate: x_dot must be (T,H,W,3) uint8, got {x_dot.shape} {x_dot.dtype}")
    crops = list(crops)
    n = len(crops)
    boxes = _per_track(boxes, "boxes", n)
    alphas = _per_track(alphas, "alphas", n)
    t_len, h, w, _ = x_dot.shape
    for j in range(n):
        if np.shape(crops[j])[0] != t_len or np.shape(boxes[j]) != (t_len, 4) or np.shape(alphas[j]) != (t_len, h, w):
            raise ValueError(
                f"reintegrate: track {j}: crops {np.shape(crops[j])}, boxes {np.shape(boxes[j])}, "
                f"alphas {np.shape(alphas[j])} do not match video {x_dot.shape}"
            )
    scales = [alpha_scale or uint8_scale(a) for a in alphas]
    out = x_dot.copy()
    for t in range(t_len):
        pasted = []
        for j in range(n):
            res = paste_frame(np.asarray(crops[j][t]), boxes[j][t], (h, w), interpolation)
            if res is None:
                continue
            region, values, valid = res
            a = as_alpha(np.asarray(alphas[j][t])[region], scales[j]) * valid
            if a.any():
                pasted.append((region, values, a))
        if not pasted:
            continue
        # composite in float over the union of touched regions only
        r0 = min(p[0][0].start for p in pasted)
        r1 = max(p[0][0].stop for p in pasted)
        c0 = min(p[0][1].start for p in pasted)
        c1 = max(p[0][1].stop for p in pasted)
        acc = out[t, r0:r1, c0:c1].astype(np.float32)
        for (rows, cols), values, a in pasted:
            sub = acc[rows.start - r0 : rows.stop - r0, cols.start - c0 : cols.stop - c0]
            a3 = cv2.merge([a, a, a])  # numpy broadcasting over a trailing 1 is several times slower
            # (1 - a) * sub + a * values, in place; exact at a == 0 and a == 1
            values *= a3
            sub *= 1.0 - a3
            sub += values
        np.rint(acc, out=acc)
        np.clip(acc, 0, 255, out=acc)
        out[t, r0:r1, c0:c1] = acc
    return out


def public_mask(
    render_masks: np.ndarray | Sequence[np.ndarray],
    alphas: Sequence[np.ndarray] | None = None,
    boxes: Sequence[np.ndarray] | None = None,
    crop_size: int | None = None,
    border: str = "replicate",
    interpolation: str = "linear",
    margin: int = 1,
    alpha_scale: int | None = None,
) -> np.ndarray:
    """r_final (T,H,W) bool: pixels of x_tilde whose value is entirely synthetic (public).

    A pixel is public only if (all conservative):
    - without reintegration (``alphas`` None): the avatar covers it fully (render alpha == 1, so
      merge took h there, not a blend with x_dot);
    - with reintegration: x_dot's weight there is 0 (some alpha == 1 and nothing above it lets x_dot
      through) AND every crop with a non-zero weight there is built only from fully-synthetic
      pixels. The second part is computed exactly by sending a 'real' indicator (1 - full(r))
      through the same crop (``border``, ``interpolation``) and paste operations: bilinear weights
      are non-negative, so the resampled indicator is 0 only where no real pixel contributes.
      Pixels inside q but outside the avatar are inpainted background, pixels in the feathered band
      blend real and synthetic: neither is public.
    - ``margin`` erodes the result by that many pixels as a guard against resampling done outside
      this module (e.g. a refine backend that resizes its crops). Use 0 for the exact set.
    Caveat: a diffusion refiner mixes the whole crop (VAE and attention receptive fields), so
    'synthetic' here follows the paper's convention: a refined avatar pixel counts as public.
    ``render_masks``: the union of all avatars (T,H,W), or one mask per track. ``alpha_scale``:
    as in :func:`reintegrate`.
    """
    if isinstance(render_masks, np.ndarray) and render_masks.ndim == 3:
        synthetic = as_full(render_masks)
    else:
        items = list(render_masks)
        synthetic = as_full(items[0])
        for m in items[1:]:
            synthetic |= as_full(m)
    t_len, h, w = synthetic.shape
    if alphas is None:
        public = synthetic
    else:
        if boxes is None or crop_size is None:
            raise ValueError("public_mask: with alphas, the tubelet boxes and crop_size are needed too")
        alphas = list(alphas)
        boxes = list(boxes)
        if len(boxes) != len(alphas):
            raise ValueError(f"public_mask: {len(alphas)} alphas but {len(boxes)} box tracks")
        real = (~synthetic).astype(np.float32)
        real_crops = [crop_tubelet(real, b, crop_size, border=border, interpolation=interpolation) for b in boxes]
        scales = [alpha_scale or uint8_scale(a) for a in alphas]
        public = np.zeros_like(synthetic)
        for t in range(t_len):
            pasted = []
            for j in range(len(alphas)):
                res = paste_frame(real_crops[j][t], boxes[j][t], (h, w), interpolation)
                if res is not None:
                    region, real_pasted, valid = res
                    a = as_alpha(np.asarray(alphas[j][t])[region], scales[j]) * valid
                    pasted.append((region, real_pasted > 0, a))
            if not pasted:
                continue  # x_dot shows through everywhere: nothing public
            r0 = min(p[0][0].start for p in pasted)
            r1 = max(p[0][0].stop for p in pasted)
            c0 = min(p[0][1].start for p in pasted)
            c1 = max(p[0][1].stop for p in pasted)
            through = np.ones((r1 - r0, c1 - c0), np.float32)  # weight with which x_dot still shows
            clean = np.ones((r1 - r0, c1 - c0), bool)  # no contributing crop holds a real pixel
            for (rows, cols), dirty, a in pasted:
                sl = (slice(rows.start - r0, rows.stop - r0), slice(cols.start - c0, cols.stop - c0))
                # a fully opaque crop hides everything composited before it, earlier dirt included
                clean[sl] |= a >= 1.0
                clean[sl] &= ~((a > 0) & dirty)
                through[sl] *= 1.0 - a
            public[t, r0:r1, c0:c1] = (through == 0) & clean
    if margin > 0:
        k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * margin + 1, 2 * margin + 1))
        public = np.stack([cv2.erode(f.view(np.uint8), k, borderType=cv2.BORDER_CONSTANT, borderValue=0) for f in public]).view(bool)
    return public


def avatar_band(avatar: np.ndarray, pixels: int = 2) -> np.ndarray:
    """Avatar pixels grown by ``pixels``: where the pasted (resampled, feathered) avatar crop bleeds
    its colours into the background; no real pixel value is shown there."""
    return grow(avatar.astype(bool), pixels)
