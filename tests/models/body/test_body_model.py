import shutil

import numpy as np
import pytest

from anonymask.core.errors import MissingWeightsError
from anonymask.models.shared.body import model as body_model_module
from anonymask.models.shared.body.model import (
    BodyModel,
    BodyModelFilesError,
    get_body_model,
    relaxed_hand_pose,
)
from anonymask.models.shared.body.tracks import JOINT_INDEX as J
from anonymask.models.shared.body.tracks import SMPLHTrack, upright_orient


@pytest.fixture(scope="module")
def model():
    return get_body_model("neutral")


def _pose(t=1):
    return np.zeros((t, 63), np.float32)


def test_counts_and_shapes(model):
    assert model.procedural and model.num_vertices == 6890
    assert model.faces.ndim == 2 and model.faces.shape[1] == 3 and model.faces.max() < 6890
    out = model.forward(np.zeros(10), np.zeros((4, 3)), _pose(4), transl=np.zeros((4, 3)))
    assert out.vertices.shape == (4, 6890, 3) and out.vertices.dtype == np.float32
    assert out.joints.shape == (4, 52, 3) and out.keypoints.shape == (4, 21, 3)
    assert get_body_model("neutral") is model


def test_height_grows_with_first_beta(model):
    heights = []
    for b0 in (-2.0, -1.0, 0.0, 1.0, 2.0):
        v = model.rest(np.array([b0] + [0.0] * 9)).vertices[0]
        heights.append(v[:, 1].max() - v[:, 1].min())
    assert all(b > a + 0.03 for a, b in zip(heights, heights[1:])), heights


def test_pose_moves_the_right_wrist_only(model):
    rest = model.rest().joints[0]
    body = _pose()
    body[0, 3 * (J["left_elbow"] - 1) + 1] = 1.2  # bend the left elbow about y
    out = model.forward(np.zeros(10), np.zeros((1, 3)), body, transl=np.zeros((1, 3))).joints[0]
    assert np.linalg.norm(out[J["left_wrist"]] - rest[J["left_wrist"]]) > 0.1
    assert np.linalg.norm(out[J["left_elbow"]] - rest[J["left_elbow"]]) < 1e-5
    assert np.linalg.norm(out[J["right_wrist"]] - rest[J["right_wrist"]]) < 1e-5
    # bone length is preserved by the rotation
    assert np.isclose(np.linalg.norm(out[J["left_wrist"]] - out[J["left_elbow"]]),
                      np.linalg.norm(rest[J["left_wrist"]] - rest[J["left_elbow"]]), atol=1e-5)


def test_upright_orientation_in_camera_frame(model):
    pelvis_at = np.array([0.3, 0.1, 4.0])
    tr = model.transl_for(np.zeros(10), pelvis_at)
    out = model.forward(np.zeros(10), upright_orient()[None], _pose(), transl=tr[None])
    jt, v = out.joints[0], out.vertices[0]
    assert np.allclose(jt[J["pelvis"]], pelvis_at, atol=1e-5)
    # y down: head above pelvis above ankles; the person's left is on the image right
    assert jt[J["head"], 1] < jt[J["pelvis"], 1] < jt[J["left_ankle"], 1]
    assert jt[J["left_shoulder"], 0] > jt[J["right_shoulder"], 0]
    nose = out.keypoints[0, 0]
    assert nose[2] < jt[J["head"], 2]  # facing the camera: nose nearer than the head joint
    assert v[:, 1].max() - v[:, 1].min() > 1.6
    back = model.forward(np.zeros(10), upright_orient(np.pi)[None], _pose(), transl=tr[None])
    assert back.keypoints[0, 0, 2] > back.joints[0, J["head"], 2]
    assert back.joints[0, J["left_shoulder"], 0] < back.joints[0, J["right_shoulder"], 0]


def test_pose_track_and_chunked_batches_match_single_frames(model, monkeypatch):
    monkeypatch.setattr(body_model_module, "_CHUNK", 4)
    rng = np.random.default_rng(0)
    t = 11  # several internal chunks
    tr = SMPLHTrack(0, rng.normal(0, 0.5, 10), rng.normal(0, 0.3, (t, 3)), rng.normal(0, 0.2, (t, 63)),
                    np.tile(relaxed_hand_pose("left"), (t, 1)), np.tile(relaxed_hand_pose("right"), (t, 1)),
                    rng.normal(0, 1, (t, 3)))
    out = model.pose_track(tr)
    for f in (0, 3, 4, 10):
        one = model.forward(tr.betas, tr.global_orient[f:f + 1], tr.body_pose[f:f + 1],
                            tr.left_hand_pose[f:f + 1], tr.right_hand_pose[f:f + 1], tr.transl[f:f + 1])
        assert np.abs(one.vertices[0] - out.vertices[f]).max() < 1e-4
    betas_per_frame = np.tile(tr.betas, (t, 1))
    again = model.forward(betas_per_frame, tr.global_orient, tr.body_pose, tr.left_hand_pose,
                          tr.right_hand_pose, tr.transl)
    assert np.abs(again.joints - out.joints).max() < 1e-4


