"""Tracks that are people: evidence over a raw track's life, and a pass that keeps or rejects it.

The landmark model hallucinates bodies on clutter (furniture, vehicles, shelves). Found once by
a scan or the full-frame detector, such a track is then followed by region tracking or held in
place for as long as the clutter stays, which on a long video is most of it. A person who stands
still is followed and held the same way, so "it does not move" alone cannot tell them apart.
:func:`track_evidence` summarises one discovery track (models/anonymizer/pose/discover.py ``_Track``) into a
typed :class:`TrackEvidence`; :func:`verify_tracks` is a pure pass over those records that returns
one typed :class:`Verdict` per track. What was measured and on which footage: docs/RESULTS.md
("Tracks that are people").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

import numpy as np

from anonymask.models.anonymizer.pose.settings import VerifySettings

#: sources of a detection that found the track anew (not followed from the frame before or held)
FRESH_SOURCES = ("frame", "tile", "crop", "scan", "search")
#: of those, the multi-person detector's (a person detector ahead of the landmark model)
DETECTOR_SOURCES = ("frame", "tile", "crop")
#: sources that followed the track from a neighbouring frame with the landmark model alone
FOLLOWED_SOURCES = ("track", "back")
#: the landmarks that say where a body is (shoulders, elbows, wrists, hips, knees, ankles, nose)
_BODY = (0, 11, 12, 13, 14, 15, 16, 23, 24, 25, 26, 27, 28)
#: bones of the body landmarks: shoulders, upper and lower arms, flanks, hips, thighs, shins
_BONES = ((11, 12), (11, 13), (13, 15), (12, 14), (14, 16), (11, 23), (12, 24), (23, 24), (23, 25), (25, 27),
          (24, 26), (26, 28))


class Reason(StrEnum):
    """Why a track was kept or rejected (the first rule that decided)."""

    DISABLED = "disabled"  # the pass is off
    SHORT = "short"  # too short a life to judge: kept
    SEEN = "seen"  # the landmark model sees a body there often enough: kept
    REFOUND = "refound"  # found anew after its first frame: kept
    MOVES = "moves"  # its body moved: kept
    HELD_UNSEEN = "held_unseen"  # long, held nearly all its life, never found again, never moved: rejected
    SCENE = "scene"  # its box shows the scene: the same pixels as where no track is (scene_match.py): rejected


@dataclass(frozen=True)
class TrackEvidence:
    """What one raw discovery track shows over its life (frame counts are frames of the video)."""

    raw_id: int
    first: int  # first frame
    last: int  # last frame
    frames: int  # frames with a detection of the track (any source)
    followed: int  # frames followed by region tracking (forwards or back)
    held: int  # frames held in place (no landmarks, last mask kept)
    fresh: int  # frames found anew: full-frame/tile/crop detector, scan or search
    detector: int  # of those, the multi-person detector's
    refound: int  # fresh frames after the first frame
    motion: float  # body landmark range over followed frames, in median box heights (NaN: none)
    jitter: float  # median frame-to-frame body landmark displacement, in median box heights (NaN: none)
    conf: float  # mean body landmark visibility over frames not held (0..1)
    bone_cv: float  # median over bones of the 3-D (world) bone length's std / mean over frames not held (NaN: none)
    height_frac: float  # median box height / frame height
    aspect: float  # median box height / width
    scene_share: float = float("nan")  # share of its samples whose box shows the scene (NaN: not measured)
    scene_hits: int = 0  # those samples

    @property
    def life(self) -> int:
        return self.last - self.first + 1


@dataclass(frozen=True)
class Verdict:
    raw_id: int
    keep: bool
    reason: Reason


def track_evidence(track, shape: tuple[int, int], t_len: int, settings: VerifySettings) -> TrackEvidence:
    """The evidence of one discovery track (``_Track``: ``tid`` and ``frames`` {t: Detection})."""
    ts = sorted(track.frames)
    dets = [track.frames[t] for t in ts]
    src = [d.source for d in dets]
    boxes = np.array([d.box for d in dets], np.float64)
    heights = np.maximum(boxes[:, 3] - boxes[:, 1], 1.0)
    widths = np.maximum(boxes[:, 2] - boxes[:, 0], 1.0)
    hmed = float(np.median(heights))
    live = [k for k, s in enumerate(src) if s != "hold"]
    idx = np.array(_BODY)
    motion = jitter = float("nan")
    if live:
        kp = np.array([dets[k].kp2d[idx] for k in live], np.float64)  # (n, J, 2)
        ok = np.array([dets[k].conf[idx] >= settings.landmark_conf for k in live])  # (n, J)
        ranges = []
        for j in range(len(idx)):
            pts = kp[ok[:, j], j]
            if len(pts) >= 2:
                q = settings.motion_percentile
                lo, hi = np.percentile(pts, [q, 100.0 - q], axis=0)
                ranges.append(float(np.linalg.norm(hi - lo)))
        if ranges:
            motion = float(np.median(ranges)) / hmed
        steps = []
        for a, b in zip(live[:-1], live[1:]):
            if ts[b] - ts[a] == 1:
                both = (dets[a].conf[idx] >= settings.landmark_conf) & (dets[b].conf[idx] >= settings.landmark_conf)
                if both.any():
                    steps.append(float(np.median(np.linalg.norm(dets[b].kp2d[idx][both] - dets[a].kp2d[idx][both],
                                                                axis=-1))))
        if steps:
            jitter = float(np.median(steps)) / hmed
    bone_cv = float("nan")
    if len(live) >= 2:
        world = np.array([dets[k].world for k in live], np.float64)
        vis = np.array([dets[k].conf for k in live])
        cvs = []
        for a, b in _BONES:
            ok = (vis[:, a] >= settings.landmark_conf) & (vis[:, b] >= settings.landmark_conf)
            if ok.sum() >= 2:
                length = np.linalg.norm(world[ok, a] - world[ok, b], axis=-1)
                if length.mean() > 0:
                    cvs.append(float(length.std() / length.mean()))
        if cvs:
            bone_cv = float(np.median(cvs))
    fresh = [k for k, s in enumerate(src) if s in FRESH_SOURCES]
    return TrackEvidence(
        raw_id=int(track.tid), first=int(ts[0]), last=int(ts[-1]), frames=len(ts),
        followed=sum(s in FOLLOWED_SOURCES for s in src), held=src.count("hold"), fresh=len(fresh),
        detector=sum(s in DETECTOR_SOURCES for s in src), refound=sum(1 for k in fresh if k > 0),
        motion=motion, jitter=jitter,
        conf=float(np.mean([dets[k].conf[idx].mean() for k in live])) if live else 0.0, bone_cv=bone_cv,
        height_frac=hmed / float(shape[0]), aspect=float(np.median(heights / widths)))


def verify_tracks(evidence: list[TrackEvidence], settings: VerifySettings) -> list[Verdict]:
    """Keep or reject each track on its evidence (pure: same evidence and settings, same verdicts).
    A track is rejected when its box shows the scene (its pixels are those of the place with nobody
    found on it, nearly all its life), or when every rule that could keep it fails (privacy first)."""
    out = []
    for ev in evidence:
        scene = settings.scene
        if not settings.enabled:
            out.append(Verdict(ev.raw_id, True, Reason.DISABLED))
        elif scene.enabled and ev.scene_hits >= scene.min_samples and ev.scene_share >= scene.min_share:
            out.append(Verdict(ev.raw_id, False, Reason.SCENE))
        elif ev.life < settings.min_life_frames:
            out.append(Verdict(ev.raw_id, True, Reason.SHORT))
        elif ev.held < settings.min_held_share * ev.frames:
            out.append(Verdict(ev.raw_id, True, Reason.SEEN))
        elif ev.refound >= settings.keep_refound and ev.refound >= settings.min_refound_per_held * ev.held:
            out.append(Verdict(ev.raw_id, True, Reason.REFOUND))
        elif np.isfinite(ev.motion) and ev.motion >= settings.keep_motion_heights:
            out.append(Verdict(ev.raw_id, True, Reason.MOVES))
        else:
            out.append(Verdict(ev.raw_id, False, Reason.HELD_UNSEEN))
    return out


#: ``pose/instance_track`` value of a raw track the pass rejected: not a person, no avatar, and its
#: instance pixels are background for segment (models/anonymizer/segment/tracks.py ``without_rejected``); -1 stays
#: "a person without a posed track of its own"
REJECTED_TRACK = -2


def with_scene(evidence: list[TrackEvidence], raw_boxes: list[np.ndarray], read_frames,
               settings: VerifySettings) -> list[TrackEvidence]:
    """``evidence`` with the scene-match cue (models/anonymizer/pose/scene_match.py) filled in;
    unchanged when the cue is off or no frames can be read."""
    if not settings.scene.enabled or read_frames is None or not evidence:
        return evidence
    from anonymask.models.anonymizer.pose.scene_match import track_scene_shares

    shares = track_scene_shares(raw_boxes, [ev.raw_id for ev in evidence], read_frames, settings.scene)
    return [replace(ev, scene_share=shares[ev.raw_id][0], scene_hits=shares[ev.raw_id][1]) for ev in evidence]


def verify_discovery(tracks, shape: tuple[int, int], t_len: int, settings: VerifySettings, raw_boxes: list[np.ndarray],
                     read_frames) -> tuple[set[int], int, int]:
    """The raw ids of discovery's ``tracks`` (``PersonDiscovery.tracker.tracks``) the pass rejects,
    their frames, and how many were rejected because their box shows the scene. ``raw_boxes``: each raw track's (T, 4) boxes (index = raw id); ``read_frames(a, b)``
    the video's frames for the scene cue (None: not measured)."""
    evidence = [track_evidence(tr, shape, t_len, settings) for tr in tracks if tr.frames]
    evidence = with_scene(evidence, raw_boxes, read_frames, settings)
    verdicts = verify_tracks(evidence, settings)
    rejected = {v.raw_id for v in verdicts if not v.keep}
    scene = sum(v.reason == Reason.SCENE for v in verdicts)
    return rejected, sum(ev.frames for ev in evidence if ev.raw_id in rejected), scene
