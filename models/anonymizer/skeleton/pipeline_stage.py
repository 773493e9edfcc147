"""The pipeline's optional ``motion`` stage: a trained skeleton anonymizer applied to SMPL-H tracks.

The anonymizer changes the 22 body joints of each track (so the avatar no longer moves with the
subject's gait); SMPL-H parameters are then re-fitted to the changed joints (absolute 3-D targets
plus their projections), which keeps the track a valid body whose joints match the anonymized
skeleton. Hands are kept as they were.
"""

from __future__ import annotations

import numpy as np

from anonymask.core.errors import AnonymaskError
from anonymask.models.shared.body.tracks import Camera, SMPLHTrack

BODY_JOINTS = 22


def anonymize_tracks(tracks: list[SMPLHTrack], camera: Camera, checkpoint: str | None,
                     iterations: int = 100) -> tuple[list[SMPLHTrack], dict[str, float]]:
    """New tracks (same ids, frames, validity) whose body joints went through the anonymizer
    (``checkpoint``: a trained skeleton anonymizer; ``iterations``: the refit of each track)."""
    from anonymask.models.anonymizer.pose.fit import FitConfig, fit_track
    from anonymask.models.anonymizer.skeleton.anonymizers import anonymize_track, load_anonymizer
    from anonymask.models.shared.body.model import get_body_model

    ckpt = checkpoint
    if not ckpt:
        raise AnonymaskError("motion.enabled needs motion.checkpoint: the path of a trained skeleton "
                             "anonymizer (make train-skeleton-anon DATASET=... writes one)")
    anonymizer, meta = load_anonymizer(ckpt)
    want = int(meta["config"].get("num_joints", BODY_JOINTS))
    if want != BODY_JOINTS:
        raise AnonymaskError(f"{ckpt}: anonymizer expects {want} joints; the motion stage needs one trained "
                             f"on the {BODY_JOINTS} SMPL-H body joints of pose tracks")
    norm = meta.get("normalization") or {}
    body = get_body_model()
    out, shifts = [], []
    mapping = (list(range(BODY_JOINTS)), list(range(BODY_JOINTS)), [1.0] * BODY_JOINTS)
    for tr in tracks:
        joints = body.pose_track(tr).joints[:, :BODY_JOINTS]
        ok = tr.valid
        new = joints.copy()
        if ok.sum() >= 2:
            align = norm.get("align_hips")
            new[ok] = anonymize_track(anonymizer, joints[ok], root_joint=int(norm.get("root_joint", 0)),
                                      align_hips=tuple(align) if align else None)
        kp2d = camera.project(new)
        fitted, _ = fit_track(body.rest_joints(tr.betas), kp2d, np.where(ok[:, None], 1.0, 0.0).repeat(BODY_JOINTS, 1),
                              camera, mapping, kp3d=new, absolute_3d=True, betas=tr.betas, track_id=tr.track_id,
                              cfg=FitConfig(iterations=int(iterations), smooth_sigma=0.0))
        fitted.left_hand_pose, fitted.right_hand_pose = tr.left_hand_pose.copy(), tr.right_hand_pose.copy()
        fitted.valid = tr.valid.copy()
        fitted.gender = tr.gender
        out.append(fitted)
        if ok.any():
            shifts.append(float(np.linalg.norm(new[ok] - joints[ok], axis=-1).mean()))
    return out, {"motion_joint_shift_mm": 1000 * float(np.mean(shifts)) if shifts else 0.0}
