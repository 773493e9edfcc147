"""Stage ``tubelets``: per person, temporally smooth square boxes around (avatar | person mask)
and the fixed-size crops of x_ddot -> ``tubelets/<j>/{box,rgb}``."""

from __future__ import annotations

from typing import Any

import numpy as np

from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.tasks.common import stage


def track_alphas(entry: VideoEntry) -> list[np.ndarray]:
    """Reintegration alpha per track: its feathered person mask, and 1 on its avatar (an avatar
    with a different body shape may reach outside the real person's mask)."""
    sil = entry.read("render/track_masks")
    alphas = entry.read("person_track_alphas").astype(np.float32) / 255.0 if entry.has_array(
        "person_track_alphas") else np.zeros(sil.shape, np.float32)
    return [np.maximum(alphas[:, j], sil[:, j].astype(np.float32)) for j in range(sil.shape[1])]


@stage("tubelets", deps=("merge", "render", "segment"), backend=lambda c: "smooth-square")
def run(entry: VideoEntry, cfg: dict[str, Any], w: StageWriter) -> None:
    from anonymask.models.compose.tubelets import crop_tubelet, tubelet_boxes

    size = int(cfg.get("size", 128))
    merged = entry.read("merged")
    alphas = track_alphas(entry)
    for j, a in enumerate(alphas):
        if not (a > 0).any():
            continue
        boxes = tubelet_boxes(a > 0, margin=float(cfg.get("margin", 0.15)), sigma=float(cfg.get("smooth", 3.0)))
        w.write(f"tubelets/{j}/box", boxes.astype(np.float32), frame_chunked=False)
        w.write(f"tubelets/{j}/rgb", crop_tubelet(merged, boxes, size))
    w.metric(tubelets=len(alphas), tubelet_size=size)


def tubelet_ids(entry: VideoEntry) -> list[int]:
    if "tubelets" not in entry.group:
        return []
    return sorted(int(k) for k in entry.group["tubelets"].group_keys())
