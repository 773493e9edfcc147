import numpy as np
import pytest
import torch

from anonymask.core.errors import DatasetError
from anonymask.models.anonymizer.skeleton.data import (
    NTULoadReport,
    SkeletonDataset,
    body_joints,
    denormalize_sequence,
    from_ntu_skeletons,
    load_genders_csv,
    normalize_sequence,
    parse_ntu_name,
    split_by_sequence,
    split_by_values,
    to_length,
)
from anonymask.models.anonymizer.skeleton.graphs import NTU25

# ----------------------------------------------------------------------------- normalisation


@pytest.mark.parametrize("center", ["mean", "first", "frame"])
@pytest.mark.parametrize("align", [None, (12, 16)])
def test_normalize_is_invertible_and_keeps_bone_lengths(synthetic, center, align):
    x = synthetic["sequences"][:3]
    for batch in (x, x[0]):
        xn, params = normalize_sequence(batch, 0, center=center, align_hips=align)
        assert xn.shape == batch.shape and xn.dtype == np.float32
        np.testing.assert_allclose(denormalize_sequence(xn, params), batch, atol=1e-4)
        np.testing.assert_allclose(NTU25.bone_lengths(xn), NTU25.bone_lengths(batch), atol=1e-4)


def test_normalize_centres_on_the_root(synthetic):
    x = synthetic["sequences"][:4]
    xn, _ = normalize_sequence(x, 0, center="mean")
    np.testing.assert_allclose(xn[:, :, 0].mean(axis=1), 0.0, atol=1e-5)
    assert np.abs(x[:, :, 0].mean(axis=1)).max() > 0.5  # it was far from the origin before
    xf, _ = normalize_sequence(x, 0, center="frame")
    np.testing.assert_allclose(xf[:, :, 0], 0.0, atol=1e-5)


def test_align_hips_points_the_hip_line_along_x(synthetic):
    x = synthetic["sequences"][:5]
    xn, params = normalize_sequence(x, 0, align_hips=(12, 16), up_axis=1)
    across = (xn[:, :, 12] - xn[:, :, 16]).mean(axis=1)
    assert np.all(across[:, 0] > 0)
    np.testing.assert_allclose(across[:, 2], 0.0, atol=1e-5)
    # rotation about the vertical only: heights are unchanged
    np.testing.assert_allclose(xn[..., 1], x[..., 1] - params["offset"][..., 1], atol=1e-5)


def test_normalize_rejects_bad_input():
    with pytest.raises(ValueError, match="shape"):
        normalize_sequence(np.zeros((5, 25)), 0)
    with pytest.raises(ValueError, match="root"):
        normalize_sequence(np.zeros((5, 25, 3)), 30)


# ----------------------------------------------------------------------------- lengths, dataset


def test_to_length_crop_and_resample():
    x = np.arange(10, dtype=np.float32)[:, None, None] * np.ones((1, 2, 3), np.float32)
    c = to_length(x, 4)
    assert c.shape == (4, 2, 3) and c[0, 0, 0] == 3  # centred window 3..6
    assert to_length(x, 4, start=6)[0, 0, 0] == 6
    p = to_length(x, 13)
    assert p.shape == (13, 2, 3) and np.all(p[10:] == 9)  # padded with the last frame
    r = to_length(x, 19, "resample")
    assert r.shape == (19, 2, 3)
    np.testing.assert_allclose(r[:, 0, 0], np.linspace(0, 9, 19), atol=1e-6)


