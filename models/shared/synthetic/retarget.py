"""Retarget DeepMimic humanoid motion to SMPL-H pose parameters.

Both skeletons keep every joint frame aligned with the root frame in the rest pose, so a joint's
local rotation carries over once expressed in the other skeleton's axes:

* Axes. DeepMimic: x forward, y up, z = body right. SMPL: x = body left, y up, z forward. With
  ``C`` mapping DeepMimic to SMPL coordinates, a rotation ``R`` becomes ``C R C^T``. The same ``C``
  maps DeepMimic's world, so the output lives in a y-up "ground" frame with SMPL's axes.
* Rest pose. DeepMimic rests with the arms hanging down, SMPL in a T-pose (left arm along +x,
  right along -x). The arm sub-chains get a fixed offset ``A`` (a quarter turn about z) that
  takes SMPL's rest arm onto DeepMimic's, so the world orientation of each arm segment matches:
  shoulder ``R_s A``, elbow and wrist ``A^T R A``.
* Joints. DeepMimic has one chest joint and one neck joint; SMPL has three spine joints and
  neck + head. The rotation is split evenly along each chain (same axis, a fraction of the
  angle), which composes back to the original. Collars, feet (toes) and fingers stay at rest.
* Translation. DeepMimic's root is its pelvis. The trajectory is scaled by the ratio of leg
  lengths so a shorter body takes shorter steps; placing the body on the ground plane (by its
  mesh) is the scene's job.

Known inaccuracies: bone lengths and joint centres differ (DeepMimic's chest pivot is lower than
SMPL's spine joints, its shoulders sit on the chest), so hands and feet land a few centimetres from
where the capture had them; the split spine bends more smoothly than the captured single joint;
the scaled root path keeps foot contacts only approximately (small foot sliding).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial.transform import Rotation

from anonymask.models.shared.body.tracks import JOINT_INDEX
from anonymask.models.shared.synthetic.mocap import DM_JOINTS, MotionFrames

#: DeepMimic axes -> SMPL axes (rows: SMPL x = -DM z, SMPL y = DM y, SMPL z = DM x)
C = np.array([[0.0, 0.0, -1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
#: DeepMimic humanoid (pybullet scale 0.25): hip joint to knee 0.4215, knee to ankle 0.4099,
#: ankle to sole 0.05 -> the pelvis height of the straight rest pose.
DM_LEG_LENGTH = 0.25 * (1.686184 + 1.639480 + 0.20)

# SMPL-T-pose arm direction -> hanging arm: rotations about the forward (z) axis.
_ARM_OFFSET = {
    "left": Rotation.from_rotvec([0.0, 0.0, -np.pi / 2]),
    "right": Rotation.from_rotvec([0.0, 0.0, np.pi / 2]),
}
_SPINE = ("spine1", "spine2", "spine3")
_NECK = ("neck", "head")
_DIRECT = {
    "left_hip": "left_hip", "left_knee": "left_knee", "left_ankle": "left_ankle",
    "right_hip": "right_hip", "right_knee": "right_knee", "right_ankle": "right_ankle",
}  # fmt: skip


@dataclass
class SMPLHMotion:
    """SMPL-H body motion in the ground frame (y up, SMPL axes; ground height not fixed yet).

    ``global_orient`` (T,3) and ``body_pose`` (T,63) are axis-angle; ``pelvis`` (T,3) is where the
    pelvis joint goes, metres. Hands are left at rest (open) by the retargeting.
    """

    name: str
    fps: float
    global_orient: np.ndarray
    body_pose: np.ndarray
    pelvis: np.ndarray

    @property
    def n_frames(self) -> int:
        return int(self.global_orient.shape[0])

    def copy(self) -> SMPLHMotion:
        return SMPLHMotion(self.name, self.fps, self.global_orient.copy(), self.body_pose.copy(),
                           self.pelvis.copy())


def _to_smpl_axes(q_xyzw: np.ndarray) -> Rotation:
    m = Rotation.from_quat(q_xyzw.reshape(-1, 4)).as_matrix()
    return Rotation.from_matrix(C @ m @ C.T)


def retarget(frames: MotionFrames, leg_length: float = DM_LEG_LENGTH) -> SMPLHMotion:
    """DeepMimic poses -> SMPL-H ``global_orient``/``body_pose`` + pelvis path in the ground frame.

    ``leg_length``: the target body's hip-to-sole height; the root path is scaled by its ratio to
    DeepMimic's.
    """
    t = frames.n_frames
    local = {name: _to_smpl_axes(frames.joint_rot[:, i]) for i, name in enumerate(DM_JOINTS)}
    body = np.zeros((t, 21, 3))

    def put(joint: str, rot: Rotation) -> None:
        body[:, JOINT_INDEX[joint] - 1] = rot.as_rotvec()

    spine = local["chest"].as_rotvec() / len(_SPINE)
    for j in _SPINE:
        body[:, JOINT_INDEX[j] - 1] = spine
    neck = local["neck"].as_rotvec() / len(_NECK)
    for j in _NECK:
        body[:, JOINT_INDEX[j] - 1] = neck
    for dm, smpl in _DIRECT.items():
        put(smpl, local[dm])
    for side in ("left", "right"):
        a = _ARM_OFFSET[side]
        put(f"{side}_shoulder", local[f"{side}_shoulder"] * a)
        put(f"{side}_elbow", a.inv() * local[f"{side}_elbow"] * a)
        # wrist: A^T I A = identity, stays zero

    root = _to_smpl_axes(frames.root_rot)
    pelvis = frames.root_pos @ C.T
    scale = leg_length / DM_LEG_LENGTH
    pelvis = pelvis * scale
    return SMPLHMotion(frames.name, frames.fps, root.as_rotvec(), body.reshape(t, 63), pelvis)
