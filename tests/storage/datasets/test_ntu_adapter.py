"""NTU RGB+D 60/120 adapters over trees that follow the real names."""

from __future__ import annotations

import pytest

from anonymask.core.errors import DatasetError
from anonymask.storage.datasets import get_adapter
from anonymask.storage.datasets.ntu import NTU120_XSUB_TRAIN, parse_ntu_name

NAMES = [
    "S001C001P001R001A001",  # subject 1 (train xsub), camera 1 (test xview)
    "S001C002P003R002A013",  # subject 3 (test), camera 2 (train)
    "S002C003P008R001A060",  # last NTU-60 class, subject 8 train, camera 3 train
    "S017C003P040R002A050",  # mutual action
]
NAMES_120 = ["S018C001P045R001A061", "S019C002P044R002A120", "S032C001P103R001A100"]


def rgb(name: str) -> str:
    return f"nturgb+d_rgb/{name}_rgb.avi"


def by_id(adapter):
    return {r.video_id: r for r in adapter.records()}


def test_ntu60_labels_and_splits(tmp_path, make_files):
    make_files(*[rgb(n) for n in NAMES], "nturgb+d_skeletons/S001C001P001R001A001.skeleton", "README.txt")
    a = get_adapter("ntu", tmp_path)
    assert len(a.classes) == 60 and a.classes[0] == "drink water"
    assert a.splits == ["xsub", "xview"]
    recs = by_id(a)
    assert sorted(recs) == sorted(NAMES)
    r = recs["S001C001P001R001A001"]
    assert (r.label, r.label_name, r.subject, r.camera, r.setup) == (0, "drink water", "P001", "C001", "S001")
    assert r.split == {"xsub": "train", "xview": "test"}
    assert r.extra["skeleton"].endswith("nturgb+d_skeletons/S001C001P001R001A001.skeleton")
    r = recs["S001C002P003R002A013"]
    assert r.label == 12 and r.split == {"xsub": "test", "xview": "train"}
    assert "skeleton" not in r.extra and r.extra["replication"] == 2
    r = recs["S002C003P008R001A060"]
    assert r.label == 59 and r.split == {"xsub": "train", "xview": "train"}
    assert r.label_name == "walking apart from each other"
    assert recs["S017C003P040R002A050"].extra["mutual"] is True
    assert r.extra["mutual"] is True and recs["S001C001P001R001A001"].extra["mutual"] is False


def test_ntu60_rejects_ntu120_actions(tmp_path, make_files):
    make_files(*[rgb(n) for n in NAMES + NAMES_120[:1]])
    with pytest.raises(DatasetError, match="A061.*ntu120"):
        list(get_adapter("ntu", tmp_path).records())
    with pytest.warns(UserWarning, match="A061"):
        recs = list(get_adapter("ntu", tmp_path, strict=False).records())
    assert len(recs) == len(NAMES)


def test_ntu120_labels_and_splits(tmp_path, make_files):
    make_files(*[rgb(n) for n in NAMES + NAMES_120])
    a = get_adapter("ntu120", tmp_path)
    assert len(a.classes) == 120 and len(set(a.classes)) == 120
    assert a.splits == ["xsub", "xset"]
    recs = by_id(a)
    assert len(recs) == 7
    r = recs["S018C001P045R001A061"]
    assert (r.label, r.label_name) == (60, "put on headphone")
    assert r.split == {"xsub": "train", "xset": "train"}  # subject 45 trains, setup 18 even
    r = recs["S019C002P044R002A120"]
    assert r.label == 119 and r.split == {"xsub": "test", "xset": "test"}
    assert recs["S032C001P103R001A100"].split == {"xsub": "train", "xset": "train"}
    assert recs["S001C002P003R002A013"].split["xset"] == "test"
    assert len(NTU120_XSUB_TRAIN) == 53


def test_malformed_names(tmp_path, make_files):
    make_files(
        *[rgb(n) for n in NAMES], "nturgb+d_rgb/S01C001P001R001A001_rgb.avi", "x/S001C001P001R001_rgb.avi"
    )
    with pytest.raises(DatasetError) as e:
        list(get_adapter("ntu", tmp_path).records())
    msg = str(e.value)
    assert "2 file(s)" in msg and "S01C001P001R001A001_rgb.avi" in msg and "SsssCcccPpppRrrrAaaa" in msg
    with pytest.warns(UserWarning, match="skipped"):
        assert len(list(get_adapter("ntu", tmp_path, strict=False).records())) == len(NAMES)


def test_ignore_list_and_empty_tree(tmp_path, make_files):
    make_files(*[rgb(n) for n in NAMES], root=tmp_path / "data")
    lst = tmp_path / "samples_with_missing_skeletons.txt"
    lst.write_text("S001C002P003R002A013\n\n# comment\nS999C001P001R001A001\n")
    recs = by_id(get_adapter("ntu", tmp_path / "data", ignore_list=lst))
    assert "S001C002P003R002A013" not in recs and len(recs) == 3
    with pytest.raises(DatasetError, match="list file .* does not exist"):
        get_adapter("ntu", tmp_path / "data", ignore_list=tmp_path / "nope.txt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match="no videos named"):
        list(get_adapter("ntu", tmp_path / "empty").records())
    with pytest.raises(DatasetError, match="unknown option.*strcit"):
        get_adapter("ntu", tmp_path / "data", strcit=False)
    with pytest.raises(DatasetError, match="does not exist"):
        get_adapter("ntu", tmp_path / "missing")


def test_parse_name():
    assert parse_ntu_name("S001C002P003R004A005") == {
        "setup": 1, "camera": 2, "subject": 3, "replication": 4, "action": 5
    }  # fmt: skip
    assert parse_ntu_name("S001C002P003R004") is None
