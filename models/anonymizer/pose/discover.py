"""Every person in a video, moving or not: per-frame multi-person detection linked into tracks.

Per frame (streamed: frames arrive in windows, nothing holds the whole video):
1. every tracked person is followed by the landmark model alone on a region derived from their
   previous landmarks (:class:`RoiLandmarker`, MediaPipe's video-mode scheme): no detector needed,
   so a person seen from behind or wearing a face mask is not lost;
2. the multi-person landmarker (detector + landmarks, :class:`PeopleDetector`) on the full frame
   every ``detect_every`` frames and whenever a track was lost, to find new people; a whole-body
   detector's box of a followed person also overrules a followed box that slid off them;
3. on keyframes, overlapping tiles too, for people too small for the full-frame detector; a tile
   detection that is not a duplicate is re-detected on a crop centred on it (a tile cuts people).
New detections are linked to lost tracks by the Hungarian method on box IoU (constant-velocity
box prediction), or start new tracks; tracks survive ``max_gap`` missed frames. Outputs per frame: an instance label map
(uint16, raw track id + 1) and the person probability (max over people), for the caller to
write; per track: landmarks, world landmarks and boxes (small arrays).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace

import cv2
import numpy as np
from scipy.optimize import linear_sum_assignment

from anonymask.models.anonymizer.pose.keypoints import EARS, HEAD_LANDMARKS, N_LANDMARKS
from anonymask.models.anonymizer.pose.people import (
    MIN_CROP_PX,
    Detection,
    PeopleDetector,
    body_scale,
    box_iou,
    boxes_cover,
    covered_by,
    mask_overlap,
    median_scale,
    merge_detections,
    same_person,
    scale_fits,
    square_tiles,
)
from anonymask.models.anonymizer.pose.people import (
    known_person as _known,
)
from anonymask.models.anonymizer.pose.settings import (
    DiscoverSettings,
    EvidenceSettings,
    SamePersonSettings,
    ScaleGateSettings,
    ScanSettings,
)
from anonymask.models.shared.geometry import inside_frame, touching_borders


@dataclass
class _Track:
    tid: int
    frames: dict[int, Detection] = field(default_factory=dict)
    last_t: int = -1
    prev_box: np.ndarray | None = None
    box: np.ndarray | None = None
    roi: tuple | None = None
    ref: tuple | None = None  # (detection with its mask, frame crop of its region) last seen for real
    sight: tuple | None = None  # (window around that region, frame crop of the window) at that sighting
    held: int = 0  # consecutive frames held in place (see PersonDiscovery._hold_still_people)
    first_ref: tuple | None = None  # ``ref`` at the first sighting of a track that starts late (backfill)
    recent: deque = field(default_factory=deque)  # last real (not held) sightings (the tracker bounds it)

    def predict(self, t: int) -> np.ndarray:
        if self.prev_box is None or self.box is None:
            return self.box
        v = (self.box - self.prev_box)
        return self.box + v * min(t - self.last_t, 3)

    def seen(self, frame: np.ndarray, d: Detection, reach: float) -> None:
        """Remember a real sighting (what :meth:`PersonDiscovery._hold_still_people` compares later frames
        with): the detection with its mask, the frame in its region, and the frame in a window
        ``reach`` x their height around it."""
        h, w = frame.shape[:2]
        x0, y0, x1, y1 = d.region
        keep = Detection(d.box.copy(), d.kp2d, d.conf, d.world, d.mask.copy(), d.region, d.score, d.source)
        self.ref, self.held = (keep, frame[y0:y1, x0:x1].copy()), 0
        r = reach * max(d.height, 1.0)
        win = (int(max(0, x0 - r)), int(max(0, y0 - r)), int(min(w, x1 + r)), int(min(h, y1 + r)))
        self.sight = (win, frame[win[1] : win[3], win[0] : win[2]].copy())

    def add(self, t: int, d: Detection) -> None:
        self.frames[t] = d
        if d.source != "hold":
            self.recent.append(d)
        self.prev_box, self.box, self.last_t = self.box, d.box.astype(np.float32), t


class OnlineTracker:
    """Hungarian matching of detections to live tracks; tracks die after ``max_gap`` misses."""

    def __init__(self, max_gap: int, min_iou: float, held_iou: float, same_bonus: float, same_tol: float,
                 same: SamePersonSettings, scale: ScaleGateSettings):
        self.max_gap = int(max_gap)
        self.min_iou = float(min_iou)
        self.held_iou = float(held_iou)
        self.same_bonus, self.same_tol, self.same = float(same_bonus), float(same_tol), same
        self.scale = scale
        self.tracks: list[_Track] = []
        self.refused_scale = 0  # pairs that would have linked, refused for their body scale (``scale_fits``)

    def track_scale(self, tr: _Track) -> float | None:
        """The median body scale (:func:`body_scale`) of the track's last ``scale.sightings`` real
        sightings (held frames repeat an old one), None before any or with the gate off."""
        return median_scale(tr.recent, self.same.min_conf) if self.scale.enabled else None

    def live(self, t: int) -> list[_Track]:
        return [tr for tr in self.tracks if t - tr.last_t <= self.max_gap]

    def update(self, t: int, dets: list[Detection]) -> list[int]:
        """Link new detections to the live tracks not yet seen in frame t (or start tracks)."""
        live = [tr for tr in self.live(t) if tr.last_t != t]
        ids = [-1] * len(dets)
        if live and dets:
            cost = np.ones((len(live), len(dets)))
            # each detection's body scale once (the gate compares it with every track's; off: none)
            scales = [body_scale(d, self.same.min_conf) if self.scale.enabled else None for d in dets]
            for i, tr in enumerate(live):
                # someone held stands where they were last seen: their held box also holds what
                # moved next to them (see PersonDiscovery._moved_parts), often someone else
                pb = tr.ref[0].box if tr.held and tr.ref is not None else tr.predict(t)
                ref = self.track_scale(tr)
                for j, d in enumerate(dets):
                    iou = box_iou(pb, d.box)
                    last = tr.frames[tr.last_t]
                    bonus = self.same_bonus if same_person(last, d, self.same_tol, self.same) else 0.0
                    # someone held in place stood still: a detection that overlaps them with
                    # other landmarks is someone (or something) else, not them moving
                    if tr.held and not bonus and iou < self.held_iou:
                        continue
                    if not (iou >= self.min_iou or bonus):
                        continue
                    # a body of another size per metre is someone (or something) else: a person's
                    # scale changes only as fast as they walk in depth (opt-in, docs/RESULTS.md)
                    if not scale_fits(ref, scales[j], t - tr.last_t, self.scale):
                        self.refused_scale += 1
                        continue
                    cost[i, j] = 1.0 - min(1.0, iou + bonus)
            rows, cols = linear_sum_assignment(cost)
            for i, j in zip(rows, cols):
                if cost[i, j] < 1.0:
                    live[i].add(t, dets[j])
                    ids[j] = live[i].tid
        for j, d in enumerate(dets):
            if ids[j] < 0:
                tr = _Track(len(self.tracks), recent=deque(maxlen=self.scale.sightings))
                tr.add(t, d)
                self.tracks.append(tr)
                ids[j] = tr.tid
        return ids


def _interior_cut(d: Detection, tile: tuple[int, int, int], h: int, w: int, margin: int) -> bool:
    """The detection touches a tile border that is not a frame border: the tile cut the person."""
    x0, y0, s = tile
    bx0, by0, bx1, by1 = d.box
    return ((bx0 <= x0 + margin and x0 > 0) or (by0 <= y0 + margin and y0 > 0)
            or (bx1 >= x0 + s - margin and x0 + s < w) or (by1 >= y0 + s - margin and y0 + s < h))


def _centred_crop(box: np.ndarray, scale: float) -> tuple[float, float, float]:
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    side = max(box[2] - box[0], box[3] - box[1]) * scale
    return float(cx - side / 2), float(cy - side / 2), float(max(side, MIN_CROP_PX))


@dataclass
class FrameOutput:
    labels: np.ndarray  # (H,W) uint16, raw track id + 1 (0: nobody)
    prob: np.ndarray  # (H,W) float32 person probability, max over people


class PersonDiscovery:
    """Streams frames in order through detection and tracking (see the module docstring)."""

    def __init__(self, detector: PeopleDetector, settings: DiscoverSettings, scan: ScanSettings,
                 evidence: EvidenceSettings, *, max_gap: int, t_len: int | None, scanner):
        """``settings``, ``scan``, ``evidence``: every knob (models/anonymizer/pose/settings.py); ``max_gap``:
        frames a track survives unseen; ``t_len``: the video's length when known (the last frame
        is scanned for people who vanished inside the frame); ``scanner``: a ready scan (tests),
        or None: built from ``scan``."""
        s = settings
        self.settings = s
        self.detector = detector
        self.t_len = None if t_len is None else int(t_len)
        self.backfill_iou = s.backfill_iou
        self.keyframe_every, self.detect_every = s.keyframe_every, s.detect_every
        self.tile_frac, self.tiles, self.tile_min_score = s.tile_frac, s.tiles, s.tile_min_score
        self.recover_missed = s.recover_missed
        self.tracker = OnlineTracker(max_gap=max_gap, min_iou=s.match_iou, held_iou=s.held_iou,
                                     same_bonus=s.same_bonus, same_tol=s.same_tol, same=s.same,
                                     scale=s.scale_gate)
        self.roi = None
        if s.roi_tracking:
            from anonymask.models.anonymizer.pose.roi import RoiLandmarker

            self.roi = RoiLandmarker(s.follow_min_flag)
        from anonymask.models.anonymizer.pose.scan import PersonEvidence, PoseScanner

        opinion = PersonEvidence(evidence) if evidence.enabled else None
        self.scanner = scanner
        if self.scanner is None and scan.enabled:
            self.scanner = PoseScanner(self.roi, scan, opinion, s.same)
        self.scan_every = scan.every
        self.hold, self.hold_tol, self.hold_refresh = s.hold, s.hold_tol, s.hold_refresh
        self.hold_reach, self.hold_motion = s.hold_reach, s.hold_motion
        self.limbs, self.limb_conf = s.limbs, s.limb_conf
        self.verify = (getattr(self.scanner, "evidence", None) or opinion) if evidence.enabled else None
        self.t = 0
        self.sources = {"track": 0, "frame": 0, "tile": 0, "crop": 0, "scan": 0, "search": 0, "hold": 0}
        self._frame_found: list[Detection] = []  # the full-frame detector's people in the current frame

    def _hold_still_people(self, frame: np.ndarray, t: int, dets: list[Detection]) -> list[int]:
        """Tracks lost in frame t whose person is still there: the visible part of their last mask
        (not covered by anyone found in t) looks as it did when they were last seen (mean absolute
        difference <= ``hold_tol`` grey levels over >= 30% of the mask). A person who stands still
        and whom the landmark model lets go (occlusion by a passer-by, an unusual body) is kept,
        with their last landmarks and mask, instead of being left to the background model, which
        would then copy them back into the removed area. Where the difference is at most
        ``hold_refresh`` x ``hold_tol``, the next frame is compared with this one instead: a person
        standing still sways a little, and the difference to the last sighting grows frame by
        frame (from 2 to 28 grey levels over 15 frames for a man standing still: the hold let
        him go, and his track was then linked to a body drawn over the object beside him). (The median instead of the mean held
        a still person longer while someone walked into their mask, but also held moving people
        in place, who then got a second track; docs/RESULTS.md.)
        Returns the held track ids."""
        held = []
        for tr in self.tracker.live(t):
            if tr.last_t == t or tr.ref is None:
                continue
            d0, crop = tr.ref
            test = self._region_change(frame, d0, crop, lambda origin, shape: covered_by(origin, shape, dets))
            if test is None or test[0] > self.hold_tol:
                continue
            if test[0] <= self.hold_refresh * self.hold_tol:
                # barely changed: compare the next frame with this one (a person standing still
                # sways a little; the difference to the last real sighting grows frame by frame)
                x0, y0, x1, y1 = d0.region
                tr.ref = (d0, frame[y0:y1, x0:x1].copy())
            d = self._moved_parts(frame, tr, replace(d0, box=d0.box.copy(), source="hold"), dets)
            tr.add(t, d)
            tr.held += 1
            held.append(tr.tid)
        return held

    def _region_change(self, frame: np.ndarray, d0: Detection, crop: np.ndarray, cover) -> tuple[float, np.ndarray] | None:
        """The hold's test of a sighting ``d0`` (its mask) against ``crop`` (the frame in its region
        then): the mean change, in grey levels (the largest over the colour channels), over the
        part of the mask in view (not in ``cover(origin, shape)``, who else is found in ``frame``),
        and that part; None where less than ``hold_visible`` of the mask is in view."""
        x0, y0, x1, y1 = d0.region
        m = d0.mask[: y1 - y0, : x1 - x0] >= 0.5
        if not m.any():
            return None
        vis = m & ~cover((x0, y0), m.shape)
        if vis.sum() < self.settings.hold_visible * m.sum():
            return None
        diff = np.abs(frame[y0:y1, x0:x1].astype(np.int16) - crop.astype(np.int16)).max(axis=-1)
        return float(diff[vis].mean()), vis

    def _moved_parts(self, frame: np.ndarray, tr: _Track, d: Detection, others: list[Detection] = ()) -> Detection:
        """A held person's last mask, plus what moved next to it since they were last seen for
        real: pixels around them (within ``hold_reach`` x their height) that differ from that
        sighting by more than ``hold_motion`` grey levels and touch the mask. Held, a person keeps
        their pose of that sighting; an arm they stretch out meanwhile lies outside it (an arm stretched
        out by a held man was left in the output).
        Pixels of the ``others`` found in this frame are theirs, not moved parts (a woman
        walking past a held man grew his mask over her, and a body drawn over the object beside
        him was then linked to him)."""
        if tr.sight is None or self.hold_motion <= 0:
            return d
        (wx0, wy0, wx1, wy1), before = tr.sight
        moved = np.abs(frame[wy0:wy1, wx0:wx1].astype(np.int16) - before.astype(np.int16)).max(axis=-1) > self.hold_motion
        moved &= ~covered_by((wx0, wy0), moved.shape, others)
        if not moved.any():
            return d
        m = np.zeros(moved.shape, np.float32)
        x0, y0, x1, y1 = d.region
        m[y0 - wy0 : y1 - wy0, x0 - wx0 : x1 - wx0] = d.mask[: y1 - y0, : x1 - x0]
        seed = cv2.dilate((m >= 0.5).astype(np.uint8), np.ones((3, 3), np.uint8))
        _, lab = cv2.connectedComponents((moved | (seed > 0)).astype(np.uint8), connectivity=8)
        touching = np.unique(lab[seed > 0])
        grown = np.isin(lab, touching[touching > 0]) & moved
        if not grown.any():
            return d
        m[grown] = 1.0
        ys, xs = np.nonzero(m >= 0.5)
        box = np.array([min(d.box[0], wx0 + xs.min()), min(d.box[1], wy0 + ys.min()),
                        max(d.box[2], wx0 + xs.max() + 1), max(d.box[3], wy0 + ys.max() + 1)], np.float32)
        return Detection(box, d.kp2d, d.conf, d.world, m, (wx0, wy0, wx1, wy1), d.score, "hold")

    def _vanished(self, t: int, w: int, h: int) -> list[float]:
        """Box heights of the tracks lost before frame t - 1 with their last box inside the frame
        (not at a border: they did not leave)."""
        out = []
        for tr in self.tracker.tracks:
            b = tr.box
            if tr.last_t < t - 1 and b is not None and inside_frame(b, (h, w), self.settings.edge):
                out.append(float(b[3] - b[1]))
        return out

    def _vanished_size(self, d: Detection, vanished: list[float]) -> bool:
        """``d`` is about the size of someone who vanished (within ``vanished_ratio`` x a height)."""
        r = self.settings.vanished_ratio
        return any(1 / r <= d.height / hv <= r for hv in vanished)

    def _verified(self, frame: np.ndarray, d: Detection) -> bool:
        ok = self.verify.ok(self.verify(frame, d), None)
        if not ok:
            self.sources["rejected"] = self.sources.get("rejected", 0) + 1
        return ok

    def _follow(self, frame: np.ndarray, t: int) -> tuple[list[Detection], list[int], bool]:
        """Step 1: tracked people on their regions. Returns (detections, track ids, any lost).

        Two tracks whose regions slid onto the same person (people crossing) keep one detection:
        it goes to the track whose predicted box it matches best; the other track is lost (and
        searched for by :meth:`_find`)."""
        lost = False
        if self.roi is None:
            return [], [], bool(self.tracker.live(t))
        cand = []  # (track, detection, next roi, fit to the track's prediction)
        for tr in self.tracker.live(t):
            if tr.roi is None:
                # someone held in place (standing still) is looked for every 5th frame only,
                # not by a full-frame detection on every frame (which finds more hallucinations)
                lost = lost or not (tr.held and tr.held % self.settings.held_search_every)
                continue
            d, nxt, _ = self.roi.track(frame, tr.roi, self.settings.follow_min_score)
            if d is None:
                tr.roi = None
                lost = True
                continue
            pb = tr.predict(t)
            cand.append((tr, d, nxt, box_iou(pb, d.box) if pb is not None else 0.0))
        dets, ids = [], []
        for tr, d, nxt, _ in sorted(cand, key=lambda c: -c[3]):
            if any(same_person(o, d, self.settings.same.tol, self.settings.same) for o in dets):
                tr.roi = None
                lost = True
                continue
            tr.roi = nxt
            dets.append(d)
            ids.append(tr.tid)
        return dets, ids, lost

    def _find(self, frame: np.ndarray, t: int, tracked: list[Detection], lost: bool,
              let_go: dict[int, np.ndarray]) -> list[Detection]:
        """Steps 2-3: new people (and lost ones) that no followed track explains; ``let_go``: the
        followed people whose box let go of a border this frame (:meth:`_let_go_of_border`)."""
        s = self.settings
        h, w = frame.shape[:2]
        key = self.tiles and t % self.keyframe_every == 0
        # the last frame is scanned too when someone vanished inside the frame and was not found
        # again: a person back from behind an occluder after the last periodic scan is found there
        # and followed back by backfill. Only then, and only people of the vanished one's size are
        # kept: every scan may also find a hallucination, or a close-up's body that would take
        # the face from the face-anchored avatar that covers it (in a close-up)
        periodic = self.scanner is not None and t % self.scan_every == 0
        vanished = self._vanished(t, w, h) if self.t_len is not None and t == self.t_len - 1 else []
        scan = periodic or (self.scanner is not None and bool(vanished))
        if not (lost or key or periodic or t % self.detect_every == 0 or not tracked or let_go):
            if not scan:
                return []
            known = list(tracked)
            return [d for d in self.scanner.scan(frame, known, full=True)
                    if not _known(d, known, s.same) and self._vanished_size(d, vanished)]
        known = list(tracked)
        # a detection that holds most of a followed person's mask is that person drawn wrongly
        # (the detector sometimes lays a body over an object next to them), not someone new
        self._frame_found = self.detector.detect(frame)
        dets = [d for d in self._frame_found if not self._is_followed(d, known)]
        if key:
            for tile in square_tiles(h, w, self.tile_frac, s.tile_overlap):
                for d in self.detector.detect_region(frame, *tile, source="tile"):
                    if d.score < self.tile_min_score or _interior_cut(d, tile, h, w, s.tile_cut_px) \
                            or _known(d, known + dets, s.same):
                        continue
                    # re-detect on a crop centred on it: whole person, clean mask
                    again = [e for e in self.detector.detect_region(frame, *_centred_crop(d.box, s.crop_scale),
                                                                     source="tile")
                             if same_person(e, d, s.same_tol, s.same) or box_iou(e.box, d.box) > s.crop_iou]
                    dets.append(again[0] if again else d)
        if self.recover_missed and lost:
            for tr in self.tracker.live(t):
                if tr.last_t == t or tr.roi is not None or (tr.held and tr.held % s.held_search_every):
                    continue  # (a person held in place is searched for every 5th frame only)
                pb = tr.predict(t)
                if pb is None or any(box_iou(pb, d.box) > s.crop_iou for d in dets):
                    continue
                found = [e for e in self.detector.detect_region(frame, *_centred_crop(pb, s.search_scale),
                                                                source="crop")
                         if box_iou(e.box, pb) > s.search_iou and not _known(e, known + dets, s.same)]
                if found:
                    dets.append(max(found, key=lambda e: box_iou(e.box, pb)))
                elif self.scanner is not None and (t - tr.last_t) % 2 == 1:  # the landmark model alone, where they were
                    e = self.scanner.search(frame, pb, known + dets)
                    if e is not None and not _known(e, known + dets, s.same):
                        e.source = "search"
                        dets.append(e)
        dets = merge_detections(dets, s.same)
        if self.verify is not None:  # a second model must agree (the landmark model hallucinates bodies)
            dets = [d for d in dets if self._verified(frame, d)]
        if scan:  # people the face-keyed detector cannot see (masked, from behind, small)
            # the whole grid when someone was lost since the last scan and is still not found
            # (someone held in place is not lost: their last mask stays removed, and they are
            # searched for where they stood)
            full = any(t - tr.last_t > 0 and not tr.held for tr in self.tracker.live(t))
            dets += [d for d in self.scanner.scan(frame, known + dets, full=full or not periodic)
                     if not _known(d, known + dets, s.same)
                     and (periodic or self._vanished_size(d, vanished))]
        return dets

    def _let_go_of_border(self, t: int, hw: tuple[int, int]) -> dict[int, np.ndarray]:
        """Track id -> (4,) bool, the frame borders (left, top, right, bottom) a followed person's box
        touched in their previous frame and lets go of in this one; only with a whole-body detector
        (``whole_body``) and ``detector_over_follow_iou`` > 0. Someone there is entering or leaving, and
        that is where the landmark model, followed alone, slides off them onto what is beside them
        (:meth:`_detector_over_follow`): the detector looks in such a frame too."""
        if self.settings.detector_over_follow_iou <= 0 or not getattr(self.detector, "whole_body", False):
            return {}
        edge, out = self.settings.edge, {}
        for tr in self.tracker.live(t):
            if tr.last_t == t and tr.prev_box is not None and tr.box is not None:
                sides = touching_borders(tr.prev_box, hw, edge) & ~touching_borders(tr.box, hw, edge)
                if sides.any():
                    out[tr.tid] = sides
        return out

    def _is_followed(self, d: Detection, followed: list[Detection]) -> bool:
        """``d`` is someone already followed: the same landmarks, the same pixels, or most of their mask."""
        s = self.settings
        return _known(d, followed, s.same) or any(mask_overlap(o, [d]) > s.drawn_over for o in followed)

    def _detector_over_follow(self, hw: tuple[int, int], let_go: dict[int, np.ndarray], tracked: list[Detection],
                              tracked_ids: list[int], by_id: dict, new: list[Detection]) -> list[Detection]:
        """A followed person whose box let go of a frame border this frame (:meth:`_let_go_of_border`)
        takes the whole-body detector's detection at that border that overlaps their followed box
        most (box IoU at least ``match_iou``, under ``detector_over_follow_iou``), and their track
        follows on from its region. Followed alone, the landmark model slides off someone leaving
        through a border onto what is beside them and carries their track inwards, where it then
        ends as if they had stopped there (a cyclist's box moved 60 px inwards over the two frames
        the detector still boxed him at the border; docs/RESULTS.md). In place, on the detection
        objects the tracks hold; returns ``new`` without the detections taken."""
        from dataclasses import fields

        from anonymask.models.anonymizer.pose.roi import roi_from_landmarks

        s = self.settings
        found, self._frame_found = self._frame_found, []
        if not found or not let_go:
            return new
        taken = []
        for o, tid in zip(tracked, tracked_ids):
            if tid not in let_go:
                continue
            others = [p for p in tracked if p is not o]
            mine = [(box_iou(o.box, d.box), d) for d in found
                    if (touching_borders(d.box, hw, s.edge) & let_go[tid]).any() and not any(d is x for x in taken)
                    and not (others and self._is_followed(d, others))]
            mine = [(iou, d) for iou, d in mine if s.match_iou <= iou < s.detector_over_follow_iou]
            if not mine:
                continue
            d = max(mine, key=lambda c: c[0])[1]
            for f in fields(Detection):
                setattr(o, f.name, getattr(d, f.name))
            tr = by_id[tid]
            tr.box = o.box.astype(np.float32)
            tr.roi = getattr(d, "roi_next", None) or roi_from_landmarks(d.kp2d, d.conf, s.region_conf)
            taken.append(d)
            self.sources["overruled"] = self.sources.get("overruled", 0) + 1
        return [d for d in new if not any(d is x or box_iou(d.box, x.box) > s.same.box_iou for x in taken)]

    def push(self, frame: np.ndarray) -> FrameOutput:
        from anonymask.models.anonymizer.pose.roi import roi_from_landmarks

        h, w = frame.shape[:2]
        t = self.t
        tracked, tracked_ids, lost = self._follow(frame, t)
        by_id = {tr.tid: tr for tr in self.tracker.tracks}
        for d, tid in zip(tracked, tracked_ids):
            by_id[tid].add(t, d)
        let_go = self._let_go_of_border(t, (h, w))
        new = self._detector_over_follow((h, w), let_go, tracked, tracked_ids, by_id,
                                         self._find(frame, t, tracked, lost, let_go))
        new_ids = self.tracker.update(t, new)
        for d, tid in zip(new, new_ids):
            tr = self.tracker.tracks[tid]
            if tr.roi is None:
                tr.roi = getattr(d, "roi_next", None) or roi_from_landmarks(d.kp2d, d.conf, self.settings.region_conf)
        dets, ids = tracked + new, tracked_ids + new_ids
        for tid in (self._hold_still_people(frame, t, dets) if self.hold else []):
            d = by_id[tid].frames[t]
            dets.append(d)
            ids.append(tid)
        for d, tid in zip(dets, ids):
            tr = by_id.get(tid) or self.tracker.tracks[tid]
            if d.source != "hold" and d.mask.size:
                tr.seen(frame, d, self.hold_reach)
                if t > 0 and len(tr.frames) == 1:  # a track that starts late: kept for backfill's hold
                    tr.first_ref = tr.ref
        labels = np.zeros((h, w), np.uint16)
        best = np.zeros((h, w), np.float32)
        for d, tid in zip(dets, ids):
            self.sources[d.source] = self.sources.get(d.source, 0) + 1
            if self.limbs and d.source != "hold":
                add_limbs(d, self.settings, (h, w))
            paint(labels, best, d, tid)
        for d in dets:
            d.mask = _NO_MASK  # the history keeps landmarks and boxes only (bounded memory)
        for tr in self.tracker.tracks:
            if tr.ref is not None and t + 1 - tr.last_t > self.tracker.max_gap:
                tr.ref = tr.sight = None  # a dead track is never held again: drop its mask and frame crops
        self.t += 1
        return FrameOutput(labels, best)

    def backfill(self, read, t_len: int, max_frames: int | None = None):
        """Follow every track that starts after frame 0 backwards in time (ROI tracking on earlier
        frames): a person found late (a tile keyframe, a turn towards the camera) is removed and
        replaced from the first frame they are visible. ``read(a, b)`` returns frames a..b-1.
        Where the landmark model cannot follow them back (a still person the scan found only
        with its anchored look), they are held back in place while their region looks as it did
        (:meth:`_held_back`, ``backfill_hold``). Yields (t, detection, raw track id) in decreasing
        t per track, for the caller to paint."""
        from anonymask.models.anonymizer.pose.roi import roi_from_landmarks

        if self.roi is None:
            return
        hold_back = self.hold and self.settings.backfill_hold
        for tr in self.tracker.tracks:
            first = min(tr.frames)
            ref, tr.first_ref = (tr.first_ref if hold_back else None), None
            if first == 0:
                continue
            d0 = tr.frames[first]
            roi = roi_from_landmarks(d0.kp2d, d0.conf, self.settings.region_conf)
            came_from = entry_sides(tr, first, self.settings.backfill_direction_frames)
            stop = 0 if max_frames is None else max(0, first - int(max_frames))
            t = first - 1
            while (roi is not None or ref is not None) and t >= stop:
                a = max(stop, t + 1 - self.settings.backfill_read_frames)
                frames = read(a, t + 1)
                for k in range(t - a, -1, -1):
                    tt = a + k
                    others = [o.frames[tt] for o in self.tracker.tracks if o is not tr and tt in o.frames]
                    d = self._followed_back(frames[k], tr, tt, roi, came_from, others) if roi is not None else None
                    if d is not None:
                        roi = d.roi_next
                        if hold_back:  # (a copy: ``d`` gives its mask up once painted)
                            x0, y0, x1, y1 = d.region
                            ref = (replace(d, box=d.box.copy()), frames[k][y0:y1, x0:x1].copy())
                    else:
                        roi = None
                        held = self._held_back(frames[k], ref, others) if ref is not None else None
                        if held is None:
                            ref = None
                            break
                        d, ref = held
                    tr.frames[tt] = d
                    key = "back" if d.source == "back" else "back_hold"
                    self.sources[key] = self.sources.get(key, 0) + 1
                    yield tt, d, tr.tid
                    d.mask = _NO_MASK
                t = a - 1

    def _followed_back(self, frame: np.ndarray, tr: _Track, tt: int, roi, came_from: np.ndarray,
                       others: list[Detection]) -> Detection | None:
        """The landmark model on ``roi`` in frame ``tt``, if what it sees is still this track's person."""
        d, nxt, _ = self.roi.track(frame, roi, self.settings.follow_min_score)
        # a person does not jump between two frames: a region that slid onto something else (the
        # person half out of the frame, clutter beside them) ends the backfill
        nxt_box = tr.frames[tt + 1].box if tt + 1 in tr.frames else None
        if (d is None or any(same_person(o, d, self.settings.same.tol, self.settings.same) for o in others)
                or (nxt_box is not None and box_iou(d.box, nxt_box) < self.backfill_iou)
                or (nxt_box is not None and left_entry_border(d.box, nxt_box, came_from, frame.shape[:2],
                                                              self.settings.edge))):
            return None
        d.source, d.roi_next = "back", nxt
        if self.limbs:
            add_limbs(d, self.settings, frame.shape[:2])
        return d

    def _held_back(self, frame: np.ndarray, ref: tuple, others: list[Detection]):
        """A track that starts late, held in place one frame earlier: the forward hold's test
        (:meth:`_hold_still_people`) against the earliest sighting ``ref`` (detection with its
        mask, frame crop of its region). A still person the scan found late was there before, as
        long as their region looks the same; pixels inside the boxes of others found in this frame
        are not compared (their masks are no longer kept). Returns (held detection, the reference
        for the frame before), or None where the region changed."""
        d0, crop = ref
        test = self._region_change(frame, d0, crop, lambda origin, shape: boxes_cover(origin, shape, others))
        if test is None or test[0] > self.hold_tol:
            return None
        change, vis = test
        if change <= self.hold_refresh * self.hold_tol:  # as forward: a still person sways a little
            x0, y0, x1, y1 = d0.region
            crop = crop.copy()  # (what someone in front covers keeps its reference)
            crop[vis] = frame[y0:y1, x0:x1][vis]
        return replace(d0, box=d0.box.copy(), source="hold"), (d0, crop)

    def tracks(self, t_len: int):
        """Per raw track: (frames sorted, kp2d (T,33,2), conf (T,33), world (T,33,3), boxes (T,4) NaN)."""
        return [self.track_arrays(i, t_len) for i in range(len(self.tracker.tracks))]

    def track_arrays(self, i: int, t_len: int):
        """Raw track ``i`` as ``tracks`` gives it. One at a time: all of them at once are
        (tracks x video length) rows, ~0.8 GB for a 5-minute video with 134 tracks."""
        tr = self.tracker.tracks[i]
        kp = np.zeros((t_len, N_LANDMARKS, 2), np.float32)
        conf = np.zeros((t_len, N_LANDMARKS), np.float32)
        world = np.zeros((t_len, N_LANDMARKS, 3), np.float32)
        boxes = np.full((t_len, 4), np.nan, np.float32)
        for t, d in tr.frames.items():
            kp[t], conf[t], world[t], boxes[t] = d.kp2d, d.conf, d.world, d.box
        return sorted(tr.frames), kp, conf, world, boxes

    def track_boxes(self, t_len: int) -> list[np.ndarray]:
        """(T,4) boxes of every raw track (NaN where absent): 16 bytes a frame."""
        out = []
        for tr in self.tracker.tracks:
            boxes = np.full((t_len, 4), np.nan, np.float32)
            for t, d in tr.frames.items():
                boxes[t] = d.box
            out.append(boxes)
        return out


