import numpy as np
import pytest

from anonymask.models.shared.body.tracks import (
    JOINT_NAMES,
    PARENTS,
    Camera,
    SMPLHTrack,
    axis_angle_to_rotmat,
    hold_edge_poses,
    upright_orient,
)


def test_joint_table_is_smplh():
    assert len(JOINT_NAMES) == 52 and len(set(JOINT_NAMES)) == 52
    assert len(PARENTS) == 52 and PARENTS[0] == -1
    assert all(0 <= p < i for i, p in enumerate(PARENTS) if i > 0)  # topological order
    assert JOINT_NAMES[20:22] == ("left_wrist", "right_wrist")
    assert JOINT_NAMES[22] == "left_index1" and JOINT_NAMES[36] == "left_thumb3"
    assert JOINT_NAMES[37] == "right_index1" and JOINT_NAMES[51] == "right_thumb3"
    assert PARENTS[JOINT_NAMES.index("left_index1")] == JOINT_NAMES.index("left_wrist")
    assert PARENTS[JOINT_NAMES.index("right_thumb1")] == JOINT_NAMES.index("right_wrist")
    assert PARENTS[JOINT_NAMES.index("head")] == JOINT_NAMES.index("neck")


def test_camera_projection_and_roundtrip():
    cam = Camera(500.0, 480.0, 47.5, 35.5, 96, 72)
    pts = np.array([[0.0, 0.0, 2.0], [0.2, -0.1, 4.0]])
    uv = cam.project(pts)
    assert np.allclose(uv[0], [47.5, 35.5])
    assert np.allclose(uv[1], [47.5 + 500 * 0.05, 35.5 - 480 * 0.025])
    hom = (cam.K @ pts.T).T
    assert np.allclose(hom[:, :2] / hom[:, 2:], uv)
    back = Camera.from_array(cam.to_array())
    assert back == cam and isinstance(back.width, int)
    half = cam.scaled(0.5)
    assert half.width == 48 and np.allclose(half.project(pts), (uv + 0.5) * 0.5 - 0.5)


def test_upright_orient_maps_canonical_axes_to_camera():
    r = axis_angle_to_rotmat(upright_orient())
    assert np.allclose(r @ [0, 1, 0], [0, -1, 0], atol=1e-6)  # body up -> image up (-y)
    assert np.allclose(r @ [0, 0, 1], [0, 0, -1], atol=1e-6)  # body front -> towards camera
    assert np.allclose(r @ [1, 0, 0], [1, 0, 0], atol=1e-6)  # body's left -> image right
    back = axis_angle_to_rotmat(upright_orient(np.pi))
    assert np.allclose(back @ [0, 0, 1], [0, 0, 1], atol=1e-6)  # seen from behind
    assert np.allclose(back @ [0, 1, 0], [0, -1, 0], atol=1e-6)


def _track(t=5):
    rng = np.random.default_rng(0)
    return SMPLHTrack(3, rng.normal(size=10), rng.normal(size=(t, 3)), rng.normal(size=(t, 63)),
                      rng.normal(size=(t, 45)), rng.normal(size=(t, 45)), rng.normal(size=(t, 3)),
                      np.array([True, False, True, True, False][:t]), "female")


def test_track_roundtrip_and_slice():
    tr = _track()
    assert tr.num_frames == 5 and tr.body_pose.dtype == np.float32
    arrays = tr.to_arrays()
    assert all(isinstance(v, np.ndarray) and v.dtype.kind in "fbi" for v in arrays.values())
    back = SMPLHTrack.from_arrays(3, arrays)
    assert back.gender == "female" and back.track_id == 3
    for k in ("betas", "global_orient", "body_pose", "left_hand_pose", "right_hand_pose", "transl", "valid"):
        assert np.array_equal(getattr(back, k), getattr(tr, k))
    s = tr.slice(slice(1, 4))
    assert s.num_frames == 3 and np.array_equal(s.valid, tr.valid[1:4])
    assert np.array_equal(s.body_pose, tr.body_pose[1:4])
    s2 = tr.slice(np.array([0, 4]))
    assert np.array_equal(s2.transl, tr.transl[[0, 4]])


