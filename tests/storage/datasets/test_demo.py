"""The demo/synthetic adapter over a generated root: records, registry names, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from anonymask.core.errors import DatasetError
from anonymask.storage.datasets import available, get_adapter


def test_records_follow_the_manifest(tiny_dataset):
    doc = json.loads((tiny_dataset / "dataset.json").read_text())
    ds = get_adapter("demo", tiny_dataset)
    assert ds.classes == ["walk", "punch_other"] and ds.splits == ["xsub", "xview"]
    recs = {r.video_id: r for r in ds.records()}
    assert sorted(recs) == sorted(v["video_id"] for v in doc["videos"])
    for v in doc["videos"]:
        r = recs[v["video_id"]]
        assert Path(r.path) == tiny_dataset / v["path"] and Path(r.path).is_file()
        assert r.label == v["label"] and r.label_name == doc["classes"][v["label"]]
        assert r.split == v["split"] and set(r.split) == {"xsub", "xview"}
        assert r.subject == v["subjects"][0] and r.camera == v["camera"]
        assert Path(r.extra["gt"]).is_file() and r.extra["identity"] == v["subjects"]
        assert r.extra["gender"] == v["genders"] and r.extra["background"] == v["background"]
    pair = recs["s01s02_a02_r01"]
    assert pair.extra["people"] == 2 and pair.label_name == "punch_other"
    desc = ds.describe()
    assert desc["dataset"] == "demo" and desc["classes"] == ds.classes and desc["fps"] == doc["fps"]


def test_synthetic_name_reads_the_same_layout(tiny_dataset):
    assert {"demo", "synthetic"} <= set(available())
    a = [r.to_dict() for r in get_adapter("demo", tiny_dataset).records()]
    b = [r.to_dict() for r in get_adapter("synthetic", tiny_dataset).records()]
    assert a == b and get_adapter("synthetic", tiny_dataset).describe()["dataset"] == "synthetic"


def test_missing_or_broken_manifest_names_the_file(tmp_path):
    with pytest.raises(DatasetError, match="dataset.json does not exist"):
        get_adapter("demo", tmp_path)
    (tmp_path / "dataset.json").write_text("{ not json")
    with pytest.raises(DatasetError, match=r"dataset\.json is not valid JSON"):
        get_adapter("demo", tmp_path)
    (tmp_path / "dataset.json").write_text(json.dumps({"classes": ["a"], "videos": []}))
    with pytest.raises(DatasetError, match="lacks the key.*splits"):
        get_adapter("synthetic", tmp_path)
    with pytest.raises(DatasetError, match="does not exist"):
        get_adapter("demo", tmp_path / "nowhere")
    with pytest.raises(DatasetError, match="unknown option"):
        get_adapter("demo", tmp_path, fps=3)


def test_bad_entries_and_missing_files(tiny_copy):
    manifest = tiny_copy / "dataset.json"
    doc = json.loads(manifest.read_text())
    broken = dict(doc, videos=[dict(doc["videos"][0], label=7)])
    manifest.write_text(json.dumps(broken))
    with pytest.raises(DatasetError, match="label 7 outside"):
        get_adapter("demo", tiny_copy)
    lacking = dict(doc, videos=[{k: v for k, v in doc["videos"][0].items() if k != "subjects"}])
    manifest.write_text(json.dumps(lacking))
    with pytest.raises(DatasetError, match="lacks subjects"):
        get_adapter("demo", tiny_copy)
    manifest.write_text(json.dumps(doc))
    first = doc["videos"][0]
    (tiny_copy / first["gt"]).unlink()
    with pytest.raises(DatasetError, match=f"{first['video_id']}.npz is listed"):
        list(get_adapter("demo", tiny_copy).records())
    assert len(list(get_adapter("demo", tiny_copy, check_files=False).records())) == len(doc["videos"])