def test_dataset_items_labels_and_subject_mapping():
    rng = np.random.default_rng(0)
    seqs = [rng.normal(size=(t, 25, 3)).astype(np.float32) + 5 for t in (30, 12, 50)]
    ds = SkeletonDataset(seqs, [2, 0, 1], ["P010", "P003", "P010"], [1, 0, 1], length=16, random_crop=True)
    assert ds.subject_ids == ["P003", "P010"]
    x, action, subject, gender = ds[0]
    assert isinstance(x, torch.Tensor) and x.shape == (16, 25, 3)
    assert (action, subject, gender) == (2, 1, 1)
    arrays = ds.arrays()
    assert arrays.x.shape == (3, 16, 25, 3)
    np.testing.assert_array_equal(arrays.subject, [1, 0, 1])
    assert abs(arrays.x[:, :, 0].mean()) < 1.0  # normalised: centred near the origin, not at 5
    no_gender = SkeletonDataset(seqs, [0, 0, 0], [1, 2, 3], length=8)
    np.testing.assert_array_equal(no_gender.arrays().gender, [-1, -1, -1])
    with pytest.raises(ValueError, match="entries"):
        SkeletonDataset(seqs, [0, 1], [1, 2, 3])
    with pytest.raises(ValueError, match="same J"):
        SkeletonDataset([seqs[0], seqs[1][:, :22]], [0, 1], [1, 2])


def test_split_by_sequence_keeps_every_subject_on_both_sides(synthetic):
    s, a = synthetic["subjects"], synthetic["actions"]
    train, test = split_by_sequence(s, a, test_fraction=0.25, seed=3)
    assert len(np.intersect1d(train, test)) == 0
    assert len(train) + len(test) == len(s)
    for k in np.unique(s):
        for act in np.unique(a):
            assert ((s[train] == k) & (a[train] == act)).any()
            assert ((s[test] == k) & (a[test] == act)).any()
    assert len(test) == pytest.approx(0.25 * len(s), abs=len(np.unique(s)) * len(np.unique(a)))
    # a different seed picks different sequences
    assert not np.array_equal(test, split_by_sequence(s, a, 0.25, seed=4)[1])


def test_split_by_values():
    train, test = split_by_values([1, 2, 1, 2, 2], [2])
    np.testing.assert_array_equal(train, [0, 2])
    np.testing.assert_array_equal(test, [1, 3, 4])


# ----------------------------------------------------------------------------- NTU files


def test_parse_ntu_name():
    info = parse_ntu_name("/data/nturgb+d_skeletons/S017C003P020R002A060.skeleton")
    assert info == {"setup": 17, "camera": 3, "performer": 20, "replication": 2, "action": 60}
    with pytest.raises(DatasetError, match="S01C001P001R001A001.skeleton"):
        parse_ntu_name("S01C001P001R001A001.skeleton")


def test_load_genders_csv(tmp_path):
    good = tmp_path / "genders.csv"
    good.write_text("performer,gender\nP001,M\n2,female\n3,1\n")
    assert load_genders_csv(good) == {1: 0, 2: 1, 3: 1}
    bad = tmp_path / "bad.csv"
    bad.write_text("subject,gender\n1,M\n2,X\n")
    with pytest.raises(DatasetError, match=r"bad.csv:3: bad gender"):
        load_genders_csv(bad)
    nocol = tmp_path / "nocol.csv"
    nocol.write_text("id,sex\n1,M\n")
    with pytest.raises(DatasetError, match="nocol.csv: needs columns"):
        load_genders_csv(nocol)
    with pytest.raises(DatasetError, match="not found"):
        load_genders_csv(tmp_path / "missing.csv")


def _ntu_tree(tmp_path, names):
    paths = []
    for name in names:
        p = tmp_path / name
        p.write_text("stand-in; the test reader ignores the content\n")
        paths.append(p)
    return paths


def _reader(tracks):
    return lambda path: tracks[path.name]


def test_from_ntu_skeletons_labels_and_body_choice(tmp_path):
    rng = np.random.default_rng(0)
    names = ["S001C001P001R001A001.skeleton", "S001C002P002R002A003.skeleton"]
    paths = _ntu_tree(tmp_path, names)
    still = np.tile(rng.normal(size=(1, 25, 3)), (20, 1, 1))
    moving = rng.normal(size=(20, 25, 3))
    tracks = {names[0]: [still, moving], names[1]: [moving[:15]]}
    csv = tmp_path / "g.csv"
    csv.write_text("performer,gender\n1,M\n2,F\n")
    ds = from_ntu_skeletons(paths, genders_csv=csv, length=10, reader=_reader(tracks), normalize=False)
    np.testing.assert_array_equal(ds.actions, [0, 2])
    assert ds.subject_ids == [1, 2]
    np.testing.assert_array_equal(ds.genders, [0, 1])
    np.testing.assert_allclose(ds.sequences[0], moving, atol=1e-6)  # the body that moves, not the still one
    assert ds.meta[1]["replication"] == 2 and ds.meta[1]["camera"] == 2


