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


def merge_duplicate_tracks(kp2d, conf, world, boxes, joints, min_conf: float = 0.3, same: float = 0.25):
    """One person found through several regions (an arm split from the body, a shadow next to it)
    gives several tracks with the same landmarks. Tracks whose landmarks coincide (median distance
    below ``same`` x body size on shared frames) are merged into the one seen most often."""
    seen = (conf[:, :, joints] >= min_conf).sum(2) >= 4  # (N,T)
    order = np.argsort(-seen.sum(1))
    kept: list[int] = []
    for i in order:
        dup = None
        for k in kept:
            both = seen[i] & seen[k]
            if not both.any():
                continue
            a, b = kp2d[i][both][:, joints], kp2d[k][both][:, joints]
            size = np.ptp(b, axis=1).max(-1).clip(min=1.0)
            d = np.linalg.norm(a - b, axis=-1).mean(-1) / size
            if np.median(d) < same:
                dup = k
                break
        if dup is None:
            kept.append(int(i))
            continue
        fill = seen[i] & ~seen[dup]
        kp2d[dup][fill], conf[dup][fill], world[dup][fill] = kp2d[i][fill], conf[i][fill], world[i][fill]
        seen[dup] |= fill
        gap = ~np.isfinite(boxes[dup, :, 0]) & np.isfinite(boxes[i, :, 0])
        boxes[dup][gap] = boxes[i][gap]
    kept.sort()
    return kp2d[kept], conf[kept], world[kept], boxes[kept]


def estimate_mediapipe(
    frames: np.ndarray,
    person_prob: np.ndarray,
    rest_joints: np.ndarray,
    *,
    camera: Camera | None = None,
    threshold: float = 0.5,
    min_visible_frames: int = 2,
    min_landmark_fraction: float = 0.25,
    min_track_fraction: float = 0.2,
    min_relative_height: float = 0.3,
    min_area_frac: float = 0.002,
    fit: FitConfig | None = None,
    source: str = "video",
) -> PoseResult:
    """Tracks of every person visible in at least ``min_visible_frames`` frames."""
    from anonymask.models.pose.mediapipe_pose import detect_keypoints

    t_len, h, w = frames.shape[:3]
    camera = camera or default_camera(w, h)
    per_frame = [frame_boxes(p, threshold, min_area_frac=min_area_frac) for p in person_prob]
    boxes = link_tracks(per_frame, min_length=min_visible_frames)
    if len(boxes) == 0:
        raise NoPersonError(f"{source}: no person found (segmentation found no person region in any frame)")
    kp2d, conf, world = detect_keypoints(frames, boxes)
    mapping = mapping_arrays(MEDIAPIPE_TO_SMPLH)
    kp2d, conf, world, boxes = merge_duplicate_tracks(kp2d, conf, world, boxes, mapping[0])
    tracks, diag = [], {}
    heights = np.array([np.nanmedian(b[:, 3] - b[:, 1]) for b in boxes])
    for i in range(len(boxes)):
        # far smaller than the main person: a fragment, an object or background motion
        if heights[i] < min_relative_height * np.nanmax(heights):
            continue
        seen = (conf[i][:, mapping[0]] >= 0.3).sum(1) >= 4
        present = np.isfinite(boxes[i, :, 0]).sum()
        # regions where the pose model rarely finds a body are not people (shadows, moving objects)
        if seen.sum() < max(min_visible_frames, min_landmark_fraction * present, min_track_fraction * t_len):
            continue
        tr, terms = fit_track(rest_joints, kp2d[i], conf[i], camera, mapping, kp3d=world[i],
                              track_id=len(tracks), cfg=fit)
        tracks.append(tr)
        diag[f"track{len(tracks) - 1}_reproj"] = terms.get("reproj", float("nan"))
    if not tracks:
        raise NoPersonError(f"{source}: no person found (person regions seen, but no body landmarks in them)")
    return PoseResult(tracks, camera, boxes, diag)
