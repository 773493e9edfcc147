"""Does a fitted body agree with what was seen of the person? A check on the fit, after it.

The fit explains a track's 2-D landmarks with a body in 3-D. Where the landmarks are few or
jittery (a body the landmark model drew over an object, a person mostly hidden), the optimiser
can find a body half a metre from the camera whose few fitted joints land on the landmarks while
the rest of it spans the frame: rendered, that avatar covers everything around the person. Such a
fit is judged by its own evidence, the person's box: inside the frame, the fitted joints must
stay within the box grown by ``max_reach`` box heights (a limb the landmarks missed may reach
past it) in most of the frames the person was seen. With ``pose4d.fit.check_reach`` a fit that does
not is replaced by the neutral avatar fitted into the box, the avatar anyone seen too briefly to
pose gets, so the person is still replaced, never erased, and no avatar is larger than what was
seen. It is off by default: an oversized avatar can cover pixels that the person's held mask
missed, and with the box avatar they show (measured: docs/RESULTS.md, search check_reach).
"""

from __future__ import annotations

import numpy as np
import torch

from anonymask.models.anonymizer.pose.kinematics import forward_kinematics
from anonymask.models.shared.body.tracks import NUM_SKELETON_JOINTS, Camera, SMPLHTrack

#: SMPL-H's body joints (pelvis to wrists); the finger joints add nothing the wrists do not
BODY_JOINTS = NUM_SKELETON_JOINTS


def reach_past_box(track: SMPLHTrack, boxes: np.ndarray, frames: list[int], rest_joints: np.ndarray,
                   camera: Camera) -> np.ndarray:
    """Per frame of ``frames`` (video frame indices; ``track`` and ``boxes`` span the video): how
    far the fitted body joints inside the frame reach past that frame's box, in box heights (0:
    within it). Frames without a box or a valid pose are left out."""
    frames = [t for t in frames if np.isfinite(boxes[t, 0]) and t < track.num_frames and track.valid[t]]
    if not frames:
        return np.zeros(0)
    idx = np.asarray(frames)
    with torch.no_grad():
        joints = forward_kinematics(torch.as_tensor(rest_joints, dtype=torch.float32),
                                    torch.as_tensor(track.global_orient[idx], dtype=torch.float32),
                                    torch.as_tensor(track.body_pose[idx], dtype=torch.float32),
                                    torch.as_tensor(track.transl[idx], dtype=torch.float32),
                                    num_joints=BODY_JOINTS).numpy()[:, :BODY_JOINTS]
    # a joint behind or at the camera projects anywhere: it is past every box (the far side of the frame)
    z = joints[..., 2]
    uv = camera.project(np.where(z[..., None] > 1e-3, joints, np.array([0.0, 0.0, 1e-3])))
    uv[z <= 1e-3] = (-1.0, -1.0)
    u = np.clip(uv[..., 0], 0, camera.width)
    v = np.clip(uv[..., 1], 0, camera.height)
    b = boxes[idx].astype(np.float64)
    height = np.maximum(b[:, 3] - b[:, 1], 1.0)
    past = np.stack([b[:, 0] - u.min(1), u.max(1) - b[:, 2], b[:, 1] - v.min(1), v.max(1) - b[:, 3]], 1)
    return np.maximum(past.max(1), 0.0) / height


def fit_disagrees(reach: np.ndarray, max_reach: float, max_share: float) -> bool:
    """The fit reaches past its box by more than ``max_reach`` box heights in at least
    ``max_share`` of the frames measured."""
    return reach.size > 0 and float(np.mean(reach > max_reach)) >= max_share
