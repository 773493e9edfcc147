"""Find the people the face-keyed detector misses: a scan with the pose landmark model.

MediaPipe's BlazePose detector finds a person through their face. A bystander wearing a face
mask, a person seen from behind or a small far person is never detected, although the landmark
model (``pose_landmark_full``) finds them at once when it is given a region around them (its
presence flag is ~1.0 there and ~0 on an empty wall). :class:`PoseScanner` therefore runs the
landmark model itself as a detector: on upright square regions laid on a grid at a few scales
(``sides``, fractions of the frame's long side; the grid stride is ``stride`` x the side), it keeps
the regions where the presence flag is high, lets the model move the region onto the person
(``refine`` steps of the region the model predicts for the next frame, as in MediaPipe's own
tracking) and accepts the result when the flag and the landmark visibility stay high.

The refinement can drift: on a thin person in front of a big object (a man standing still by a
motorcycle, ~20x94 px) the predicted regions grow onto the object and the flag
falls, although a region of the person's size has the flag at 0.8-1.0 (on sides 0.9-1.1 x his
height; 0.0-0.3 at 1.2-1.3 x, the size the model predicts). Where the refinement fails, the
region is therefore anchored (:meth:`PoseScanner._anchored`): the predicted centre with smaller
sides (``anchor_scales`` x the predicted side), accepted only where the flag is >= ``anchor_flag``,
the body is the one the first look found, the model's own next region stays on it, and the
landmarks stay put when the region moves by ``anchor_shift`` x its side four ways (mean shift
<= ``anchor_jitter`` x the body's height: 0.02-0.04 on the man, 0.08 on a body drawn over the
motorcycle's wheel). The usual second opinion (:class:`PersonEvidence`) follows.

The landmark model also says "person" on some human-like clutter (a chair with clothes on it, an
anatomical skeleton model). Each candidate is therefore checked by a second, different model
(:class:`PersonEvidence`): OpenCV's HOG pedestrian classifier on the candidate's box and
MediaPipe's selfie segmentation on a crop around it, read inside the landmark model's mask. The
same check filters the full-frame detector's new detections (it sometimes draws a second,
sideways body next to a person, over trees and buildings).
A candidate that fails the check is counted (``rejected``) and tried again on later scans.

Every scan uses a grid shifted by half a stride, or scaled by half a scale step, from the previous
one: over time the scans cover positions and sizes between those of the first (temporal
accumulation for a person in an unlucky place; they are followed back to their first frame by the
caller's backfill). Regions whose centre lies inside a person already found are skipped.

The landmark model's calls on empty background are most of the scan's cost (and most of pose4d's).
For cost, ``rotate > 1`` gates the scans after the first by change: a region is looked at when
its pixels changed since the last scan (someone came, went or moved; :func:`_changed_cells`), and
of the unchanged regions only a ``1/rotate`` share, which moves on after every round of
:data:`GRID_PHASES` grids, so every region of every grid is still looked at within
``GRID_PHASES x rotate`` scans. A scan the caller asks to be ``full`` (someone was lost) looks at the
whole grid. (A rotating share without the change test, measured earlier on the hard cases, missed
a person walking across for the whole video.) ``rotate`` 1 looks at the whole grid every time.

A look is not repeated on the same pixels (``skip_unchanged``): where a region of a grid phase was
looked at and the model saw no body there, or only one the checks turned down, that region is
skipped on later scans of the same phase until its pixels change (the change test above, against
the pixels of that look). The model and the checks give the same answer on the same pixels, so a
repeat can only differ by noise below the change test; on a long still scene those repeats were
half of the scan's calls and started tracks on clutter (docs/RESULTS.md). A look that found
someone, or stopped at someone already found (that depends on who is known, not on the pixels), is
always repeated: a person lost later must be found again there.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from enum import Enum

import cv2
import numpy as np

from anonymask.models.anonymizer.pose.people import Detection, box_iou, known_person, mask_overlap
from anonymask.models.anonymizer.pose.settings import EvidenceSettings, SamePersonSettings, ScanSettings

#: OpenCV's default people detector: its window (w, h px) and the height of the person it was
#: trained on inside it (Dalal & Triggs' 64x128 windows hold a ~96-px pedestrian)
HOG_WINDOW, HOG_PERSON_PX = (64, 128), 96.0
#: the selfie segmentation's (general model) square input side, px
SELFIE_INPUT = 256
#: px: boxes are scored at this height at least, and search regions and grid strides are at least
#: this large (guards for degenerate boxes: nothing this small can be posed)
MIN_BOX_PX, MIN_STRIDE_PX, MIN_SEARCH_PX = 8.0, 4.0, 16.0
#: of the four shifted regions of the stability check (:meth:`PoseScanner._stable`), how many must
#: keep the flag: a body the model sees only from some sides of it is not a stable one
STABLE_SHIFTS, STABLE_MIN_KEPT = ((1, 0), (-1, 0), (0, 1), (0, -1)), 3
#: the grey that hides people already found from the landmark model (a flat mid-grey is nobody)
GREY = 127


class Look(Enum):
    """What one look at a region came to. ``EMPTY`` and ``TURNED_DOWN`` depend only on the pixels
    (and the settings): the same pixels give them again, so such a look need not be repeated."""

    EMPTY = "empty"  # no body (person flag below first_flag)
    KNOWN = "known"  # the body is someone already found (depends on who is known)
    TURNED_DOWN = "turned_down"  # a body the refinement, the shape test or the second opinion rejected
    FOUND = "found"

    @property
    def repeatable(self) -> bool:
        return self in (Look.KNOWN, Look.FOUND)


@dataclass
class Evidence:
    hog: float  # HOG SVM margin of the best window around the box (> 0: pedestrian)
    selfie: float  # mean selfie-segmentation probability inside the landmark model's mask (nan: not run)


class PersonEvidence:
    """Second opinion on a person candidate from models other than the pose landmark model."""

    def __init__(self, settings: EvidenceSettings):
        self.hog_min, self.hog_weight, self.min_combined = settings.hog_min, settings.hog_weight, settings.min_combined
        self.hog_scales, self.hog_shifts_px = settings.hog_scales, settings.hog_shifts_px
        self.selfie_context = settings.selfie_context
        self._hog = cv2.HOGDescriptor()
        svm = np.ravel(cv2.HOGDescriptor_getDefaultPeopleDetector()).astype(np.float32)
        self._w, self._b = svm[:-1], float(svm[-1])
        self._selfie = None
        self._lock = threading.Lock()

    def hog_score(self, frame: np.ndarray, box: np.ndarray) -> float:
        """Best linear-SVM margin over a few shifts and scales of the 64x128 window in which the
        box's height is 96 px (the size the default people detector was trained on)."""
        x0, y0, x1, y1 = [float(v) for v in box]
        bh = max(y1 - y0, MIN_BOX_PX)
        s = HOG_PERSON_PX / bh
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        gray = frame if frame.ndim == 2 else cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY)
        best = -np.inf
        ww, wh = HOG_WINDOW
        for ds in self.hog_scales:
            for dx in self.hog_shifts_px:
                k = s * ds
                m = np.float32([[k, 0, ww / 2 + dx - cx * k], [0, k, wh / 2 - cy * k]])
                win = cv2.warpAffine(gray, m, HOG_WINDOW, flags=cv2.INTER_AREA if k < 1 else cv2.INTER_LINEAR,
                                     borderMode=cv2.BORDER_REPLICATE)
                best = max(best, float(self._hog.compute(win).ravel() @ self._w + self._b))
        return best

    def selfie_score(self, frame: np.ndarray, det: Detection) -> float:
        """Selfie segmentation (MediaPipe, general model) on a square crop 1.3x the box, read
        inside the landmark model's own mask: do two models agree on these pixels being a person?"""
        import mediapipe as mp

        h, w = frame.shape[:2]
        x0, y0, x1, y1 = [float(v) for v in det.box]
        side = self.selfie_context * max(x1 - x0, y1 - y0, MIN_BOX_PX)
        s = SELFIE_INPUT / side
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        m = np.float32([[s, 0, SELFIE_INPUT / 2 - cx * s], [0, s, SELFIE_INPUT / 2 - cy * s]])
        crop = cv2.warpAffine(frame, m, (SELFIE_INPUT, SELFIE_INPUT), borderMode=cv2.BORDER_REPLICATE)
        with self._lock:
            if self._selfie is None:
                self._selfie = mp.solutions.selfie_segmentation.SelfieSegmentation(model_selection=0)
            prob = self._selfie.process(np.ascontiguousarray(crop)).segmentation_mask
        rx0, ry0, rx1, ry1 = det.region
        mask = np.zeros((h, w), np.float32)
        mh, mw = ry1 - ry0, rx1 - rx0
        mask[ry0:ry0 + mh, rx0:rx0 + mw] = det.mask[:mh, :mw]
        inside = cv2.warpAffine(mask, m, (SELFIE_INPUT, SELFIE_INPUT)) >= 0.5
        return float(prob[inside].mean()) if inside.any() else 0.0

    def __call__(self, frame: np.ndarray, det: Detection) -> Evidence:
        hog = self.hog_score(frame, det.box)
        if hog >= self.hog_min:  # enough: skip the segmentation model
            return Evidence(hog, float("nan"))
        return Evidence(hog, self.selfie_score(frame, det))

    def ok(self, ev: Evidence, min_combined: float | None) -> bool:
        """A pedestrian for HOG, or enough segmentation agreement for how un-pedestrian-like the
        HOG window looks (selfie + hog_weight * hog >= ``min_combined``, None: the settings' value). Measured on the real sample
        videos: bodies hallucinated by the landmark model (on trees, shelves, a chair with clothes)
        score <= -0.1, small clutter on a table or a treadmill 0.03-0.15 (the scan asks for 0.2),
        real people (seen from behind, masked, half occluded) >= 0.06 (>= 0.3 where the scan found
        them)."""
        if ev.hog >= self.hog_min:
            return True
        need = self.min_combined if min_combined is None else float(min_combined)
        return bool(np.isfinite(ev.selfie) and ev.selfie + self.hog_weight * ev.hog >= need)


