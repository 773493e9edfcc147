import numpy as np
import pytest
import torch
import trimesh

from anonymask.models.shared.body import procedural as P
from anonymask.models.shared.body.tracks import JOINT_INDEX as J
from anonymask.models.shared.body.tracks import PARENTS


@pytest.fixture(scope="module")
def smplh_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    P.write_model_file(root / "smplh", "neutral")
    return root


@pytest.fixture(scope="module")
def arrays(smplh_dir):
    with np.load(smplh_dir / "smplh" / "SMPLH_NEUTRAL.npz") as z:
        return {k: z[k] for k in z.files}


def test_smplx_loads_generated_file(smplh_dir):
    import smplx

    model = smplx.create(str(smplh_dir), model_type="smplh", ext="npz", use_pca=False, gender="neutral")
    out = model(body_pose=torch.zeros(1, 63), return_verts=True)
    assert out.vertices.shape == (1, 6890, 3)
    assert out.joints.shape[1] >= 52
    assert model.faces.shape[1] == 3 and model.faces.max() < 6890
    assert torch.isfinite(out.vertices).all()
    assert model.parents.tolist() == list(PARENTS)


def test_file_keys_and_shapes(arrays):
    a = arrays
    assert a["v_template"].shape == (6890, 3)
    assert a["shapedirs"].shape[:2] == (6890, 3) and a["shapedirs"].shape[2] >= 10
    assert a["posedirs"].shape == (6890, 3, 459)
    assert a["J_regressor"].shape == (52, 6890)
    assert a["weights"].shape == (6890, 52)
    assert a["kintree_table"].shape == (2, 52)
    assert a["hands_componentsl"].shape[1] == 45 and a["hands_meanr"].shape == (45,)
    w = a["weights"]
    assert (w >= 0).all() and np.allclose(w.sum(1), 1.0)


def test_mesh_parts_are_closed_and_outward(arrays):
    mesh = trimesh.Trimesh(arrays["v_template"], arrays["f"], process=False)
    parts = mesh.split(only_watertight=False)
    assert 10 <= len(parts) <= 40
    for part in parts:
        assert part.is_watertight, "every body part is a closed surface"
        assert part.volume > 0, "faces wind outwards"
    used = np.unique(arrays["f"])
    assert used.shape[0] > 6500  # nearly every vertex is on the surface


def test_rest_body_proportions(arrays):
    v, jt = arrays["v_template"], arrays["J_regressor"] @ arrays["v_template"]
    height = v[:, 1].max() - v[:, 1].min()
    assert 1.6 < height < 1.8
    assert abs(v[:, 1].min() - P.FLOOR_Y) < 1e-6
    # T-pose: arms along x, head above neck above pelvis above knees above ankles
    order = ["left_ankle", "left_knee", "left_hip", "pelvis", "spine1", "spine2", "neck", "head"]
    ys = [jt[J[n], 1] for n in order]
    assert all(a < b for a, b in zip(ys, ys[1:]))
    assert jt[J["left_wrist"], 0] > jt[J["left_elbow"], 0] > jt[J["left_shoulder"], 0] > 0.1
    assert jt[J["right_wrist"], 0] < -0.5
    assert np.allclose(jt[:, 0][[J["left_knee"], J["left_elbow"]]], -jt[:, 0][[J["right_knee"], J["right_elbow"]]],
                       atol=1e-6)


def test_joint_regressor_tracks_shape_changes(arrays):
    rng = np.random.default_rng(1)
    dirs, reg = arrays["shapedirs"], arrays["J_regressor"]
    for _ in range(3):
        betas = rng.normal(0, 1.0, dirs.shape[2])
        v = arrays["v_template"] + dirs @ betas
        truth = P._build("neutral", betas).joints
        assert np.abs(reg @ v - truth).max() < 0.01  # linear shape space vs. the generator
    # and (to a fraction of a millimetre) on the template
    assert np.abs(reg @ arrays["v_template"] - arrays["J"]).max() < 1e-3


def test_shape_components_change_what_they_name(arrays):
    v0, dirs, reg = arrays["v_template"], arrays["shapedirs"], arrays["J_regressor"]

    def measure(k, amount):
        v = v0 + dirs[:, :, k] * amount
        jt = reg @ v
        return dict(
            height=v[:, 1].max() - v[:, 1].min(),
            shoulder=jt[J["left_shoulder"], 0] - jt[J["right_shoulder"], 0],
            arm=np.linalg.norm(jt[J["left_wrist"]] - jt[J["left_shoulder"]]),
            leg=jt[J["left_hip"], 1] - jt[J["left_ankle"], 1],
            girth=np.ptp(v[np.abs(v[:, 1] - jt[J["spine2"], 1]) < 0.02][:, 2]),
            head=np.ptp(v[v[:, 1] > jt[J["head"], 1]][:, 0]),
        )

    names = P.SHAPE_COMPONENTS
    checks = [("height", "height"), ("shoulder_width", "shoulder"), ("arm_length", "arm"),
              ("leg_length", "leg"), ("girth", "girth"), ("head_size", "head")]
    for comp, key in checks:
        k = names.index(comp)
        values = [measure(k, a)[key] for a in (-2, -1, 0, 1, 2)]
        assert all(b > a for a, b in zip(values, values[1:])), (comp, values)
    h = [measure(0, a)["height"] for a in (-1, 1)]
    assert 0.1 < h[1] - h[0] < 0.2  # +-1 std of height is a plausible spread


def test_landmark_vertices_sit_on_their_features(arrays):
    v = arrays["v_template"]
    jt = arrays["J"]
    ids = P.LANDMARK_VERTEX_IDS
    head = v[:, 1] > jt[J["head"], 1] - 0.02
    assert v[ids["nose"], 2] >= v[head, 2].max() - 0.005  # the nose is the head's front-most point
    assert v[ids["leye"], 0] > 0 > v[ids["reye"], 0]
    assert v[ids["lear"], 0] > v[ids["leye"], 0] and v[ids["rear"], 0] < v[ids["reye"], 0]
    assert v[ids["lmiddle"], 0] > jt[J["left_middle3"], 0] and v[ids["rmiddle"], 0] < jt[J["right_middle3"], 0]
    assert v[ids["LBigToe"], 2] > v[ids["LHeel"], 2] + 0.15
    assert v[ids["RHeel"], 1] < jt[J["right_ankle"], 1]


def test_genders_differ_and_generation_is_deterministic():
    z = np.zeros(P.NUM_SHAPE)
    m, f, n = (P._build(g, z) for g in ("male", "female", "neutral"))
    height = {k: b.verts[:, 1].max() - b.verts[:, 1].min() for k, b in (("m", m), ("f", f), ("n", n))}
    assert height["m"] > height["n"] > height["f"]
    sh = lambda b: b.joints[J["left_shoulder"], 0] / (b.verts[:, 1].max() - b.verts[:, 1].min())  # noqa: E731
    assert sh(m) > sh(f)
    again = P._build("female", z)
    assert np.array_equal(again.verts, f.verts)


def test_joint_regressor_is_a_convex_combination(arrays):
    reg = arrays["J_regressor"]
    assert (reg >= 0).all() and np.allclose(reg.sum(1), 1.0)  # numerically tame in float32
