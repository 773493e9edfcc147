"""ntu-skeleton backend: camera from Kinect joint/colour-pixel pairs, SMPL-H fitted to the joints.

The synthetic .skeleton files are written in the real format from a known SMPL-H motion seen by a
known colour camera; the Kinect joints live in a depth camera 5 cm beside it with Kinect axes
(x to the sensor's left, y up). As in NTU's files, the colour video is a mirror image of that
camera space (colorX grows with Kinect x), so the person's anatomical left appears where the
avatar's right is.
"""

import numpy as np
import pytest
from conftest import synthetic_motion
from scipy.spatial.transform import Rotation

from anonymask.core.errors import DatasetError, NoPersonError
from anonymask.models.anonymizer.metrics import mpjpe_mm
from anonymask.models.anonymizer.pose.fit import FitConfig
from anonymask.models.anonymizer.pose.keypoints import BODY_JOINTS
from anonymask.models.anonymizer.pose.ntu import (
    decompose_projection,
    dlt_projection,
    estimate_from_ntu_skeleton,
    fit_color_projection,
)
from anonymask.models.shared.body.tracks import JOINT_INDEX, Camera
from anonymask.storage.datasets.ntu_skeleton import write_ntu_skeleton

# SMPL-H joint at (about) each Kinect v2 joint's place, in NTU's joint order
KINECT_AS_SMPLH = (
    "pelvis", "spine2", "neck", "head", "left_shoulder", "left_elbow", "left_wrist", "left_middle1",
    "right_shoulder", "right_elbow", "right_wrist", "right_middle1", "left_hip", "left_knee", "left_ankle",
    "left_foot", "right_hip", "right_knee", "right_ankle", "right_foot", "spine3", "left_middle3",
    "left_thumb3", "right_middle3", "right_thumb3",
)  # fmt: skip
MIRROR_LABELS = [KINECT_AS_SMPLH.index(n.replace("left", "@").replace("right", "left").replace("@", "right"))
                 for n in KINECT_AS_SMPLH]
COLOR_CAM = Camera(1050.0, 1046.0, 955.3, 542.1, 1920, 1080)  # "true" colour intrinsics (NTU size)
R_CD = Rotation.from_euler("xyz", [0.6, -1.2, 0.4], degrees=True).as_matrix()  # colour -> depth
T_CD = np.array([0.052, -0.003, 0.004])
FRAMES = (10, 270, 480, 3)  # the ingested video: NTU frames downscaled 4x
FIT = FitConfig(iterations=100)


def kinect_view(smplh_joints, rng, mirrored=True, noise_m=0.01, noise_px=0.5):
    """(T,52,3) colour-camera joints of the body AS SEEN IN THE VIDEO -> Kinect joints (T,25,3) in
    depth-camera space + colour pixels (T,25,2) at 1920x1080.

    As with a real Kinect, the joints are noisy (noise_m) and their colour pixels are the mapping
    of those noisy joints (plus noise_px for the mapper's own imprecision)."""
    idx = [JOINT_INDEX[n] for n in KINECT_AS_SMPLH]
    if mirrored:  # Kinect's left joint = the real person's left = the video body's right
        idx = [idx[k] for k in MIRROR_LABELS]
    flip = np.array([-1.0, 1.0, 1.0]) if mirrored else np.ones(3)
    real = smplh_joints[:, idx] * flip  # the world the video mirrors
    kinect = (real @ R_CD.T + T_CD) * [-1.0, -1.0, 1.0]  # Kinect camera space: x left, y up, z forward
    kinect += rng.normal(scale=noise_m, size=kinect.shape)
    seen = ((kinect * [-1.0, -1.0, 1.0] - T_CD) @ R_CD) * flip
    pixels = COLOR_CAM.project(seen) + rng.normal(scale=noise_px, size=seen.shape[:2] + (2,))
    return kinect, pixels


def _root_aligned_and_absolute(body, track, truth, frames):
    got = body.pose_track(track).joints[frames][:, BODY_JOINTS]
    want = body.pose_track(truth).joints[frames][:, BODY_JOINTS]
    return mpjpe_mm(got, want, root=0), mpjpe_mm(got, want)