def test_track_validates_shapes():
    with pytest.raises(ValueError, match="frames"):
        SMPLHTrack(0, np.zeros(10), np.zeros((4, 3)), np.zeros((3, 63)), np.zeros((4, 45)),
                   np.zeros((4, 45)), np.zeros((4, 3)))
    with pytest.raises(ValueError, match="gender"):
        SMPLHTrack.rest(0, 2, gender="robot")
    assert SMPLHTrack.rest(1, 4).valid.all()


def test_a_compact_track_holds_its_own_frames_and_reads_the_same_over_the_video():
    tr = _track(5).at(0)  # valid: frames 0, 2, 3
    tr.valid[0] = False
    c = tr.compact()
    assert (c.start, c.stop, c.num_frames) == (2, 4, 2)
    assert np.array_equal(c.transl, tr.transl[2:4]) and c.valid.all()
    back = SMPLHTrack.from_arrays(3, c.to_arrays())
    assert (back.start, back.num_frames) == (2, 2)
    full = back.window(0, 7)  # past its own rows on both sides
    assert (full.start, full.num_frames) == (0, 7)
    assert full.valid.tolist() == [False, False, True, True, False, False, False]
    assert np.array_equal(full.body_pose[2:4], tr.body_pose[2:4])
    assert np.array_equal(full.transl[:2], tr.transl[[2, 2]]) and np.array_equal(full.transl[4:], tr.transl[[3] * 3])
    mid = c.window(3, 6)
    assert mid.start == 3 and mid.valid.tolist() == [True, False, False]
    assert np.array_equal(mid.global_orient[0], tr.global_orient[3])
    assert c.window(10, 12).valid.sum() == 0 and c.window(0, 0).num_frames == 0
    never = tr.slice(slice(0, 1)).invalid().compact()
    assert never.num_frames == 0 and never.window(0, 3).valid.sum() == 0
    with pytest.raises(ValueError, match="inverted"):
        c.window(4, 2)


def test_hold_edge_poses_holds_the_edge_poses_within_the_shot():
    tr = _track(5).at(10)  # valid: video frames 10, 12, 13 (rows 0, 2, 3)
    held = hold_edge_poses(tr, 2, [(0, 11), (11, 30)])
    # the first valid frame (10) lies in shot 0..10: held back to 8; the last (13) in 11..29: to 15
    assert (held.start, held.stop) == (8, 16)
    assert held.valid.tolist() == [True, True, True, False, True, True, True, True]
    assert np.array_equal(held.transl[[0, 1]], tr.transl[[0, 0]])  # frame 10's pose, held
    assert np.array_equal(held.body_pose[6:], tr.body_pose[[3, 3]])  # frame 13's pose, held
    assert np.array_equal(held.global_orient[2:6], tr.global_orient[0:4])
    # never across a cut, never before the video
    assert hold_edge_poses(tr, 2, [(0, 10), (10, 14), (14, 30)]).start == 10
    assert hold_edge_poses(tr, 2, [(0, 10), (10, 14), (14, 30)]).stop == 14
    assert hold_edge_poses(tr.at(1), 3, [(0, 30)]).start == 0
    assert hold_edge_poses(tr, 0, [(0, 30)]) is tr
    never = tr.slice(slice(0, 5)).invalid()
    assert hold_edge_poses(never, 2, [(0, 30)]).valid.sum() == 0


def test_hold_edge_poses_does_not_hold_into_frames_where_the_body_yielded():
    """carphone: a body found on the man from frame 45 had yielded to the face avatar at 42-44;
    its first pose, held two frames back, stood over the face avatar's shoulder there."""
    tr = SMPLHTrack.rest(0, 30)
    tr.valid[:] = False
    tr.valid[12:20] = True
    yielded = np.zeros(30, bool)
    yielded[10:12] = True  # just before its first shown frame
    held = hold_edge_poses(tr, 3, [(0, 30)], yielded)
    assert held.start == 12 and held.stop == 23  # the end is held, the start is not
    yielded[:] = False
    yielded[8] = True  # further back than the hold reaches: no effect
    held = hold_edge_poses(tr, 3, [(0, 30)], yielded)
    assert held.start == 9 and held.stop == 23
