"""Store throughput: write/read MB/s and random 16-frame clip latency vs decoding the mp4."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from anonymask.storage.store import CLIP_FRAMES, DatasetStore, VideoInfo


def _smooth_video(t: int, h: int, w: int, seed: int = 0) -> np.ndarray:
    """Camera-like content (smooth gradients + moving blobs + mild noise) so codecs behave realistically."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    base = np.stack([xx / w * 200, yy / h * 200, (xx + yy) / (w + h) * 255], -1)
    out = np.empty((t, h, w, 3), np.uint8)
    for i in range(t):
        cx, cy = (w / 2 + w / 4 * np.sin(i / 9), h / 2 + h / 5 * np.cos(i / 7))
        blob = np.exp(-(((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * (h / 8) ** 2)))[..., None] * 120
        out[i] = np.clip(base + blob + rng.normal(0, 2, (h, w, 1)), 0, 255).astype(np.uint8)
    return out


def bench_store(frames: int = 300, height: int = 480, width: int = 640, clips: int = 20, seed: int = 0) -> dict[str, Any]:
    from anonymask.storage.video_io import read_frames, write_mp4

    video = _smooth_video(frames, height, width, seed)
    mb = video.nbytes / 1e6
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, frames - CLIP_FRAMES, clips)
    with tempfile.TemporaryDirectory() as d:
        store = DatasetStore.create(str(Path(d) / "b.zarr"), "bench", overwrite=True)
        store.register_videos([VideoInfo("v")])
        entry = store.video("v")
        t0 = time.perf_counter()
        entry.write_array("raw", video)
        write_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        back = entry.read("raw")
        read_s = time.perf_counter() - t0
        assert back.shape == video.shape
        arr = entry.array("raw")
        lat = []
        for s in starts:
            t0 = time.perf_counter()
            np.asarray(arr[int(s) : int(s) + CLIP_FRAMES])
            lat.append(time.perf_counter() - t0)
        store_bytes = sum(p.stat().st_size for p in Path(d, "b.zarr").rglob("*") if p.is_file())
        mp4 = Path(d) / "v.mp4"
        write_mp4(mp4, video, fps=30, crf=18)
        mp4_lat = []
        for s in starts:
            t0 = time.perf_counter()
            read_frames(mp4, start=int(s), stop=int(s) + CLIP_FRAMES)
            mp4_lat.append(time.perf_counter() - t0)
        mp4_bytes = mp4.stat().st_size
    return {
        "video_shape": list(video.shape),
        "raw_mb": round(mb, 1),
        "write_mb_s": round(mb / write_s, 1),
        "read_mb_s": round(mb / read_s, 1),
        "clip_read_ms_median": round(1000 * float(np.median(lat)), 2),
        "mp4_clip_decode_ms_median": round(1000 * float(np.median(mp4_lat)), 2),
        "clip_speedup_vs_mp4": round(float(np.median(mp4_lat) / np.median(lat)), 2),
        "store_compression_ratio": round(video.nbytes / max(store_bytes, 1), 2),
        "mp4_compression_ratio_crf18": round(video.nbytes / max(mp4_bytes, 1), 2),
    }
