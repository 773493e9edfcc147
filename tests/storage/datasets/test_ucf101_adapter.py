"""UCF-101 adapter: classInd labels, the three official splits, group as subject."""

from __future__ import annotations

import pytest

from anonymask.core.errors import DatasetError
from anonymask.storage.datasets import get_adapter
from anonymask.storage.datasets.ucf101 import UCF101_CLASSES


def build(root, *, drop: str | None = None):
    lists = root / "ucfTrainTestlist"
    lists.mkdir(parents=True)
    (lists / "classInd.txt").write_text("".join(f"{i} {c}\n" for i, c in enumerate(UCF101_CLASSES, 1)))
    videos = [
        ("ApplyEyeMakeup", "ApplyEyeMakeup", 1, 1),
        ("ApplyEyeMakeup", "ApplyEyeMakeup", 8, 2),
        ("HandstandPushups", "HandStandPushups", 16, 1),  # the real case mismatch
        ("YoYo", "YoYo", 25, 4),
    ]
    paths = []
    for folder, cls, g, c in videos:
        p = root / "UCF-101" / folder / f"v_{cls}_g{g:02d}_c{c:02d}.avi"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.touch()
        paths.append(p)
    # official rule: split k tests groups 7(k-1)+1 .. 7k
    for k in (1, 2, 3):
        train, test = [], []
        for (folder, _cls, g, _c), p in zip(videos, paths):
            line = f"{folder}/{p.name}"
            if 7 * (k - 1) < g <= 7 * k:
                test.append(line)
            else:
                train.append(f"{line} {UCF101_CLASSES.index(folder) + 1}")
        for name, rows in ((f"trainlist0{k}.txt", train), (f"testlist0{k}.txt", test)):
            if name != drop:
                (lists / name).write_text("\r\n".join(rows) + "\r\n")
    return paths


def test_ucf_labels_splits(tmp_path):
    build(tmp_path)
    a = get_adapter("ucf101", tmp_path)
    assert len(a.classes) == 101 and a.splits == ["split1", "split2", "split3"]
    recs = {r.video_id: r for r in a.records()}
    assert len(recs) == 4
    r = recs["v_ApplyEyeMakeup_g01_c01"]
    assert (r.label, r.label_name, r.subject) == (0, "ApplyEyeMakeup", "g01")
    assert r.split == {"split1": "test", "split2": "train", "split3": "train"}
    assert recs["v_ApplyEyeMakeup_g08_c02"].split == {"split1": "train", "split2": "test", "split3": "train"}
    r = recs["v_HandStandPushups_g16_c01"]
    assert (r.label, r.label_name) == (36, "HandstandPushups")
    assert r.split == {"split1": "train", "split2": "train", "split3": "test"}
    r = recs["v_YoYo_g25_c04"]
    assert r.label == 100 and r.extra["clip"] == 4
    assert set(r.split.values()) == {"train"}  # groups 22-25 always train


def test_ucf_missing_split_file(tmp_path):
    build(tmp_path, drop="testlist02.txt")
    a = get_adapter("ucf101", tmp_path)
    with pytest.raises(DatasetError, match=r"expected .*ucfTrainTestlist/testlist02\.txt"):
        list(a.records())


def test_ucf_missing_split_folder_and_bad_class_index(tmp_path):
    (tmp_path / "UCF-101").mkdir()
    with pytest.raises(DatasetError, match=r"expected .*ucfTrainTestlist"):
        get_adapter("ucf101", tmp_path)
    lists = tmp_path / "ucfTrainTestlist"
    lists.mkdir()
    (lists / "classInd.txt").write_text("1 ApplyEyeMakeup\n2 Archery\n")
    with pytest.raises(DatasetError, match="expected indices 1..101"):
        get_adapter("ucf101", tmp_path)


def test_ucf_malformed_names(tmp_path):
    build(tmp_path)
    (tmp_path / "UCF-101" / "YoYo" / "yoyo_clip.avi").touch()
    (tmp_path / "UCF-101" / "YoYo" / "v_Archery_g01_c01.avi").touch()
    with pytest.raises(DatasetError) as e:
        list(get_adapter("ucf101", tmp_path).records())
    assert "yoyo_clip.avi" in str(e.value) and "in folder 'YoYo'" in str(e.value)
