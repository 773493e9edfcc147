"""Keypoint conventions and their SMPL-H joint counterparts.

MediaPipe Pose gives 33 landmarks, the NTU Kinect skeleton 25 joints. Each maps to the SMPL-H
joint that sits at (about) the same anatomical place; weights say how much to trust the match
(mediapipe's hips sit lateral to SMPL's hip joints, so they count less).
"""

from __future__ import annotations

from anonymask.models.shared.body.tracks import JOINT_INDEX, NUM_SKELETON_JOINTS

#: MediaPipe Pose's landmark count (its landmark model also returns 6 auxiliary points after them)
N_LANDMARKS = 33
#: MediaPipe's face landmarks that place the head: nose, the eyes' centres and the ears
HEAD_LANDMARKS = (0, 2, 5, 7, 8)
#: MediaPipe's ear landmarks (their distance is the head's width)
EARS = (7, 8)

# (mediapipe index, SMPL-H joint name, weight)
MEDIAPIPE_TO_SMPLH: tuple[tuple[int, str, float], ...] = (
    (11, "left_shoulder", 1.0), (12, "right_shoulder", 1.0),
    (13, "left_elbow", 1.0), (14, "right_elbow", 1.0),
    (15, "left_wrist", 1.0), (16, "right_wrist", 1.0),
    (23, "left_hip", 0.7), (24, "right_hip", 0.7),
    (25, "left_knee", 1.0), (26, "right_knee", 1.0),
    (27, "left_ankle", 1.0), (28, "right_ankle", 1.0),
    (31, "left_foot", 0.5), (32, "right_foot", 0.5),
    (0, "head", 0.3),
)

# NTU RGB+D Kinect v2 joints (1-based in the docs; 0-based here) -> SMPL-H
NTU_TO_SMPLH: tuple[tuple[int, str, float], ...] = (
    (0, "pelvis", 1.0), (1, "spine2", 0.5), (2, "neck", 0.7), (3, "head", 0.7),
    (4, "left_shoulder", 1.0), (5, "left_elbow", 1.0), (6, "left_wrist", 1.0),
    (8, "right_shoulder", 1.0), (9, "right_elbow", 1.0), (10, "right_wrist", 1.0),
    (12, "left_hip", 0.8), (13, "left_knee", 1.0), (14, "left_ankle", 1.0), (15, "left_foot", 0.5),
    (16, "right_hip", 0.8), (17, "right_knee", 1.0), (18, "right_ankle", 1.0), (19, "right_foot", 0.5),
    (20, "spine3", 0.5),
)


def mapping_arrays(mapping):
    """(source indices, SMPL-H indices, weights) as lists."""
    src = [m[0] for m in mapping]
    dst = [JOINT_INDEX[m[1]] for m in mapping]
    w = [m[2] for m in mapping]
    return src, dst, w


#: the 22 body joints MPJPE is reported on (pelvis..right_wrist)
BODY_JOINTS = list(range(NUM_SKELETON_JOINTS))
