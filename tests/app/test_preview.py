"""The preview page: written from a real store, rendered by headless Chromium."""

import shutil
import subprocess

import numpy as np
import pytest

from anonymask.cli.main import main
from anonymask.storage.store import DatasetStore, VideoInfo

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def make_store(url):
    s = DatasetStore.create(url, "demo", stages=["ingest", "reintegrate"], overwrite=True)
    s.register_videos([VideoInfo("vid_ok", label=0, label_name="walk"), VideoInfo("vid_bad", label=1)])
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 255, (6, 32, 48, 3), dtype=np.uint8)
    e = s.video("vid_ok")
    with e.stage("ingest", backend="x") as w:
        w.write("raw", raw)
    with e.stage("reintegrate", backend="x") as w:
        w.write("anonymized", 255 - raw)
        pm = np.zeros((6, 32, 48), bool)
        pm[:, 8:20, 10:30] = True
        w.write("public_mask", pm)
        w.write("person_mask", (pm * 255).astype(np.uint8))
        w.metric(person_leak=0.012, mask_iou=0.8)
    try:
        with s.video("vid_bad").stage("ingest", backend="x"):
            raise ValueError("bad.mp4: not a readable video file")
    except ValueError:
        pass
    return s


def add_grey_video(s, video_id: str, frames: int):
    """A registered video of grey 96x128 frames, its output the same frames with nothing drawn."""
    s.register_videos([VideoInfo(video_id)])
    e = s.video(video_id)
    raw = np.full((frames, 96, 128, 3), 90, np.uint8)
    with e.stage("ingest", backend="x") as w:
        w.write("raw", raw)
    with e.stage("reintegrate", backend="x") as w:
        w.write("anonymized", raw)
        w.write("public_mask", np.zeros((frames, 96, 128), bool))
    return e


def add_audit_failure(s):
    """A video whose audit failed with a face finding in frames 3 and 4 (box recorded in frame 3)."""
    e = add_grey_video(s, "vid_leak", 6)
    finding = {"kind": "face", "frames": [3, 4], "box": [40.0, 30.0, 100.0, 80.0], "score": 0.9, "outside": 1.0}
    try:
        with e.stage("audit", backend="x") as w:
            w.metric(audit_findings=1, audit_report=[finding])
            raise RuntimeError("vid_leak: audit: real person visible outside avatar pixels: face at x=40..100")
    except RuntimeError:
        pass


