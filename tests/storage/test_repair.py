"""Each kind of damage is reported by ``verify`` (with the video id) and undone by
``verify --repair``: flipped bytes, a truncated chunk, a deleted chunk, deleted array and group
metadata, a deleted stage record. Repaired stores are bit-identical to the undamaged one."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from anonymask.cli.main import main
from anonymask.storage.inspect import verify_store
from anonymask.storage.store import DatasetStore
from anonymask.tasks.common import stage_deps

GT = {"pose4d": {"backend": "gt"}, "segment": {"backend": "gt"}}
VID = "s01_a01_r01"
VIDS = ["s01_a01_r01", "s02_a01_r01", "s01s02_a02_r01"]


@pytest.fixture(scope="module")
def golden(tiny_anonymized):
    """The tiny set fully anonymized (stages run directly, no Prefect), never modified."""
    assert verify_store(DatasetStore.open(tiny_anonymized), deps=stage_deps()).ok
    return tiny_anonymized


def shard(url: str, array: str, vid: str) -> Path:
    files = [p for p in (Path(url) / "videos" / vid / array / "c").rglob("*") if p.is_file()]
    assert files, array
    return max(files, key=lambda p: p.stat().st_size)


def flip(url, vid=VID):
    p = shard(url, "anonymized", vid)
    b = bytearray(p.read_bytes())
    for i in range(len(b) // 3, len(b) // 3 + 64):
        b[i] ^= 0xFF
    p.write_bytes(bytes(b))
    return "anonymized", "reintegrate"


def truncate(url, vid=VID):
    p = shard(url, "merged", vid)
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    return "merged", "merge"


def delete_chunk(url, vid=VID):
    shard(url, "raw", vid).unlink()
    return "raw", "ingest"


def delete_array_metadata(url, vid=VID):
    (Path(url) / "videos" / vid / "inpainted" / "zarr.json").unlink()
    return "inpainted", "inpaint"


def delete_group_metadata(url, vid=VID):
    (Path(url) / "videos" / vid / "zarr.json").unlink()
    return "", None


def delete_record(url, vid=VID):
    meta = Path(url) / "videos" / vid / "zarr.json"
    doc = json.loads(meta.read_text())
    del doc["attributes"]["stages"]["render"]
    meta.write_text(json.dumps(doc))
    return "render", "render"


DAMAGE = {"flipped_bytes": flip, "truncated_chunk": truncate, "deleted_chunk": delete_chunk,
          "deleted_array_metadata": delete_array_metadata, "deleted_group_metadata": delete_group_metadata,
          "deleted_record": delete_record}


def check_findings(lines: list[str], vid: str, kind: str, stage: str | None) -> None:
    mine = [line for line in lines if line.startswith(vid)]
    assert mine, (vid, kind, lines)
    if stage is not None:
        assert any(f"stage {stage}" in line or f"{vid}/{stage}" in line for line in mine), (kind, mine)
    if kind == "deleted_group_metadata":
        assert any("group metadata missing" in line for line in mine), mine
    if kind == "deleted_record":
        assert any("stage record missing" in line and "merge" in line for line in mine), mine
    if kind == "deleted_array_metadata":
        assert any("metadata file zarr.json is gone" in line for line in mine), mine


def repair_and_compare(url, golden, tmp_path, capsys, vids):
    assert main(["verify", url]) == 1
    out = capsys.readouterr().out
    for vid in vids:
        assert f"DAMAGED  {vid}" in out
    assert main(["verify", url, "--repair", "--log-dir", str(tmp_path / "logs")]) == 0
    out = capsys.readouterr().out
    assert "after repair:" in out and out.rstrip().splitlines()[-1].startswith("OK"), out
    fixed, ref = DatasetStore.open(url), DatasetStore.open(golden)
    assert verify_store(fixed, deps=stage_deps()).ok
    for vid in VIDS:
        if vid in vids:
            assert f"repair  {vid}" in out
            for name in ("raw", "render/rgb", "merged", "inpainted", "anonymized", "public_mask"):
                np.testing.assert_array_equal(fixed.video(vid).read(name), ref.video(vid).read(name))
        else:  # the other videos were not touched
            assert fixed.video(vid).records() == ref.video(vid).records()


def test_every_kind_of_damage_at_once(golden, tmp_path, capsys):
    """Six kinds of damage over the three videos, one verify, one repair."""
    url = str(tmp_path / "d.zarr")
    shutil.copytree(golden, url)
    plan = [("flipped_bytes", VIDS[0]), ("truncated_chunk", VIDS[0]), ("deleted_record", VIDS[0]),
            ("deleted_chunk", VIDS[1]), ("deleted_array_metadata", VIDS[1]),
            ("deleted_group_metadata", VIDS[2])]
    stages = {kind: DAMAGE[kind](url, vid) for kind, vid in plan}
    res = verify_store(DatasetStore.open(url), deps=stage_deps())
    assert not res.ok
    for kind, vid in plan:
        check_findings(res.damaged, vid, kind, stages[kind][1])
    repair_and_compare(url, golden, tmp_path, capsys, VIDS)


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(DAMAGE))
def test_each_kind_of_damage_alone(golden, tmp_path, kind, capsys):
    url = str(tmp_path / "d.zarr")
    shutil.copytree(golden, url)
    _, stage = DAMAGE[kind](url)
    res = verify_store(DatasetStore.open(url), deps=stage_deps())
    assert not res.ok
    assert all(line.startswith(VID) for line in res.damaged), res.damaged  # every finding names the video
    check_findings(res.damaged, VID, kind, stage)
    repair_and_compare(url, golden, tmp_path, capsys, [VID])


def test_missing_store_is_one_clear_line(tmp_path, capsys):
    missing = str(tmp_path / "gone.zarr")
    assert main(["verify", missing]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"anonymask: error: {missing}: no such store (the folder does not exist)"]
    assert main(["status", missing]) == 2
