"""Stage ``reintegrate``: refined tubelets pasted over x_dot with the feathered person masks ->
``anonymized`` (x_tilde) and ``public_mask`` (r: pixels that are entirely synthetic).

Records ``person_leak`` on synthetic data: the fraction of ground-truth person pixels whose real
appearance is still visible (target 0), and ``real_leak``: the same, not counting pixels under an
avatar or within 2 px of one (an avatar pixel, or the resampled avatar crop bleeding into the
background, whose colour happens to match the person's is not a leak).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.tasks.common import stage
from anonymask.tasks.tubelets import track_alphas, tubelet_ids


@stage("reintegrate", deps=("inpaint", "refine", "tubelets", "segment", "render"), backend=lambda c: "feather")
def run(entry: VideoEntry, cfg: dict[str, Any], w: StageWriter) -> None:
    from anonymask.models.compose.reintegrate import public_mask, reintegrate
    from anonymask.models.metrics import person_leak

    x_dot = entry.read("inpainted")
    alphas_all = track_alphas(entry)
    ids = tubelet_ids(entry)
    crops = [entry.read(f"tubelets/{j}/refined") for j in ids]
    boxes = [entry.read(f"tubelets/{j}/box") for j in ids]
    alphas = [alphas_all[j] for j in ids]
    x_tilde = reintegrate(x_dot, crops, boxes, alphas) if ids else x_dot.copy()
    sil = entry.read("render/track_masks")
    size = int(crops[0].shape[1]) if crops else None
    r = public_mask([sil[:, j] for j in ids], alphas=alphas, boxes=boxes, crop_size=size) if ids else \
        np.zeros(x_dot.shape[:3], bool)
    w.write("anonymized", x_tilde)
    w.write("public_mask", r)
    w.metric(public_fraction=float(r.mean()))
    if entry.has_array("gt/person_mask"):
        raw, gt, bg = entry.read("raw"), entry.read("gt/person_mask"), entry.read("gt/background")
        w.metric(person_leak=person_leak(raw, x_tilde, gt, bg),
                 real_leak=person_leak(raw, x_tilde, gt, bg, synthetic=avatar_band(entry.read("render/mask"))))


def avatar_band(avatar: np.ndarray, pixels: int = 2) -> np.ndarray:
    """Avatar pixels grown by ``pixels``: where the pasted (resampled, feathered) avatar crop bleeds
    its colours into the background; no real pixel value is shown there."""
    from anonymask.models.segment.masks import grow

    return grow(avatar.astype(bool), pixels)
