"""Follow what keeps moving after a person is lost: their legs, their back.

Two cases share the motion test below. A walker carried on past their last sighting
(:func:`follow_moving`), and a person held in place because their box centre had nearly stopped
(:func:`follow_held`: the held box grows by what moves at it, while it is held).

A person leaving the frame is often seen last from the hips down (the
landmark model let a passer-by in street footage go with legs and hips in view). No offline model here
finds legs, nor do the audit's detectors, so the walk-on of
:func:`anonymask.models.anonymizer.pose.bridge.bridge_after_end` (a box carried on at the person's last speed) was
all that removed them; the legs outpaced it and were shown (docs/RESULTS.md).

Past the walk-on, each frame is compared with the frame ``follow_lag`` before, aligned onto it by a
homography of what lies outside the person (the identity where none can be measured, as on a
still camera), at ``follow_width`` px. The pixels that changed by more than ``follow_motion`` grey
levels and connect to the box of the frame before (grown by ``follow_reach`` x their height) are
where they are now and were ``follow_lag`` frames ago; the box removed is the box around them
joined with the last sighting's box, where the avatar stays held. Following stops where

- less than ``follow_min_share`` of a person's box moves (they left, or stopped);
- more than ``follow_max_area`` x a person's box moves (a van driving past a body drawn on it, a
  pan the homography cannot undo): pure motion, no person model, so this bounds what it may take;
- what moves falls back against the way they walked (``follow_back`` x their height): once they
  left, the parallax of a hand-held camera behind them keeps changing pixels, and is not them;
- ``follow_frames`` frames have passed, or the shot ends.

Every value comes from :class:`~anonymask.models.anonymizer.pose.settings.BridgeSettings`.
"""

from __future__ import annotations

import cv2
import numpy as np

from anonymask.models.anonymizer.pose.settings import BridgeSettings
from anonymask.models.shared.align import small_grey, step_homographies
from anonymask.models.shared.geometry import box_intersection, box_union


def changed_pixels(prev: np.ndarray, cur: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """(changed, valid) bool maps between two grey frames (``prev`` already aligned onto ``cur``;
    NaN where it has no pixel): changed by more than ``threshold`` grey levels, and compared at all."""
    valid = np.isfinite(prev)
    return (np.abs(np.nan_to_num(prev) - cur) > threshold) & valid, valid


def moving_box(changed: np.ndarray, box: np.ndarray, height: float, *, reach: float, min_area: float,
               bridge: float) -> np.ndarray | None:
    """The box around what changed (``changed``: a bool map from :func:`changed_pixels`): the
    connected parts of the change that reach into ``box`` grown by ``reach`` x ``height``, whole,
    after joining changes up to ``bridge`` x ``height`` apart; None when less than ``min_area``
    pixels changed there."""
    h, w = changed.shape
    diff = cv2.morphologyEx(changed.astype(np.uint8), cv2.MORPH_OPEN, np.ones((2, 2), np.uint8))
    # a plain-coloured leg changes only at its edges from one frame to the next: join the edges of
    # one body part (their gap is about its width)
    r = max(1, int(round(bridge * height)))
    diff = cv2.dilate(diff, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1)))
    g = reach * height
    x0, y0 = int(max(0, np.floor(box[0] - g))), int(max(0, np.floor(box[1] - g)))
    x1, y1 = int(min(w, np.ceil(box[2] + g))), int(min(h, np.ceil(box[3] + g)))
    if x1 <= x0 or y1 <= y0:
        return None
    n, labels, stats, _ = cv2.connectedComponentsWithStats(diff, connectivity=8)
    touching = set(np.unique(labels[y0:y1, x0:x1]).tolist()) - {0}  # whole parts, also beyond the box
    keep = [i for i in touching if stats[i, cv2.CC_STAT_AREA] >= 4]
    if not keep or sum(int(stats[i, cv2.CC_STAT_AREA]) for i in keep) < min_area:
        return None
    xs = [stats[i, cv2.CC_STAT_LEFT] for i in keep] + [stats[i, cv2.CC_STAT_LEFT] + stats[i, cv2.CC_STAT_WIDTH]
                                                         for i in keep]
    ys = [stats[i, cv2.CC_STAT_TOP] for i in keep] + [stats[i, cv2.CC_STAT_TOP] + stats[i, cv2.CC_STAT_HEIGHT]
                                                        for i in keep]
    out = np.array([min(xs), min(ys), max(xs), max(ys)], np.float32)
    # leaving through a border: the part between the changed edge and the border has not changed
    # (the same plain trouser leg in both frames), but it is still them
    out[:2][out[:2] <= r] = 0
    if out[2] >= w - r:
        out[2] = w
    if out[3] >= h - r:
        out[3] = h
    return out


