"""4-D pose backends: video (+ optional skeleton) -> SMPL-H tracks + camera.

- ``mediapipe``: every person found on every frame by MediaPipe's multi-person pose landmarker
  (models/anonymizer/pose/people.py; no motion cue, so people who stand still are found), linked into tracks
  (models/anonymizer/pose/discover.py); SMPL-H fitted to each track's 2-D and 3-D world landmarks.
- ``gt``: ground-truth tracks (synthetic data) passed through, for ablations.
Camera: principal point at the centre, focal length from an assumed horizontal field of view
(datasets rarely ship intrinsics for their RGB videos).

Person discovery is a sequence of named passes over :class:`~anonymask.models.anonymizer.pose.records.Person`
records (:func:`estimate_people` reads as the list): discover, backfill, second detector (opt-in),
verify, associate, fit, bridge, yield parts (with the second detector: one person, one avatar), faces; on a dim shot they all read it brightened (models/anonymizer/pose/exposure.py). Each takes its settings from the typed tree in models/anonymizer/pose/settings.py and adds typed
diagnostics to :class:`~anonymask.models.anonymizer.pose.records.PoseDiagnostics`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from anonymask.core.errors import NoPersonError
from anonymask.models.anonymizer.pose.bridge import (
    bridge_across_border,
    bridge_after_end,
    bridge_before_late_start,
)
from anonymask.models.anonymizer.pose.exposure import brightened
from anonymask.models.anonymizer.pose.face_people import add_face_people
from anonymask.models.anonymizer.pose.fallback import box_track
from anonymask.models.anonymizer.pose.fit import FitConfig
from anonymask.models.anonymizer.pose.keypoints import MEDIAPIPE_TO_SMPLH, mapping_arrays
from anonymask.models.anonymizer.pose.link import begun_on_someone, link_groups
from anonymask.models.anonymizer.pose.plausible import fit_disagrees, reach_past_box
from anonymask.models.anonymizer.pose.records import Kind, Person, PoseDiagnostics
from anonymask.models.anonymizer.pose.settings import FitSettings, MediapipePoseSettings
from anonymask.models.shared.body.tracks import Camera, SMPLHTrack
from anonymask.models.shared.geometry import fill_gaps

#: how a track's avatar was obtained (``pose/kinds``)
POSED, FALLBACK_BOX, FALLBACK_FACE = int(Kind.POSED), int(Kind.FALLBACK_BOX), int(Kind.FALLBACK_FACE)


@dataclass
class PoseResult:
    tracks: list[SMPLHTrack]  # compact: each over its own frames (``SMPLHTrack.window(0, T)`` for the video)
    camera: Camera
    boxes: np.ndarray  # (N,T,4) person boxes (NaN where absent)
    diagnostics: dict[str, float] = field(default_factory=dict)
    instance_track: np.ndarray | None = None  # raw track id -> posed track index (-1: none)
    gap: np.ndarray | None = None  # (N,T) bool: frames bridged between detections
    kinds: np.ndarray | None = None  # (N,) int8: POSED, FALLBACK_BOX or FALLBACK_FACE
    report: PoseDiagnostics | None = None  # the typed diagnostics behind ``diagnostics``


#: degrees: the horizontal field of view assumed for footage whose camera is unknown (a typical
#: webcam or phone's main lens is 55-70); the fits are made and drawn through the same camera, so
#: it scales depth, not where an avatar lands in the image
ASSUMED_FOV_DEG = 60.0


def default_camera(width: int, height: int) -> Camera:
    """A pinhole camera of :data:`ASSUMED_FOV_DEG` for a ``width`` x ``height`` frame."""
    return Camera.from_fov(width, height, ASSUMED_FOV_DEG)


def fit_config(settings: FitSettings) -> FitConfig:
    """The body fit's configuration from the pose4d settings: every field of ``FitConfig`` (its own
    defaults serve the other backends)."""
    return FitConfig(iterations=settings.iterations, lr=settings.lr, w_2d=settings.w_2d, w_3d=settings.w_3d,
                     w_prior=settings.w_prior, w_smooth=settings.w_smooth, smooth_sigma=settings.smooth_sigma,
                     min_confidence=settings.min_confidence, min_joints=settings.min_joints,
                     min_spread_px=settings.min_spread_px, near_m=settings.near_m,
                     w_smooth_transl=settings.w_smooth_transl)


def estimate_people(windows, shape: tuple[int, int, int], rest_joints: np.ndarray, settings: MediapipePoseSettings,
                    *, detector, camera: Camera | None, source: str, write_window, read_frames, paint_frame,
                    relabel_frame, discovery) -> PoseResult:
    """Every person in a video (or shot), streamed over frame windows, as SMPL-H tracks.

    ``windows`` yields (t0, frames (n,H,W,3) uint8) in order; ``write_window(t0, labels (n,H,W)
    uint16, prob (n,H,W) float32)`` receives the instance labels (raw track id + 1) and person
    probability of each window (None: not kept). Nothing here holds more than one window of
    frames. ``read_frames(a, b)`` re-reads frames for the passes that look back (backfill,
    bridge's follow, faces; None: they are skipped); ``paint_frame(t, detection, raw id)`` draws a
    person they add into frame t's labels (None: not kept); ``relabel_frame(t, old, new)`` moves a raw
    track's pixels of frame t to another raw id (a track split by the second detector; None: not
    kept). ``discovery``: a ready
    ``PersonDiscovery`` (tests), or None: built from ``settings.discover`` with ``detector``.

    Every person found is replaced, never only erased (issue 8 item 2): a person seen too
    briefly to pose gets a neutral avatar in their box, a face no body explains a face-anchored
    one. ``result.instance_track`` maps raw ids to track indices.
    """
    from anonymask.models.anonymizer.pose.discover import PersonDiscovery

    t_len, h, w = shape
    camera = camera or default_camera(w, h)
    disc = discovery or PersonDiscovery(detector, settings.discover, settings.scan, settings.evidence,
                                        max_gap=settings.max_gap, t_len=t_len, scanner=None)
    diag = PoseDiagnostics()
    read_frames, windows, diag.exposure_gain = brightened(read_frames, windows, t_len, settings.exposure)
    diag.shots_brightened = int(diag.exposure_gain != 1.0)
    discover(disc, windows, write_window)
    if read_frames is not None and settings.discover.backfill:
        backfill(disc, read_frames, t_len, paint_frame)
    unconfirmed, parts = second_detector(disc, read_frames, t_len, settings, diag, relabel_frame)
    raw_boxes = disc.track_boxes(t_len)  # (T,4) per raw track: 16 bytes a frame
    rejected = verify(disc, raw_boxes, (h, w), t_len, settings, diag, read_frames) | unconfirmed
    for i in unconfirmed:
        raw_boxes[i][:] = np.nan
    people = associate(disc, raw_boxes, rejected, (h, w), settings, diag)
    fit_people(people, rest_joints, camera, settings, t_len)
    bridge(people, raw_boxes, (h, w), settings, read_frames)
    diag.second_part_frames = yield_parts(people, disc, parts) if parts is not None else None
    if read_frames is not None and settings.faces.enabled:
        add_face_people(people, read_frames, t_len, rest_joints, camera, _body, len(raw_boxes), paint_frame,
                        settings.faces, settings.confirm.box_smooth, diag)
    return assemble(people, len(raw_boxes), rejected, camera, disc, diag, source)


def discover(disc, windows, write_window) -> None:
    """Pass 1, frame by frame: detect, follow and hold every person (models/anonymizer/pose/discover.py),
    writing each window's instance labels and person probability as it goes."""
    for t0, frames in windows:
        outs = [disc.push(f) for f in frames]
        if write_window is not None:
            write_window(t0, np.stack([o.labels for o in outs]), np.stack([o.prob for o in outs]))


