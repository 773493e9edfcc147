"""Where the people are, per frame, before any pose is known.

Two cues, united: a person-segmentation map (works for people who stand still) and, for static
cameras, motion against the temporal median of the clip (works for small people in wide shots,
which portrait-trained segmenters miss). Body parts split by thin gaps are joined by a closing.
"""

from __future__ import annotations

import cv2
import numpy as np


def motion_probability(frames: np.ndarray, threshold: float = 25.0, close: int = 9) -> np.ndarray:
    """(T,H,W) float32 in {0,1}: pixels that differ from the clip's temporal median background."""
    bg = np.median(frames, axis=0)
    out = np.empty(frames.shape[:3], np.float32)
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (close, close))
    for t, f in enumerate(frames):
        d = np.abs(f.astype(np.float32) - bg).max(-1) > threshold
        out[t] = cv2.morphologyEx(d.astype(np.uint8), cv2.MORPH_CLOSE, kernel)
    return out


def detection_probability(frames: np.ndarray, seg_prob: np.ndarray | None, use_motion: bool = True) -> np.ndarray:
    """max(segmentation, motion) — the map person boxes are taken from."""
    if seg_prob is None and not use_motion:
        raise ValueError("detection needs a segmentation map or motion")
    maps = [] if seg_prob is None else [np.asarray(seg_prob, np.float32)]
    if use_motion and frames.shape[0] >= 3:
        maps.append(motion_probability(frames))
    return np.maximum.reduce(maps) if len(maps) > 1 else maps[0]
