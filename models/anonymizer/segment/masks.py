"""Person masks over time: threshold + silhouettes, unflicker, grow, feather, split per track.

Conventions (shared by inpaint/ and compose/):
- a *mask* is (T,H,W) bool, uint8 (0/1 or 0/255) or float alpha in [0,1];
- ``as_alpha`` turns any of these into float32 alpha, ``as_bool`` into "covered at all" (alpha > 0),
  ``as_full`` into "fully covered" (alpha == 1). Privacy code uses ``as_full`` for what may be shown
  as synthetic and ``as_bool`` for what must be hidden: the conservative side in both cases.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np
from scipy.ndimage import uniform_filter1d

from anonymask.models.anonymizer.segment.scene_trim import unsplit

MaskLike = np.ndarray


def uint8_scale(mask: np.ndarray) -> int:
    """255 for a uint8 mask stored as 0..255 (its max exceeds 1), else 1."""
    m = np.asarray(mask)
    return 255 if m.dtype == np.uint8 and m.size and int(m.max()) > 1 else 1


def as_alpha(mask: np.ndarray, scale: int | None = None) -> np.ndarray:
    """Any mask -> float32 alpha in [0,1]. uint8 masks whose max exceeds 1 are read as 0..255.

    ``scale`` fixes the uint8 reading (1 or 255) when converting a video block by block.
    """
    m = np.asarray(mask)
    if m.dtype == bool:
        return m.astype(np.float32)
    if m.dtype == np.uint8:
        s = uint8_scale(m) if scale is None else scale
        return m.astype(np.float32) / np.float32(s) if s != 1 else m.astype(np.float32)
    return np.clip(m.astype(np.float32, copy=False), 0.0, 1.0)


def as_bool(mask: np.ndarray) -> np.ndarray:
    """Pixels covered at all (alpha > 0)."""
    m = np.asarray(mask)
    return m.copy() if m.dtype == bool else m > 0


def as_full(mask: np.ndarray) -> np.ndarray:
    """Pixels fully covered (alpha == 1; for uint8 0/255 masks, == 255)."""
    m = np.asarray(mask)
    if m.dtype == bool:
        return m.copy()
    if m.dtype == np.uint8:
        return m == uint8_scale(m)
    return m >= 1.0


def union_tracks(masks: np.ndarray | Sequence[np.ndarray] | None, shape: tuple[int, ...] | None = None):
    """Union of per-track masks given as (T,H,W), (N,T,H,W) or a list of (T,H,W); None -> None."""
    if masks is None:
        return None
    if isinstance(masks, np.ndarray) and masks.ndim == 3:
        out = as_bool(masks)
    else:
        items = list(masks)
        if not items:
            return np.zeros(shape, bool) if shape is not None else None
        out = np.zeros(np.asarray(items[0]).shape, bool)
        for m in items:
            out |= as_bool(m)
    if shape is not None and out.shape != tuple(shape):
        raise ValueError(f"silhouettes have shape {out.shape}, expected {tuple(shape)}")
    return out


def person_mask(
    prob: np.ndarray,
    silhouettes: np.ndarray | Sequence[np.ndarray] | None = None,
    threshold: float = 0.5,
) -> np.ndarray:
    """Person pixels = segmentation >= threshold OR inside any fitted body's projected silhouette.

    The union covers what either source misses: segmentation misses thin or occluded limbs, the
    fitted body misses hair, loose clothes and carried objects. ``silhouettes`` may be one (T,H,W)
    mask or one per track.
    """
    prob = np.asarray(prob)
    out = prob >= threshold
    sil = union_tracks(silhouettes, prob.shape)
    if sil is not None:
        out |= sil
    return out


def unflicker(masks: np.ndarray, window: int, mode: str = "any") -> np.ndarray:
    """Temporal smoothing over frames t-B..t+B (window = B).

    mode="any" (default, as in the paper): a pixel is person if it is person in ANY frame of the
    window, i.e. the masks are unioned over time. This closes holes that last <= 2B frames and never
    removes person pixels, which is the safe direction for privacy (a pixel wrongly kept as person is
    only inpainted; a pixel wrongly dropped would show the real person).
    mode="majority": person if person in more than half of the window's frames (the window is
    truncated at the clip ends); removes short false positives too but can drop real person pixels.
    """
    m = as_bool(masks)
    if window <= 0 or m.shape[0] <= 1:
        return m
    size = 2 * int(window) + 1
    if mode == "any":
        # OR of the clip shifted by -B..B frames (truncated at the ends): whole-frame ops, far
        # faster than a filter along the strided time axis for the small B used in practice.
        out = m.copy()
        for d in range(1, int(window) + 1):
            np.logical_or(out[d:], m[:-d], out=out[d:])
            np.logical_or(out[:-d], m[d:], out=out[:-d])
        return out
    if mode == "majority":
        count = uniform_filter1d(m.astype(np.float32), size=size, axis=0, mode="constant") * size
        t = np.arange(m.shape[0])
        n = (np.minimum(t + window, m.shape[0] - 1) - np.maximum(t - window, 0) + 1).astype(np.float32)
        return count > 0.5 * n[:, None, None] + 1e-4
    raise ValueError(f"unflicker mode must be 'any' or 'majority', got {mode!r}")


def _disk(radius: int) -> np.ndarray:
    return cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))


def grow(masks: np.ndarray, pixels: int) -> np.ndarray:
    """Dilate every frame by a disk of radius ``pixels`` (bool out). Works on (H,W) or (T,H,W)."""
    m = as_bool(masks)
    if pixels <= 0:
        return m
    kernel = _disk(int(pixels))
    frames = m.reshape((-1,) + m.shape[-2:]).view(np.uint8)
    out = np.empty_like(frames)
    for i, f in enumerate(frames):
        out[i] = cv2.dilate(f, kernel)
    return out.view(bool).reshape(m.shape)


def feather(masks: np.ndarray, sigma: float) -> np.ndarray:
    """Soft alpha (float32) whose core is exactly 1 on the mask and whose edge falls off OUTSIDE it.

    The mask is grown by ceil(3*sigma) and blurred with a Gaussian of ``sigma``: the blurred value
    at the original boundary is ~0.999 and it reaches 0 about 7*sigma outside. Pixels of the input
    mask are then set to exactly 1, so everything the (already grown) person mask covers is fully
    replaced and only pixels outside it are blended. The soft band therefore never lets real
    person pixels through, it only blends background with background.
    """
    m = as_bool(masks)
    if sigma <= 0:
        return m.astype(np.float32)
    grown = grow(m, math.ceil(3 * sigma)).reshape((-1,) + m.shape[-2:])
    h, w = grown.shape[1:]
    pad = math.ceil(4 * sigma) + 2  # the blur kernel's reach (OpenCV truncates float kernels at 4 sigma)
    out = np.zeros(grown.shape, np.float32)
    for i, f in enumerate(grown):
        rows = np.flatnonzero(f.any(axis=1))
        if rows.size == 0:
            continue
        cols = np.flatnonzero(f.any(axis=0))
        r0, r1 = max(0, rows[0] - pad), min(h, rows[-1] + 1 + pad)
        c0, c1 = max(0, cols[0] - pad), min(w, cols[-1] + 1 + pad)
        # Blur only the region the mask can reach. It is surrounded by >= kernel-radius zeros
        # inside the frame and ends at the frame edge elsewhere, so OpenCV's reflect-101 border
        # makes this equal to blurring the full frame.
        roi = f[r0:r1, c0:c1].astype(np.float32)
        out[i, r0:r1, c0:c1] = cv2.GaussianBlur(roi, (0, 0), sigmaX=sigma, sigmaY=sigma)
    out = out.reshape(m.shape)
    np.clip(out, 0.0, 1.0, out=out)
    out[m] = 1.0
    return out


def assign_to_tracks(
    mask: np.ndarray,
    silhouettes: np.ndarray | Sequence[np.ndarray],
    max_distance: float | None = None,
) -> np.ndarray:
    """Split a video's person mask into one mask per track: (N,T,H,W) bool.

    Each mask pixel goes to the track whose projected silhouette is nearest in that frame (a
    track always keeps its own silhouette). Pixels farther than ``max_distance`` from every
    silhouette, or in frames without any silhouette, belong to no track: they stay in the union
    mask (so they are inpainted) but no tubelet is stretched to reach them.
    """
    m = as_bool(mask)
    sil = np.stack([as_bool(s) for s in silhouettes]) if len(silhouettes) else np.zeros((0,) + m.shape, bool)
    n = sil.shape[0]
    out = np.zeros((n,) + m.shape, bool)
    if n == 0:
        return out
    limit = np.inf if max_distance is None else float(max_distance)
    for t in range(m.shape[0]):
        present = [j for j in range(n) if sil[j, t].any()]
        if not present:
            continue
        dist = np.full((len(present),) + m.shape[1:], np.inf, np.float32)
        for k, j in enumerate(present):
            dist[k] = cv2.distanceTransform((~sil[j, t]).view(np.uint8), cv2.DIST_L2, 5)
        best = np.argmin(dist, axis=0)
        near = np.min(dist, axis=0) <= limit
        for k, j in enumerate(present):
            out[j, t] = (m[t] & near & (best == k)) | sil[j, t]
    return out


def contact_margin(masks: np.ndarray, band: float, frac: float, least: int, most: int) -> np.ndarray:
    """Extra margin at the bottom of every person blob: (T,H,W) bool to add to the grown hole.

    Per frame, each connected part of the mask is one person (or a piece of one); its pixels in the lowest ``band`` of its height (feet and ankles)
    are grown by ``frac`` x its height, clipped to [``least``, ``most``] px. Feet are where the
    person mask fails most: a shoe against a floor of the same brightness, contact shadows, and
    the fastest limb of a gait or a kick; the fitted avatar places them worst too. The margin
    scales with each part's own height (a near person's foot is larger and its miss wider).
    """
    m = as_bool(masks)
    out = np.zeros(m.shape, bool)
    if band <= 0 or frac <= 0 or m.size == 0:
        return out
    frames = m.reshape((-1,) + m.shape[-2:])
    res = out.reshape(frames.shape)
    for i, f in enumerate(frames):
        if not f.any():
            continue
        n, labels, stats, _ = cv2.connectedComponentsWithStats(f.view(np.uint8), connectivity=8)
        by_radius: dict[int, np.ndarray] = {}
        for c in range(1, n):
            y, h = int(stats[c, cv2.CC_STAT_TOP]), int(stats[c, cv2.CC_STAT_HEIGHT])
            r = int(np.clip(round(frac * h), least, most))
            if r <= least:  # no more than the margin everywhere: nothing to add
                continue
            top = y + h - max(1, int(math.ceil(band * h)))
            x, w = int(stats[c, cv2.CC_STAT_LEFT]), int(stats[c, cv2.CC_STAT_WIDTH])
            sel = by_radius.setdefault(r, np.zeros(f.shape, np.uint8))
            sel[top : y + h, x : x + w] |= (labels[top : y + h, x : x + w] == c).view(np.uint8)
        for r, sel in by_radius.items():
            res[i] |= cv2.dilate(sel, _disk(r)).view(bool)
    return out


@dataclass
class PersonMasks:
    """Everything later stages need from the segment stage.

    hole: (T,H,W) bool, the grown, unflickered person mask q: inpaint exactly these pixels.
    alpha: (T,H,W) float32, ``feather(hole)``: 1 on the hole, soft band outside it.
    track_holes: (N,T,H,W) bool, each track's share of the hole (the hole pixels nearest to its
    silhouette, and the silhouette itself).
    ``track_alpha(k, frames)``: track k's feathered share, the reintegration alpha and (> 0) the
    tubelet mask. Computed on demand, one track at a time: a window's float alphas of every track
    at once were most of the segment stage's memory.
    """

    hole: np.ndarray
    alpha: np.ndarray
    track_holes: np.ndarray
    sigma: float

    def track_alpha(self, k: int, frames: slice = slice(None)) -> np.ndarray:
        """(T,H,W) float32 alpha of track ``k`` over ``frames`` (feathering is per frame, so a
        slice of frames equals the same frames of the whole)."""
        return feather(self.track_holes[k][frames], self.sigma)

    @property
    def track_alphas(self) -> list[np.ndarray]:
        """Every track's alpha (all in memory at once: for small clips and tests)."""
        return [self.track_alpha(k) for k in range(len(self.track_holes))]