def backfill(disc, read_frames, t_len: int, paint_frame) -> None:
    """Pass 2: tracks that start late are followed backwards to where their person came in, or held
    back in place while their region is unchanged (a still person found late); each earlier
    detection is painted into its frame's labels."""
    for t, d, tid in disc.backfill(read_frames, t_len):
        if paint_frame is not None:
            paint_frame(t, d, tid)


def second_detector(disc, read_frames, t_len: int, settings: MediapipePoseSettings, diag: PoseDiagnostics,
                    relabel_frame) -> tuple[set[int], dict[int, list[tuple[int, int]]] | None]:
    """Pass 3 (opt-in, ``verify.second_detector.backend``): an independent whole-body detector looks at
    every track every few frames (models/anonymizer/pose/second_detector.py); a long run of a track's
    frames where it sees no person is split off and dropped, a kept stretch after it becomes a
    raw track of its own. Returns the dropped raw ids (verify adds them to its rejected) and, per
    kept raw id, the [a, b] spans where it is a part of another track's person (None: pass off)."""
    cfg = settings.verify.second_detector
    if cfg.backend == "none" or read_frames is None or not settings.verify.enabled:
        return set(), None
    from anonymask.models.anonymizer.pose.discover import new_track
    from anonymask.models.anonymizer.pose.second_detector import (
        part_spans,
        sample_confirmations,
        split_unconfirmed,
    )
    from anonymask.models.anonymizer.pose.yolo import persons_for

    samples = sample_confirmations(disc.tracker.tracks, read_frames, t_len, cfg, persons_for(cfg))
    dropped, frames = split_unconfirmed(disc.tracker.tracks, new_track, samples, cfg.min_run_frames, relabel_frame)
    diag.second_samples = sum(len(v) for v in samples.values())
    diag.second_confirmed = sum(bool(v) for got in samples.values() for _, v in got)
    diag.second_dropped, diag.second_dropped_frames = len(dropped), frames
    parts = {}
    for tid, got in samples.items():
        frames_of = disc.tracker.tracks[tid].frames
        if tid in dropped or not got or not frames_of:
            continue
        if spans := part_spans(got, min(frames_of), max(frames_of), cfg.part_min_samples):
            parts[tid] = spans
    diag.second_parts = len(parts)
    return dropped, parts


