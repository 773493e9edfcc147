"""Camera motion between frames: homographies from corner features outside the people.

Shared by the moving-camera fill (models/anonymizer/inpaint/aligned.py: a hole is filled from neighbour
frames mapped onto it) and by person discovery (models/anonymizer/pose/follow.py: what keeps moving next to
a lost walker, between frames aligned so the camera's own motion does not count).
"""

from __future__ import annotations

import cv2
import numpy as np


def small_grey(frame: np.ndarray, width: int) -> tuple[np.ndarray, float]:
    """A grey copy at most ``width`` px wide (uint8) and the scale factor small/full."""
    h, w = frame.shape[:2]
    width = min(int(width), w)
    k = width / float(w)
    hs = max(8, int(round(h * k)))
    return cv2.cvtColor(cv2.resize(frame, (width, hs), interpolation=cv2.INTER_AREA), cv2.COLOR_RGB2GRAY), k


def step_homographies(grey: list[np.ndarray], usable: list[np.ndarray], features: int = 400,
                      min_inliers: int = 24, threshold: float = 1.5) -> list[np.ndarray | None]:
    """Per consecutive pair (t, t+1): the 3x3 homography taking frame t's pixels to frame t+1's
    (in the grey copies' pixels), or None where it cannot be measured (too few features outside
    the people, or fewer than ``min_inliers`` RANSAC inliers, or under half of them)."""
    out: list[np.ndarray | None] = []
    for t in range(len(grey) - 1):
        pts = cv2.goodFeaturesToTrack(grey[t], features, 0.01, 4, mask=usable[t])
        if pts is None or len(pts) < min_inliers:
            out.append(None)
            continue
        nxt, found, _ = cv2.calcOpticalFlowPyrLK(grey[t], grey[t + 1], pts, None, winSize=(21, 21), maxLevel=3)
        hs, ws = grey[t].shape
        xy = np.clip(np.round(nxt[:, 0]).astype(int), 0, [ws - 1, hs - 1])
        ok = (found.ravel() == 1) & (usable[t + 1][xy[:, 1], xy[:, 0]] > 0)
        if ok.sum() < min_inliers:
            out.append(None)
            continue
        hm, inl = cv2.findHomography(pts[ok], nxt[ok], cv2.RANSAC, threshold)
        n_in = int(inl.sum()) if inl is not None else 0
        out.append(hm if hm is not None and n_in >= max(min_inliers, 0.5 * ok.sum()) else None)
    return out


def chain_maps(steps: list[np.ndarray | None]) -> tuple[list[np.ndarray], np.ndarray]:
    """From the per-step homographies: for every frame, the map from its pixels to its chain's
    first frame, and each frame's chain id (frames of different chains are never aligned)."""
    n = len(steps) + 1
    to_first = [np.eye(3)]
    chain = np.zeros(n, np.int64)
    for t in range(1, n):
        hm = steps[t - 1]
        if hm is None:
            to_first.append(np.eye(3))
            chain[t] = chain[t - 1] + 1
        else:  # frame t -> frame t-1 -> the chain's first frame
            to_first.append(to_first[t - 1] @ np.linalg.inv(hm))
            chain[t] = chain[t - 1]
    return to_first, chain
