"""DeepMimic clip parsing, resampling and looping, against the files pybullet ships."""

from __future__ import annotations

import json

import numpy as np
import pytest

from anonymask.core.errors import DatasetError
from anonymask.models.shared.synthetic import mocap


def test_all_shipped_clips_parse():
    names = mocap.available_clips()
    assert {"walk", "run", "jump", "kick", "punch"} <= set(names)
    for name in names:
        clip = mocap.load_clip(name)
        k = len(clip.times)
        assert clip.root_pos.shape == (k, 3) and clip.root_rot.shape == (k, 4)
        assert clip.joint_rot.shape == (k, len(mocap.DM_JOINTS), 4)
        assert np.all(np.diff(clip.times) >= 0) and clip.duration > 0.5
        np.testing.assert_allclose(np.linalg.norm(clip.joint_rot, axis=-1), 1.0, atol=1e-6)
    assert mocap.load_clip("walk").loop and not mocap.load_clip("punch").loop


def test_hinge_columns_become_rotations_about_z():
    raw = np.asarray(json.loads((mocap.motions_dir() / "humanoid3d_walk.txt").read_text())["Frames"])
    clip = mocap.load_clip("walk")
    knee = mocap.DM_JOINTS.index("right_knee")
    q = clip.joint_rot[0, knee]
    assert abs(q[0]) < 1e-9 and abs(q[1]) < 1e-9  # pure z rotation
    # right knee is column 20 of the file (duration, root pos 3, root rot 4, chest 4, neck 4, hip 4)
    assert np.isclose(2 * np.arctan2(q[2], q[3]), raw[0, 20])
    # a shin bends backwards: knee angles of a walk are <= 0
    assert raw[:, 20].max() <= 1e-6 and raw[:, 34].max() <= 1e-6


def test_resample_hits_keyframes_and_counts_frames():
    clip = mocap.load_clip("punch")
    frames = clip.sample(clip.times[:5])
    np.testing.assert_allclose(frames.root_pos, clip.root_pos[:5], atol=1e-9)
    dots = np.abs(np.sum(frames.joint_rot * clip.joint_rot[:5], axis=-1))
    np.testing.assert_allclose(dots, 1.0, atol=1e-9)
    r = clip.resample(15.0, 10, start=0.2, speed=1.5)
    assert r.n_frames == 10 and r.fps == 15.0
    # at speed 1.5 and 15 fps, frame 2 is clip time 0.2 + 2 * 0.1
    np.testing.assert_allclose(r.root_pos[2], clip.sample(np.array([0.4])).root_pos[0], atol=1e-9)


def test_loop_continues_with_cycle_shift_and_non_loop_holds():
    walk = mocap.load_clip("walk")
    t = np.array([0.3, 0.3 + walk.duration, 0.3 + 2 * walk.duration, 0.3 - walk.duration])
    f = walk.sample(t)
    shift = walk.root_pos[-1] - walk.root_pos[0]
    assert shift[0] > 1.0  # a walk cycle travels ~1.2 m forward (+x)
    np.testing.assert_allclose(f.root_pos[1, [0, 2]] - f.root_pos[0, [0, 2]], shift[[0, 2]], atol=1e-9)
    np.testing.assert_allclose(f.root_pos[2, [0, 2]] - f.root_pos[0, [0, 2]], 2 * shift[[0, 2]], atol=1e-9)
    np.testing.assert_allclose(f.root_pos[0, [0, 2]] - f.root_pos[3, [0, 2]], shift[[0, 2]], atol=1e-9)
    np.testing.assert_allclose(np.abs(np.sum(f.joint_rot[0] * f.joint_rot[1], -1)), 1.0, atol=1e-9)
    # consecutive frames across a loop boundary stay close (heading mismatch spread over the cycle)
    r = walk.resample(30.0, 200)
    step = np.abs(np.sum(r.root_rot[1:] * r.root_rot[:-1], -1))
    assert step.min() > np.cos(0.1)
    punch = mocap.load_clip("punch")
    held = punch.sample(np.array([-1.0, 0.0, punch.duration, punch.duration + 5]))
    np.testing.assert_allclose(held.root_pos[0], held.root_pos[1])
    np.testing.assert_allclose(held.root_pos[2], held.root_pos[3])


def test_capture_skeleton_is_plausible():
    frames = mocap.load_clip("walk").resample(30.0)
    fk = mocap.forward_kinematics(frames)
    assert np.all(fk["neck"][:, 1] > fk["root"][:, 1] + 0.3)  # upright
    ankles = np.minimum(fk["left_ankle"][:, 1], fk["right_ankle"][:, 1])
    assert 0.0 < ankles.min() < 0.12 and ankles.max() < 0.2  # a foot near the ground all the time
    # right is +z in DeepMimic: the right hip is on the +z side of the pelvis, facing +x
    side = mocap.quat_rotate(frames.root_rot, np.array([0.0, 0.0, 1.0]))
    assert np.all(np.sum((fk["right_hip"] - fk["root"]) * side, axis=1) > 0.05)


def test_punch_is_thrown_with_the_right_hand():
    fk = mocap.forward_kinematics(mocap.load_clip("punch").resample(30.0))

    def reach(j):
        d = fk[j] - fk["root"]
        return np.hypot(d[:, 0], d[:, 2]).max()

    assert reach("right_wrist") > reach("left_wrist") + 0.15


def test_stand_clip_and_errors(tmp_path):
    stand = mocap.load_clip("stand").resample(15.0, 30)
    assert stand.n_frames == 30 and np.ptp(stand.root_pos[:, 0]) < 0.05
    with pytest.raises(DatasetError, match="no_such_clip"):
        mocap.load_clip("no_such_clip")
    bad = tmp_path / "bad.txt"
    bad.write_text('{"Loop": "none", "Frames": [[1, 2, 3]]}')
    with pytest.raises(DatasetError, match="bad"):
        mocap.load_clip(bad)
    bad.write_text("not json")
    with pytest.raises(DatasetError, match="not a DeepMimic"):
        mocap.load_clip(str(bad))