def yield_parts(people: list[Person], disc, parts: dict[int, list[tuple[int, int]]]) -> int:
    """Pass 6b (with the second detector): one person, one avatar. Where a raw track was a part of
    another track's person (``parts``: raw id -> [a, b] spans, second_detector.py ``part_spans``), its
    person's avatar yields: not drawn there (``valid`` False); its pixels stay removed (pose/instances,
    boxes), and the other person's avatar stands on them. A span at the raw track's first (last)
    frame reaches over the frames its person was bridged before (after) it, when no other raw track
    of that person comes earlier (later). In place; returns the frames hidden."""
    hidden = 0
    for p in people:
        tr = p.track
        if tr is None or not any(i in parts for i in p.raw_ids):
            continue
        # each raw track's first and last frame, and the person's (over all their raw tracks)
        ends = {i: (min(f), max(f)) for i in p.raw_ids if (f := disc.tracker.tracks[i].frames)}
        first, last = min(e[0] for e in ends.values()), max(e[1] for e in ends.values())
        for i in p.raw_ids:
            for a, b in parts.get(i, []):
                a = tr.start if a == ends[i][0] == first else a
                b = tr.stop - 1 if b == ends[i][1] == last else b
                for t in range(max(a, tr.start), min(b, tr.stop - 1) + 1):
                    if tr.valid[t - tr.start]:
                        tr.valid[t - tr.start] = False
                        hidden += 1
    return hidden


def verify(disc, raw_boxes: list[np.ndarray], hw: tuple[int, int], t_len: int, settings: MediapipePoseSettings,
           diag: PoseDiagnostics, read_frames) -> set[int]:
    """Pass 3: raw tracks with no evidence over their life of being a person (models/anonymizer/pose/verify.py:
    held on unchanged pixels nearly all their life, never found again, never moving), or whose box
    shows the scene (the pixels of the place where no track is, ``read_frames`` needed) are dropped:
    their boxes are cleared here (nothing links to them, nothing is fitted or held for them) and
    ``assemble`` marks them ``REJECTED_TRACK`` (their pixels are background for segment).
    ``settings.verify.enabled`` False: every track is kept."""
    if not settings.verify.enabled:
        return set()
    from anonymask.models.anonymizer.pose.verify import verify_discovery

    rejected, frames, scene = verify_discovery(disc.tracker.tracks, hw, t_len, settings.verify, raw_boxes, read_frames)
    for i in rejected:
        raw_boxes[i][:] = np.nan
    diag.verify_rejected, diag.verify_rejected_frames, diag.verify_scene = len(rejected), frames, scene
    return rejected


def associate(disc, raw_boxes: list[np.ndarray], rejected: set[int], hw: tuple[int, int],
              settings: MediapipePoseSettings, diag: PoseDiagnostics) -> list[Person]:
    """Pass 4: raw tracks that are one person lost behind an occluder are linked into one
    (models/anonymizer/pose/link.py; ``settings.link.gap`` 0 turns it off); each person's landmarks merged
    over their own span (first to last box: memory grows with the people's own frames, not
    tracks x video length, docs/SCALING.md) and their boxes filled over the gaps between their
    detections (up to their longest gap between linked parts)."""
    t_len = raw_boxes[0].shape[0] if raw_boxes else 0
    groups = [[i] for i in range(len(raw_boxes))]
    if settings.link.gap:
        taken = begun_on_someone(raw_boxes, settings.link)  # (rejected tracks have no boxes left)
        groups = link_groups(raw_boxes, hw, settings.link, taken)
        diag.begun_on_someone = len(taken)
    groups = [g for g in groups if not rejected.issuperset(g)]
    diag.linked_tracks = sum(len(g) - 1 for g in groups)
    people = []
    for group in groups:
        frames_seen, kp2d, conf, world, bx = _merged([disc.track_arrays(i, t_len) for i in group])
        longest = max([settings.max_gap] + [b - a - 1 for a, b in zip(frames_seen[:-1], frames_seen[1:])])
        filled, gap = fill_gaps(bx, longest)
        p = Person(list(group), frames_seen, filled, gap)
        a, b = person_span(filled)
        p.landmarks = (kp2d[a:b].copy(), conf[a:b].copy(), world[a:b].copy(), (a, b))
        del kp2d, conf, world
        people.append(p)
    return people


