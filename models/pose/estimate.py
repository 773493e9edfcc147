"""4-D pose backends: video (+ optional skeleton) -> SMPL-H tracks + camera.

- ``mediapipe``: person regions from a segmentation map, tracked over time; MediaPipe Pose on
  each person's crop; SMPL-H fitted to its 2-D landmarks and 3-D world landmarks.
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
from anonymask.models.pose.tracking import frame_boxes, link_tracks


@dataclass
class PoseResult:
    tracks: list[SMPLHTrack]
    camera: Camera
    boxes: np.ndarray  # (N,T,4) person boxes (NaN where absent)
    diagnostics: dict[str, float] = field(default_factory=dict)


def default_camera(width: int, height: int, fov_deg: float = 60.0) -> Camera:
    return Camera.from_fov(width, height, fov_deg)


def estimate_mediapipe(
    frames: np.ndarray,
    person_prob: np.ndarray,
    rest_joints: np.ndarray,
    *,
    camera: Camera | None = None,
    threshold: float = 0.5,
    min_visible_frames: int = 2,
    fit: FitConfig | None = None,
    source: str = "video",
) -> PoseResult:
    """Tracks of every person visible in at least ``min_visible_frames`` frames."""
    from anonymask.models.pose.mediapipe_pose import detect_keypoints

    t_len, h, w = frames.shape[:3]
    camera = camera or default_camera(w, h)
    per_frame = [frame_boxes(p, threshold) for p in person_prob]
    boxes = link_tracks(per_frame, min_length=min_visible_frames)
    if len(boxes) == 0:
        raise NoPersonError(f"{source}: no person found (segmentation found no person region in any frame)")
    kp2d, conf, world = detect_keypoints(frames, boxes)
    mapping = mapping_arrays(MEDIAPIPE_TO_SMPLH)
    tracks, diag = [], {}
    for i in range(len(boxes)):
        seen = (conf[i][:, mapping[0]] >= 0.3).sum(1) >= 4
        if seen.sum() < min_visible_frames:
            continue
        tr, terms = fit_track(rest_joints, kp2d[i], conf[i], camera, mapping, kp3d=world[i],
                              track_id=len(tracks), cfg=fit)
        tracks.append(tr)
        diag[f"track{len(tracks) - 1}_reproj"] = terms.get("reproj", float("nan"))
    if not tracks:
        raise NoPersonError(f"{source}: no person found (person regions seen, but no body landmarks in them)")
    return PoseResult(tracks, camera, boxes, diag)
