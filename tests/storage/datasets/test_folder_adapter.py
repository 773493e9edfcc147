"""Folder adapter: recursive listing, safe unique ids, optional labels CSV."""

from __future__ import annotations

import pytest

from anonymask.core.errors import DatasetError
from anonymask.storage.datasets import get_adapter

FILES = [
    "walk.mp4",
    "walk.avi",
    "clips/a b/run (1).MOV",
    "clips/jump.webm",
    "deep/x/y/z.mkv",
    "notes.txt",
    ".hidden/skip.mp4",
]


def test_listing_and_ids(tmp_path, make_files):
    make_files(*FILES)
    a = get_adapter("folder", tmp_path)
    recs = list(a.records())
    assert a.classes == [] and a.splits == []
    ids = [r.video_id for r in recs]
    assert len(ids) == 5 and len(set(ids)) == 5
    assert all("/" not in i and " " not in i and not i.startswith("__") for i in ids)
    by_rel = {r.extra["relative_path"]: r for r in recs}
    assert by_rel["deep/x/y/z.mkv"].video_id == "deep__x__y__z"
    assert by_rel["walk.mp4"].video_id != by_rel["walk.avi"].video_id
    assert all(r.label is None and r.split == {} for r in recs)


def test_labels_csv_names_and_split(tmp_path, make_files):
    make_files(*FILES)
    csv = tmp_path / "labels.csv"
    csv.write_text(
        "path_or_id,label,split\nclips/jump.webm,jump,train\ndeep__x__y__z,walk,test\nwalk.mp4,walk,train\n"
    )
    a = get_adapter("folder", tmp_path, labels=csv)
    assert a.classes == ["jump", "walk"] and a.splits == ["split"]
    recs = {r.extra["relative_path"]: r for r in a.records()}
    assert (recs["clips/jump.webm"].label, recs["clips/jump.webm"].split) == (0, {"split": "train"})
    assert (recs["deep/x/y/z.mkv"].label_name, recs["deep/x/y/z.mkv"].split) == ("walk", {"split": "test"})
    assert recs["walk.avi"].label is None and recs["walk.avi"].split == {"split": "unused"}


def test_integer_labels_and_ambiguity(tmp_path, make_files):
    make_files(*FILES)
    csv = tmp_path / "l.csv"
    csv.write_text("z.mkv,3\nclips/a b/run (1),0\n")
    a = get_adapter("folder", tmp_path, labels=csv)
    assert a.classes == ["0", "1", "2", "3"]
    recs = {r.extra["relative_path"]: r for r in a.records()}
    assert recs["deep/x/y/z.mkv"].label == 3 and recs["clips/a b/run (1).MOV"].label == 0
    csv.write_text("walk,1\n")  # stem shared by walk.mp4 and walk.avi
    with pytest.raises(DatasetError, match="several videos"):
        get_adapter("folder", tmp_path, labels=csv)


def test_bad_rows_and_empty_folder(tmp_path, make_files):
    make_files(*FILES)
    csv = tmp_path / "l.csv"
    csv.write_text("ghost.mp4,1\nwalk.mp4,2\n")
    with pytest.raises(DatasetError, match="ghost.mp4"):
        get_adapter("folder", tmp_path, labels=csv)
    with pytest.warns(UserWarning, match="ghost"):
        a = get_adapter("folder", tmp_path, labels=csv, strict=False)
    assert sum(r.label is not None for r in a.records()) == 1
    csv.write_text("walk.mp4,1,later\n")
    with pytest.raises(DatasetError, match="split 'later'"):
        get_adapter("folder", tmp_path, labels=csv)
    with pytest.raises(DatasetError, match="labels file"):
        get_adapter("folder", tmp_path, labels=tmp_path / "nope.csv")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match="no videos"):
        get_adapter("folder", tmp_path / "empty")
