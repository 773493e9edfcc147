"""Classification metrics of the action benchmarks: top-1 and mean per-class accuracy.

Clip-level numbers score every clip; video-level numbers average the softmax over a video's
clips first (what the papers report when several clips are sampled per video).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch


def per_class_accuracy(pred: np.ndarray, labels: np.ndarray, num_classes: int) -> list[float | None]:
    """Accuracy of each class (None for a class without samples)."""
    out: list[float | None] = []
    for k in range(num_classes):
        sel = labels == k
        out.append(float((pred[sel] == k).mean()) if sel.any() else None)
    return out


def classification_metrics(
    logits: torch.Tensor, labels: torch.Tensor, video_ids: Sequence[str], num_classes: int
) -> dict:
    """dict(clip_top1, top1, mean_class_acc, per_class_acc, videos, clips); top1 etc. video-level."""
    logits = logits.detach().float().cpu()
    labels_np = labels.detach().cpu().numpy().astype(int)
    if logits.shape[0] == 0:
        return {"clip_top1": None, "top1": None, "mean_class_acc": None, "per_class_acc": [None] * num_classes,
                "videos": 0, "clips": 0}  # fmt: skip
    clip_pred = logits.argmax(1).numpy()
    probs = logits.softmax(1).numpy()
    order: dict[str, list[int]] = {}
    for i, vid in enumerate(video_ids):
        order.setdefault(vid, []).append(i)
    v_pred = np.array([probs[idx].mean(0).argmax() for idx in order.values()])
    v_lab = np.array([labels_np[idx[0]] for idx in order.values()])
    per_class = per_class_accuracy(v_pred, v_lab, num_classes)
    present = [a for a in per_class if a is not None]
    return {
        "clip_top1": float((clip_pred == labels_np).mean()),
        "top1": float((v_pred == v_lab).mean()),
        "mean_class_acc": float(np.mean(present)) if present else None,
        "per_class_acc": per_class,
        "videos": len(order),
        "clips": int(logits.shape[0]),
    }