_NO_MASK = np.zeros((0, 0), np.float32)


def new_track(tid: int) -> _Track:
    """An empty raw track ``tid`` for a pass after discovery that splits one (models/anonymizer/pose/second_detector.py):
    only its frames are read from then on, not its follow state."""
    return _Track(tid)


def entry_sides(tr: _Track, first: int, frames: int) -> np.ndarray:
    """Which borders (left, top, right, bottom) a late track's person moves away from over its
    first ``frames`` frames: the sides they may have come in through. From the box edges' motion:
    moving away from the left border is the box's centre moving right, and so on; a box that
    grows downwards (someone walking towards the camera) moves away from the top."""
    ts = [t for t in sorted(tr.frames) if t >= first][: max(2, frames)]
    if len(ts) < 2:
        return np.zeros(4, bool)
    a, b = tr.frames[ts[0]].box, tr.frames[ts[-1]].box
    cx, cy = (b[0] + b[2] - a[0] - a[2]) / 2, (b[1] + b[3] - a[1] - a[3]) / 2
    return np.array([cx > 0, cy > 0, cx < 0, cy < 0])


def left_entry_border(box: np.ndarray, later: np.ndarray, sides: np.ndarray, hw: tuple[int, int],
                      edge: float) -> bool:
    """Followed backwards, whether ``box`` left a border its person came in through: ``later`` (the
    next frame's box) touches a side in ``sides`` (within ``edge`` of the frame), ``box`` does not.
    A person who walked in through a border was at that border in every earlier frame they were
    in view, so going back in time they stay on it until they are gone; a region that moved
    inwards from there slid onto whatever stands beside the border (a followed walker's region
    slid onto a motorcycle, and the walker's first frames were left unremoved)."""
    return bool((sides & touching_borders(later, hw, edge) & ~touching_borders(box, hw, edge)).any())


