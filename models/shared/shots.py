"""Hard cuts in a video: where one shot ends and the next begins.

Action datasets cut: HMDB-51 clips are movie excerpts, UCF-101 and web videos are edited. Across
a cut nothing carries over: a person followed or held in place before it is not in the new
shot, and the background the temporal median would take from the other shot is another scene.
So people are found, tracked, masked and inpainted shot by shot (pose4d, segment, inpaint).

A cut is a frame that changes by a spike after calm, on either of two measures, each against the
previous frame:

- colours: the HSV histogram (8x4x4 bins on a 64-px-wide thumbnail), 1 - histogram
  intersection >= ``threshold``;
- layout: the grey thumbnail (32 px wide, zero mean, unit norm), 1 - its correlation with the
  previous one >= ``structure``. Two views of the same room have the same colours: the cut
  between them changes the histogram by 0.33, as much as a fast flip inside a shot does, but it
  moves every edge;

and by at least ``ratio`` x the mean of that measure over the ``context`` frames before it (a fast
pan or a flip rises over several frames; a cut is a spike), and for the layout also over the
``lookahead`` frames after it (a pan goes on; the new shot is calm). Measured on the real videos
that packages ship and footage built from them (docs/RESULTS.md names the clips): colours, cuts
0.33-0.84, no cut at most 0.33 (a fast flip); layout, cuts 0.58-1.26, no cut at most 0.45 (a
fast pan, which rises and stays high over five frames: no spike).
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


def frame_layout(frame: np.ndarray, width: int = 32) -> np.ndarray:
    """Grey thumbnail ``width`` px wide, zero mean and unit norm (its dot product with another is
    their correlation)."""
    h = max(8, int(round(width * frame.shape[0] / max(frame.shape[1], 1))))
    g = cv2.cvtColor(cv2.resize(frame, (width, h), interpolation=cv2.INTER_AREA), cv2.COLOR_RGB2GRAY)
    g = g.astype(np.float32) - float(g.mean())
    return g / max(float(np.linalg.norm(g)), 1e-6)


class CutDetector:
    """Streaming: ``push(frames)`` in order, then ``cuts`` lists the frames that start a shot
    (never 0). ``threshold`` 0 turns detection off (one shot); ``structure`` 0 turns the layout
    measure off (colours only). A layout cut must also stand out from the
    ``lookahead`` frames after it (a pan's changes go on; a cut's new shot is calm again)."""

    def __init__(self, threshold: float, structure: float, ratio: float = 3.0, context: int = 8, min_shot: int = 4,
                 lookahead: int = 3):
        self.threshold, self.structure, self.ratio = float(threshold), float(structure), float(ratio)
        self.context, self.min_shot, self.lookahead = max(1, int(context)), int(min_shot), int(lookahead)
        self.differences: list[float] = []  # colours: frame t vs t - 1, for t >= 1
        self.layout_changes: list[float] = []  # layout: frame t vs t - 1, for t >= 1
        self._prev: tuple[np.ndarray, np.ndarray] | None = None

    def push(self, frames: np.ndarray) -> None:
        for f in np.asarray(frames).reshape((-1,) + np.shape(frames)[-3:]):
            hist, layout = frame_histogram(f), frame_layout(f)
            if self._prev is not None:
                self.differences.append(float(1.0 - np.minimum(hist, self._prev[0]).sum()))
                self.layout_changes.append(float(1.0 - (layout * self._prev[1]).sum()))
            self._prev = (hist, layout)

    @property
    def cuts(self) -> list[int]:
        """The frames that start a shot, from the measures so far (two floats a frame)."""
        if self.threshold <= 0:
            return []
        out: list[int] = []
        recent: deque[tuple[float, float]] = deque(maxlen=self.context)
        for i, (d, s) in enumerate(zip(self.differences, self.layout_changes)):
            t = i + 1
            calm_d = float(np.mean([r[0] for r in recent])) if recent else 0.0
            calm_s = float(np.mean([r[1] for r in recent])) if recent else 0.0
            after = self.layout_changes[i + 1 : i + 1 + self.lookahead]
            calm_after = float(np.mean(after)) if after else 0.0
            colours = d >= self.threshold and d >= self.ratio * calm_d
            layout = (self.structure > 0 and s >= self.structure and s >= self.ratio * calm_s
                      and s >= self.ratio * calm_after)
            if (colours or layout) and t - (out[-1] if out else 0) >= self.min_shot:
                out.append(t)
                recent.clear()
            else:
                recent.append((d, s))
        return out


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
    still view). The median ignores a minority of moving things. What it measures on still and
    moving cameras of real footage is in docs/RESULTS.md."""
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
