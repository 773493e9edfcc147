"""Each video's brightness as pose4d's exposure rule reads it, and the gain it would get.

    python scripts/exposure_levels.py STORE.zarr [VIDEO.mp4 ...]

Per video: the 50th, 95th and 99th luminance percentiles (grey levels, Rec. 601 luma) over 16
frames spread over it (a store's ``raw`` array, or a video file), and the gain of
models/anonymizer/pose/exposure.py ``shot_gain`` with production's settings (1.0: left as it is).
"""

from __future__ import annotations

import sys

import numpy as np

from anonymask.models.anonymizer.pose.exposure import luminance_level, sample_frames, shot_gain
from anonymask.models.anonymizer.pose.settings import ExposureSettings
from anonymask.storage.store import DatasetStore
from anonymask.storage.video_io import read_frames


def report(name: str, frames: np.ndarray, settings: ExposureSettings) -> None:
    p = [luminance_level(frames, q) for q in (50, 95, settings.percentile)]
    print(f"{name:50s} p50 {p[0]:6.1f}  p95 {p[1]:6.1f}  p{settings.percentile:g} {p[2]:6.1f}  "
          f"gain {shot_gain(frames, settings):.2f}")


def main(argv: list[str]) -> None:
    s = ExposureSettings()
    for src in argv:
        if src.rstrip("/").endswith(".zarr"):
            ds = DatasetStore.open(src)
            for vid in ds.video_ids():
                raw = ds.video(vid).array("raw")
                report(vid, sample_frames(lambda a, b, raw=raw: raw[a:b], raw.shape[0], s.sample_frames), s)
        else:
            f = np.asarray(read_frames(src))
            report(src, sample_frames(lambda a, b, f=f: f[a:b], len(f), s.sample_frames), s)


if __name__ == "__main__":
    main(sys.argv[1:])
