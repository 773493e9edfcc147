"""The preview page: written from a real store, rendered by headless Chromium."""

import shutil
import subprocess

import numpy as np
import pytest

from anonymask.cli import main
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