def test_dlt_recovers_camera_both_handednesses(rng):
    x = rng.uniform([-1, -1, 2], [1, 1, 5], size=(40, 3))
    k = COLOR_CAM.K
    r = Rotation.from_euler("xyz", [5, -20, 3], degrees=True).as_matrix()
    t = np.array([0.1, -0.2, 0.3])
    for mirrored in (False, True):
        xs = x * [-1.0, 1.0, 1.0] if mirrored else x
        cam = xs @ r.T + t
        u = cam[:, :2] / cam[:, 2:] * [k[0, 0], k[1, 1]] + k[:2, 2]
        p = dlt_projection(x, u)
        for sign in (1.0, -1.0):  # P is only known up to scale, sign included
            k2, r2, t2, m2 = decompose_projection(sign * p, x)
            assert m2 == mirrored
            np.testing.assert_allclose(k2, k, rtol=1e-6, atol=1e-4)
            np.testing.assert_allclose(r2, r, atol=1e-8)
            assert np.linalg.det(r2) == pytest.approx(1.0)
            np.testing.assert_allclose(t2, t, atol=1e-7)


@pytest.mark.parametrize("mirrored", [False, True])
def test_coplanar_joints_fall_back_to_nominal_intrinsics(rng, mirrored):
    """A single frame of a flat pose cannot determine K: nominal Kinect v2 K + PnP, handedness kept."""
    seen = np.c_[rng.uniform(-0.5, 0.5, (25, 2)), np.full(25, 3.0)]  # fronto-parallel plane
    kinect = seen * [-1.0, -1.0, 1.0] * ([-1.0, 1.0, 1.0] if mirrored else 1.0)
    pixels = COLOR_CAM.project(seen) + rng.normal(scale=0.5, size=(25, 2))
    proj = fit_color_projection(kinect, pixels, 1920, 1080)
    assert proj.source == "nominal" and proj.mirrored == mirrored
    assert proj.rms_px < 1.5
    np.testing.assert_allclose(proj.R, np.diag([-1.0, -1.0, 1.0]), atol=0.03)


def _write_scene(body, path, rng, mirrored=True):
    """Two people (B leaves after frame 6) and a static false 'body' (furniture) listed first."""
    t_len = FRAMES[0]
    a = synthetic_motion(body, t_len, seed=1, pelvis=(0.35, 0.15, 3.4))
    b = synthetic_motion(body, t_len, seed=2, pelvis=(-0.75, 0.25, 4.0))
    b.valid[7:] = False
    ka, pa = kinect_view(body.pose_track(a).joints, rng, mirrored)
    kb, pb = kinect_view(body.pose_track(b).joints, rng, mirrored)
    kb[7:], pb[7:] = np.nan, np.nan
    kf = np.repeat(ka[:1] + [1.2, 0.0, 1.5], t_len, 0) + rng.normal(scale=0.001, size=ka.shape)
    pf = np.repeat(pa[:1], t_len, 0)
    write_ntu_skeleton(path, np.stack([kf, ka, kb]), np.stack([pf, pa, pb]))
    return a, b