def fit_people(people: list[Person], rest_joints: np.ndarray, camera: Camera, settings: MediapipePoseSettings,
               t_len: int) -> None:
    """Pass 5: a person seen in at least ``confirm.min_visible_frames`` frames (capped at the
    video's length) is posed: SMPL-H fitted to their landmarks over their span, everyone in a few
    batched optimisations instead of one each (the fixed cost of a step is most of a short fit).
    Anyone seen more briefly, or (``fit.check_reach``) whose fit reaches far past their box
    (models/anonymizer/pose/plausible.py), still gets an avatar: a neutral one fitted into their box
    (``Kind.FALLBACK_BOX``), never only erased. A posed avatar stays on screen through the frames
    the person was detected or bridged. Track ids are the people's indices."""
    need = max(1, min(int(settings.confirm.min_visible_frames), t_len))
    mapping = mapping_arrays(MEDIAPIPE_TO_SMPLH)
    to_fit = [(*p.landmarks[:3], p.landmarks[3], t_len, k) for k, p in enumerate(people)
              if len(p.frames_seen) >= need]
    for p in people:
        p.landmarks = None
    fitted = {item[5]: f for item, f in zip(to_fit, fit_over_spans(rest_joints, to_fit, camera, mapping,
                                                                    fit_config(settings.fit),
                                                                    settings.fit.batch_frames))}
    del to_fit
    for k, p in enumerate(people):  # compact at once: one whole-video track at a time
        tr, terms = fitted.pop(k, (None, {}))
        if tr is not None and settings.fit.check_reach:  # a fit far past the person's box (plausible.py)
            reach = reach_past_box(tr, p.boxes, p.frames_seen, rest_joints, camera)
            p.fit_failed = fit_disagrees(reach, settings.fit.max_reach, settings.fit.max_reach_share)
        if tr is None or p.fit_failed:
            p.kind, p.track = Kind.FALLBACK_BOX, box_track(p.boxes, camera, _body(), k, "body",
                                                           settings.confirm.box_smooth).compact()
            continue
        tr.track_id = k
        tr.valid = np.isfinite(p.boxes[:, 0])
        p.kind, p.track, p.reproj = Kind.POSED, tr.compact(), terms.get("reproj", float("nan"))


def bridge(people: list[Person], raw_boxes: list[np.ndarray], hw: tuple[int, int], settings: MediapipePoseSettings,
           read_frames) -> None:
    """Pass 6: each person past the frames they were seen (models/anonymizer/pose/bridge.py): held where they
    stopped being seen in the open, walked on, carried across a border, held before a late start
    behind someone else. Tracks are compact (their own frames) before and after; each is over the
    whole video only while it is bridged."""
    n = settings.max_gap
    for p in people:
        t_len = len(p.boxes)
        full = p.track.window(0, t_len)
        bridge_after_end(full, p.boxes, p.gap, hw, n, settings.bridge, read_frames)
        others = [raw_boxes[i] for i in range(len(raw_boxes)) if i not in p.raw_ids]
        bridge_before_late_start(full, p.boxes, p.gap, np.stack(others or [np.full((t_len, 4), np.nan, np.float32)]), n,
                   settings.bridge)
        bridge_across_border(full, p.boxes, p.gap, hw, n, settings.bridge)
        p.track = full.compact()


