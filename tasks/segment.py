"""Stage ``segment``: person mask q = segmentation OR fitted-body silhouettes, unflickered, grown,
feathered; one feathered mask per track for reintegration. Records ``mask_iou`` vs ground truth."""

from __future__ import annotations

from typing import Any

import numpy as np

from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.tasks.common import stage


def _to_u8(alpha: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(np.asarray(alpha, np.float32) * 255), 0, 255).astype(np.uint8)


@stage("segment", deps=("ingest", "pose4d", "render"))
def run(entry: VideoEntry, cfg: dict[str, Any], w: StageWriter) -> None:
    from anonymask.models.metrics import mask_iou
    from anonymask.models.segment.backends import get_segmenter
    from anonymask.models.segment.masks import build_person_masks, person_mask

    backend = cfg.get("backend", "mediapipe")
    if backend == "gt":
        prob = entry.read("gt/person_mask").astype(np.float32)
    elif backend == "mediapipe" and entry.has_array("pose/person_prob"):
        prob = entry.read("pose/person_prob").astype(np.float32) / 255.0  # computed by pose4d
    else:
        prob = np.asarray(get_segmenter(backend).segment(entry.read("raw")), np.float32)
    sil = entry.read("render/track_masks") if cfg.get("union_silhouette", True) else None
    seg_prob = prob
    if cfg.get("box_fill", True):
        from anonymask.models.segment.boxes import box_masks

        tm = sil if sil is not None else entry.read("render/track_masks")
        det_boxes = entry.read("pose/boxes") if entry.has_array("pose/boxes") else None
        boxes = box_masks(prob.shape, tm, det_boxes, margin=float(cfg.get("box_margin", 0.15)))
        prob = np.maximum(prob, boxes.astype(np.float32))
    silhouettes = [sil[:, j] for j in range(sil.shape[1])] if sil is not None else None
    thr = float(cfg.get("threshold", 0.5))
    pm = build_person_masks(prob, silhouettes, threshold=thr, window=int(cfg.get("unflicker", 2)),
                            grow_pixels=int(cfg.get("grow", 4)), sigma=float(cfg.get("feather", 2.0)))
    w.write("person_hole", pm.hole)
    w.write("person_mask", _to_u8(pm.alpha))
    if pm.track_alphas:
        w.write("person_track_alphas", np.stack([_to_u8(a) for a in pm.track_alphas], axis=1))
    if entry.has_array("gt/person_mask"):
        # segmentation quality: the mask before box filling (q itself is the box-filled superset)
        raw_mask = person_mask(seg_prob, silhouettes, thr)
        w.metric(mask_iou=mask_iou(raw_mask, entry.read("gt/person_mask")))
    w.metric(person_fraction=float(pm.hole.mean()))
