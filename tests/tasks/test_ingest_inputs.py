"""Inputs told as they are: every frame kept unless a cap is set (then recorded and shown),
damaged and lost frames counted and named, display rotation applied, fps from timestamps,
dangling links and unreadable entries listed as failed."""

import math
import os
import struct
from fractions import Fraction

import av
import numpy as np
import pytest

from anonymask.config.pipeline import pipeline_config
from anonymask.config.stages import stage_settings
from anonymask.core.errors import InvalidVideoError
from anonymask.storage.inspect import format_status_table, status_report
from anonymask.storage.store import DatasetStore, VideoInfo
from anonymask.tasks.common import execute_stage


def encode(path, frames, *, rate=25, options=None, pts_ms=None, faststart=False):
    """Encode with PyAV directly (not through the code under test)."""
    c = av.open(str(path), "w", options={"movflags": "+faststart"} if faststart else {})
    s = c.add_stream("libx264", rate=rate, options=options or {})
    s.height, s.width = frames.shape[1:3]
    s.pix_fmt = "yuv420p"
    if pts_ms is not None:
        s.codec_context.time_base = Fraction(1, 1000)
        s.time_base = Fraction(1, 1000)
    for i, f in enumerate(frames):
        fr = av.VideoFrame.from_ndarray(f, format="rgb24")
        if pts_ms is not None:
            fr.pts, fr.time_base = int(pts_ms[i]), Fraction(1, 1000)
        for p in s.encode(fr):
            c.mux(p)
    for p in s.encode():
        c.mux(p)
    c.close()
    return path


def textured(n, h=48, w=64, seed=0):
    """Moving bars on noise: enough bitstream for damage to land inside frames."""
    rng = np.random.default_rng(seed)
    out = rng.integers(0, 60, (n, h, w, 3), dtype=np.uint8)
    for i in range(n):
        out[i, :, (3 * i) % w : (3 * i) % w + 8] = 220
    return out


def ingest(tmp_path, path, **cfg):
    url = str(tmp_path / "s.zarr")
    s = DatasetStore.create(url, "folder")
    vid = f"v{len(s.video_ids())}"
    s.register_videos([VideoInfo(vid, path=str(path))])
    execute_stage(url, vid, "ingest", pipeline_config("folder", {"ingest": cfg}))
    return DatasetStore.open(url).video(vid)


