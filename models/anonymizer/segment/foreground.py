"""Pixels next to a person that are not the scene: the part of them the segmentation left out.

The person masks come from the landmark model's segmentation (and the avatars). Where it cuts a
limb (a leg kicked back against a dark tyre, a hand in motion blur), the cut part lies just outside
the mask, and the safety margin may not reach it. On a still camera the shot itself says what is
there when nobody is: the per-pixel median, over a block of frames, of the pixels no person's mask
(grown by the safety margin) covers (:func:`block_background`). A pixel within ``reach`` x a
person's height of their mask, connected to it, that differs from that median by more than ``tol``
grey levels (in any colour channel) is not the scene: it moves with the person, so it is taken as
theirs (:func:`touching_foreground`). A shadow or an object a person carries goes with them, which
costs a little background, never a person pixel.

The background model only describes still shots. Where more than ``max_scene_change`` of a frame's
pixels away from people differ from it (the camera moved, the light changed), it says nothing
about that frame and no pixel is added there: such frames keep the masks they had.

Blocks are fixed frame ranges of a shot (the caller's), so the result does not depend on the
window the stage reads frames in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

#: frames of a block the median is taken over at most (evenly spaced, every 2nd of 64): enough for
#: a median that a limb passing through in a few frames does not move; each costs a frame read and
#: a distance map
MEDIAN_FRAMES = 32
#: the scene-change test reads every this many pixels across and down (the share it measures is
#: the same on a sparse grid, at a sixteenth of the median's cost there)
SCENE_STRIDE = 4
#: fewer samples than this (frames where a pixel is outside every person's mask) give no background
#: value for that pixel: a median of one or two frames is whatever was there then
MIN_SAMPLES = 3


@dataclass
class Background:
    """A block's background: colour (H, W, 3) uint8 where ``known`` (H, W) bool."""

    colour: np.ndarray
    known: np.ndarray


def block_of(t: int, shot: tuple[int, int], block: int) -> tuple[int, int]:
    """Frame t's block: the fixed range [c0, c1) of ``block`` frames of its shot (start, stop)."""
    s0, s1 = shot
    c0 = s0 + (t - s0) // block * block
    return c0, min(c0 + block, s1)


def frame_heights(boxes: np.ndarray, start: int, stop: int) -> np.ndarray:
    """Per frame start..stop-1, the median height of the people's boxes there (``boxes`` (people,
    T, 4) x0, y0, x1, y1; NaN: nobody)."""
    hts = boxes[:, start:stop, 3] - boxes[:, start:stop, 1]
    hts = np.where(np.isfinite(hts) & (hts > 0), hts, np.nan)
    out = np.full(stop - start, np.nan)
    seen = np.isfinite(hts).any(axis=0)
    out[seen] = np.nanmedian(hts[:, seen], axis=0)
    return out


def sample_frames(start: int, stop: int) -> np.ndarray:
    """The frames of block start..stop-1 its median is taken over (at most :data:`MEDIAN_FRAMES`)."""
    n = stop - start
    return start + np.unique(np.linspace(0, max(n - 1, 0), min(max(n, 0), MEDIAN_FRAMES)).round().astype(int))


def within_radius(mask: np.ndarray, radius: float) -> np.ndarray:
    """Pixels within ``radius`` px (Euclidean) of ``mask`` (H, W bool), the mask included: a
    distance transform, whose cost does not grow with the radius as a dilation's does."""
    if radius <= 0:
        return mask.copy()
    dist = cv2.distanceTransform((~mask).view(np.uint8), cv2.DIST_L2, cv2.DIST_MASK_PRECISE)
    return dist <= radius