def build_person_masks(
    prob: np.ndarray,
    silhouettes: np.ndarray | Sequence[np.ndarray] | None = None,
    threshold: float = 0.5,
    window: int = 2,
    grow_pixels: int = 5,
    sigma: float = 2.0,
    max_distance: float | None = None,
    silhouettes_in_hole: bool = True,
    contact: tuple[float, float, int] | None = None,
    extra: np.ndarray | None = None,
    scene: np.ndarray | None = None,
) -> PersonMasks:
    """segmentation (+ per-track silhouettes) -> person_mask -> unflicker -> grow -> feather, split per track.

    The split assigns every hole pixel to the nearest track's (grown) silhouette, so the union of
    the track masks is the hole wherever some track is near (see ``assign_to_tracks``); each track
    mask also holds its own silhouette. With ``silhouettes_in_hole=False`` the hole is the
    segmentation alone: pixels under an avatar but outside the person are not inpainted (the
    avatar covers them in the output anyway), so less background is destroyed. ``contact``
    (band, frac, most px): the feet's wider margin (``contact_margin``, at least ``grow_pixels``).
    ``extra`` (T,H,W) bool: pixels added to the hole as they are, after the margins (a margin of
    their own, e.g. the hands' discs of hands.py: not grown again). ``scene`` (T,H,W) bool: pixels
    that show the place as it is with nobody near (scene_trim.py): they leave the hole wherever
    they are outside the person mask grown by the safety margin (the other margins' pixels only).
    """
    m = person_mask(prob, silhouettes if silhouettes_in_hole else None, threshold)
    smooth = unflicker(m, window)
    hole = grow(smooth, grow_pixels)
    if contact is not None:
        hole |= contact_margin(smooth, contact[0], contact[1], grow_pixels, contact[2])
    if extra is not None:
        hole |= as_bool(extra)
    if scene is not None:
        # never the person's own mask, nor its safety margin (the segmentation's edge is uncertain
        # by that much: an edge pixel mixes the person with the place)
        keep = grow(m, grow_pixels)
        hole = unsplit(hole, hole & ~(as_bool(scene) & ~keep))
    alpha = feather(hole, sigma)
    tracks = np.zeros((0, *hole.shape), bool)
    if silhouettes is not None:
        sil = [silhouettes] if isinstance(silhouettes, np.ndarray) and silhouettes.ndim == 3 else list(silhouettes)
        sil = [grow(unflicker(as_bool(s), window), grow_pixels) for s in sil]
        tracks = assign_to_tracks(hole, sil, max_distance)
    return PersonMasks(hole=hole, alpha=alpha, track_holes=tracks, sigma=sigma)
