"""Self-audit of anonymized frames with detectors independent of the one that found the people.

People are found by MediaPipe's BlazePose detector + pose landmark model (models/anonymizer/pose). The audit
uses other models, so one model's blind spot is not the audit's:
- ``face``: MediaPipe's BlazeFace face detectors (short-range and full-range models, shipped in the
  wheel), on the frame and on overlapping tiles (small faces), confirmed by the selfie
  segmentation seeing a person around the face;
- ``hog``: OpenCV's HOG + linear SVM pedestrian detector (built into OpenCV, no weights file); a
  weak detection must be confirmed by the pose landmark model on its box (``HogAuditor``).

A detection is a *finding* when most of it lies outside the drawn pixels: the avatars' (the render
mask, grown by a few pixels) and, where the caller gives them, the hole pixels the inpainting made
up (a spatial fill where no frame shows the place without a person: a smooth continuation of the
colours around it, no real pixel; models/anonymizer/inpaint/backends.py). A face or body there is
real, not drawn. Detections on drawn pixels are expected: a fill's smooth oval over a spoon can
read as a face.
A real face outside the avatars does not need the avatars' pixels to be seen, so with ``refind``
a candidate must also be found by the same detector, at a lower score (``refind_score``),
once the avatars are taken out (the grown avatar pixels replaced by the background without
people): a box that an avatar's head beside a fill or a handlebar completes into a "face" is not
found there at any score and does not count (``AuditReport.avatar_induced``). Auditors whose
``refind_without_avatars`` is true take part: the face auditor. A body partly under an avatar
loses more of what a body detector needs than a face beside one does (with a tenth to two fifths
of a real body's centre under an avatar, the opt-in YOLO auditor finds 95-99% of the candidates
again at score 0.1 on real footage and 90-96% on the synthetic sets: docs/RESULTS.md), so body
candidates are not re-checked this way.
A real person shown on the source frame's own pixels is on the source frame: with ``source_check``
a candidate whose central part is mostly pixels of the output's own time (less than
``source_max_fill`` of it filled from other frames or made up: the inpainting's hole) must also be
found by the auditor's ``refind`` (face, HOG, YOLO: each at a lower score than it counts at) on
the source frame at that time, on a box covering at least ``source_cover`` of it
(``AuditReport.not_in_source``). What the detector sees there and not on the
source is made by what the output changed around it: an avatar's edge, a fill beside clutter
(docs/RESULTS.md). Where the fill dominates the candidate, a person the fill copied from another
frame could be what the detector sees, so there today's rule stands.
Single-frame detections are weak evidence (HOG fires on furniture now and then), so a finding
counts only when the same place is found in ``min_frames`` audited frames (a person left in the
video is there frame after frame).

Registry: ``get_auditor(name, **cfg).detect(frame) -> list[(kind, box x0,y0,x1,y1, score)]``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import cv2
import numpy as np

from anonymask.core.registry import build, names, register
from anonymask.models.shared.geometry import box_cover_share, box_iou


def available_auditors() -> list[str]:
    return names("audit")


def get_auditor(name: str, **cfg):
    """The audit detector registered as ``name`` (core/registry.py), settings validated."""
    return build("audit", name, **cfg)


def _tiles(h: int, w: int, frac: float = 0.6) -> list[tuple[int, int, int, int]]:
    """(x0, y0, x1, y1) overlapping tiles of about ``frac`` of each side (2 or 3 per axis)."""
    out = []
    for n, size in ((h, int(round(frac * h))), (w, int(round(frac * w)))):
        starts = sorted({0, (n - size) // 2, n - size})
        out.append([(a, a + size) for a in starts])
    return [(x0, y0, x1, y1) for (y0, y1) in out[0] for (x0, x1) in out[1]]


@register("audit", "face")
class FaceAuditor:
    """BlazeFace short-range and full-range (MediaPipe wheel models) on the frame and, for frames
    larger than ``tile_above`` pixels, on overlapping tiles: the models see a 128 / 192 px version
    of what they are given, so a small face is only found on a tile."""

    #: a candidate must be found again with the avatars taken out (module docstring: ``refind``)
    refind_without_avatars = True

    def __init__(self, min_score: float = 0.7, tile_above: int = 320, min_person: float = 0.4,
                 refind_score: float = 0.3):
        """``refind_score``: the score at which a face found outside the avatars must be found again
        once they are taken out (lower than ``min_score``: a real face that loses a few pixels at its
        edge to the grown avatar mask scores lower, but is still found)."""
        self.models = self._models(min_score)
        self.tile_above = int(tile_above)
        self.min_score = float(min_score)
        self.min_person = float(min_person)
        self.refind_score = float(refind_score)
        self._low = None
        self._seg = None
        self.last_scores: list[float] = []

    @staticmethod
    def _models(min_score: float):
        import mediapipe as mp

        return [mp.solutions.face_detection.FaceDetection(model_selection=s, min_detection_confidence=min_score)
                for s in (0, 1)]

    def _run(self, image: np.ndarray, ox: int, oy: int, models, min_score: float | None = None
             ) -> list[tuple[str, np.ndarray, float]]:
        h, w = image.shape[:2]
        out = []
        floor = self.min_score if min_score is None else min_score
        for m in models:
            for d in m.process(np.ascontiguousarray(image)).detections or []:
                sc = float(d.score[0])
                if sc < floor:
                    continue
                b = d.location_data.relative_bounding_box
                box = np.array([ox + b.xmin * w, oy + b.ymin * h, ox + (b.xmin + b.width) * w,
                                oy + (b.ymin + b.height) * h], np.float32)
                out.append(("face", box, sc))
                if min_score is None:
                    self.last_scores.append(sc)
        return out

    def confirmed(self, frame: np.ndarray, kind: str, box: np.ndarray, score: float) -> bool:
        """Asked for faces outside avatar pixels: MediaPipe's selfie segmentation, on a crop 3x the
        face around it, must see a person in the face box (mean probability >= ``min_person``);
        BlazeFace alone fires on a motorbike's headlight."""
        import mediapipe as mp

        if self._seg is None:
            self._seg = mp.solutions.selfie_segmentation.SelfieSegmentation(model_selection=0)
        h, w = frame.shape[:2]
        bw, bh = float(box[2] - box[0]), float(box[3] - box[1])
        side = 3.0 * max(bw, bh, 8.0)
        cx, cy = float(box[0] + box[2]) / 2, float(box[1] + box[3]) / 2 + 0.5 * bh
        s = 256.0 / side
        m = np.float32([[s, 0, 128 - cx * s], [0, s, 128 - cy * s]])
        crop = cv2.warpAffine(frame, m, (256, 256), borderMode=cv2.BORDER_REPLICATE)
        prob = self._seg.process(np.ascontiguousarray(crop)).segmentation_mask
        x0, y0 = (np.array([box[0], box[1]]) * s + m[:, 2]).astype(int)
        x1, y1 = (np.array([box[2], box[3]]) * s + m[:, 2]).astype(int)
        x0, y0, x1, y1 = max(0, x0), max(0, y0), min(256, x1), min(256, y1)
        return x1 > x0 and y1 > y0 and float(prob[y0:y1, x0:x1].mean()) >= self.min_person

    def detect(self, frame: np.ndarray) -> list[tuple[str, np.ndarray, float]]:
        return self._detect(frame, self.models, None)

    def refind(self, frame: np.ndarray) -> list[tuple[str, np.ndarray, float]]:
        """:meth:`detect` down to ``refind_score`` (see the module docstring: ``refind``)."""
        if self._low is None:
            self._low = self._models(self.refind_score)
        return self._detect(frame, self._low, self.refind_score)

    def _detect(self, frame: np.ndarray, models, min_score: float | None) -> list[tuple[str, np.ndarray, float]]:
        h, w = frame.shape[:2]
        out = self._run(frame, 0, 0, models, min_score)
        if max(h, w) > self.tile_above:
            for x0, y0, x1, y1 in _tiles(h, w):
                out += self._run(frame[y0:y1, x0:x1], x0, y0, models[1:], min_score)
        return _nms(out)