#: distinct grids :meth:`PoseScanner.grid` lays (4 shifts x 2 scales) before they repeat
GRID_PHASES = 8

def _inside(pt: tuple[float, float], box: np.ndarray, grow: float = 0.0) -> bool:
    gx, gy = grow * (box[2] - box[0]), grow * (box[3] - box[1])
    return box[0] - gx <= pt[0] <= box[2] + gx and box[1] - gy <= pt[1] <= box[3] + gy


class PoseScanner:
    """``scan(frame, known)`` -> new detections (source ``scan``); see the module docstring."""

    def __init__(self, roi, settings: ScanSettings, evidence: PersonEvidence | None, same: SamePersonSettings):
        """``roi``: the landmark model to look with (None: a new one); ``evidence``: the second
        opinion a hit needs (None: none); ``same``: when a body is someone already found."""
        if roi is None:
            from anonymask.models.anonymizer.pose.roi import RoiLandmarker

            roi = RoiLandmarker(settings.first_flag)
        s = settings
        self.roi, self.same, self.region_conf = roi, same, s.region_conf
        self.sides, self.min_side, self.stride = tuple(s.sides), s.min_side, s.stride
        self.phase_grow = s.phase_grow
        self.first_flag, self.min_flag, self.min_score = s.first_flag, s.min_flag, s.min_score
        self.refine, self.rotate = s.refine, s.rotate
        self.evidence = evidence
        self.scan_combined, self.min_aspect = s.combined, s.min_aspect
        self.anchor_scales = tuple(s.anchor_scales) if s.anchor else ()
        self.anchor_tol, self.anchor_flag = s.anchor_tol, s.anchor_flag
        self.anchor_shift, self.anchor_jitter = s.anchor_shift, s.anchor_jitter
        self.anchor_same_tol, self.min_leg, self.max_shoulders = s.anchor_same_tol, s.min_leg, s.max_shoulders
        self.same_body_overlap, self.search_regions, self.search_iou = (s.same_body_overlap, s.search_regions,
                                                                        s.search_iou)
        self.change_tol, self.change_min = s.change_tol, s.change_min
        self._last: np.ndarray | None = None  # the last scan's frame, grey at 1/4 size (change gating)
        self.skip_unchanged = s.skip_unchanged
        # (phase, (cx, cy, side), frame size) -> the region's pixels (grey, 1/4 size) at a look that saw nobody
        self._unproductive: dict[tuple, np.ndarray] = {}
        self.skipped = 0
        self.unchanged_skipped = 0  # looks not repeated on unchanged pixels (skip_unchanged)
        self.anchored = 0
        self.scans = 0
        self.calls = 0
        self.rejected = 0
        self.last_evidence: list[tuple[np.ndarray, Evidence, bool]] = []

    def grid(self, h: int, w: int, phase: int = 0) -> list[tuple[float, float, float]]:
        """Every (cx, cy, side) region of the full grid, small sides first. ``phase`` 1..3 shifts
        the grid by half a stride (x, y, both) and ``phase`` >= 4 scales the sides by 1.22 (half
        the step between scales): successive scans cover the positions and scales between those
        of the first (a person who stands still in an unlucky place is found on a later scan)."""
        out = []
        shift = ((0.0, 0.0), (0.5, 0.0), (0.0, 0.5), (0.5, 0.5))[phase % 4]
        grow = self.phase_grow if (phase // 4) % 2 else 1.0
        for frac in self.sides:
            side = max(float(self.min_side), frac * max(h, w)) * grow
            st = max(MIN_STRIDE_PX, self.stride * side)
            nx, ny = max(1, int(np.ceil(w / st))), max(1, int(np.ceil(h / st)))
            ox, oy = (w - (nx - 1) * st) / 2 + shift[0] * st, (h - (ny - 1) * st) / 2 + shift[1] * st
            out += [(ox + i * st, oy + j * st, side) for j in range(ny) for i in range(nx) if ox + i * st < w + 1
                    and oy + j * st < h + 1]
        return out

    def _refined(self, frame: np.ndarray, roi, first: Detection | None = None) -> Detection | None:
        """Let the model move the region onto the person: follow the region it predicts (``refine``
        steps); if that drifts away (the flag drops), try once from the region the first
        detection's landmarks span (more stable on thin or unusual bodies)."""
        starts = [roi]
        if first is not None:
            from anonymask.models.anonymizer.pose.roi import roi_from_landmarks

            alt = roi_from_landmarks(first.kp2d, first.conf, self.region_conf)
            if alt is not None:
                starts.append(alt)
        for start in starts:
            d, flag, cur = None, 0.0, start
            for _ in range(max(1, self.refine)):
                self.calls += 1
                d, nxt, flag = self.roi.track(frame, cur, min_score=self.min_score)
                if d is None:
                    break
                d.roi_next = nxt
                cur = nxt
            if d is not None and flag >= self.min_flag:
                return d
        if first is not None:
            for start in starts:
                d = self._anchored(frame, start, first)
                if d is not None:
                    return d
        return None

    def _anchored(self, frame: np.ndarray, start, first: Detection) -> Detection | None:
        """The refinement drifted: the regions the model predicts are too large for this person
        (a thin person in front of a big object: the flag falls as the region grows onto it).
        Try the predicted centre with smaller sides (``anchor_scales`` x the predicted side), and
        accept a region only where the model is sure (flag >= ``anchor_flag``) and agrees with
        itself: the body is the one the first look found (same landmarks) and the region the
        model predicts from it has about the same centre (within ``anchor_tol`` x side), and the
        landmarks are stable (:meth:`_stable`)."""
        from anonymask.models.anonymizer.pose.people import same_person

        cx, cy, side, rot = start
        for k in self.anchor_scales:
            roi = (cx, cy, side * k, rot)
            self.calls += 1
            d, nxt, flag = self.roi.track(frame, roi, min_score=self.min_score)
            if d is None or flag < self.anchor_flag:
                continue
            off = float(np.hypot(nxt[0] - cx, nxt[1] - cy)) / max(roi[2], 1.0)
            if off > self.anchor_tol or not same_person(d, first, self.anchor_same_tol, self.same) or not self._stable(frame, roi, d):
                continue
            d.roi_next = (nxt[0], nxt[1], nxt[2] * k, nxt[3])
            self.anchored += 1
            return d
        return None

    def _stable(self, frame: np.ndarray, roi, d: Detection) -> bool:
        """The landmarks stay put when the region moves a little (``anchor_shift`` x side, four
        ways): on a real person they move by <= 0.04 x their height on average (measured on a
        man standing still by a motorcycle), on bodies drawn over a wheel or a limb 0.08.
        At least three of the four shifted regions must keep the flag (>= ``first_flag``) and
        the mean landmark shift must stay within ``anchor_jitter`` x the body height."""
        from anonymask.models.anonymizer.pose.people import BODY_LANDMARKS

        idx = list(BODY_LANDMARKS)
        cx, cy, side, rot = roi
        moved, kept, lost = [], 0, 0
        for dx, dy in STABLE_SHIFTS:
            if lost > len(STABLE_SHIFTS) - STABLE_MIN_KEPT:  # too few can keep the flag now: no need to look on
                return False
            self.calls += 1
            e, _, flag = self.roi.track(frame, (cx + dx * self.anchor_shift * side, cy + dy * self.anchor_shift * side,
                                               side, rot), min_score=0.0)
            if e is None or flag < self.first_flag:
                lost += 1
                continue
            kept += 1
            moved.append(float(np.median(np.linalg.norm(e.kp2d[idx] - d.kp2d[idx], axis=1))))
        return kept >= STABLE_MIN_KEPT and float(np.mean(moved)) <= self.anchor_jitter * max(d.height, 1.0)

    def _candidate(self, frame: np.ndarray, roi, taken: list[Detection], min_combined: float | None,
                   min_aspect: float) -> Detection | None:
        """The person the landmark model finds from ``roi`` (flag, refinement, evidence), or None."""
        return self._look(frame, roi, taken, min_combined, min_aspect)[0]

    def _look(self, frame: np.ndarray, roi, taken: list[Detection], min_combined: float | None,
              min_aspect: float) -> tuple[Detection | None, Look]:
        """:meth:`_candidate` with what the look came to (:class:`Look`)."""
        self.calls += 1
        d0, nxt, flag = self.roi.track(frame, roi, min_score=self.min_score)
        if d0 is None or flag < self.first_flag:
            return None, Look.EMPTY
        if known_person(d0, taken, self.same):  # the region holds (part of) someone already found
            return None, Look.KNOWN
        d = self._refined(frame, nxt, d0)
        if d is None or d.score < self.min_score:
            return None, Look.TURNED_DOWN
        if known_person(d, taken, self.same):  # someone already found (people may overlap: masks, not boxes)
            return None, Look.KNOWN
        bw, bh = float(d.box[2] - d.box[0]), float(d.box[3] - d.box[1])
        if bh < min_aspect * bw or (min_aspect > 0 and not _plausible_body(d, frame.shape[0], self.min_leg,
                                                                           self.max_shoulders)):
            self.rejected += 1
            return None, Look.TURNED_DOWN
        if self.evidence is not None:
            ev = self.evidence(frame, d)
            ok = self.evidence.ok(ev, min_combined)
            self.last_evidence.append((d.box.copy(), ev, ok))
            if not ok:
                self.rejected += 1
                return None, Look.TURNED_DOWN
        d.source = "scan"
        return d, Look.FOUND

    def cells(self, frame: np.ndarray, full: bool = False) -> list[tuple[float, float, float]]:
        """The (cx, cy, side) regions of the next scan (see the module docstring), which this call
        starts: it counts the scan and keeps ``frame`` as the reference the next one compares with."""
        h, w = frame.shape[:2]
        k = self.scans
        cells = self.grid(h, w, k)  # shifted grid after each scan
        small = _small_grey(frame) if self.rotate > 1 else None
        if k > 0 and self.rotate > 1 and not full:
            # the cells that changed since the last scan, and of the others a share that moves on
            # after each round of GRID_PHASES scans (every cell of every phase is looked at within
            # GRID_PHASES x rotate scans however still the scene is)
            share = set(range(((k - 1) // GRID_PHASES) % self.rotate, len(cells), self.rotate))
            changed = _changed_cells(small, self._last, cells, self.change_tol, self.change_min)
            keep = [c for i, c in enumerate(cells) if i in share or changed[i]]
            self.skipped += len(cells) - len(keep)
            cells = keep
        self._last = small
        self.scans += 1
        return cells

    def scan(self, frame: np.ndarray, known: list[Detection] = (), full: bool = False) -> list[Detection]:
        """New people anywhere in the frame (the grid; after the first scan, with ``rotate > 1``,
        its changed regions and a rotating share of the others).
        ``full``: the whole grid (the caller asks for it after losing someone).
        Stricter than :meth:`search`: nothing says a person is there, so the second opinion must
        be clear (``scan_combined``) and the body upright-ish (``min_aspect``: box height >= 0.9 x
        width, legs not much shorter than the torso; lying people are left to the full-frame
        detector)."""
        phase = self.scans % GRID_PHASES
        cells = self.cells(frame, full)
        small = _small_grey(frame) if self.skip_unchanged else None
        self.last_evidence = []
        known = list(known)
        found: list[Detection] = []
        for cx, cy, side in cells:
            if any(_inside((cx, cy), d.box) for d in known + found):
                continue
            key = (phase, (cx, cy, side), frame.shape[:2])  # a phase's grid is fixed for a frame size
            if small is not None:
                pixels = _cell_pixels(small, (cx, cy, side))
                before = self._unproductive.get(key)
                if before is not None and not _pixels_changed(pixels, before, self.change_tol, self.change_min):
                    self.unchanged_skipped += 1
                    continue
            d, look = self._look(frame, (cx, cy, side, 0.0), known + found, self.scan_combined, self.min_aspect)
            if small is not None:
                if look.repeatable:
                    self._unproductive.pop(key, None)
                else:
                    self._unproductive[key] = pixels
            if d is None:
                continue
            # one person found twice by the scan (upper body, then whole body): keep the larger
            part = next((k for k, o in enumerate(found) if mask_overlap(o, [d]) > self.same_body_overlap), None)
            if part is not None:
                found[part] = d
            else:
                found.append(d)
        return found

    def search(self, frame: np.ndarray, box: np.ndarray, known: list[Detection] = ()) -> Detection | None:
        """A lost person near ``box`` (their predicted box): the ``search_regions`` around it (for a
        person occluded for a while, turned away, or whom the region tracking let go)."""
        self.last_evidence = []
        bw, bh = float(box[2] - box[0]), float(box[3] - box[1])
        size = max(bw, bh, MIN_SEARCH_PX)
        cx, cy = _centre(box)
        known = list(known)
        # the people already found are greyed out: where two people overlap, the landmark model
        # otherwise locks onto the more visible one again
        img = frame
        for o in known:
            if o.mask.size and box_iou(o.box, box) > 0:
                if img is frame:
                    img = frame.copy()
                x0, y0, x1, y1 = o.region
                sub = img[y0:y1, x0:x1]
                sub[o.mask[: y1 - y0, : x1 - x0] >= 0.5] = GREY
        for k, dx, dy in self.search_regions:
            d = self._candidate(img, (cx + dx * size, cy + dy * size, k * size, 0.0), known, None, 0.0)
            if d is not None and box_iou(d.box, box) > self.search_iou:
                return d
        return None


#: the change map is taken at 1/CHANGE_SCALE of the frame's size (noise averages out, and it is cheap)
CHANGE_SCALE = 4


def _small_grey(frame: np.ndarray) -> np.ndarray:
    g = cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY) if frame.ndim == 3 else frame
    h, w = g.shape[:2]
    return cv2.resize(g, (max(1, w // CHANGE_SCALE), max(1, h // CHANGE_SCALE)), interpolation=cv2.INTER_AREA)


def _changed_cells(small: np.ndarray | None, last: np.ndarray | None, cells, tol: float,
                   min_share: float) -> list[bool]:
    """Per (cx, cy, side) cell: did its pixels change since the last scan (at least ``min_share``
    of them, and at least 2, by more than ``tol`` grey levels at 1/4 size)? Every cell counts as
    changed when there is nothing to compare with (no gating, a first scan, another frame size)."""
    if small is None or last is None or small.shape != last.shape:
        return [True] * len(cells)
    moved = (np.abs(small.astype(np.int16) - last.astype(np.int16)) > tol).astype(np.uint8)
    ii = cv2.integral(moved)
    hs, ws = small.shape
    out = []
    for cell in cells:
        x0, y0, x1, y1 = _cell_bounds(cell, (hs, ws))
        n = int(ii[y1, x1] - ii[y0, x1] - ii[y1, x0] + ii[y0, x0])
        out.append(n >= max(2.0, min_share * max(1, (x1 - x0) * (y1 - y0))))
    return out


def _cell_bounds(cell: tuple[float, float, float], shape: tuple[int, int]) -> tuple[int, int, int, int]:
    """(x0, y0, x1, y1) of a (cx, cy, side) region on the 1/CHANGE_SCALE grey frame of ``shape``."""
    cx, cy, side = cell
    hs, ws = shape
    r = side / (2 * CHANGE_SCALE)
    x0, x1 = int(np.clip((cx / CHANGE_SCALE) - r, 0, ws)), int(np.clip((cx / CHANGE_SCALE) + r, 0, ws))
    y0, y1 = int(np.clip((cy / CHANGE_SCALE) - r, 0, hs)), int(np.clip((cy / CHANGE_SCALE) + r, 0, hs))
    return x0, y0, x1, y1


def _cell_pixels(small: np.ndarray, cell: tuple[float, float, float]) -> np.ndarray:
    x0, y0, x1, y1 = _cell_bounds(cell, small.shape[:2])
    return small[y0:y1, x0:x1].copy()


def _pixels_changed(now: np.ndarray, before: np.ndarray, tol: float, min_share: float) -> bool:
    """The change test of :func:`_changed_cells` between two copies of one region."""
    if now.shape != before.shape:
        return True
    n = int((np.abs(now.astype(np.int16) - before.astype(np.int16)) > tol).sum())
    return n >= max(2.0, min_share * max(1, now.size))


def _centre(box: np.ndarray) -> tuple[float, float]:
    return float((box[0] + box[2]) / 2), float((box[1] + box[3]) / 2)


def _plausible_body(d: Detection, height: int, min_leg: float, max_shoulders: float) -> bool:
    """An upright body seen down to the ankles has legs (hip-knee-ankle, in the image) at least
    ``min_leg`` x its torso (shoulders-hips); measured 1.2-1.8 on the real and synthetic people,
    0.5 on a cable and a cylinder the landmark model took for a person. Bodies whose ankles are
    not in the frame (cut by its bottom) are not judged on their legs. In any body the shoulders
    are at most about as wide as the torso is long: measured 0.08-0.63 on the people the scan
    finds (real lab footage, the synthetic sets), 1.1-1.4 on a kicking person; 2.7 on a red motorcycle
    tank and 5.9 on a man's arms, drawn as a squat body (the landmark model's hallucinations,
    which also fool the selfie segmentation). Above ``max_shoulders`` it is not a body."""
    k = d.kp2d
    sh, hp, kn, an = k[[11, 12]].mean(0), k[[23, 24]].mean(0), k[[25, 26]].mean(0), k[[27, 28]].mean(0)
    torso = float(np.linalg.norm(sh - hp))
    if float(np.linalg.norm(k[11] - k[12])) > max_shoulders * max(torso, 1e-3):
        return False
    if an[1] >= height - 2 or kn[1] >= height - 2:
        return True
    leg = float(np.linalg.norm(hp - kn) + np.linalg.norm(kn - an))
    return torso <= 0 or leg >= min_leg * torso