def assemble(people: list[Person], n_raw: int, rejected: set[int], camera: Camera, disc, diag: PoseDiagnostics,
             source: str) -> PoseResult:
    """Last: the result arrays, every raw id (``n_raw`` of discovery's, then the face people's)
    mapped to its person or to ``REJECTED_TRACK``, the diagnostics filled in."""
    from anonymask.models.anonymizer.pose.verify import REJECTED_TRACK

    if not people:
        if rejected:  # tracks found, none of them a person: their labels map to REJECTED_TRACK
            err = NoPersonError(f"{source}: no person found ({len(rejected)} track(s) found, none verified as a "
                                f"person)")
            err.instance_track = np.full(n_raw, REJECTED_TRACK, np.int32)
            raise err
        raise NoPersonError(f"{source}: no person found (no body detected in any frame, no face seen)")
    lut = np.full(max([n_raw - 1] + [i for p in people for i in p.raw_ids]) + 1, -1, np.int32)
    lut[sorted(rejected)] = REJECTED_TRACK
    for k, p in enumerate(people):
        lut[p.raw_ids] = k
    diag.people = [(p.kind, len(p.frames_seen), p.reproj) for p in people]
    diag.fits_failed = sum(p.fit_failed for p in people)
    diag.detections = dict(disc.sources)
    diag.links_refused_scale = disc.tracker.refused_scale
    scanner = getattr(disc, "scanner", None)
    if scanner is not None:  # what the landmark-model scan cost (its calls dominate pose4d's time)
        diag.scan_count, diag.scan_calls, diag.scan_skipped = scanner.scans, scanner.calls, scanner.skipped
        diag.scan_unchanged = scanner.unchanged_skipped
    res = PoseResult([p.track for p in people], camera, np.stack([p.boxes for p in people]).astype(np.float32),
                     diag.metrics(), report=diag)
    res.instance_track = lut
    res.gap = np.stack([p.gap for p in people])
    res.kinds = np.asarray([int(p.kind) for p in people], np.int8)
    return res


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
                          camera, mapping, cfg, batch_frames=b - a)[0]  # one person: one batch


def fit_over_spans(rest_joints, items, camera, mapping, cfg, batch_frames: int):
    """:func:`fit_over_span` of several people, ``items`` = [(kp2d, conf, world over the span,
    (a, b) the span, video length, track id)]: fitted together (models/anonymizer/pose/fit.py
    ``fit_tracks``: the same tracks as one by one) in batches of similar span lengths holding at
    most ``batch_frames`` padded frames. Returns [(track over the whole video, terms)] in the
    order of ``items``."""
    from anonymask.models.anonymizer.pose.fit import FitInput, fit_tracks
    from anonymask.models.shared.body.tracks import SMPLHTrack

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
    from anonymask.models.shared.body.model import get_body_model

    return get_body_model()


def estimate_people_by_shot(shots: list[tuple[int, int]], shape: tuple[int, int, int], rest_joints: np.ndarray,
                            settings: MediapipePoseSettings, *, detector, camera: Camera | None, source: str,
                            write_window, read_frames, paint_frame, relabel_frame, block: int) -> PoseResult:
    """:func:`estimate_people` on each shot [start, stop) of a video as if it were a video of its
    own (models/shared/shots.py: nobody is followed, held, linked, backfilled or extended across a cut),
    merged into one result over the whole video; ``block``: frames read at a time. Raw track ids
    (the instance labels) and track indices are numbered on from shot to shot, the diagnostics
    merged (:meth:`PoseDiagnostics.merge`). A shot where nobody is found adds nothing;
    NoPersonError only when no shot has anyone."""
    t_len, h, w = shape
    tracks, boxes, gaps, kinds, luts = [], [], [], [], []
    diag = PoseDiagnostics()
    camera = camera or default_camera(w, h)
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

        def shot_relabel(t, old, new, a=a, off=raw_off):
            if relabel_frame is not None:
                relabel_frame(a + t, old + off, new + off)

        try:
            res = estimate_people(windows(), (b - a, h, w), rest_joints, settings, detector=detector, camera=camera,
                                  source=source, write_window=shot_write, discovery=None,
                                  read_frames=lambda x, y, a=a: read_frames(a + x, a + y), paint_frame=shot_paint,
                                  relabel_frame=shot_relabel)
        except NoPersonError as err:
            # nobody here; its frames were written as it streamed: labels of tracks the
            # verification pass rejected keep their raw ids, which map to REJECTED_TRACK
            lut = getattr(err, "instance_track", None)
            if lut is not None:
                luts.append(lut)
                raw_off += len(lut)
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
        diag.merge(res.report)
    if not tracks:
        raise NoPersonError(f"{source}: no person found in any of its {len(shots)} shots")
    diag.shots = len(shots)
    out = PoseResult(tracks, camera, np.concatenate(boxes).astype(np.float32), diag.metrics(), report=diag)
    out.instance_track = np.concatenate(luts).astype(np.int32)
    out.gap = np.concatenate(gaps)
    out.kinds = np.concatenate(kinds)
    return out
