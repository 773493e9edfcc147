"""Screenshots of `anonymask preview`, one JPEG per video, taken by headless Chromium.

    python scripts/preview_screenshots.py --store data/stores/sample.zarr --out docs/results/preview

Each video gets its own preview page (``anonymask preview STORE --videos ID``: a failed audit's
frames first, with its boxes), rendered at ``--width`` CSS pixels, cropped to the page's content
and saved as ``<out>/<video id>.jpg`` (scaled by ``--scale``). Needs Chromium (`make setup`
installs it).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import cv2
import numpy as np

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
         "--virtual-time-budget=10000", "--hide-scrollbars"]


def content_rows(img: np.ndarray, background: int = 250) -> int:
    """Height of the screenshot down to its last row that is not page background."""
    busy = np.nonzero((np.abs(img.astype(np.int16) - background) > 6).any(axis=(1, 2)))[0]
    return int(busy[-1]) + 12 if busy.size else img.shape[0]


def main(argv: list[str] | None = None) -> int:
    from anonymask.cli.preview import write_preview
    from anonymask.storage.store import DatasetStore

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--store", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--videos", default="all", help="comma-separated video ids, or all")
    p.add_argument("--frames", type=int, default=3)
    p.add_argument("--width", type=int, default=1000)
    p.add_argument("--height", type=int, default=2400, help="window height: the page is cropped to its content")
    p.add_argument("--scale", type=float, default=0.7)
    p.add_argument("--quality", type=int, default=80)
    a = p.parse_args(argv)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("preview_screenshots: chromium not found (make setup installs it)", file=sys.stderr)
        return 2
    store = DatasetStore.open(a.store, mode="r")
    ids = store.video_ids() if a.videos == "all" else a.videos.split(",")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for vid in ids:
            page = write_preview(store, Path(tmp) / vid, frames_per_video=a.frames, videos=[vid])
            shot = Path(tmp) / f"{vid}.png"
            subprocess.run([chromium, *FLAGS, f"--user-data-dir={Path(tmp) / 'chrome'}",
                            f"--window-size={a.width},{a.height}", f"--screenshot={shot}", page.as_uri()],
                           capture_output=True, timeout=180, check=False)
            img = cv2.imread(str(shot))
            if img is None:
                print(f"{vid}: no screenshot", file=sys.stderr)
                continue
            img = img[: content_rows(img)]
            img = cv2.resize(img, None, fx=a.scale, fy=a.scale, interpolation=cv2.INTER_AREA)
            cv2.imwrite(str(out / f"{vid}.jpg"), img, [cv2.IMWRITE_JPEG_QUALITY, a.quality])
            print(out / f"{vid}.jpg", img.shape[1], "x", img.shape[0], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
