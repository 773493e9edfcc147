"""Per-pixel track labels for the segment stage: pose4d's raw instance labels mapped to posed
tracks, and the pixels of raw tracks verified not to be people taken out of the person
probability."""

from __future__ import annotations

import numpy as np

from anonymask.models.anonymizer.segment.boxes import window_box_masks


def lut_map(labels: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """Raw instance labels (id + 1, 0 = nobody) -> posed track index (-1: nobody or not posed)."""
    table = np.concatenate([[-1], np.asarray(lut, np.int32)]).astype(np.int32)
    return np.take(table, labels, mode="clip")  # ids past the table clip to its last entry; no int64 copy


def without_rejected(prob: np.ndarray, labels: np.ndarray, lut: np.ndarray, boxes: np.ndarray | None, t0: int,
                     margin: float, rejected: int) -> np.ndarray:
    """``pose/person_prob`` of frames t0.. with the pixels owned by raw tracks pose4d's verification
    rejected (``instance_track`` == ``rejected``: clutter, not a person) set to 0, except inside the
    boxes (grown by ``margin``) of the people kept in that frame: a person passing in front of the
    clutter may own less probability there than the clutter's track, and stays removed."""
    rej = lut_map(labels, lut) == rejected
    if not rej.any():
        return prob
    if boxes is not None and len(boxes):
        rej &= ~window_box_masks(rej.shape, boxes, t0, margin)
    out = prob.copy()
    out[rej] = 0
    return out