def _nms(dets: list[tuple[str, np.ndarray, float]], iou: float = 0.4) -> list[tuple[str, np.ndarray, float]]:
    kept: list[tuple[str, np.ndarray, float]] = []
    for d in sorted(dets, key=lambda d: -d[2]):
        if not any(k[0] == d[0] and box_iou(k[1], d[1]) > iou for k in kept):
            kept.append(d)
    return kept


@register("audit", "hog")
class HogAuditor:
    """OpenCV's default HOG people detector (64x128 window) on the frame padded by a replicated
    border (people cut by the frame edge), upscaled by ``upscale`` when the frame's long side is
    below ``upscale_below`` (people down to ~96/upscale px tall).

    HOG fires on some static structures (a wall corner, a pillar; scores up to ~2). A detection
    counts only when a second model agrees (or it scores above ``strong``, off by default): the pose landmark model, run on
    a region around the box, says a person is present (``confirm``; it says ~0 on walls and ~1 on
    people, also masked or seen from behind). :func:`audit_frames` asks ``confirmed`` only for
    detections outside avatar pixels; unconfirmed ones are counted and never fail a video."""

    #: a body partly under an avatar is not looked for again with the avatars taken out (module docstring)
    refind_without_avatars = False

    def __init__(self, hit_threshold: float = 0.3, upscale_below: int = 400, upscale: float = 1.5, pad: int = 16,
                 strong: float = float("inf"), confirm: bool = True, min_flag: float = 0.85,
                 refind_threshold: float = -0.3):
        """``refind_threshold``: the SVM margin at which a candidate on the source frame's own pixels
        must be found on the source frame (``source_check``): low, so the check lets go only what HOG
        does not see there at all (real bodies beside an avatar are found again at -0.3 in 259 of
        261 candidate frames, on the frame with the avatar taken out: docs/RESULTS.md)."""
        self.refind_threshold = float(refind_threshold)
        self.hog = cv2.HOGDescriptor()
        self.hog.setSVMDetector(cv2.HOGDescriptor_getDefaultPeopleDetector())
        self.hit_threshold = float(hit_threshold)
        self.upscale_below = int(upscale_below)
        self.upscale = float(upscale)
        self.pad = int(pad)
        self.strong = float(strong)
        self.min_flag = float(min_flag)
        self._roi = None
        # the landmark model's own "nobody here" flag and the body-landmark visibility a region's
        # landmarks need: the values pose4d follows people with
        from anonymask.models.anonymizer.pose.settings import DiscoverSettings

        follow = DiscoverSettings()
        self.roi_min_flag, self.roi_min_score = follow.follow_min_flag, follow.follow_min_score
        self.confirm = bool(confirm)

    def _present(self, frame: np.ndarray, box: np.ndarray) -> bool:
        """The landmark model, from a region around the box, keeps saying "person" while it moves
        the region onto what it sees (two steps of its own region prediction, flag >= ``min_flag``
        each time): a person; a tall thin object (a rocket, a pillar) loses the flag on the way."""
        if self._roi is None:
            from anonymask.models.anonymizer.pose.roi import RoiLandmarker

            self._roi = RoiLandmarker(self.roi_min_flag)
        bh = float(box[3] - box[1])
        cx, cy = float(box[0] + box[2]) / 2, float(box[1] + box[3]) / 2
        for side, dy in ((1.3 * bh, 0.05 * bh), (1.7 * bh, 0.0)):
            d, nxt, flag = self._roi.track(frame, (cx, cy + dy, side, 0.0), self.roi_min_score)
            if d is None or flag < 0.5:
                continue
            ok = True
            for _ in range(2):
                d, nxt, flag = self._roi.track(frame, nxt, self.roi_min_score)
                if d is None or flag < self.min_flag or d.score < 0.6:
                    ok = False
                    break
            if ok:
                return True
        return False

    def detect(self, frame: np.ndarray) -> list[tuple[str, np.ndarray, float]]:
        return self._detect(frame, self.hit_threshold)

    def refind(self, frame: np.ndarray) -> list[tuple[str, np.ndarray, float]]:
        """:meth:`detect` down to ``refind_threshold``, unconfirmed (the source check)."""
        return self._detect(frame, self.refind_threshold)

    def _detect(self, frame: np.ndarray, threshold: float) -> list[tuple[str, np.ndarray, float]]:
        h, w = frame.shape[:2]
        s = self.upscale if max(h, w) < self.upscale_below else 1.0
        gray = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
        p = self.pad
        gray = cv2.copyMakeBorder(gray, p, p, p, p, cv2.BORDER_REPLICATE)
        if s != 1.0:
            gray = cv2.resize(gray, None, fx=s, fy=s, interpolation=cv2.INTER_LINEAR)
        if gray.shape[0] < 128 or gray.shape[1] < 64:  # smaller than the detector's window
            return []
        rects, weights = self.hog.detectMultiScale(gray, hitThreshold=threshold, winStride=(8, 8),
                                                   padding=(8, 8), scale=1.05)
        out = []
        for (x, y, bw, bh), sc in zip(rects, np.ravel(weights)):
            # the default detector's window has ~1/8 margin around the person on each side
            box = np.array([x + bw / 8, y + bh / 10, x + bw * 7 / 8, y + bh * 9 / 10], np.float32) / s - p
            box = np.clip(box, 0, [w, h, w, h]).astype(np.float32)
            out.append(("body", box, float(sc)))
        return _nms(out, 0.5)

    def confirmed(self, frame: np.ndarray, kind: str, box: np.ndarray, score: float) -> bool:
        """Asked by :func:`audit_frames` for detections outside avatar pixels only (cost)."""
        return not self.confirm or score >= self.strong or self._present(frame, box)


