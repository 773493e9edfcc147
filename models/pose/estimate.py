"""4-D pose backends: video (+ optional skeleton) -> SMPL-H tracks + camera.

- ``mediapipe``: every person found on every frame by MediaPipe's multi-person pose landmarker
  (models/pose/people.py; no motion cue, so people who stand still are found), linked into tracks
  (models/pose/discover.py); SMPL-H fitted to each track's 2-D and 3-D world landmarks.
- ``gt``: ground-truth tracks (synthetic data) passed through, for ablations.
Camera: principal point at the centre, focal length from an assumed horizontal field of view
(datasets rarely ship intrinsics for their RGB videos).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from anonymask.errors import NoPersonError
from anonymask.models.body.tracks import Camera, SMPLHTrack
from anonymask.models.pose.fit import FitConfig, fit_track
from anonymask.models.pose.keypoints import MEDIAPIPE_TO_SMPLH, mapping_arrays


@dataclass
class PoseResult:
    tracks: list[SMPLHTrack]
    camera: Camera
    boxes: np.ndarray  # (N,T,4) person boxes (NaN where absent)
    diagnostics: dict[str, float] = field(default_factory=dict)
    instance_track: np.ndarray | None = None  # raw track id -> posed track index (-1: none)
    gap: np.ndarray | None = None  # (N,T) bool: frames bridged between detections


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
    tiles: bool = True,
    fit: FitConfig | None = None,
    source: str = "video",
    discovery=None,
    read_frames=None,
    paint_frame=None,
    backfill: bool = True,
) -> PoseResult:
    """Tracks of every person the multi-person detector finds, streamed over frame windows.

    ``windows`` yields (t0, frames (n,H,W,3) uint8) in order; ``write_window(t0, labels (n,H,W)
    uint16, prob (n,H,W) float32)`` receives the instance labels (raw track id + 1) and person
    probability of each window. Nothing here holds more than one window of frames.

    A track seen in fewer than ``min_visible_frames`` frames (capped at the video length) is not
    posed: it is counted in ``diagnostics["unconfirmed_tracks"]``, its pixels stay in the person
    probability (so they are removed) and the audit looks at the output. ``result.instance_track``
    maps raw track ids to posed track indices (-1: unconfirmed). With ``read_frames(a, b)``, tracks
    that start late are followed backwards (``PersonDiscovery.backfill``) and each earlier detection
    is handed to ``paint_frame(t, detection, raw id)``.
    """
    from anonymask.models.pose.discover import PersonDiscovery, fill_gaps

    t_len, h, w = shape
    camera = camera or default_camera(w, h)
    disc = discovery or PersonDiscovery(keyframe_every=keyframe_every, tiles=tiles, max_gap=max_gap)
    for t0, frames in windows:
        outs = [disc.push(f) for f in frames]
        if write_window is not None:
            write_window(t0, np.stack([o.labels for o in outs]), np.stack([o.prob for o in outs]))
    if read_frames is not None and backfill:
        for t, d, tid in disc.backfill(read_frames, t_len):
            if paint_frame is not None:
                paint_frame(t, d, tid)
    raw = disc.tracks(t_len)
    need = max(1, min(int(min_visible_frames), t_len))
    mapping = mapping_arrays(MEDIAPIPE_TO_SMPLH)
    lut = np.full(len(raw), -1, np.int32)
    tracks, boxes, gaps, diag = [], [], [], {}
    unconfirmed = 0
    for rid, (frames_seen, kp2d, conf, world, bx) in enumerate(raw):
        if len(frames_seen) < need:
            unconfirmed += 1
            continue
        filled, gap = fill_gaps(bx, max_gap)
        tr, terms = fit_track(rest_joints, kp2d, conf, camera, mapping, kp3d=world, track_id=len(tracks), cfg=fit)
        # the avatar stays on screen through the frames the person was detected or bridged
        tr.valid = np.isfinite(filled[:, 0])
        lut[rid] = len(tracks)
        diag[f"track{len(tracks)}_reproj"] = terms.get("reproj", float("nan"))
        diag[f"track{len(tracks)}_frames"] = float(len(frames_seen))
        tracks.append(tr)
        boxes.append(filled)
        gaps.append(gap)
    diag["unconfirmed_tracks"] = float(unconfirmed)
    diag.update({f"detections_{k}": float(v) for k, v in disc.sources.items()})
    if not tracks:
        why = "detections in too few frames to form a track" if raw else "no person detected in any frame"
        raise NoPersonError(f"{source}: no person found ({why})")
    res = PoseResult(tracks, camera, np.stack(boxes).astype(np.float32), diag)
    res.instance_track = lut
    res.gap = np.stack(gaps)
    return res
