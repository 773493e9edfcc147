"""MediaPipe Pose (the model bundled in the wheel, model_complexity=1) on person crops.

MediaPipe's pose solution sees one person per image, so each tracked person box is cropped
(square, with margin), run separately, and its landmarks mapped back to frame pixels. World
landmarks (metres, hip-centred, camera-aligned axes) give the 3-D structure for fitting.
"""

from __future__ import annotations

import numpy as np

_POSE = None


def _pose():
    """One MediaPipe graph per process (loading it costs ~100 ms)."""
    global _POSE
    if _POSE is None:
        import mediapipe as mp

        _POSE = mp.solutions.pose.Pose(
            static_image_mode=True, model_complexity=1, enable_segmentation=False, min_detection_confidence=0.3
        )
    return _POSE


def _square_crop(frame: np.ndarray, box: np.ndarray, margin: float, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Crop a square around box (padding with black), resized to size; returns crop and (x0,y0,side)."""
    import cv2

    x0, y0, x1, y1 = box
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    side = max(x1 - x0, y1 - y0) * (1 + 2 * margin)
    side = max(side, 16.0)
    sx, sy = cx - side / 2, cy - side / 2
    scale = size / side
    m = np.array([[scale, 0, -sx * scale], [0, scale, -sy * scale]], np.float32)
    crop = cv2.warpAffine(frame, m, (size, size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT)
    return crop, np.array([sx, sy, side], np.float32)


def detect_keypoints(
    frames: np.ndarray, boxes: np.ndarray, margin: float = 0.25, size: int = 256
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For tracks' boxes (N,T,4) (NaN = absent) -> kp2d (N,T,33,2) px, conf (N,T,33), world (N,T,33,3)."""
    n, t_len = boxes.shape[:2]
    kp2d = np.zeros((n, t_len, 33, 2), np.float32)
    conf = np.zeros((n, t_len, 33), np.float32)
    world = np.zeros((n, t_len, 33, 3), np.float32)
    pose = _pose()
    for i in range(n):
        for t in range(t_len):
            b = boxes[i, t]
            if not np.all(np.isfinite(b)):
                continue
            crop, (sx, sy, side) = _square_crop(frames[t], b, margin, size)
            res = pose.process(np.ascontiguousarray(crop))
            if res.pose_landmarks is None:
                continue
            lm = res.pose_landmarks.landmark
            kp2d[i, t] = [[sx + p.x * side, sy + p.y * side] for p in lm]
            conf[i, t] = [p.visibility for p in lm]
            if res.pose_world_landmarks is not None:
                world[i, t] = [[p.x, p.y, p.z] for p in res.pose_world_landmarks.landmark]
    return kp2d, conf, world