def test_preview_page_contents(tmp_path, capsys):
    url = str(tmp_path / "d.zarr")
    make_store(url)
    assert main(["preview", url, "--out", str(tmp_path / "prev"), "--frames", "3"]) == 0
    page = tmp_path / "prev" / "index.html"
    assert capsys.readouterr().out.strip() == str(page)
    html = page.read_text()
    assert "vid_ok" in html and "vid_bad" in html and "not a readable video file" in html
    assert "0.012" in html  # person_leak shown
    imgs = sorted(p.name for p in (tmp_path / "prev" / "img").iterdir())
    assert len(imgs) == 9  # 3 frames x (original, anonymized, overlay)
    for name in imgs:
        assert f"img/{name}" in html


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (make setup installs it)")
def test_preview_renders_in_headless_chromium(tmp_path):
    url = str(tmp_path / "d.zarr")
    make_store(url)
    main(["preview", url, "--out", str(tmp_path / "prev")])
    page = tmp_path / "prev" / "index.html"
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
             f"--user-data-dir={tmp_path / 'chrome'}", "--virtual-time-budget=5000"]
    dom = subprocess.run([*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert "id=\"video-vid_ok\"" in dom.stdout and "1 failed" in dom.stdout
    shot = tmp_path / "shot.png"
    subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1000,800", page.as_uri()],
                   capture_output=True, timeout=120)
    import cv2

    img = cv2.imread(str(shot))
    assert img is not None and img.shape[:2] == (800, 1000)
    # the page drew something beyond a blank background: text and the frame images
    assert (img < 200).mean() > 0.01


def test_preview_shows_the_frames_an_audit_named_with_its_boxes(tmp_path):
    import cv2

    url = str(tmp_path / "d.zarr")
    add_audit_failure(make_store(url))
    assert main(["preview", url, "--out", str(tmp_path / "prev"), "--frames", "2"]) == 0
    html = (tmp_path / "prev" / "index.html").read_text()
    assert "face at x=40..100" in html  # the audit's reason is on the page
    # frames 3 and 4 (named by the audit), not the evenly spaced 0 and 5
    imgs = sorted(p.name for p in (tmp_path / "prev" / "img").glob("vid_leak_*_anon.jpg"))
    assert imgs == ["vid_leak_00003_anon.jpg", "vid_leak_00004_anon.jpg"]
    img = cv2.imread(str(tmp_path / "prev" / "img" / imgs[0]))[..., ::-1].astype(int)
    yellow = (img[..., 0] > 180) & (img[..., 1] > 160) & (img[..., 2] < 100)
    assert yellow[32:78, 40].mean() > 0.8 and not yellow[:, :36].any()  # the box's left edge, nothing elsewhere
    # the box is drawn in the frame it was recorded for only
    img4 = cv2.imread(str(tmp_path / "prev" / "img" / imgs[1]))[..., ::-1].astype(int)
    assert not ((img4[..., 0] > 180) & (img4[..., 1] > 160) & (img4[..., 2] < 100)).any()
    # the failed ones come first
    assert html.index("video-vid_leak") < html.index("video-vid_ok")


def test_preview_limit_and_chosen_videos(tmp_path, capsys):
    url = str(tmp_path / "d.zarr")
    add_audit_failure(make_store(url))
    assert main(["preview", url, "--out", str(tmp_path / "a"), "--limit", "2"]) == 0
    html = (tmp_path / "a" / "index.html").read_text()  # the two failed ones
    assert "Showing 2 of 3 videos" in html and "video-vid_leak" in html and "video-vid_bad" in html
    assert "video-vid_ok" not in html
    assert main(["preview", url, "--out", str(tmp_path / "b"), "--videos", "vid_ok"]) == 0
    html = (tmp_path / "b" / "index.html").read_text()
    assert "video-vid_ok" in html and "video-vid_leak" not in html and "video-vid_bad" not in html
    assert "&mdash; walk" in html
    capsys.readouterr()
    assert main(["preview", url, "--out", str(tmp_path / "c"), "--videos", "vid_ok,nope"]) == 2
    assert "nope" in capsys.readouterr().err
    assert main(["preview", url, "--out", str(tmp_path / "d"), "--limit", "0"]) == 0
    assert "Showing" not in (tmp_path / "d" / "index.html").read_text()


def test_preview_shows_what_the_audit_let_go_as_not_on_the_source(tmp_path):
    """A passed audit that let a body candidate go (``audit.source_check``): its frame is shown
    first, with the box in cyan, and the page says why."""
    import cv2

    url = str(tmp_path / "d.zarr")
    e = add_grey_video(make_store(url), "vid_excused", 8)
    with e.stage("audit", backend="x") as w:
        w.metric(audit_findings=0, audit_passed=1.0, audit_not_in_source=1,
                 audit_source_excused=[{"frame": 5, "kind": "body", "box": [60.0, 20.0, 90.0, 80.0],
                                        "score": 0.52, "filled": 0.0}])
    assert main(["preview", url, "--out", str(tmp_path / "prev"), "--frames", "1", "--videos", "vid_excused"]) == 0
    html = (tmp_path / "prev" / "index.html").read_text()
    assert "1 audit candidate(s) let go" in html
    imgs = sorted(p.name for p in (tmp_path / "prev" / "img").glob("vid_excused_*_anon.jpg"))
    assert imgs == ["vid_excused_00005_anon.jpg"]  # its frame, not frame 0
    img = cv2.imread(str(tmp_path / "prev" / "img" / imgs[0]))[..., ::-1].astype(int)
    cyan = (img[..., 0] < 80) & (img[..., 1] > 150) & (img[..., 2] > 200)
    assert cyan[25:75, 60].mean() > 0.8 and not cyan[:, :55].any()