#: landmark pairs drawn into a person's mask (thin limbs the landmark model's segmentation misses):
#: arms, legs down to heel and toes, the torso, and each hand from the wrist to its pinky, index
#: and thumb (a hand held out is where the segmentation most often stops short)
LIMBS = ((11, 13), (13, 15), (12, 14), (14, 16), (23, 25), (25, 27), (24, 26), (26, 28), (27, 31), (28, 32),
         (27, 29), (28, 30), (11, 12), (23, 24), (11, 23), (12, 24),
         (15, 17), (15, 19), (15, 21), (17, 19), (16, 18), (16, 20), (16, 22), (18, 20))


def add_limbs(d: Detection, settings: DiscoverSettings, shape: tuple[int, int] | None) -> None:
    """Draw the body's limbs (lines between landmarks, ``settings.limb_width`` x the person's
    height thick) and a disc over the head (landmarks seen with ``settings.head_conf``) into the
    detection's mask.

    ``settings.limb_conf``: the visibility a limb's two landmarks need. Below 0.5
    the landmark model still places a limb it does not see well, often a leg behind an object,
    which its segmentation leaves out (a back leg behind a vehicle or a bench was
    shown beside it; docs/RESULTS.md). With ``shape`` (the frame's
    H, W) the mask's region grows to hold such lines, for limbs whose landmarks lie within
    ``settings.limb_reach`` x the height of the person's box; without it the lines stay within
    the region."""
    if d.mask.size == 0 or d.kp2d is None:
        return
    width, min_conf, need, reach = settings.limb_width, settings.head_conf, settings.limb_conf, settings.limb_reach
    x0, y0, x1, y1 = d.region
    th = max(2, int(round(width * max(d.height, 1.0))))
    pairs = [(a, b) for a, b in LIMBS if d.conf[a] >= need and d.conf[b] >= need]
    if shape is not None and pairs:
        lim = reach * max(d.height, 1.0)
        lo, hi = d.box[:2] - lim, d.box[2:] + lim
        pairs = [(a, b) for a, b in pairs if np.all((d.kp2d[[a, b]] >= lo) & (d.kp2d[[a, b]] <= hi))]
        if pairs:
            pts = d.kp2d[[i for p in pairs for i in p]]
            nx0 = int(max(0, min(x0, np.floor(pts[:, 0].min() - th))))
            ny0 = int(max(0, min(y0, np.floor(pts[:, 1].min() - th))))
            nx1 = int(min(shape[1], max(x1, np.ceil(pts[:, 0].max() + th))))
            ny1 = int(min(shape[0], max(y1, np.ceil(pts[:, 1].max() + th))))
            if (nx0, ny0, nx1, ny1) != (x0, y0, x1, y1):
                grown = np.zeros((ny1 - ny0, nx1 - nx0), np.float32)
                grown[y0 - ny0 : y1 - ny0, x0 - nx0 : x1 - nx0] = d.mask
                d.mask, d.region = grown, (nx0, ny0, nx1, ny1)
                x0, y0, x1, y1 = d.region
    m = np.ascontiguousarray(d.mask, np.float32)
    for a, b in pairs:
        pa = (int(round(d.kp2d[a, 0] - x0)), int(round(d.kp2d[a, 1] - y0)))
        pb = (int(round(d.kp2d[b, 0] - x0)), int(round(d.kp2d[b, 1] - y0)))
        cv2.line(m, pa, pb, 1.0, th, lineType=cv2.LINE_8)
    head = [i for i in HEAD_LANDMARKS if d.conf[i] >= min_conf]
    if head:  # the head (hair, a hat) the segmentation often trims: a disc over the face landmarks
        c = d.kp2d[head].mean(axis=0)
        ears = np.linalg.norm(d.kp2d[EARS[0]] - d.kp2d[EARS[1]]) if min(d.conf[list(EARS)]) >= min_conf else 0.0
        r = max(settings.head_ear_radius * float(ears), settings.head_min_radius * float(d.height), 2.0)
        lift = settings.head_lift * r
        cv2.circle(m, (int(round(c[0] - x0)), int(round(c[1] - y0 - lift))), int(round(r)), 1.0, -1)
    d.mask = m


def paint(labels: np.ndarray, best: np.ndarray, d: Detection, tid: int) -> None:
    """Draw a detection's mask into a frame's instance labels (raw id + 1) and person probability."""
    x0, y0, x1, y1 = d.region
    sub = best[y0:y1, x0:x1]
    win = (d.mask >= 0.5) & (d.mask > sub)
    labels[y0:y1, x0:x1][win] = tid + 1
    np.maximum(sub, d.mask, out=sub)