def _lower_median(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Per column of ``values`` (k, P, 3) uint8, the lower median of the rows where ``valid`` (k, P)
    is True (every column has at least one): the invalid rows sort last as 256."""
    v = values.astype(np.uint16)
    v[~valid] = 256
    v.sort(axis=0)
    idx = (valid.sum(axis=0) - 1) // 2  # (P,)
    return np.take_along_axis(v, idx[None, :, None].repeat(3, axis=2), axis=0)[0].astype(np.uint8)


def reach_pixels(heights: np.ndarray, reach: float) -> list[int] | None:
    """Per frame, ``reach`` x its person height (px, at least 1); frames with no height take the
    median of the others; None where no frame has one."""
    seen = np.isfinite(heights)
    if not seen.any():
        return None
    fallback = float(np.median(heights[seen]))
    return [max(1, int(round(reach * (float(h) if ok else fallback)))) for h, ok in zip(heights, seen)]


def _scene_grid(h: int, w: int) -> np.ndarray:
    """The sparse grid the scene-change test reads (every :data:`SCENE_STRIDE` px)."""
    grid = np.zeros((h, w), bool)
    grid[::SCENE_STRIDE, ::SCENE_STRIDE] = True
    return grid


def block_background(frames: np.ndarray, people: np.ndarray, heights: np.ndarray, margin_px: int,
                     reach: float, *, clear_reach: bool = False) -> Background:
    """The background of a block from its sampled ``frames`` (k, H, W, 3) uint8 and the people's
    masks there (k, H, W bool; ``heights`` (k,) px, NaN where nobody is): the median colour of each
    pixel over the frames where no mask grown by ``margin_px`` covers it, at least
    :data:`MIN_SAMPLES` of them. Computed where a person's ``reach`` can take a pixel and on the
    scene-change test's grid (elsewhere ``known`` is False). ``clear_reach``: only frames where no
    person is within ``reach`` (plus the margin) of the pixel count: the place as it is with
    nobody near, not even a limb the masks missed (scene_trim.py)."""
    return block_backgrounds(frames, people, heights, margin_px, reach, (clear_reach,))[0]


def block_backgrounds(frames: np.ndarray, people: np.ndarray, heights: np.ndarray, margin_px: int,
                      reach: float, clear_reach: Sequence[bool]) -> list[Background]:
    """:func:`block_background` once per ``clear_reach`` value, from one distance map per frame."""
    k, h, w = people.shape
    reach_px = reach_pixels(heights, reach)
    if k == 0 or reach_px is None:
        return [Background(np.zeros((h, w, 3), np.uint8), np.zeros((h, w), bool)) for _ in clear_reach]
    excluded = {c: np.empty_like(people) for c in set(clear_reach)}
    region = _scene_grid(h, w)
    for t in range(k):
        dist = cv2.distanceTransform((~people[t]).view(np.uint8), cv2.DIST_L2, cv2.DIST_MASK_PRECISE)
        for c, ex in excluded.items():
            ex[t] = dist <= (reach_px[t] + margin_px if c else margin_px)
        region |= dist <= reach_px[t] + margin_px
    ys, xs = np.nonzero(region)
    return [_median_where_free(frames, ys, xs, ~excluded[c][:, ys, xs], (h, w)) for c in clear_reach]


def _median_where_free(frames: np.ndarray, ys: np.ndarray, xs: np.ndarray, free: np.ndarray,
                       shape: tuple[int, int]) -> Background:
    """The lower median colour at pixels (``ys``, ``xs``) over the frames where they are ``free``
    (k, P bool), where at least :data:`MIN_SAMPLES` are."""
    colour = np.zeros((*shape, 3), np.uint8)
    known = np.zeros(shape, bool)
    ok = free.sum(axis=0) >= MIN_SAMPLES
    if ok.any():
        ys, xs, free = ys[ok], xs[ok], free[:, ok]
        colour[ys, xs] = _lower_median(frames[:, ys, xs], free)
        known[ys, xs] = True
    return Background(colour, known)


def touching_foreground(frames: np.ndarray, person: np.ndarray, heights: np.ndarray,
                        backgrounds: Sequence[Background], *, tol: float, reach: float,
                        max_scene_change: float) -> np.ndarray:
    """(n, H, W) bool: per frame, the pixels outside ``person`` (n, H, W bool, the people's masks
    before the safety margin) within ``reach`` x that frame's person height (``heights`` (n,) px,
    NaN where nobody is) of the mask, connected to it, that differ from that frame's background
    (``backgrounds[t]``, its block's) by more than ``tol`` grey levels in a colour channel.
    Frames whose pixels away from people differ from it in over ``max_scene_change`` of them get
    nothing."""
    out = np.zeros(person.shape, bool)
    for t, frame, bg, near in described_frames(frames, person, heights, backgrounds, reach, tol, max_scene_change):
        ys, xs = np.nonzero(near)  # the rest only where a person's reach is
        y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
        box = (slice(y0, y1), slice(x0, x1))
        fg = _differs(frame[box], bg.colour[box], tol) & bg.known[box] & near[box] & ~person[t][box]
        if not fg.any():
            continue
        seed = cv2.dilate(person[t][box].view(np.uint8), np.ones((3, 3), np.uint8)) > 0
        _, lab = cv2.connectedComponents((fg | seed).astype(np.uint8), connectivity=8)
        touching = np.unique(lab[seed])
        out[t][box] = np.isin(lab, touching[touching > 0]) & fg
    return out


def described_frames(frames: np.ndarray, person: np.ndarray, heights: np.ndarray, backgrounds: Sequence[Background],
                     reach: float, tol: float, max_scene_change: float):
    """Yield (t, frame, its background, ``near``) for each frame with a person whose background
    still describes it away from them (:func:`scene_still`); ``near``: the pixels within ``reach``
    x that frame's person height (``heights``, px) of ``person`` (n, H, W bool)."""
    reach_px = reach_pixels(heights, reach)
    if reach_px is None:
        return
    for t in range(len(person)):
        if not person[t].any():
            continue
        bg, frame = backgrounds[t], frames[t]
        near = within_radius(person[t], reach_px[t])
        if scene_still(frame, bg, near, tol, max_scene_change):
            yield t, frame, bg, near


def scene_still(frame: np.ndarray, bg: Background, near: np.ndarray, tol: float, max_scene_change: float) -> bool:
    """Does ``bg`` still describe ``frame`` away from the people (``near``: where they can reach)?
    On the sparse grid, at most ``max_scene_change`` of the known pixels there differ by more than
    ``tol``; False when none is known (the camera or the light moved, or nothing to compare)."""
    g = slice(None, None, SCENE_STRIDE)
    away = bg.known[g, g] & ~near[g, g]
    return bool(away.any()) and float(_differs(frame[g, g], bg.colour[g, g], tol)[away].mean()) <= max_scene_change


def _differs(a: np.ndarray, b: np.ndarray, tol: float) -> np.ndarray:
    """(H, W) bool: the two uint8 colour images differ by more than ``tol`` in some channel."""
    d = cv2.absdiff(np.ascontiguousarray(a), np.ascontiguousarray(b))
    return np.maximum(np.maximum(d[..., 0], d[..., 1]), d[..., 2]) > tol
