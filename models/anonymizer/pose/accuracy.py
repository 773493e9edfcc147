"""How close the fitted people are to the ground truth (synthetic data): pose4d's ``mpjpe_mm``."""

from __future__ import annotations

import numpy as np

from anonymask.models.anonymizer.metrics import mpjpe_mm
from anonymask.models.anonymizer.pose.keypoints import BODY_JOINTS


def matched_mpjpe(gt_tracks: list, fit_tracks: list, t_len: int) -> float:
    """Root-aligned MPJPE (mm) of each ground-truth person matched to the fitted track whose root
    is nearest over the frames both are present in (NaN: nobody matched). ``t_len``: the
    ground truth's frames (pose4d's tracks are compact, windowed to it here)."""
    from anonymask.models.shared.body.model import get_body_model

    body = get_body_model()
    fit_tracks = [f.window(0, t_len) for f in fit_tracks]  # pose4d's tracks are compact
    fit_joints = [body.pose_track(f).joints[:, BODY_JOINTS] for f in fit_tracks]  # pose each once
    errs = []
    for g in gt_tracks:
        gj = body.pose_track(g).joints[:, BODY_JOINTS]
        best = np.inf
        for f, fj in zip(fit_tracks, fit_joints):
            both = g.valid & f.valid
            if both.sum() == 0:
                continue
            d_root = np.linalg.norm(gj[both, 0] - fj[both, 0], axis=-1).mean()
            if d_root < best:
                best = d_root
                err = mpjpe_mm(fj[both], gj[both], root=0)
        if np.isfinite(best):
            errs.append(err)
    return float(np.mean(errs)) if errs else float("nan")