def test_from_ntu_skeletons_errors_name_the_file(tmp_path):
    rng = np.random.default_rng(0)
    names = ["S001C001P001R001A001.skeleton", "S001C001P007R001A002.skeleton", "notntu.skeleton"]
    paths = _ntu_tree(tmp_path, names)
    tracks = {names[0]: [rng.normal(size=(9, 25, 3))], names[1]: [rng.normal(size=(9, 20, 3))], names[2]: []}
    with pytest.raises(DatasetError, match="P007R001A002.skeleton: body track has shape"):
        from_ntu_skeletons(paths[:2], reader=_reader(tracks))
    with pytest.raises(DatasetError, match="notntu.skeleton: not an NTU"):
        from_ntu_skeletons([paths[0], paths[2]], reader=_reader(tracks))
    with pytest.raises(DatasetError, match="S009C001P001R001A001.skeleton: file not found"):
        from_ntu_skeletons([tmp_path / "S009C001P001R001A001.skeleton"], reader=_reader(tracks))

    def broken(path):
        raise ValueError("truncated body block")

    with pytest.raises(DatasetError, match="A001.skeleton: cannot read skeleton file.*truncated"):
        from_ntu_skeletons(paths[:1], reader=broken)
    empty = {names[0]: []}
    with pytest.raises(DatasetError, match="A001.skeleton: no body"):
        from_ntu_skeletons(paths[:1], reader=_reader(empty))
    # skip_bad leaves the bad ones out and says why
    report = NTULoadReport()
    ds = from_ntu_skeletons(paths, reader=_reader(tracks), skip_bad=True, report=report, length=4)
    assert len(ds) == 1
    assert sorted(p.split("/")[-1] for p, _ in report.skipped) == sorted(names[1:])
    # a gender file that misses a performer is an error even with skip_bad
    csv = tmp_path / "g.csv"
    csv.write_text("performer,gender\n2,F\n")
    with pytest.raises(DatasetError, match="g.csv: no gender for performer P001"):
        from_ntu_skeletons(paths, reader=_reader(tracks), genders_csv=csv, skip_bad=True)


def test_from_ntu_skeletons_reads_real_format_files(tmp_path, synthetic):
    from anonymask.storage.datasets.ntu_skeleton import write_ntu_skeleton

    seqs = synthetic["sequences"]
    still = np.repeat(seqs[5][:1], len(seqs[0]), axis=0)  # a static false body next to the performer
    a = write_ntu_skeleton(tmp_path / "S001C001P003R001A002.skeleton", np.stack([still, seqs[0]]))
    b = write_ntu_skeleton(tmp_path / "S001C002P004R002A001.skeleton", seqs[1][None])
    ds = from_ntu_skeletons([a, b], length=12, normalize=False)
    np.testing.assert_allclose(ds.sequences[0], seqs[0], atol=1e-5)
    np.testing.assert_array_equal(ds.actions, [1, 0])
    assert ds.subject_ids == [3, 4]
    assert ds.arrays().x.shape == (2, 12, 25, 3)

    broken = tmp_path / "S001C001P005R001A003.skeleton"
    broken.write_text("\n".join(a.read_text().splitlines()[:40]))  # truncated mid-frame
    with pytest.raises(DatasetError, match="S001C001P005R001A003.skeleton"):
        from_ntu_skeletons([a, broken])


def test_body_joints_drops_smplh_fingers():
    x = np.arange(2 * 52 * 3, dtype=np.float32).reshape(2, 52, 3)
    np.testing.assert_array_equal(body_joints(x), x[:, :22])
    y = np.zeros((4, 25, 3))
    assert body_joints(y) is not None and body_joints(y).shape == (4, 25, 3)
