"""Per-subject motion style: neutral is a no-op, each knob changes what it says."""

from __future__ import annotations

import numpy as np
import pytest

from anonymask.models.shared.body.model import get_body_model
from anonymask.models.shared.body.tracks import JOINT_INDEX as J
from anonymask.models.shared.synthetic.mocap import load_clip
from anonymask.models.shared.synthetic.retarget import retarget
from anonymask.models.shared.synthetic.style import MotionStyle, apply_style, mirror_motion, sample_style


@pytest.fixture(scope="module")
def body():
    return get_body_model("neutral")


@pytest.fixture(scope="module")
def punch():
    return retarget(load_clip("punch").resample(15.0, 30))


def _joints(body, m):
    return body.forward(np.zeros(10), m.global_orient, m.body_pose, transl=m.pelvis - body.rest_joints()[0]).joints


def test_neutral_style_changes_nothing(punch):
    out = apply_style(punch, MotionStyle())
    np.testing.assert_allclose(out.body_pose, punch.body_pose, atol=1e-6)
    np.testing.assert_allclose(out.global_orient, punch.global_orient)


def test_mirror_swaps_sides_and_is_an_involution(body, punch):
    twice = mirror_motion(mirror_motion(punch))
    np.testing.assert_allclose(twice.body_pose, punch.body_pose, atol=1e-6)
    a, b = _joints(body, punch), _joints(body, mirror_motion(punch))
    flip = np.array([-1.0, 1.0, 1.0])
    # the mirrored left wrist moves like the original right wrist, reflected (SMPL's rest body is
    # close to symmetric: a few millimetres)
    err = np.abs(b[:, J["left_wrist"]] - a[:, J["right_wrist"]] * flip).max()
    assert err < 0.03


def test_posture_and_amplitude_knobs(body, punch):
    j0 = _joints(body, punch)
    slouched = _joints(body, apply_style(punch, MotionStyle(slouch=0.35)))
    # forward flexion moves the head forward relative to the pelvis, in the body's own frame
    from scipy.spatial.transform import Rotation

    fwd = Rotation.from_rotvec(punch.global_orient).apply([0.0, 0.0, 1.0])
    lean0 = np.sum((j0[:, J["head"]] - j0[:, J["pelvis"]]) * fwd, -1)
    lean1 = np.sum((slouched[:, J["head"]] - slouched[:, J["pelvis"]]) * fwd, -1)
    assert np.all(lean1 > lean0 + 0.05)
    wide = _joints(body, apply_style(punch, MotionStyle(arm_abduction=0.4)))
    side = Rotation.from_rotvec(punch.global_orient).apply([1.0, 0.0, 0.0])  # body left
    out0 = np.sum((j0[:, J["left_elbow"]] - j0[:, J["spine3"]]) * side, -1)
    out1 = np.sum((wide[:, J["left_elbow"]] - wide[:, J["spine3"]]) * side, -1)
    assert np.mean(out1 - out0) > 0.04
    # halving the leg amplitude halves the spread of the knee angles about their mean
    small = apply_style(punch, MotionStyle(amp_legs=0.5))
    k = J["left_knee"] - 1
    spread0 = np.linalg.norm(punch.body_pose[:, 3 * k:3 * k + 3] - punch.body_pose[:, 3 * k:3 * k + 3].mean(0), axis=1)
    spread1 = np.linalg.norm(small.body_pose[:, 3 * k:3 * k + 3] - small.body_pose[:, 3 * k:3 * k + 3].mean(0), axis=1)
    assert 0.35 < spread1.mean() / spread0.mean() < 0.65


def test_sampled_styles_are_deterministic_and_varied():
    a = [sample_style(np.random.default_rng([3, i])) for i in range(6)]
    b = [sample_style(np.random.default_rng([3, i])) for i in range(6)]
    assert a == b
    vecs = np.stack([s.vector() for s in a])
    assert np.all(np.ptp(vecs[:, :12], axis=0) > 0)
    assert MotionStyle.from_dict(a[0].to_dict()) == a[0]
