"""HMDB-51 adapter: per-class split files (1 train, 2 test, 0 unused)."""

from __future__ import annotations

import pytest

from anonymask.core.errors import DatasetError
from anonymask.storage.datasets import get_adapter
from anonymask.storage.datasets.hmdb51 import HMDB51_CLASSES

VIDEOS = {
    "brush_hair": [
        "April_09_brush_hair_u_nm_np1_ba_goo_0.avi",
        "Brushing_Hair_with_Beth_brush_hair_h_nm_np1_le_goo_0.avi",
    ],
    "wave": ["#20_Rhythm_&_Blues_wave_u_cm_np2_fr_med_1.avi"],
}
# split k: (value per video of the class, in order)
CODES = {
    1: {"brush_hair": "12", "wave": "2"},
    2: {"brush_hair": "21", "wave": "0"},
    3: {"brush_hair": "10", "wave": "1"},
}


def build(root, drop: str | None = None):
    splits = root / "testTrainMulti_7030_splits"
    splits.mkdir(parents=True)
    for cls, names in VIDEOS.items():
        for n in names:
            p = root / "videos" / cls / n
            p.parent.mkdir(parents=True, exist_ok=True)
            p.touch()
        for k in (1, 2, 3):
            fn = f"{cls}_test_split{k}.txt"
            if fn != drop:
                (splits / fn).write_text("".join(f"{n} {c} \n" for n, c in zip(names, CODES[k][cls])))


def test_hmdb_labels_and_splits(tmp_path):
    build(tmp_path)
    a = get_adapter("hmdb51", tmp_path)
    assert len(a.classes) == 51 and a.splits == ["split1", "split2", "split3"]
    recs = {r.extra["name"]: r for r in a.records()}
    r = recs["April_09_brush_hair_u_nm_np1_ba_goo_0.avi"]
    assert (r.label, r.label_name) == (0, "brush_hair")
    assert r.split == {"split1": "train", "split2": "test", "split3": "train"}
    assert r.extra["viewpoint"] == "ba" and r.extra["people"] == 1
    assert recs["Brushing_Hair_with_Beth_brush_hair_h_nm_np1_le_goo_0.avi"].split["split3"] == "unused"
    w = recs["#20_Rhythm_&_Blues_wave_u_cm_np2_fr_med_1.avi"]
    assert w.label == HMDB51_CLASSES.index("wave") == 50
    assert w.split == {"split1": "test", "split2": "unused", "split3": "train"}
    assert "/" not in w.video_id and "#" not in w.video_id and "&" not in w.video_id


def test_hmdb_missing_split_file_and_folder(tmp_path):
    build(tmp_path, drop="wave_test_split2.txt")
    with pytest.raises(DatasetError, match=r"expected .*testTrainMulti_7030_splits/wave_test_split2\.txt"):
        list(get_adapter("hmdb51", tmp_path).records())
    other = tmp_path / "elsewhere" / "hmdb"  # neither it nor its parent holds the split folder
    other.mkdir(parents=True)
    with pytest.raises(DatasetError, match="testTrainMulti_7030_splits"):
        get_adapter("hmdb51", other)


def test_hmdb_unknown_class_folder(tmp_path):
    build(tmp_path)
    (tmp_path / "videos" / "juggle").mkdir()
    (tmp_path / "videos" / "juggle" / "x.avi").touch()
    with pytest.raises(DatasetError, match="'juggle' is not an HMDB-51 class"):
        list(get_adapter("hmdb51", tmp_path).records())
