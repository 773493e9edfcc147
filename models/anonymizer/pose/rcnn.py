"""Weight-backed person detector for GPU users: torchvision Keypoint R-CNN + Mask R-CNN.

The offline default finds people with MediaPipe's face-keyed BlazePose detector and the landmark
scan (models/anonymizer/pose/people.py, scan.py). With weights, ``pose4d.detector: rcnn`` replaces the
detector by torchvision's COCO person models, which find people by their whole body:

- ``keypointrcnn_resnet50_fpn``: person boxes + 17 COCO keypoints;
- ``maskrcnn_resnet50_fpn`` (optional): person instance masks, matched to the boxes by IoU.

Each person box is handed to the pose landmark model on the region its keypoints span (as for a
MediaPipe detection), so tracking, world landmarks and the SMPL-H fit stay the same; the instance
mask is Mask R-CNN's where it is loaded (sharper than the landmark model's), else the landmark
model's. A box the landmark model cannot follow still becomes a detection (keypoints mapped to the
33-landmark layout, no world landmarks), so no person the detector saw is dropped.

Weights: only from ``$ANONYMASK_WEIGHTS/torchvision/`` (torchvision's own state-dict files, the
names below); a missing file raises :class:`MissingWeightsError` naming it. Nothing is downloaded.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import numpy as np
from pydantic import Field

from anonymask.core.errors import MissingWeightsError
from anonymask.core.registry import register
from anonymask.models.anonymizer.pose.keypoints import N_LANDMARKS
from anonymask.models.anonymizer.pose.people import BODY_LANDMARKS, Detection, box_iou
from anonymask.models.anonymizer.pose.settings import DiscoverSettings

KEYPOINT_FILE = "keypointrcnn_resnet50_fpn_coco-fc266e95.pth"
MASK_FILE = "maskrcnn_resnet50_fpn_coco-bf2d0c1e.pth"
SUBDIR = "torchvision"
URL = "https://download.pytorch.org/models/"

#: the landmark model's person flag and body-landmark visibility a region around an R-CNN person must
#: reach for their landmarks and mask to come from it, and the landmark visibility that sizes the
#: region: the values discovery follows people with (pose4d.discover.follow_min_flag,
#: follow_min_score, region_conf)
_FOLLOW = DiscoverSettings()
ROI_MIN_FLAG, ROI_MIN_SCORE, ROI_LANDMARK_CONF = _FOLLOW.follow_min_flag, _FOLLOW.follow_min_score, _FOLLOW.region_conf

#: COCO keypoint k -> MediaPipe/BlazePose landmark index
COCO_TO_BLAZEPOSE = (0, 2, 5, 7, 8, 11, 12, 13, 14, 15, 16, 23, 24, 25, 26, 27, 28)


def weights_dir(root: str | os.PathLike | None = None) -> Path:
    from anonymask.core.paths import weights_root

    base = Path(root) if root is not None else weights_root()
    if base is None:
        raise MissingWeightsError("torchvision Keypoint R-CNN", [f"{SUBDIR}/{KEYPOINT_FILE}"],
                                  f"ANONYMASK_WEIGHTS is not set; get the files from {URL}")
    return base / SUBDIR


def check_rcnn_files(root: str | os.PathLike | None = None, masks: bool = True) -> Path:
    """The folder holding the state-dict files, or :class:`MissingWeightsError` naming each missing one."""
    d = weights_dir(root)
    need = [KEYPOINT_FILE] + ([MASK_FILE] if masks else [])
    missing = [f"{SUBDIR}/{f}" for f in need if not (d / f).is_file()]
    if missing:
        raise MissingWeightsError("torchvision Keypoint R-CNN / Mask R-CNN (pose4d.detector=rcnn)", missing,
                                  f"download them from {URL}<file name>")
    return d


def load_rcnn(root: str | os.PathLike | None = None, masks: bool = True, device: str = "cpu"):
    """(keypoint model, mask model or None), eval mode, from the state-dict files under
    ``<root>/torchvision/`` (root default ``$ANONYMASK_WEIGHTS``)."""
    d = check_rcnn_files(root, masks)
    from anonymask.core.compat import ensure_torchvision

    ensure_torchvision()  # torchvision ops on CPU-only torch
    import torch
    from torchvision.models.detection import keypointrcnn_resnet50_fpn, maskrcnn_resnet50_fpn
    kp = keypointrcnn_resnet50_fpn(weights=None, weights_backbone=None)
    kp.load_state_dict(torch.load(d / KEYPOINT_FILE, map_location="cpu", weights_only=True))
    mk = None
    if masks:
        mk = maskrcnn_resnet50_fpn(weights=None, weights_backbone=None)
        mk.load_state_dict(torch.load(d / MASK_FILE, map_location="cpu", weights_only=True))
    return kp.eval().to(device), (mk.eval().to(device) if mk is not None else None)


def coco_to_landmarks(kps: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(17,3) COCO keypoints (x, y, visible) and their (17,) logits -> (33,2) pixels, (33,) conf."""
    kp2d = np.zeros((N_LANDMARKS, 2), np.float32)
    conf = np.zeros(N_LANDMARKS, np.float32)
    idx = list(COCO_TO_BLAZEPOSE)
    kp2d[idx] = kps[:, :2]
    conf[idx] = 1.0 / (1.0 + np.exp(-np.asarray(scores, np.float32)))
    return kp2d, conf


@register("person_detector", "rcnn", weights="torchvision", runtime=("roi",),
          check=lambda s: check_rcnn_files(s["root"], s["masks"]))