def test_ntu_two_people_mirrored_like_ntu(body, tmp_path, rng):
    a, b = _write_scene(body, tmp_path / "S001C001P001R001A050.skeleton", rng, mirrored=True)
    res = estimate_from_ntu_skeleton(tmp_path / "S001C001P001R001A050.skeleton", FRAMES, body, fit=FIT)
    want = COLOR_CAM.scaled(FRAMES[2] / 1920)
    cam = res.camera
    assert (cam.width, cam.height) == (480, 270)
    assert cam.fx == pytest.approx(want.fx, rel=0.02) and cam.fy == pytest.approx(want.fy, rel=0.02)
    assert cam.cx == pytest.approx(want.cx, abs=3.0) and cam.cy == pytest.approx(want.cy, abs=3.0)
    assert res.diagnostics["ntu_mirrored"] == 1.0
    assert len(res.tracks) == 2, "the static false body must be dropped"
    # match tracks to people by pelvis position (absolute: the camera frame is recovered)
    errs = {}
    for truth, name in ((a, "A"), (b, "B")):
        frames = np.flatnonzero(truth.valid)
        track = min(res.tracks, key=lambda tr: np.linalg.norm(tr.transl[frames] - truth.transl[frames]))
        np.testing.assert_array_equal(track.valid, truth.valid)
        errs[name] = _root_aligned_and_absolute(body, track, truth, frames)
        assert np.isfinite(res.boxes[track.track_id][frames]).all()
        assert np.isnan(res.boxes[track.track_id][~truth.valid]).all()
    print("ntu mirrored: MPJPE (root-aligned, absolute) mm", errs, "camera", cam, res.diagnostics)
    # 3-D joints are observed directly (1 cm Kinect jitter, smoothed over time): what remains is
    # mostly the unobserved collars and spine1; 30 mm root-aligned (~2x the measured error) and
    # 50 mm absolute (the camera's metric pose is recovered too) flag a wrong fit or camera.
    for rel, absolute in errs.values():
        assert rel < 30.0 and absolute < 50.0


def test_ntu_not_mirrored(body, tmp_path, rng):
    t_len = 8
    a = synthetic_motion(body, t_len, seed=3, pelvis=(0.0, 0.2, 3.0))
    ka, pa = kinect_view(body.pose_track(a).joints, rng, mirrored=False)
    path = write_ntu_skeleton(tmp_path / "x.skeleton", ka[None], pa[None])
    # NTU's video and skeleton frame counts can differ: 2 video frames more than skeleton frames
    res = estimate_from_ntu_skeleton(path, (t_len + 2, 540, 960, 3), body, fit=FIT)
    assert res.tracks[0].num_frames == t_len + 2
    np.testing.assert_array_equal(res.tracks[0].valid, np.arange(t_len + 2) < t_len)
    res.tracks[0] = res.tracks[0].slice(slice(0, t_len))
    assert res.diagnostics["ntu_mirrored"] == 0.0
    assert res.camera.fx == pytest.approx(COLOR_CAM.scaled(0.5).fx, rel=0.02)
    rel, absolute = _root_aligned_and_absolute(body, res.tracks[0], a, np.arange(t_len))
    print(f"ntu not mirrored: MPJPE {rel:.1f} mm root-aligned, {absolute:.1f} mm absolute")
    assert rel < 30.0 and absolute < 50.0


def test_missing_skeleton_is_a_clear_dataset_error(body, tmp_path):
    with pytest.raises(DatasetError, match=r"\.skeleton.*mediapipe"):
        estimate_from_ntu_skeleton(None, FRAMES, body)
    with pytest.raises(DatasetError, match=r"S002C003P004R001A010\.skeleton"):
        estimate_from_ntu_skeleton(None, FRAMES, body, video="raw/S002C003P004R001A010_rgb.avi")
    gone = tmp_path / "S001C001P001R001A001.skeleton"
    with pytest.raises(DatasetError, match=str(gone)):
        estimate_from_ntu_skeleton(gone, FRAMES, body)


def test_skeleton_without_bodies_is_no_person(body, tmp_path):
    path = write_ntu_skeleton(tmp_path / "empty.skeleton", np.full((1, 5, 25, 3), np.nan))
    with pytest.raises(NoPersonError, match="empty.skeleton"):
        estimate_from_ntu_skeleton(path, (5, 270, 480, 3), body)


def test_body_only_after_the_video_ends_is_no_person(body, tmp_path, rng):
    joints = np.full((1, 6, 25, 3), np.nan)
    joints[0, 4:] = rng.normal(size=(2, 25, 3)) * 0.3 + [0.0, 0.0, 3.0]
    path = write_ntu_skeleton(tmp_path / "late.skeleton", joints)
    with pytest.raises(NoPersonError, match="late.skeleton.*3 frames"):
        estimate_from_ntu_skeleton(path, (3, 270, 480, 3), body)
