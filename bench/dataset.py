"""`anonymask bench --only dataset`: clips/s of the dataset API reading the store's Zarr chunks
(anonymask.data.StoreClips) vs decoding the exported mp4s with PyAV (ExportClips), in one run.

The data: the synthetic tiny set at ``size`` (default 480x640) and ``frames`` (64; 3 videos), anonymized with the
ground-truth backends, exported as H.264 (crf 18). Both readers walk the same clips (clip_len 16,
frame_stride 2, clip_stride 8, no resize, no masks) in order and at random, returning float32
clips and (``_uint8``) the stored bytes; the best of ``repeats`` passes is reported. One torch
thread (a DataLoader worker's setting).
"""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path
from typing import Any


def _pass(ds, order) -> float:
    t0 = time.perf_counter()
    for i in order:
        ds[i]
    return time.perf_counter() - t0


def bench_dataset(quick: bool = False, size: tuple[int, int] = (480, 640), frames: int = 64,
                  repeats: int = 3) -> dict[str, Any]:
    import torch

    from anonymask.config.pipeline import pipeline_config
    from anonymask.data import ExportClips, StoreClips
    from anonymask.models.shared.synthetic.generator import generate_demo
    from anonymask.storage.datasets import get_adapter
    from anonymask.storage.export import export_store
    from anonymask.storage.store import DatasetStore
    from anonymask.tasks.common import ORDER, run_video

    if quick:
        size, frames, repeats = (120, 160), 32, 1
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as d:
        root = generate_demo(Path(d) / "raw", preset="tiny", seed=0, width=size[1], height=size[0], frames=frames)
        url = str(Path(d) / "b.zarr")
        cfg = pipeline_config("demo", {"ingest": {"max_side": max(size)}, "pose4d": {"backend": "gt"},
                                       "segment": {"backend": "gt"}, "audit": {"fail": False}})
        store = DatasetStore.create(url, "demo", source=str(root), stages=ORDER, config=cfg)
        infos = list(get_adapter("demo", root).records())
        store.register_videos(infos)
        t0 = time.perf_counter()
        for info in infos:
            run_video(url, info.video_id, cfg)
        anonymize_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = export_store(url, Path(d) / "out")
        export_s = time.perf_counter() - t0
        kw = dict(clip_len=16, frame_stride=2, clip_stride=8)
        zarr_ds = StoreClips(url, "rend_diff", masks=False, only_done=False, **kw)
        mp4_ds = ExportClips(Path(d) / "out", **kw)
        zarr_u8 = StoreClips(url, "rend_diff", masks=False, only_done=False, uint8=True, **kw)
        mp4_u8 = ExportClips(Path(d) / "out", uint8=True, **kw)
        n = len(zarr_ds)
        shuffled = list(range(n))
        random.Random(0).shuffle(shuffled)
        out: dict[str, Any] = {
            "videos": len(infos), "frames_per_video": frames, "size": list(size), "clips": n,
            "clip": kw, "exported": len(res["written"]), "anonymize_s": round(anonymize_s, 1),
            "export_s": round(export_s, 2), "torch_threads": 1,
        }
        if len(mp4_ds) != n:
            out["error"] = f"{len(mp4_ds)} clips from the export, {n} from the store"
            return out
        for name, ds in (("zarr", zarr_ds), ("mp4_pyav", mp4_ds), ("zarr_uint8", zarr_u8), ("mp4_pyav_uint8", mp4_u8)):
            for how, order in (("sequential", list(range(n))), ("random", shuffled)):
                best = min(_pass(ds, order) for _ in range(repeats))
                out[f"{name}_{how}_clips_per_s"] = round(n / best, 1)
        for how in ("sequential", "random"):
            for kind in ("", "_uint8"):
                out[f"zarr_over_mp4{kind}_{how}"] = round(
                    out[f"zarr{kind}_{how}_clips_per_s"] / out[f"mp4_pyav{kind}_{how}_clips_per_s"], 2)
        with_masks = StoreClips(url, "rend_diff", only_done=False, **kw)
        best = min(_pass(with_masks, list(range(n))) for _ in range(repeats))
        out["zarr_with_masks_sequential_clips_per_s"] = round(n / best, 1)
        return out