class RCNNPeopleDetector:
    """Same interface as :class:`PeopleDetector` (``detect``, ``detect_region``)."""

    #: finds people by their whole body, independently of the landmark model: discovery lets its box of
    #: a followed person overrule the landmark model's (DiscoverSettings.detector_over_follow_iou)
    whole_body = True

    def __init__(
        self,
        root: str | os.PathLike | None = None,
        masks: bool = True,
        min_score: Annotated[float, Field(ge=0.0, le=1.0)] = 0.6,
        device: str | None = None,
        roi=None,
        min_size: int = 512,
        max_people: Annotated[int, Field(ge=1)] = 20,
        mask_score_share: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5,
        mask_iou: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5,
        landmark_iou: Annotated[float, Field(ge=0.0, le=1.0)] = 0.3,
    ):
        """``min_score``: the keypoint model's person score; Mask R-CNN's masks are taken from its
        people scored at ``mask_score_share`` x that (the two models rank a person differently)
        whose box has IoU > ``mask_iou`` with the keypoint person's. ``landmark_iou``: the box IoU
        the landmark model's person, run on the region the keypoints span, needs with the R-CNN
        box to be that person (below it went to someone else: the R-CNN keypoints are kept)."""
        import torch

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.kp, self.mask = load_rcnn(root, masks, self.device)
        for m in (self.kp, self.mask):
            if m is not None:
                m.transform.min_size = (int(min_size),)
                m.roi_heads.detections_per_img = int(max_people)
        self.min_score = float(min_score)
        self.mask_score_share, self.mask_iou, self.landmark_iou = mask_score_share, mask_iou, landmark_iou
        self._roi = roi

    @property
    def roi(self):
        if self._roi is None:
            from anonymask.models.anonymizer.pose.roi import RoiLandmarker

            self._roi = RoiLandmarker(ROI_MIN_FLAG)
        return self._roi

    def _infer(self, image: np.ndarray):
        import torch

        x = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1).float().div(255.0).to(self.device)
        with torch.inference_mode():
            k = self.kp([x])[0]
            m = self.mask([x])[0] if self.mask is not None else None
        keep = (k["labels"] == 1) & (k["scores"] >= self.min_score)
        boxes = k["boxes"][keep].cpu().numpy()
        kps = k["keypoints"][keep].cpu().numpy()
        kps_scores = k["keypoints_scores"][keep].cpu().numpy()
        scores = k["scores"][keep].cpu().numpy()
        masks = [None] * len(boxes)
        if m is not None:
            mp = (m["labels"] == 1) & (m["scores"] >= self.mask_score_share * self.min_score)
            mboxes = m["boxes"][mp].cpu().numpy()
            mmasks = m["masks"][mp, 0].cpu().numpy()
            for i, b in enumerate(boxes):
                ious = [box_iou(b, mb) for mb in mboxes]
                if ious and max(ious) > self.mask_iou:
                    masks[i] = mmasks[int(np.argmax(ious))].astype(np.float32)
        return boxes, kps, kps_scores, scores, masks

    def detect(self, frame: np.ndarray) -> list[Detection]:
        from anonymask.models.anonymizer.pose.roi import roi_from_landmarks

        h, w = frame.shape[:2]
        out = []
        for box, kps, ks, _score, mask in zip(*self._infer(frame)):
            kp2d, conf = coco_to_landmarks(kps, ks)
            d = None
            roi = roi_from_landmarks(kp2d, conf, ROI_LANDMARK_CONF)
            if roi is not None:
                d, nxt, _ = self.roi.track(frame, roi, ROI_MIN_SCORE)
                if d is not None and box_iou(d.box, box) < self.landmark_iou:
                    d = None  # the landmark model went to someone else
                if d is not None:
                    d.roi_next = nxt
            if d is None:
                full = mask if mask is not None else _box_mask(box, h, w)
                x0, y0 = int(max(0, np.floor(box[0]))), int(max(0, np.floor(box[1])))
                x1, y1 = int(min(w, np.ceil(box[2]))), int(min(h, np.ceil(box[3])))
                d = Detection(box.astype(np.float32), kp2d, conf, np.zeros((N_LANDMARKS, 3), np.float32),
                              full[y0:y1, x0:x1].copy(), (x0, y0, x1, y1),
                              float(conf[list(BODY_LANDMARKS)].mean()), "frame")
            elif mask is not None:  # Mask R-CNN's instance mask instead of the landmark model's
                x0, y0, x1, y1 = d.region
                d.mask = np.maximum(mask[y0:y1, x0:x1], 0.0).astype(np.float32)
            d.source = "frame"
            out.append(d)
        return out

    def detect_region(self, frame: np.ndarray, x0: float, y0: float, side: float, source: str = "crop") -> list[Detection]:
        """Detections whose box centre lies in the square region (the models see the whole frame)."""
        out = []
        for d in self.detect(frame):
            cx, cy = (d.box[0] + d.box[2]) / 2, (d.box[1] + d.box[3]) / 2
            if x0 <= cx <= x0 + side and y0 <= cy <= y0 + side:
                d.source = source
                out.append(d)
        return out

    def close(self) -> None:
        pass


def _box_mask(box: np.ndarray, h: int, w: int) -> np.ndarray:
    m = np.zeros((h, w), np.float32)
    x0, y0 = int(max(0, np.floor(box[0]))), int(max(0, np.floor(box[1])))
    x1, y1 = int(min(w, np.ceil(box[2]))), int(min(h, np.ceil(box[3])))
    m[y0:y1, x0:x1] = 1.0
    return m