def _aligned(prev: np.ndarray, cur: np.ndarray, box: np.ndarray, grow: float) -> np.ndarray:
    """``prev`` mapped onto ``cur`` by the homography of what lies outside ``box`` grown by
    ``grow`` px (both grey, same size); NaN where it has no pixel. The identity where the motion
    cannot be measured (a flat or blurred frame, or a still camera with nothing to find)."""
    h, w = cur.shape
    usable = np.full((h, w), 255, np.uint8)
    x0, y0 = int(max(0, box[0] - grow)), int(max(0, box[1] - grow))
    x1, y1 = int(min(w, box[2] + grow)), int(min(h, box[3] + grow))
    usable[y0:y1, x0:x1] = 0
    a, b = prev.astype(np.uint8), cur.astype(np.uint8)
    hm = step_homographies([a, b], [usable, usable])[0]
    if hm is None:
        return prev
    out = cv2.warpPerspective(prev, hm, (w, h), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                              borderValue=np.nan)
    return out


def _centre(box: np.ndarray) -> np.ndarray:
    return np.array([(box[0] + box[2]) / 2, (box[1] + box[3]) / 2], np.float64)


def _lead(box: np.ndarray, way: np.ndarray) -> float:
    """How far the box reaches in direction ``way`` (its furthest corner along it)."""
    xs = (box[0], box[2])
    ys = (box[1], box[3])
    return max(float(x * way[0] + y * way[1]) for x in xs for y in ys)


class _GreyFrames:
    """Frames as small grey images, read ``follow_read_frames`` at a time and kept while ``lag`` frames back may still
    be asked for (frame t and frame t - lag are compared), and the motion test on them."""

    def __init__(self, read_frames, t_len: int, settings: BridgeSettings):
        self.read, self.t_len, self.lag, self.width = read_frames, t_len, settings.follow_lag, settings.follow_width
        self.threshold, self.reach = settings.follow_motion, settings.follow_reach
        self.min_share, self.part_gap = settings.follow_min_share, settings.follow_part_gap
        self.chunk, self.margin = settings.follow_read_frames, settings.follow_margin_px
        self.cache: dict[int, tuple[np.ndarray, float]] = {}

    def __call__(self, t: int) -> tuple[np.ndarray, float]:
        if t not in self.cache:
            a = max(0, t - self.lag)
            for k, f in enumerate(self.read(a, min(self.t_len, a + self.chunk))):
                g, scale = small_grey(np.asarray(f), self.width)
                self.cache.setdefault(a + k, (g.astype(np.float32), scale))
            for old in [k for k in self.cache if k < t - self.lag]:
                del self.cache[old]
        return self.cache[t]

    def moved_at(self, t: int, box: np.ndarray, height: float, area: float,
                 away_from: np.ndarray | None) -> tuple[np.ndarray | None, float]:
        """The box (full-size px) around what changed between frame t - lag and frame t next to
        ``box`` (full-size px), the camera's motion outside it undone (None where too little moved),
        and the share of the pixels outside ``away_from`` (full-size px; 0.0 when None or when
        nothing moved there) that changed."""
        cur, k = self(t)
        before, _ = self(max(0, t - self.lag))
        small_box = box * k
        reach = self.reach
        changed, valid = changed_pixels(_aligned(before, cur, small_box, reach * height * k + self.margin), cur, self.threshold)
        found = moving_box(changed, small_box, height * k, reach=reach, min_area=self.min_share * area * k * k,
                           bridge=self.part_gap)
        if found is None:
            return None, 0.0
        elsewhere = 0.0 if away_from is None else share_outside(changed, valid, away_from * k)
        return np.clip(found / k, 0, [cur.shape[1] / k, cur.shape[0] / k] * 2).astype(np.float32), elsewhere


def share_outside(changed: np.ndarray, valid: np.ndarray, box: np.ndarray) -> float:
    """Share of the compared (``valid``) pixels outside ``box`` that ``changed``."""
    h, w = changed.shape
    outside = valid.copy()
    x0, y0 = int(max(0, np.floor(box[0]))), int(max(0, np.floor(box[1])))
    x1, y1 = int(min(w, np.ceil(box[2]))), int(min(h, np.ceil(box[3])))
    outside[y0:y1, x0:x1] = False
    n = int(outside.sum())
    return float((changed & outside).sum() / n) if n else 0.0