def test_every_frame_is_kept_and_a_cap_is_recorded_and_shown(tmp_path):
    path = encode(tmp_path / "long.mp4", textured(310, 16, 16), options={"crf": "30"})
    e = ingest(tmp_path, path)
    assert e.array("raw").shape[0] == 310  # the old default cap was 300
    assert e.attrs["frame_cap"] is None and e.attrs["decode"]["bad_frames"] == 0

    e = ingest(tmp_path, path, max_frames=50)
    assert e.array("raw").shape[0] == 50
    assert e.attrs["frame_cap"] == 50 and e.attrs["source_frames"] == 310
    table = format_status_table(status_report(e.store))
    assert f"capped: {e.video_id}: 50 of 310 frames kept (ingest.max_frames=50)" in table


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    d = tmp_path_factory.mktemp("damaged")
    good = encode(d / "good.mp4", textured(48, 96, 128), options={"g": "12", "bf": "0", "crf": "18"})
    data = bytearray(good.read_bytes())
    mid = len(data) // 2
    for i in range(mid, mid + 400):
        data[i] ^= 0x5A
    (d / "corrupt.mp4").write_bytes(bytes(data))
    fast = encode(d / "fast.mp4", textured(48, 96, 128), options={"g": "12", "bf": "0"}, faststart=True)
    (d / "half.mp4").write_bytes(fast.read_bytes()[: fast.stat().st_size // 2])
    return d


def test_corrupt_bytes_fail_the_video_naming_the_frames(tmp_path, damaged):
    with pytest.raises(InvalidVideoError) as ei:
        ingest(tmp_path, damaged / "corrupt.mp4")
    msg = str(ei.value)
    assert msg.startswith(str(damaged / "corrupt.mp4"))
    assert "more than ingest.max_bad_frames=0" in msg and "damaged frames" in msg
    # with a tolerance the video goes through, and what was wrong is recorded with it
    e = ingest(tmp_path, damaged / "corrupt.mp4", max_bad_frames=1000)
    dec = e.attrs["decode"]
    assert dec["bad_frames"] > 0 and dec["damaged_ranges"]
    assert e.record("ingest")["metrics"]["bad_frames"] == dec["bad_frames"]


def test_a_truncated_file_fails_naming_the_lost_frames(tmp_path, damaged):
    with pytest.raises(InvalidVideoError) as ei:
        ingest(tmp_path, damaged / "half.mp4")
    msg = str(ei.value)
    assert str(damaged / "half.mp4") in msg
    assert "lost (the file ends early:" in msg and "of 48 declared frames decodable" in msg


def patch_rotation(src, dst, degrees):
    """Write a display matrix into the mp4's track header (what phones do)."""
    b = bytearray(open(src, "rb").read())
    i = b.find(b"tkhd")
    version = b[i + 4]
    off = i + 8 + (28 if version == 1 else 16) + 4 + 8 + 8
    c, s = round(math.cos(math.radians(degrees))), round(math.sin(math.radians(degrees)))
    fx = lambda v: int(v * 65536) & 0xFFFFFFFF  # noqa: E731
    b[off : off + 36] = struct.pack(">9I", fx(c), fx(s), 0, fx(-s), fx(c), 0, 0, 0, 0x40000000)
    open(dst, "wb").write(bytes(b))


def test_display_rotation_is_applied(tmp_path):
    frames = np.zeros((4, 48, 64, 3), np.uint8)
    frames[:, :12, :12] = 255  # a white square in the coded top-left corner
    src = encode(tmp_path / "plain.mp4", frames, options={"crf": "10"})
    patch_rotation(src, tmp_path / "rot.mp4", 90)  # shown turned 90 degrees clockwise
    e = ingest(tmp_path, tmp_path / "rot.mp4")
    raw = e.read("raw")
    assert raw.shape == (4, 64, 48, 3) and e.attrs["rotation"] == 90
    assert raw[0, :8, -8:].mean() > 200 and raw[0, :8, :8].mean() < 50  # top-left -> top-right
    e = ingest(tmp_path, src)
    assert e.read("raw").shape == (4, 48, 64, 3) and e.attrs["rotation"] == 0


def test_fps_comes_from_the_timestamps(tmp_path):
    pts = np.cumsum([0] + [40 if i % 2 == 0 else 94 for i in range(29)])  # 40/94 ms: ~15 fps, varying
    e = ingest(tmp_path, encode(tmp_path / "vfr.mp4", textured(30, 16, 16), pts_ms=pts))
    assert e.attrs["fps"] == pytest.approx(29 / (pts[-1] / 1000.0), rel=1e-6)
    assert e.attrs["variable_frame_rate"] is True
    e = ingest(tmp_path, encode(tmp_path / "cfr.mp4", textured(30, 16, 16), rate=Fraction(30000, 1001)))
    assert e.attrs["fps"] == pytest.approx(30000 / 1001, rel=1e-6) and e.attrs["variable_frame_rate"] is False


def test_dangling_links_and_unreadable_entries_are_listed_and_fail(tmp_path):
    from anonymask.storage.datasets import get_adapter

    root = tmp_path / "raw"
    root.mkdir()
    encode(root / "ok.mp4", textured(4, 16, 16))
    os.symlink(tmp_path / "gone.mp4", root / "link.mp4")
    (root / "notes.txt").write_text("not a video")  # non-videos stay ignored
    recs = {r.video_id: r for r in get_adapter("folder", root).records()}
    assert set(recs) == {"ok", "link"}
    with pytest.raises(InvalidVideoError, match="link.mp4: dangling symbolic link"):
        ingest(tmp_path, recs["link"].path)
    if os.geteuid() != 0:  # root reads everything: the permission case cannot happen there
        locked = root / "locked"
        locked.mkdir()
        encode(locked / "in.mp4", textured(4, 16, 16))
        locked.chmod(0)
        try:
            recs = {r.video_id: r for r in get_adapter("folder", root).records()}
            assert "locked" in recs
            with pytest.raises(InvalidVideoError, match="cannot be listed"):
                ingest(tmp_path, recs["locked"].path)
        finally:
            locked.chmod(0o755)


def test_a_cut_splits_the_video_into_shots_and_inpainting_stays_in_its_shot(tmp_path):
    """A red scene cut to a blue one: ingest stores the two shots, and a hole that covers a
    region through the whole blue shot is filled from the blue shot around it, never with the
    red scene that the temporal median would see there in the first shot."""
    from anonymask.tasks import inpaint

    red, blue = np.zeros((12, 48, 64, 3), np.uint8), np.zeros((12, 48, 64, 3), np.uint8)
    red[..., 0], blue[..., 2] = 200, 200
    e = ingest(tmp_path, encode(tmp_path / "cut.mp4", np.concatenate([red, blue])))
    np.testing.assert_array_equal(e.read("shots"), [[0, 12], [12, 24]])
    assert e.metrics()["shots"] == 2
    hole = np.zeros((24, 48, 64), bool)
    hole[12:, 10:30, 20:40] = True
    for cuts, expect in ((True, 2), (False, 0)):  # the channel a hole pixel in the blue shot shows
        if not cuts:
            del e.group["shots"]  # a store from before cut detection: one shot
        with e.stage("segment", backend="test") as w:
            w.write("person_hole", hole)
        with e.stage("inpaint", backend="test") as w:
            inpaint.run(e, stage_settings("inpaint", pipeline_config("folder")["inpaint"]), w)
        filled = e.read("inpainted")[12:][hole[12:]]
        assert (filled.argmax(axis=-1) == expect).all(), cuts
    cut_off = ingest(tmp_path, tmp_path / "cut.mp4", cut_threshold=0.0)
    np.testing.assert_array_equal(cut_off.read("shots"), [[0, 24]])


def test_a_shot_whose_camera_moves_takes_the_moving_camera_backend(tmp_path):
    """The temporal median needs a still view: in a panning shot it would fill the hole with a
    smear of other places, so that shot takes ``inpaint.moving_camera`` (here opencv, frame by
    frame, whose output is easy to compare; the default aligned_median is tested in
    tests/models/inpaint/test_aligned.py); the still shot keeps the median.
    ``moving_camera=same`` keeps the median everywhere."""
    import cv2

    from anonymask.models.anonymizer.inpaint import get_inpainter
    from anonymask.tasks import inpaint

    rng = np.random.default_rng(0)
    world = cv2.GaussianBlur(rng.integers(0, 256, (48, 64 + 3 * 16, 3), np.uint8), (9, 9), 3)
    still = np.stack([world[:, :64]] * 16)
    still[..., 0] //= 3  # another colour: a cut between the shots
    pan = np.stack([world[:, 3 * t : 3 * t + 64] for t in range(16)])
    e = ingest(tmp_path, encode(tmp_path / "pan.mp4", np.concatenate([still, pan])))
    np.testing.assert_array_equal(e.read("shots"), [[0, 16], [16, 32]])
    hole = np.zeros((32, 48, 64), bool)
    hole[:, 16:32, 24:40] = True
    with e.stage("segment", backend="test") as w:
        w.write("person_hole", hole)
    raw = e.read("raw")
    for moving, expect in (("opencv", 1), ("same", 0)):
        with e.stage("inpaint", backend="test") as w:
            inpaint.run(e, stage_settings("inpaint", pipeline_config("folder", {"inpaint": {"moving_camera": moving}})["inpaint"]), w)
        assert e.metrics()["moving_shots"] == expect
        table = format_status_table(status_report(DatasetStore.open(str(tmp_path / "s.zarr"))))
        assert ("shots: v0: 2, 1 with a moving camera (inpainted from its aligned frames)" in table) is (expect == 1)
        assert "shots: v0: 2" in table
        got = e.read("inpainted")
        per_frame = get_inpainter("opencv").inpaint(raw[16:], hole[16:])
        assert np.array_equal(got[16:], per_frame) is (moving == "opencv")
        median = get_inpainter("temporal_median").inpaint(raw[:16], hole[:16])
        np.testing.assert_array_equal(got[:16], median)  # the still shot keeps the median
