import multiprocessing as mp

import numpy as np
import pytest

from anonymask.core.errors import StoreError
from anonymask.storage.store import DatasetStore, VideoInfo


def _video(t=20, h=24, w=32, seed=0):
    return np.random.default_rng(seed).integers(0, 255, (t, h, w, 3), dtype=np.uint8)


def make_store(url, n=2, stages=("ingest", "segment")):
    s = DatasetStore.create(url, "demo", classes=["a", "b"], splits=["xsub"], stages=list(stages), overwrite=True)
    s.register_videos([VideoInfo(f"v{i}", label=i % 2, split={"xsub": "train"}) for i in range(n)])
    return s


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_roundtrip_arrays_and_record_written_last(tmp_path, kind):
    url = str(tmp_path / "d.zarr") if kind == "local" else f"memory://rt-{tmp_path.name}"
    s = make_store(url)
    e = s.video("v0")
    x = _video()
    with e.stage("ingest", backend="pyav", config={"size": 32}) as w:
        w.write("raw", x)
        w.write("pose/params", np.arange(20 * 6, dtype=np.float32).reshape(20, 6), frame_chunked=False)
        w.metric(frames=20)
    rec = e.record("ingest")
    assert rec["status"] == "done" and rec["backend"] == "pyav"
    assert rec["outputs"]["raw"]["shape"] == [20, 24, 32, 3]
    reopened = DatasetStore.open(url)
    np.testing.assert_array_equal(reopened.video("v0").read("raw"), x)
    np.testing.assert_array_equal(reopened.video("v0").read("raw", slice(3, 7)), x[3:7])
    assert reopened.video("v0").read("pose/params")[2, 1] == 13
    assert reopened.video("v0").metrics()["frames"] == 20


def test_video_arrays_chunked_by_16_frames_in_one_shard(tmp_path):
    s = make_store(str(tmp_path / "d.zarr"))
    arr_desc = None
    with s.video("v0").stage("ingest", backend="x") as w:
        w.write("raw", _video(t=40))
        w.write("mask", np.zeros((40, 24, 32), bool))
        arr_desc = w.outputs
    a = s.video("v0").array("raw")
    assert a.chunks == (16, 24, 32, 3)
    assert a.shards == (48, 24, 32, 3)  # one shard holds the whole array
    m = s.video("v0").array("mask")
    assert m.chunks == (16, 24, 32) and m.dtype == bool
    assert set(arr_desc) == {"raw", "mask"}
    codecs = str(a.metadata.codecs)
    assert "zstd" in codecs.lower()


def test_an_all_zero_array_is_stored_not_compared_away(tmp_path):
    """Stage arrays are written with ``write_empty_chunks`` (storage/store.py ``WRITE_CONFIG``): zarr
    then skips comparing every chunk with the fill value, a cost measured on the pipeline bench,
    so an all-zero mask's shard is on disk. It reads back the same, and its checksum is the one
    of the same zeros held in memory."""
    from anonymask.storage.hashing import array_checksum

    s = make_store(str(tmp_path / "d.zarr"))
    zeros = np.zeros((40, 24, 32), bool)
    with s.video("v0").stage("ingest", backend="x") as w:
        w.write("mask", zeros)
        w.write("small", np.zeros((5, 3), np.float32), frame_chunked=False)
        desc = w.outputs
    stored = [p for p in (tmp_path / "d.zarr" / "videos" / "v0" / "mask" / "c").rglob("*") if p.is_file()]
    assert stored, "an all-zero shard was left out: write_empty_chunks is not in effect"
    assert any((tmp_path / "d.zarr" / "videos" / "v0" / "small" / "c").rglob("*"))
    e = s.video("v0")
    np.testing.assert_array_equal(e.read("mask"), zeros)
    assert desc["mask"]["checksum"] == array_checksum(zeros) == array_checksum(e.array("mask"))


def test_failed_stage_records_error_and_reraises(tmp_path):
    s = make_store(str(tmp_path / "d.zarr"))
    e = s.video("v1")
    with pytest.raises(ValueError, match="boom"):
        with e.stage("segment", backend="mp", config={"a": 1}) as w:
            w.write("person_mask", np.ones((4, 8, 8), bool))
            raise ValueError("boom")
    rec = e.record("segment")
    assert rec["status"] == "failed"
    assert "ValueError: boom" in rec["error"]
    assert rec["outputs"] == {}
    assert not e.is_done("segment")


def test_is_done_checks_config_and_input_hash(tmp_path):
    s = make_store(str(tmp_path / "d.zarr"))
    e = s.video("v0")
    with e.stage("ingest", backend="x", config={"size": 32}, input_hash="abc") as w:
        w.write("raw", _video(t=4))
    from anonymask.storage.hashing import config_hash

    assert e.is_done("ingest")
    assert e.is_done("ingest", config_hash=config_hash({"size": 32}), input_hash="abc")
    assert not e.is_done("ingest", config_hash=config_hash({"size": 64}))
    assert not e.is_done("ingest", input_hash="other")
    # a record whose array vanished is not done
    del e.group["raw"]
    assert not e.is_done("ingest")


def test_register_is_idempotent_and_keeps_records(tmp_path):
    url = str(tmp_path / "d.zarr")
    s = make_store(url)
    with s.video("v0").stage("ingest", backend="x") as w:
        w.write("raw", _video(t=4))
    s2 = DatasetStore.create(url, "demo")
    s2.register_videos([VideoInfo("v0", label=0), VideoInfo("v9", label=1)])
    assert s2.video_ids() == ["v0", "v1", "v9"]
    assert s2.video("v0").is_done("ingest")
    assert s2.stages == ["ingest", "segment"]


def test_open_errors_are_clear(tmp_path):
    with pytest.raises(StoreError, match="nothing.zarr: no such store"):
        DatasetStore.open(str(tmp_path / "nothing.zarr"), mode="r")
    (tmp_path / "empty.zarr").mkdir()
    with pytest.raises(StoreError, match="not a Zarr store"):
        DatasetStore.open(str(tmp_path / "empty.zarr"), mode="r")
    s = make_store(str(tmp_path / "d.zarr"))
    with pytest.raises(StoreError, match="no video 'nope'"):
        s.video("nope")
    with pytest.raises(StoreError, match="holds dataset 'demo'"):
        DatasetStore.create(str(tmp_path / "d.zarr"), "ntu")
    with pytest.raises(StoreError, match="invalid video id"):
        s.register_videos([VideoInfo("a/b")])
    with pytest.raises(StoreError, match="has no array"):
        s.video("v0").array("raw")


def _write_video(url, vid, seed):
    s = DatasetStore.open(url)
    e = s.video(vid)
    with e.stage("ingest", backend="x") as w:
        w.write("raw", _video(t=48, seed=seed))
        w.write("person_mask", (_video(t=48, seed=seed)[..., 0] > 128))


def test_concurrent_writers_of_different_videos(tmp_path):
    url = str(tmp_path / "d.zarr")
    make_store(url, n=4)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_write_video, args=(url, f"v{i}", i)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    s = DatasetStore.open(url)
    for i in range(4):
        e = s.video(f"v{i}")
        assert e.is_done("ingest")
        np.testing.assert_array_equal(e.read("raw"), _video(t=48, seed=i))
