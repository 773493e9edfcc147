import numpy as np
import pytest

from anonymask.models.anonymizer.compose import crop_tubelet, points_to_crop
from anonymask.models.anonymizer.refine.conditions import (
    OPENPOSE18_COLORS,
    OPENPOSE18_LIMBS,
    depth_condition,
    face_condition,
    face_mesh_contours,
    openpose_condition,
    smplh_to_openpose18,
)

S = 64


def standing_pose():
    """OpenPose-18 keypoints of a frontal stick figure in a 64x64 crop (x right, y down)."""
    p = {
        0: (32, 10), 1: (32, 18), 2: (24, 18), 3: (20, 28), 4: (18, 38), 5: (40, 18), 6: (44, 28),
        7: (46, 38), 8: (27, 36), 9: (26, 48), 10: (26, 60), 11: (37, 36), 12: (38, 48), 13: (38, 60),
        14: (30, 8), 15: (34, 8), 16: (28, 9), 17: (36, 9),
    }
    return np.array([p[k] for k in range(18)], float)


def test_openpose_joints_land_on_their_pixels_with_their_colours():
    joints = standing_pose()[None].repeat(2, 0)
    joints[1] += [3.0, -2.0]  # second frame moved
    img = openpose_condition(joints, S, radius=1)
    assert img.shape == (2, S, S, 3) and img.dtype == np.uint8
    for t in range(2):
        for k in (1, 3, 4, 9, 10, 12, 13):  # joints away from other joints
            x, y = joints[t, k].round().astype(int)
            assert tuple(img[t, y, x]) == OPENPOSE18_COLORS[k], (t, k)
    # a limb's midpoint shows 60 % of the limb colour
    a, b = OPENPOSE18_LIMBS[7]  # right hip -> right knee
    mid = (0.5 * (joints[0, a] + joints[0, b])).round().astype(int)
    expected = (0.6 * np.array(OPENPOSE18_COLORS[7])).astype(np.uint8)
    assert np.abs(img[0, mid[1], mid[0]].astype(int) - expected).max() <= 1
    # nothing far from the skeleton
    assert not img[0, :, :8].any() and not img[0, :, 56:].any()


def test_openpose_invisible_joints_and_their_limbs_are_not_drawn():
    joints = standing_pose()[None]
    vis = np.ones((1, 18), bool)
    vis[0, 7] = False  # left wrist
    img = openpose_condition(joints, S, visibility=vis, radius=1)
    full = openpose_condition(joints, S, radius=1)
    x, y = joints[0, 7].astype(int)
    assert full[0, y, x].any() and not img[0, y, x].any()
    lower_arm = (0.5 * (joints[0, 6] + joints[0, 7]) + [0, 2]).astype(int)
    assert full[0, lower_arm[1], lower_arm[0]].any() and not img[0, lower_arm[1], lower_arm[0]].any()
    nan = joints.copy()
    nan[0, 7] = np.nan
    assert np.array_equal(openpose_condition(nan, S, radius=1), img)
    with pytest.raises(ValueError):
        openpose_condition(joints[:, :17], S)


def test_smplh_mapping_to_openpose18():
    rng = np.random.default_rng(0)
    smplh = rng.normal(size=(3, 52, 2))
    op, valid = smplh_to_openpose18(smplh)
    assert op.shape == (3, 18, 2)
    assert np.allclose(op[:, 4], smplh[:, 21]) and np.allclose(op[:, 7], smplh[:, 20])  # wrists R, L
    assert np.allclose(op[:, 10], smplh[:, 8]) and np.allclose(op[:, 13], smplh[:, 7])  # ankles R, L
    assert np.allclose(op[:, 1], 0.5 * (smplh[:, 16] + smplh[:, 17]))
    assert np.allclose(op[:, 0], smplh[:, 15])  # head as nose without face points
    assert valid[:, :14].all() and not valid[:, 14:].any()
    face = rng.normal(size=(3, 5, 2))
    op2, valid2 = smplh_to_openpose18(smplh, face5=face)
    assert np.allclose(op2[:, [0, 14, 15, 16, 17]], face) and valid2.all()


def test_points_to_crop_matches_crop_tubelet():
    video = np.zeros((1, 100, 120), np.float32)
    video[0, 40, 70] = 1.0  # one bright pixel at x=70, y=40
    box = np.array([[50.0, 20.0, 90.0, 60.0]])
    crop = crop_tubelet(video, box, 80)  # 2x upsampling
    u, v = points_to_crop(np.array([[[70.0, 40.0]]]), box, 80)[0, 0]
    peak = np.unravel_index(np.argmax(crop[0]), crop[0].shape)
    assert abs(peak[1] - u) <= 0.5 and abs(peak[0] - v) <= 0.5


def test_face_condition_draws_white_dots_and_lines():
    pts = np.array([[[10.0, 10.0], [50.0, 10.0], [30.0, 40.0]]])
    img = face_condition(pts, S, radius=0, connections=[(0, 1)])
    for x, y in pts[0].astype(int):
        assert tuple(img[0, y, x]) == (255, 255, 255)
    assert img[0, 10, 30].min() > 200  # on the line 0-1
    assert not img[0, 25, 20].any()  # no line 0-2 was asked for
    vis = np.array([[True, True, False]])
    hidden = face_condition(pts, S, visibility=vis, radius=0)
    assert not hidden[0, 40, 30].any()
    contours = face_mesh_contours()
    assert len(contours) > 100 and max(max(c) for c in contours) < 468


def test_depth_condition_near_is_bright_background_black():
    z = np.zeros((2, 8, 8))
    z[0, 2:6, 2:6] = 2.0
    z[0, 3, 3] = 1.0  # nearest point of the clip
    z[1, 2:6, 2:6] = 4.0  # farthest point of the clip (frame 2)
    img = depth_condition(z, far_level=80)
    assert img.shape == (2, 8, 8, 3) and img.dtype == np.uint8
    assert np.all(img[..., 0] == img[..., 2])
    assert img[0, 3, 3, 0] == 255 and img[1, 3, 3, 0] == 80
    # 1/z normalised over the clip: 1/2 sits at (0.5 - 0.25) / (1 - 0.25) = 1/3 of the range
    assert img[0, 2, 2, 0] == round(80 + (255 - 80) / 3)
    assert not img[0, 0, 0].any() and not img[1, 7, 7].any()
    mask = z > 0
    mask[0, 3, 3] = False
    masked = depth_condition(z, mask)
    assert not masked[0, 3, 3].any() and masked[0, 2, 2, 0] == 255  # now the nearest avatar point
    assert not depth_condition(np.zeros((1, 4, 4))).any()
