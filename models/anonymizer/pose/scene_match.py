"""Does a track's box show the scene? Its pixels against the same place when no track is there.

The landmark model hallucinates bodies on clutter (a ceiling camera, a skeleton model, a vehicle),
and such a track is followed or held for as long as the clutter stays. Clutter is part of the
scene: where a track sits on it, its box shows the pixels that the same place shows at frames when
no track is there at all (before the hallucination began, or after it ended). A person does not:
where they stand, the place looks different when they are not there, and a person who stands
still for the whole shot leaves no such frame, so the cue never speaks for them (privacy first).

:func:`scene_plan` picks, from the boxes alone, a track's sample frames and for each the nearest
frames where its box is free of every other track (and of the track itself);
:func:`scene_shares` compares the grey levels of the box at the sample and at those frames. A
sample "shows the scene" when one reference differs by less than ``max_diff`` grey levels. What
was measured, on which footage: docs/RESULTS.md ("scene match").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import cv2
import numpy as np

from anonymask.models.anonymizer.pose.settings import SceneMatchSettings
from anonymask.models.shared.geometry import box_cover_share

#: grey frames are compared at half the pose input's size: the cue is a mean over a whole box, and
#: half size halves the memory of the frames kept for it
_SCALE = 0.5


@dataclass
class TrackScenePlan:
    raw_id: int
    samples: list[tuple[int, np.ndarray]] = field(default_factory=list)  # (frame, box) of each sample
    refs: list[list[int]] = field(default_factory=list)  # free reference frames per sample (may be empty)


def scene_plan(raw_boxes: list[np.ndarray], judge: list[int], settings: SceneMatchSettings) -> list[TrackScenePlan]:
    """For each raw track in ``judge`` (indices into ``raw_boxes``, each (T, 4) with NaN where the
    track has no box): sample frames every ``settings.every`` frames of its boxes, and for each the
    ``settings.refs`` nearest frames (every ``settings.ref_stride``-th) where no track's box, its own
    included, covers ``settings.free_cover`` or more of the sample's box."""
    if not raw_boxes:
        return []
    boxes = np.stack(raw_boxes)  # (N, T, 4)
    cand = np.arange(0, boxes.shape[1], settings.ref_stride)
    at_cand = boxes[:, cand]  # (N, C, 4)
    plans = []
    for i in judge:
        plan = TrackScenePlan(i)
        own = np.flatnonzero(np.isfinite(boxes[i, :, 0]))
        for t in own[::settings.every]:
            box = boxes[i, t]
            if box[2] - box[0] < 2 or box[3] - box[1] < 2:
                continue
            blocked = (box_cover_share(box, at_cand) >= settings.free_cover).any(axis=0)
            free = cand[~blocked]
            near = free[np.argsort(np.abs(free - t), kind="stable")[:settings.refs]]
            plan.samples.append((int(t), box.copy()))
            plan.refs.append(sorted(int(f) for f in near))
        plans.append(plan)
    return plans


def _grey(frame: np.ndarray) -> np.ndarray:
    small = cv2.resize(frame, None, fx=_SCALE, fy=_SCALE, interpolation=cv2.INTER_AREA)
    return cv2.cvtColor(small, cv2.COLOR_RGB2GRAY)


def read_grey(read_frames: Callable[[int, int], np.ndarray], needed: set[int], window: int) -> dict[int, np.ndarray]:
    """The frames in ``needed``, grey at half size, read ``window`` frames at a time (only windows that
    hold a needed frame are read)."""
    out: dict[int, np.ndarray] = {}
    for a in sorted({t // window * window for t in needed}):
        frames = read_frames(a, a + window)
        for k in range(len(frames)):
            if a + k in needed:
                out[a + k] = _grey(np.asarray(frames[k]))
    return out


def _patch(grey: np.ndarray, box: np.ndarray) -> np.ndarray:
    h, w = grey.shape
    x0, y0 = max(0, int(round(box[0] * _SCALE))), max(0, int(round(box[1] * _SCALE)))
    x1, y1 = min(w, int(round(box[2] * _SCALE))), min(h, int(round(box[3] * _SCALE)))
    return grey[y0:y1, x0:x1].astype(np.float32)


def scene_shares(plans: list[TrackScenePlan], grey: dict[int, np.ndarray], settings: SceneMatchSettings) -> dict[int, tuple[float, int]]:
    """Per planned track: (share of its samples that show the scene, number of those samples)."""
    out = {}
    for plan in plans:
        hits = 0
        for (t, box), refs in zip(plan.samples, plan.refs):
            now = _patch(grey[t], box)
            if now.size == 0:
                continue
            if any(float(np.mean(np.abs(now - _patch(grey[f], box)))) < settings.max_diff for f in refs):
                hits += 1
        out[plan.raw_id] = (hits / len(plan.samples) if plan.samples else 0.0, hits)
    return out


def track_scene_shares(raw_boxes: list[np.ndarray], judge: list[int], read_frames, settings: SceneMatchSettings) -> dict[int, tuple[float, int]]:
    """:func:`scene_plan` then :func:`scene_shares`, reading only the frames they need."""
    plans = scene_plan(raw_boxes, judge, settings)
    needed = {t for p in plans for t, _ in p.samples} | {f for p in plans for refs in p.refs for f in refs}
    return scene_shares(plans, read_grey(read_frames, needed, settings.read_window), settings)