def test_relaxed_hand_curls_fingers_towards_the_palm(model):
    flat = model.rest().joints[0]
    out = model.forward(np.zeros(10), np.zeros((1, 3)), _pose(), relaxed_hand_pose("left")[None],
                        relaxed_hand_pose("right")[None], np.zeros((1, 3)))
    tips = out.keypoints[0]
    rest_tips = model.rest().keypoints[0]
    # palm faces down (-y) in the rest pose: curled finger tips go down, on both hands
    for k in (12, 13, 17, 18):  # left index/middle, right index/middle tips
        assert tips[k, 1] < rest_tips[k, 1] - 0.01
    assert np.allclose(out.joints[0, :22], flat[:22], atol=1e-6)


def test_real_file_folder_is_used(model, tmp_path, monkeypatch):
    shutil.copy(model.path, tmp_path / "SMPLH_NEUTRAL.npz")
    monkeypatch.setenv("ANONYMASK_SMPLH_DIR", str(tmp_path))
    real = BodyModel(gender="neutral")
    assert not real.procedural and real.path == tmp_path / "SMPLH_NEUTRAL.npz"
    a = real.forward(np.zeros(10), upright_orient()[None], _pose())
    b = model.forward(np.zeros(10), upright_orient()[None], _pose())
    assert np.allclose(a.vertices, b.vertices)


def test_missing_real_files_raise_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("ANONYMASK_SMPLH_DIR", str(tmp_path))
    with pytest.raises(BodyModelFilesError) as err:
        BodyModel(gender="female")
    assert isinstance(err.value, MissingWeightsError)
    assert "SMPLH_FEMALE.npz" in str(err.value) and str(tmp_path) in str(err.value)


def test_concurrent_small_batches_restore_the_thread_count(model):
    import threading

    import torch

    before = torch.get_num_threads()
    errors = []

    def work():
        try:
            for _ in range(5):
                model.forward(np.zeros(10), np.zeros((1, 3)), _pose(), transl=np.zeros((1, 3)))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors and torch.get_num_threads() == before


def test_fast_skinning_matches_smplx(model):
    import torch

    assert model._zero_posedirs  # the procedural model has no pose-corrective shapes
    rng = np.random.default_rng(3)
    t = 3
    args = [torch.tensor(rng.normal(0, s, shape), dtype=torch.float32) for s, shape in
            ((0.8, (t, 10)), (0.5, (t, 3)), (0.4, (t, 63)), (0.4, (t, 45)), (0.4, (t, 45)), (1.0, (t, 3)))]
    with torch.no_grad():
        v_fast, j_fast = model._run(*args, use_smplx=False)
        v_ref, j_ref = model._run(*args, use_smplx=True)
    assert torch.allclose(v_fast, v_ref, atol=1e-5) and torch.allclose(j_fast, j_ref, atol=1e-5)
    assert j_fast.shape[1] == 52 + 21


def test_reshape_track_keeps_feet_or_pelvis(model):
    t = 2
    tr = SMPLHTrack.rest(0, t)
    tr.global_orient[:] = upright_orient(0.5)
    tr.transl[:] = model.transl_for(tr.betas, [0.2, 0.1, 4.0])
    before = model.pose_track(tr)
    tall = np.zeros(10, np.float32)
    tall[0] = 2.0
    feet = model.reshape_track(tr, tall)
    pelvis = model.reshape_track(tr, tall, keep="pelvis")
    assert np.array_equal(feet.betas, tall) and np.array_equal(tr.betas, np.zeros(10))  # input untouched
    a, b = model.pose_track(feet), model.pose_track(pelvis)
    sole = lambda out: out.vertices[:, :, 1].max(axis=1)  # noqa: E731 - y down: the soles are max y
    head = lambda out: out.vertices[:, :, 1].min(axis=1)  # noqa: E731
    assert np.allclose(sole(a), sole(before), atol=0.005)  # still standing on the same floor
    assert (head(a) < head(before) - 0.05).all()  # taller: the head is higher in the image
    assert np.allclose(b.joints[:, 0], before.joints[:, 0], atol=1e-5)
    assert (sole(b) > sole(before) + 0.03).all()  # longer legs reach below the old floor


@pytest.mark.parametrize("frames", [8, 200])
def test_posing_is_bit_identical_whatever_torch_thread_count(frames):
    """A store computed with one thread count and repaired (or resumed on a Dask worker) with
    another must be bit-identical: a multi-threaded GEMM rounded the posed vertices differently,
    and one pixel of the tiny set's repair came out off by one (issue 32)."""
    import torch

    from anonymask.models.shared.body.model import get_body_model

    body = get_body_model()
    rng = np.random.default_rng(3)
    args = dict(betas=rng.normal(size=10) * 0.5, global_orient=rng.normal(size=(frames, 3)) * 0.3,
                body_pose=rng.normal(size=(frames, 63)) * 0.3, transl=rng.normal(size=(frames, 3)))
    outs = []
    for threads in (1, 4):
        torch.set_num_threads(threads)  # the autouse fixture restores it
        outs.append(body(**args))
        assert torch.get_num_threads() == threads  # the caller's setting is given back
    np.testing.assert_array_equal(outs[0].vertices, outs[1].vertices)
    np.testing.assert_array_equal(outs[0].joints, outs[1].joints)
    np.testing.assert_array_equal(outs[0].keypoints, outs[1].keypoints)
