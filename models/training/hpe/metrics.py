"""Pose accuracy: PCKh@0.5 (the paper's metric, MPII's protocol) and PCK@0.2 of the keypoint box.

PCKh@a: a keypoint is correct when its error is <= a * head size; the score is the fraction of
correct keypoints over all annotated ones (pooled over the set: "mean PCKh" as reported on MPII
weighs joints by their count). MPII's head size is the upper-neck-to-head-top length (0.6 x the
head box diagonal). Our bodies carry no head-top point: SMPL-H's head joint sits at the skull base,
about 7 cm above its neck joint on the project's body model, while an adult's upper neck to head
top is about 20 cm. So head size = ``HEAD_SCALE`` (3) x |head - neck|, which puts the threshold on
the same anatomical scale as MPII's; with scale 1 the metric would be three times stricter.

PCK@0.2 (bbox): error <= 0.2 x the longer side of the box around the annotated keypoints, a
normaliser that does not depend on the head joints at all.
"""

from __future__ import annotations

import numpy as np
import torch

#: head size = HEAD_SCALE * |head - neck| (SMPL-H joints); see the module docstring
HEAD_SCALE = 3.0


def _np(a) -> np.ndarray:
    return a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)


def keypoint_errors(pred, gt) -> np.ndarray:
    """Euclidean distance per keypoint: (N, K, 2) x (N, K, 2) -> (N, K)."""
    return np.linalg.norm(_np(pred).astype(np.float64) - _np(gt).astype(np.float64), axis=-1)


def pck(pred, gt, visible, normaliser, alpha: float) -> float:
    """Fraction of annotated keypoints with error <= alpha * normaliser[n]; nan with none annotated."""
    err = keypoint_errors(pred, gt)
    vis = _np(visible).astype(bool)
    norm = _np(normaliser).astype(np.float64).reshape(-1, 1)
    if err.shape != vis.shape or norm.shape[0] != err.shape[0]:
        raise ValueError(f"shape mismatch: errors {err.shape}, visible {vis.shape}, normaliser {norm.shape}")
    if not vis.any():
        return float("nan")
    return float((err <= alpha * norm)[vis].mean())


def pck_per_keypoint(pred, gt, visible, normaliser, alpha: float) -> np.ndarray:
    """(K,) accuracy per keypoint (nan where a keypoint is never annotated)."""
    err = keypoint_errors(pred, gt)
    vis = _np(visible).astype(bool)
    ok = (err <= alpha * _np(normaliser).astype(np.float64).reshape(-1, 1)) & vis
    count = vis.sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, ok.sum(0) / np.maximum(count, 1), np.nan)


def pckh(pred, gt, visible, head_size, alpha: float = 0.5) -> float:
    """PCKh@alpha (default 0.5) with per-sample head sizes (see ``HEAD_SCALE``)."""
    return pck(pred, gt, visible, head_size, alpha)


def pck_bbox(pred, gt, visible, bbox_size, alpha: float = 0.2) -> float:
    """PCK@alpha of the keypoint box's longer side."""
    return pck(pred, gt, visible, bbox_size, alpha)


def mean_error(pred, gt, visible) -> float:
    """Mean pixel error over annotated keypoints (nan with none)."""
    err = keypoint_errors(pred, gt)
    vis = _np(visible).astype(bool)
    return float(err[vis].mean()) if vis.any() else float("nan")
