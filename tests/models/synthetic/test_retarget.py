"""Retargeting DeepMimic motion onto the SMPL-H body: the posed body follows the capture."""

from __future__ import annotations

import numpy as np
import pytest

from anonymask.models.shared.body.model import get_body_model
from anonymask.models.shared.body.tracks import JOINT_INDEX as J
from anonymask.models.shared.synthetic import mocap
from anonymask.models.shared.synthetic.retarget import C, retarget
from anonymask.models.shared.synthetic.scene import pose_in_ground

BONES = [
    ("left_shoulder", "left_elbow"), ("left_elbow", "left_wrist"),
    ("right_shoulder", "right_elbow"), ("right_elbow", "right_wrist"),
    ("left_hip", "left_knee"), ("left_knee", "left_ankle"),
    ("right_hip", "right_knee"), ("right_knee", "right_ankle"),
    ("root", "neck"),
]  # fmt: skip


@pytest.fixture(scope="module")
def body():
    return get_body_model("neutral")


def _pose(body, motion):
    j0 = body.rest_joints()[0]
    return body.forward(np.zeros(10), motion.global_orient, motion.body_pose, transl=motion.pelvis - j0)


@pytest.mark.parametrize("clip", ["walk", "punch", "kick"])
def test_bones_point_where_the_capture_points(body, clip):
    """Every limb segment of the posed SMPL-H body points the same way as the captured skeleton's
    (axes, left/right and the T-pose vs arms-down rest difference all enter this)."""
    frames = mocap.load_clip(clip).resample(10.0)
    out = _pose(body, retarget(frames))
    fk = mocap.forward_kinematics(frames)
    for a, b in BONES:
        ref = (fk[b] - fk[a]) @ C.T
        got = out.joints[:, J[b]] - out.joints[:, J["pelvis" if a == "root" else a]]
        cos = np.sum(ref * got, -1) / np.linalg.norm(ref, axis=-1) / np.linalg.norm(got, axis=-1)
        assert cos.min() > 0.98, (clip, a, b, cos.min())


def test_walk_is_upright_grounded_and_faces_its_path(body):
    motion = retarget(mocap.load_clip("walk").resample(15.0, 30))
    placed = pose_in_ground(body, motion, np.zeros(10, np.float32), "neutral")
    j = placed.joints
    assert np.all(j[:, J["head"], 1] > j[:, J["pelvis"], 1] + 0.4)
    feet = placed.vertices[..., 1].min(axis=1)  # lowest point per frame
    assert feet.min() == pytest.approx(0.0, abs=1e-5) and np.percentile(feet, 90) < 0.06
    # the legs alternate: left ankle ahead of the right, then behind
    travel = placed.motion.pelvis[-1] - placed.motion.pelvis[0]
    travel /= np.linalg.norm(travel)
    lead = (j[:, J["left_ankle"]] - j[:, J["right_ankle"]]) @ travel
    assert lead.max() > 0.3 and lead.min() < -0.3
    # the body faces where it walks (SMPL faces +z at rest)
    from scipy.spatial.transform import Rotation

    fwd = Rotation.from_rotvec(placed.motion.global_orient).apply([0.0, 0.0, 1.0])
    assert np.mean(fwd @ travel) > 0.8


def test_punching_hand_stays_the_right_hand(body):
    out = _pose(body, retarget(mocap.load_clip("punch").resample(15.0)))

    def reach(name):
        d = out.joints[:, J[name]] - out.joints[:, J["pelvis"]]
        return np.hypot(d[:, 0], d[:, 2]).max()

    assert reach("right_wrist") > reach("left_wrist") + 0.15


def test_trajectory_scales_with_leg_length():
    frames = mocap.load_clip("walk").resample(15.0, 20)
    a = retarget(frames)
    b = retarget(frames, leg_length=0.5 * 0.881)
    np.testing.assert_allclose(b.pelvis, a.pelvis * 0.5 * 0.881 / (0.25 * (1.686184 + 1.639480 + 0.2)), rtol=1e-5)
    np.testing.assert_allclose(a.body_pose, b.body_pose)
