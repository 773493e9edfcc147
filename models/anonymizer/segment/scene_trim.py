"""Margin pixels that show the scene: the person is not there, so they are not removed.

The hole is each person's mask widened by margins for what the mask may have missed: the safety
margin, unflicker's union over neighbouring frames (a fast arm sweeps a band), the feet's and the
hands' margins. Each is a guess at where the person might be. On a still shot the frame itself can
answer it: a margin pixel whose colour, this frame, is the colour its place has when nobody is near
(the per-pixel median over the block's frames where no person is within reach of it:
foreground.py ``block_background`` with ``clear_reach``) shows the place and nothing of the person.
Such pixels leave the hole (:func:`scene_pixels`, applied in masks.py ``build_person_masks``), so
less of the frame is made up.

Which pixels show the place: whole 3 x 3 neighbourhoods within ``tol`` grey levels in every
channel (an opening: sensor noise does not perforate the hole into speckle).

What never leaves the hole: the person's own mask (segmentation, the pixels the foreground pass
added because they differ from the scene, boxes of bridged or box-drawn people, still regions) and
its safety margin (``segment.grow``: the segmentation's edge is uncertain by that much); a
pixel whose place is not known with nobody near (a person who stands still the whole block: their
margin stays); every pixel of a frame the background no longer describes (a moving camera, a
change of light: foreground.py ``scene_still``); and a region of the hole the trim would split (:func:`unsplit`).
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

from anonymask.models.anonymizer.segment.foreground import Background, described_frames

#: the neighbourhood (px, square) that must all lie within ``tol`` of the place for its pixels to leave;
#: a piece of the hole smaller than it is not a region of its own (:func:`unsplit`)
OPENING = 3


def scene_pixels(frames: np.ndarray, person: np.ndarray, heights: np.ndarray, backgrounds: Sequence[Background], *,
                 tol: float, reach: float, scene_tol: float, max_scene_change: float) -> np.ndarray:
    """(n, H, W) bool: per frame, the pixels outside ``person`` (n, H, W bool) that show
    the frame's background with nobody near (``backgrounds[t]``, ``block_background(...,
    clear_reach=True)``) where it is known: whole 3 x 3 neighbourhoods within ``tol`` grey levels
    (every channel). A frame whose
    background no longer describes it away from the people (more than ``max_scene_change`` of the
    pixels there differ by more than ``scene_tol``; away: beyond ``reach`` x that frame's person
    height, ``heights`` (n,) px, NaN where nobody is) gets none."""
    out = np.zeros(person.shape, bool)
    kernel = np.ones((OPENING, OPENING), np.uint8)
    for t, frame, bg, _ in described_frames(frames, person, heights, backgrounds, reach, scene_tol, max_scene_change):
        # every known pixel counts, not only those within reach: unflicker's sweep of a fast limb
        # reaches further, and a margin left standing there would be a piece of its own
        ys, xs = np.nonzero(bg.known | person[t])
        box = (slice(ys.min(), ys.max() + 1), slice(xs.min(), xs.max() + 1))
        d = cv2.absdiff(np.ascontiguousarray(frame[box]), np.ascontiguousarray(bg.colour[box]))
        diff = np.maximum(np.maximum(d[..., 0], d[..., 1]), d[..., 2])  # a reduce over the last axis is slow
        free = bg.known[box] & ~person[t][box]
        # whole 3 x 3 neighbourhoods within ``tol`` (outside the box counts as not the scene)
        out[t][box] = cv2.morphologyEx(((diff <= tol) & free).view(np.uint8), cv2.MORPH_OPEN, kernel,
                                       borderType=cv2.BORDER_CONSTANT, borderValue=0).view(bool)
    return out


def unsplit(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """``after`` (T,H,W bool, the hole trimmed from ``before``) with every region of ``before``
    that the trim split into pieces whole again: the trim shaves a region's outline, it never cuts
    one apart (a piece cut off from its avatar would be made-up fill on its own, and read as a
    person erased). Pieces smaller than the seed neighbourhood (:data:`OPENING` squared) do not
    count as pieces."""
    out = after.copy()
    least = OPENING * OPENING
    for t in range(len(before)):
        if np.array_equal(before[t], after[t]):
            continue
        n_old, old = cv2.connectedComponents(before[t].view(np.uint8), connectivity=8)
        n_new, new, stats, _ = cv2.connectedComponentsWithStats(after[t].view(np.uint8), connectivity=8)
        # each piece lies inside one region of before (after is a subset of before): its pairs
        on = after[t]
        pairs = np.unique(new[on].astype(np.int64) * n_old + old[on])
        piece, region = pairs // n_old, pairs % n_old
        pieces = np.bincount(region[stats[piece, cv2.CC_STAT_AREA] >= least], minlength=n_old)
        split = np.nonzero(pieces > 1)[0]
        if split.size:
            out[t] |= np.isin(old, split) & before[t]
    return out
