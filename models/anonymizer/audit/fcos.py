"""Weight-backed audit detector for users with weights: torchvision's FCOS person detector.

The offline audit detectors (BlazeFace, HOG; models/anonymizer/audit/detectors.py) are weak on small people:
on the synthetic demo and hard sets they found none of the leaks the ground-truth check found
(docs/RESULTS.md). A COCO-trained detector sees whole bodies down to a few tens of pixels. FCOS is
chosen because it is a *different model* from the weight-backed discovery detector
(``pose4d.detector: rcnn``, two-stage Keypoint/Mask R-CNN): one-stage, anchor-free, its own heads,
so the audit does not inherit the blind spots of the model that found the people. (Both learned
from COCO; a person unlike anything in COCO can still fool both.)

Weights: only from ``$ANONYMASK_WEIGHTS/torchvision/`` (torchvision's own state-dict file named
below); a missing file raises :class:`MissingWeightsError` naming it. Nothing is downloaded.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import numpy as np
from pydantic import Field

from anonymask.core.errors import MissingWeightsError
from anonymask.core.registry import register

FCOS_FILE = "fcos_resnet50_fpn_coco-99b0c9b7.pth"
SUBDIR = "torchvision"
URL = "https://download.pytorch.org/models/"
COCO_PERSON = 1


def fcos_path(root: str | os.PathLike | None = None) -> Path:
    """The weight file under ``<root>/torchvision/`` (root default ``$ANONYMASK_WEIGHTS``), or
    :class:`MissingWeightsError` naming it."""
    from anonymask.core.paths import weights_root

    base = Path(root) if root is not None else weights_root()
    what = "torchvision FCOS person detector (audit.detectors: fcos)"
    if base is None:
        raise MissingWeightsError(what, [f"{SUBDIR}/{FCOS_FILE}"], f"ANONYMASK_WEIGHTS is not set; get the file from {URL}")
    path = base / SUBDIR / FCOS_FILE
    if not path.is_file():
        raise MissingWeightsError(what, [str(path)], f"download it from {URL}{FCOS_FILE}")
    return path


def load_fcos(root: str | os.PathLike | None = None, device: str = "cpu"):
    """FCOS ResNet-50 FPN in eval mode from :func:`fcos_path`."""
    path = fcos_path(root)
    from anonymask.core.compat import ensure_torchvision

    ensure_torchvision()  # torchvision ops on CPU-only torch
    import torch
    from torchvision.models.detection import fcos_resnet50_fpn

    model = fcos_resnet50_fpn(weights=None, weights_backbone=None)
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return model.eval().to(device)


@register("audit", "fcos", weights="torchvision", check=lambda s: fcos_path(s["root"]))
class FcosAuditor:
    """COCO person boxes from FCOS (``detect(frame) -> [("body", box, score)]``).

    Frames whose short side is below ``upscale_below`` are enlarged to ``min_size`` (the model's
    own resize), so a person a few tens of pixels tall in a small frame is seen at a size the
    detector was trained on. No second model is asked: the score threshold is the confirmation,
    and :func:`audit_frames` still needs the same place in several audited frames."""

    def __init__(
        self,
        root: str | None = None,
        min_score: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5,
        min_size: Annotated[int, Field(ge=64)] = 800,
        upscale_below: Annotated[int, Field(ge=0)] = 800,
        device: str | None = None,
        max_people: int = 50,
    ):
        import torch

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model = load_fcos(root, self.device)
        self.min_score = float(min_score)
        self.min_size = int(min_size)
        self.upscale_below = int(upscale_below)
        self.model.score_thresh = self.min_score
        self.model.detections_per_img = int(max_people)

    def detect(self, frame: np.ndarray) -> list[tuple[str, np.ndarray, float]]:
        import torch

        h, w = frame.shape[:2]
        # torchvision resizes the short side to min_size; keep a large frame's own size
        self.model.transform.min_size = (self.min_size if min(h, w) < self.upscale_below else min(h, w),)
        self.model.transform.max_size = max(1333, int(np.ceil(max(h, w) * self.model.transform.min_size[0] / min(h, w))))
        x = torch.from_numpy(np.ascontiguousarray(frame)).permute(2, 0, 1).float().div(255.0).to(self.device)
        with torch.inference_mode():
            out = self.model([x])[0]
        keep = (out["labels"] == COCO_PERSON) & (out["scores"] >= self.min_score)
        boxes = out["boxes"][keep].cpu().numpy().astype(np.float32)
        scores = out["scores"][keep].cpu().numpy()
        boxes = np.clip(boxes, 0, [w, h, w, h]).astype(np.float32)
        return [("body", b, float(s)) for b, s in zip(boxes, scores)]
