"""Each video's brightness as pose4d's exposure rule reads it, and the gain it would get.

    python scripts/exposure_levels.py STORE.zarr [VIDEO.mp4 ...]

Per video: the 50th, 95th and 99th luminance percentiles (grey levels, Rec. 601 luma) over 16
frames spread over it (a store's ``raw`` array, or a video file), and the gain of
models/anonymizer/pose/exposure.py ``shot_gain`` with production's settings (1.0: left as it is).
"""

from __future__ import annotations

import sys

import numpy as np

from anonymask.models.anonymizer.pose.exposure import shot_gain
from anonymask.models.anonymizer.pose.settings import ExposureSettings
from anonymask.storage.store import DatasetStore
from anonymask.storage.video_io import read_frames

LUMA = np.array([0.299, 0.587, 0.114], np.float32)


def report(name: str, frames: np.ndarray, settings: ExposureSettings) -> None:
    p = np.percentile(frames.astype(np.float32) @ LUMA, [50, 95, settings.percentile])
    print(f"{name:50s} p50 {p[0]:6.1f}  p95 {p[1]:6.1f}  p{settings.percentile:g} {p[2]:6.1f}  "
          f"gain {shot_gain(frames, settings):.2f}")


def main(argv: list[str]) -> None:
    s = ExposureSettings()
    for src in argv:
        if src.rstrip("/").endswith(".zarr"):
            ds = DatasetStore.open(src)
            for vid in ds.video_ids():
                raw = ds.video(vid).array("raw")
                idx = np.unique(np.linspace(0, raw.shape[0] - 1, min(s.sample_frames, raw.shape[0])).astype(int))
                report(vid, np.stack([np.asarray(raw[i]) for i in idx]), s)
        else:
            f = np.asarray(read_frames(src))
            idx = np.unique(np.linspace(0, len(f) - 1, min(s.sample_frames, len(f))).astype(int))
            report(src, f[idx], s)


if __name__ == "__main__":
    main(sys.argv[1:])
