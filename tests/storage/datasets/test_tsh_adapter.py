"""Toyota Smarthome adapter: action names with dots, cross-subject and cross-view protocols."""

from __future__ import annotations

import pytest

from anonymask.core.errors import DatasetError
from anonymask.storage.datasets import get_adapter

FILES = [
    "mp4/Cook.Cleandishes_p02_r00_v02_c03.mp4",  # subject 2 test; not a cross-view class
    "mp4/Drink.Fromcup_p03_r01_v05_c01.mp4",  # subject 3 train; camera 1 trains in both CV
    "mp4/Walk_p25_r02_v01_c02.mp4",  # camera 2 tests
    "mp4/Readbook_p18_r00_v11_c05.mp4",  # camera 5 validation
    "mp4/WatchTV_p19_r03_v01_c04.mp4",  # not a CV class
    "mp4/Sitdown_p07_r00_v03_c07.mp4",  # camera 7: unused in CV1, train in CV2
]


def test_tsh_labels_and_splits(tmp_path, make_files):
    make_files(*FILES)
    a = get_adapter("tsh", tmp_path)
    assert len(a.classes) == 31 and a.splits == ["xsub", "xview1", "xview2"]
    recs = {r.video_id: r for r in a.records()}
    r = recs["Cook.Cleandishes_p02_r00_v02_c03"]
    assert (r.label, r.label_name, r.subject, r.camera) == (0, "Cook.Cleandishes", "p02", "c03")
    assert r.split == {"xsub": "test", "xview1": "unused", "xview2": "unused"}
    assert r.extra["label_cv"] is None
    r = recs["Drink.Fromcup_p03_r01_v05_c01"]
    assert r.label == a.classes.index("Drink.Fromcup") == 8
    assert r.split == {"xsub": "train", "xview1": "train", "xview2": "train"}
    assert r.extra == {"round": 1, "video": 5, "label_cv": 3}
    assert recs["Walk_p25_r02_v01_c02"].split == {"xsub": "train", "xview1": "test", "xview2": "test"}
    assert recs["Readbook_p18_r00_v11_c05"].split == {"xsub": "test", "xview1": "val", "xview2": "val"}
    assert recs["WatchTV_p19_r03_v01_c04"].label == 30
    assert recs["WatchTV_p19_r03_v01_c04"].split["xview2"] == "unused"
    assert recs["Sitdown_p07_r00_v03_c07"].split == {"xsub": "train", "xview1": "unused", "xview2": "train"}


def test_tsh_unknown_action_and_malformed(tmp_path, make_files):
    make_files(*FILES, "mp4/Cook.Juggle_p02_r00_v02_c03.mp4", "mp4/Walk_p25_v01_c02.mp4")
    with pytest.raises(DatasetError) as e:
        list(get_adapter("tsh", tmp_path).records())
    assert "Cook.Juggle" in str(e.value) and "Walk_p25_v01_c02.mp4" in str(e.value)
    with pytest.warns(UserWarning):
        assert len(list(get_adapter("tsh", tmp_path, strict=False).records())) == len(FILES)
