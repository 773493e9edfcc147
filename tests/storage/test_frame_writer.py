"""Streaming frame arrays: any block sizes give the same array and checksum as one whole write;
shards stay bounded whatever the length; windows cover every frame exactly once."""

import numpy as np
import pytest

from anonymask.storage import store as store_mod
from anonymask.storage.hashing import array_checksum
from anonymask.storage.store import DatasetStore, VideoInfo, shard_frames
from anonymask.storage.windows import frame_windows, iter_blocks


@pytest.fixture
def entry(tmp_path):
    s = DatasetStore.create(str(tmp_path / "s.zarr"), "demo")
    s.register_videos([VideoInfo("v")])
    return s.video("v")


def video(t, h=6, w=10, seed=0):
    return np.random.default_rng(seed).integers(0, 255, (t, h, w, 3), dtype=np.uint8)


@pytest.mark.parametrize("blocks", [[83], [1] * 83, [7] * 11 + [6], [16, 32, 35], [0, 50, 0, 33]])
@pytest.mark.parametrize("mode", ["exact", "hint_short", "hint_long", "unknown"])
def test_streamed_equals_whole(entry, monkeypatch, blocks, mode):
    monkeypatch.setattr(store_mod, "SHARD_BYTES", 6 * 10 * 3 * 32)  # 32-frame shards: several of them
    a = video(83)
    kw = {"exact": {"frames": 83}, "hint_short": {"hint": 40}, "hint_long": {"hint": 100}, "unknown": {}}[mode]
    fw = entry.frame_writer("x", a.shape[1:], np.uint8, **kw)
    assert fw.shard_t == 32
    pos = 0
    for n in blocks:
        fw.write(a[pos : pos + n])
        pos += n
        assert fw.written % 32 == 0  # only whole shards reach the store before close
    desc = fw.close()
    arr = entry.array("x")
    np.testing.assert_array_equal(arr[...], a)
    assert desc == {"shape": list(a.shape), "dtype": "uint8", "checksum": array_checksum(a)}
    assert arr.shards[0] == 32 and arr.chunks[0] == 16


def test_writer_refuses_wrong_counts_and_shapes(entry):
    fw = entry.frame_writer("x", (6, 10, 3), np.uint8, frames=10)
    with pytest.raises(ValueError, match="does not fit"):
        fw.write(np.zeros((2, 6, 11, 3), np.uint8))
    fw.write(video(8))
    with pytest.raises(ValueError, match="more than the 10 frames"):
        fw.write(video(3))
    with pytest.raises(ValueError, match="8 frames written, 10 announced"):
        fw.close()


def test_shards_are_bounded_by_bytes_not_by_length(entry, monkeypatch):
    monkeypatch.setattr(store_mod, "SHARD_BYTES", 6 * 10 * 3 * 48)
    entry.write_array("long", video(500))
    entry.write_array("short", video(5))
    assert entry.array("long").shards[0] == 48  # 3 chunks of 16 frames
    assert entry.array("short").shards[0] == 5 and entry.array("short").chunks[0] == 5
    assert shard_frames((1080, 1920, 3), np.uint8) == 16  # never less than one chunk
    assert shard_frames((360, 640, 3), np.uint8) % 16 == 0


def test_stage_writer_frames_registers_the_output(entry):
    a = video(20)
    with entry.stage("ingest", backend="x") as w:
        with w.frames("raw", a.shape[1:], np.uint8, 20) as f:
            for blk in (a[:3], a[3:]):
                f.write(blk)
    rec = entry.record("ingest")
    assert rec["outputs"]["raw"]["checksum"] == array_checksum(a)
    assert entry.is_done("ingest")


@pytest.mark.parametrize("n,size,ctx", [(0, 4, 0), (1, 64, 8), (10, 4, 0), (10, 4, 3), (64, 64, 8), (65, 16, 40)])
def test_windows_cover_each_frame_once(n, size, ctx):
    wins = frame_windows(n, size, ctx)
    owned = [i for w in wins for i in range(w.core_start, w.core_stop)]
    assert owned == list(range(n))
    for w in wins:
        assert 0 <= w.start <= w.core_start < w.core_stop <= w.stop <= n
        assert w.core_start - w.start == min(ctx, w.core_start)
        assert w.stop - w.core_stop == min(ctx, n - w.core_stop)
        assert len(w) <= size + 2 * ctx
    a = np.arange(n)
    assert np.concatenate([b[w.core_in_block] for w, b in iter_blocks(a, size, ctx)] or [a]).tolist() == a.tolist()