class AuditedFrame(NamedTuple):
    """One audited frame and what the audit knows of its pixels (a plain tuple of the first items works too)."""

    t: int
    frame: np.ndarray  # the output, (H,W,3) uint8
    avatar: np.ndarray  # avatar pixels, (H,W) bool
    background: np.ndarray | None = None  # the frame without people (the inpainting's), for ``refind``
    made_up: np.ndarray | None = None  # hole pixels the fill made up, (H,W) bool
    source: np.ndarray | None = None  # the source frame at ``t``, (H,W,3) uint8, for ``source_check``
    filled: np.ndarray | None = None  # every hole pixel (filled from other frames or made up), (H,W) bool


@dataclass
class AuditFinding:
    kind: str  # face / body (detectors), gt_leak (ground truth), erased (removed without an avatar)
    frames: list[int]
    box: list[float]  # in the first frame it was found
    score: float
    outside: float  # share of the box outside drawn pixels (avatars, made-up fill)


@dataclass
class AuditReport:
    frames_checked: int = 0
    detections: int = 0
    on_avatars: int = 0
    unconfirmed: int = 0
    on_fill: int = 0  # outside the avatars but mostly on made-up fill pixels (not counted in on_avatars)
    #: those detections, to look at: frame, kind, box, score, outside_avatars, outside_drawn
    fill_excused: list[dict] = field(default_factory=list)
    avatar_induced: int = 0  # candidates not found again with the avatars taken out (``refind``)
    not_in_source: int = 0  # candidates on the source's own pixels not found on the source frame
    #: those candidates, to look at: frame, kind, box, score, filled (share of the box's centre)
    source_excused: list[dict] = field(default_factory=list)
    findings: list[AuditFinding] = field(default_factory=list)
    #: per kind, the most audited frames one candidate (outside avatars, confirmed) reached
    max_frames: dict[str, int] = field(default_factory=dict)
    #: per kind, the frames a candidate needs to become a finding
    frames_needed: dict[str, int] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.findings

    def summary(self) -> str:
        if self.passed:
            return f"audit passed: {self.frames_checked} frames checked, {self.detections} detections, all on avatars"
        def at(b):
            return f"x={b[0]:.0f}..{b[2]:.0f}, y={b[1]:.0f}..{b[3]:.0f}"

        parts = [f"{f.kind} at {at(f.box)} in frames {_ranges(f.frames)} ({f.outside:.0%} outside avatar and made-up fill pixels)"
                 for f in self.findings if f.kind not in ("gt_leak", "erased")]
        parts += [f"ground truth: {f.score:.2%} of the person pixels shown outside avatars, in frames "
                  f"{_ranges(f.frames)} (first at {at(f.box)})" for f in self.findings if f.kind == "gt_leak"]
        text = "audit: real person visible outside avatar pixels: " + "; ".join(parts) if parts else ""
        erased = [f"a person removed without an avatar in frames {_ranges(f.frames)} (first at {at(f.box)}; the "
                  f"largest region {f.score:.1f}x the video's typical hole, no avatar on it)"
                  for f in self.findings if f.kind == "erased"]
        if erased:
            text = (text + "; " if text else "audit: ") + "person erased, not replaced: " + "; ".join(erased)
        return text


