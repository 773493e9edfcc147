"""The hands' margin: a disc around each avatar's wrists.

Hands are where both sources of the person mask are weakest: the segmentation drops thin, fast
parts (a hand held out from the body often has no mask at all), and the fitted avatar's hand is a
generic pose at the end of the arm. What is left of a person after the safety margin on the
synthetic sets is most often a hand (docs/RESULTS.md, "where the leak is"). A disc whose
radius is a hand's length (about a tenth of the person's height) around the wrist holds the whole
hand whichever way it points, as long as the fit's wrist is near the real one. It only adds to the
hole, like the feet's margin (masks.py ``contact_margin``).
"""

from __future__ import annotations

import math

import cv2
import numpy as np


def hand_discs(shape: tuple[int, int, int], joints2d: np.ndarray, wrists: tuple[int, ...], heights: np.ndarray,
               present: np.ndarray, frac: float) -> np.ndarray:
    """(n,H,W) bool: discs of radius ``ceil(frac * height)`` around the wrists of every person present.

    ``joints2d`` (n,N,J,2) the avatars' rendered joints in px (NaN where none), ``wrists`` the
    indices of the wrist joints among the J (the body model's layout: the caller's); ``heights`` (n,N)
    each person's box height in px (NaN where they have no box); ``present`` (n,N) bool: the person
    is there in that frame (the segment stage: they have a box; a pose held past the track's ends
    has joints but no box, and gets no disc).
    ``frac`` 0 gives no discs.
    """
    n, h, w = shape
    out = np.zeros(shape, np.uint8)
    if frac <= 0:
        return out.view(bool)
    for k, j in zip(*np.nonzero(np.asarray(present, bool))):
        height = float(heights[k, j])
        if not math.isfinite(height) or height <= 0:
            continue
        r = max(1, math.ceil(frac * height))
        for wrist in wrists:
            x, y = joints2d[k, j, wrist]
            if math.isfinite(x) and math.isfinite(y) and -r <= x < w + r and -r <= y < h + r:
                cv2.circle(out[k], (int(round(x)), int(round(y))), r, 1, -1)
    return out.view(bool)