def follow_moving(boxes: np.ndarray, gap: np.ndarray, last: int, read_frames, settings: BridgeSettings) -> list[int]:
    """Extend a lost walker's removed boxes (in place; see the module docstring) past the end of
    their walk-on (the bridged frames after ``last``, their last sighting): each later frame's box
    becomes the box around what moved next to the box of the frame before, joined with the last
    sighting's box. Stops at the first frame where too little moves or too much, or after
    ``settings.follow_frames`` frames, or at the end of ``boxes`` (the shot); ``follow_motion`` 0:
    off. ``read_frames(a, b)`` gives frames a..b-1. Returns the frames whose box it set (bridged:
    ``gap`` True)."""
    threshold, frames, max_area, back = (settings.follow_motion, settings.follow_frames, settings.follow_max_area,
                                         settings.follow_back)
    t_len = len(boxes)
    ref = boxes[last]
    if not np.all(np.isfinite(ref)) or last + 1 >= t_len or threshold <= 0:
        return []
    height = float(ref[3] - ref[1])
    area = float((ref[2] - ref[0]) * (ref[3] - ref[1]))
    walk_end = last
    while walk_end + 1 < t_len and gap[walk_end + 1] and np.isfinite(boxes[walk_end + 1, 0]):
        walk_end += 1
    stop = min(t_len, walk_end + 1 + int(frames))
    # a person's size: their last box, or the walk-on's last one (carried on at the speed their box
    # grew while they came into view), within the frame
    h_img, w_img = np.asarray(read_frames(last, last + 1)[0]).shape[:2]
    end = np.clip(boxes[walk_end], 0, [w_img, h_img, w_img, h_img])
    area = max(area, float((end[2] - end[0]) * (end[3] - end[1])))
    grey = _GreyFrames(read_frames, t_len, settings)

    # the way they were walking: what follows them must keep going that way (its leading edge never
    # falls back by more than ``back`` x their height; what moves behind them once they left, parallax
    # of a hand-held camera, a bystander's sway, is not them)
    way = _centre(boxes[walk_end]) - _centre(ref)
    if not np.all(np.isfinite(way)) or float(np.hypot(*way)) < 1.0:
        return []
    way = way / float(np.hypot(*way))
    lead = _lead(boxes[walk_end], way)
    changed: list[int] = []
    prev_box = boxes[walk_end].astype(np.float32)
    for t in range(walk_end + 1, stop):
        moved, _ = grey.moved_at(t, prev_box, height, area, away_from=None)
        if moved is None or np.isfinite(boxes[t, 0]):
            break  # nothing moves next to them any more (or the track goes on there)
        if (moved[2] - moved[0]) * (moved[3] - moved[1]) > max_area * area:
            break  # more moves than a person of their size: a car, the camera; followed no further
        if _lead(moved, way) < lead - back * height:
            break  # it falls back: not the walker (they left)
        lead = max(lead, _lead(moved, way))
        # joined with the last sighting's box, where the avatar stays held: one region with an
        # avatar on it, never less than holding would remove
        boxes[t] = box_union(moved, ref)
        gap[t] = True
        changed.append(t)
        prev_box = moved
    return changed


def follow_held(boxes: np.ndarray, last: int, held: range, read_frames, settings: BridgeSettings) -> list[int]:
    """Grow a held person's removed boxes (in place) by what moves at them: over the frames
    ``held`` (bridged with frame ``last``'s box, their last sighting), each box becomes the held box
    joined with what changed next to the region of the frame before, as far as ``held_reach`` x
    their height past the held box. A person whose box centre had almost stopped may still move their
    legs or arms (a slow walker lost behind someone), and those move out of the held box; a
    person who stands still, or is hidden, moves nothing there and keeps the held box. Held, they
    are still where they were: their limbs reach no farther than about a limb's length past the
    box they were seen in, so whatever else moves there (someone passing, a car) adds nothing past
    that. Motion singles out their limbs only where the rest of the picture holds still: a frame in
    which more than ``held_still_share`` of the pixels beyond that reach changed (a moving camera's
    parallax, traffic) grows nothing. Stops at the first frame where nothing moves at them;
    ``follow_motion`` 0: off. Returns the frames whose box it grew."""
    threshold, limit, still_share = settings.follow_motion, settings.held_reach, settings.held_still_share
    t_len = len(boxes)
    ref = boxes[last].astype(np.float32)
    if not np.all(np.isfinite(ref)) or threshold <= 0 or len(held) == 0:
        return []
    height = float(ref[3] - ref[1])
    area = float((ref[2] - ref[0]) * (ref[3] - ref[1]))
    bound = ref + np.float32(limit * height) * np.array([-1, -1, 1, 1], np.float32)
    grey = _GreyFrames(read_frames, t_len, settings)
    grown: list[int] = []
    region = ref
    for t in held:
        moved, elsewhere = grey.moved_at(t, region, height, area, away_from=bound)
        if moved is None:
            break  # nothing moves at them: still, or hidden
        if elsewhere > still_share:
            continue  # the whole picture moves: this frame's motion says nothing about them
        region = box_union(box_intersection(moved, bound), ref)
        boxes[t] = region
        grown.append(t)
    return grown