def _ranges(frames: list[int]) -> str:
    frames = sorted(frames)
    if len(frames) > 6:
        return f"{frames[0]}..{frames[-1]} ({len(frames)} checked)"
    return ",".join(str(f) for f in frames)


def outside_share(box: np.ndarray, synthetic: np.ndarray, inner: float = 0.25) -> float:
    """Share of the box's central part (``inner`` of its size cut off each side: detector boxes
    include background around a face or body) whose pixels are not synthetic (avatar)."""
    h, w = synthetic.shape
    bw, bh = box[2] - box[0], box[3] - box[1]
    box = np.array([box[0] + inner * bw, box[1] + inner * bh, box[2] - inner * bw, box[3] - inner * bh])
    x0, y0 = int(max(0, np.floor(box[0]))), int(max(0, np.floor(box[1])))
    x1, y1 = int(min(w, np.ceil(box[2]))), int(min(h, np.ceil(box[3])))
    if x1 <= x0 or y1 <= y0:
        return 0.0
    return float(1.0 - synthetic[y0:y1, x0:x1].mean())


def audit_frames(frames: Iterable[AuditedFrame | tuple], auditors: list, *, min_outside: float = 0.6,
                 min_frames: dict[str, int] | None = None, avatar_grow: int = 3, refind: bool = True,
                 refind_iou: float = 0.3, source_check: bool = True, source_max_fill: float = 0.5,
                 source_cover: float = 0.5) -> AuditReport:
    """Audit :class:`AuditedFrame` items (None for an optional item: not given); see the module
    docstring. ``refind``: a candidate of an auditor whose ``refind_without_avatars`` is true counts
    only if its ``refind`` finds it again (box IoU > ``refind_iou``) on the frame with the avatars
    taken out.
    ``source_check``: and, where less than ``source_max_fill`` of its centre is hole, on the source
    frame (a box there covering ``source_cover`` of it); items without ``source`` and ``filled``
    are not source-checked."""
    need = {"face": 2, "body": 3, **(min_frames or {})}
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * avatar_grow + 1,) * 2) if avatar_grow > 0 else None
    rep = AuditReport()
    groups: list[dict] = []  # candidate findings: kind, box, frames, score, outside
    for item in frames:
        item = AuditedFrame(*item)
        t, frame, avatar = item[:3]
        rep.frames_checked += 1
        syn = avatar.astype(np.uint8)
        if kernel is not None:
            syn = cv2.dilate(syn, kernel)
        syn = syn.astype(np.float32)
        made = item.made_up
        filled = item.filled.astype(np.float32) if source_check and item.filled is not None else None
        drawn = np.maximum(syn, np.asarray(made, np.float32)) if made is not None else syn
        # the frame without avatars for a confirming model: avatar pixels replaced by the removed-
        # people background where the caller gives it (``background``), else greyed out (a flat grey
        # silhouette still looks like a person to a pose model)
        blank = frame.copy()
        if item.background is not None:
            grown = syn.astype(bool)
            blank[grown] = item.background[grown]
        else:
            blank[avatar] = 127
        for a in auditors:
            again = None  # the detector on the frame without avatars, run once a candidate needs it
            in_source = None  # and on the source frame
            for kind, box, score in a.detect(frame):
                rep.detections += 1
                out = outside_share(box, drawn)
                if out < min_outside:
                    off_avatars = outside_share(box, syn) if drawn is not syn else out
                    if off_avatars >= min_outside:
                        rep.on_fill += 1
                        rep.fill_excused.append({"frame": int(t), "kind": kind,
                                                 "box": [round(float(v), 1) for v in box], "score": round(float(score), 3),
                                                 "outside_avatars": round(off_avatars, 3), "outside_drawn": round(out, 3)})
                    else:
                        rep.on_avatars += 1
                    continue
                if hasattr(a, "confirmed") and not a.confirmed(blank, kind, box, score):
                    rep.unconfirmed += 1
                    continue
                if refind and getattr(a, "refind_without_avatars", False):
                    again = a.refind(blank) if again is None else again
                    if not any(k == kind and box_iou(b, box) > refind_iou for k, b, _ in again):
                        rep.avatar_induced += 1
                        continue
                if filled is not None and item.source is not None and hasattr(a, "refind"):
                    fill_share = 1.0 - outside_share(box, filled)
                    if fill_share < source_max_fill:
                        in_source = a.refind(item.source) if in_source is None else in_source
                        same = [b for k, b, _ in in_source if k == kind]
                        if not same or box_cover_share(box, np.asarray(same, np.float32)).max() < source_cover:
                            rep.not_in_source += 1
                            rep.source_excused.append({"frame": int(t), "kind": kind,
                                                       "box": [round(float(v), 1) for v in box],
                                                       "score": round(float(score), 3),
                                                       "filled": round(fill_share, 3)})
                            continue
                g = next((g for g in groups if g["kind"] == kind and box_iou(g["last"], box) > 0.3), None)
                if g is None:
                    groups.append({"kind": kind, "box": box, "last": box, "frames": [t], "score": score, "outside": out})
                elif t not in g["frames"]:
                    g["frames"].append(t)
                    g["last"] = box
                    g["score"] = max(g["score"], score)
    rep.frames_needed = {k: min(v, max(1, rep.frames_checked)) for k, v in need.items()}
    for g in groups:
        rep.max_frames[g["kind"]] = max(rep.max_frames.get(g["kind"], 0), len(g["frames"]))
        if len(g["frames"]) >= min(need.get(g["kind"], 2), max(1, rep.frames_checked)):
            rep.findings.append(AuditFinding(g["kind"], sorted(g["frames"]), [float(v) for v in g["box"]],
                                             float(g["score"]), float(g["outside"])))
    return rep
