"""Benchmark of one training epoch with and without the frozen-prefix feature cache.

Builds a synthetic store in a temporary folder, trains two epochs and times the second (the
first pays for start-up); with the cache, building it is timed separately. Peak memory is the
CUDA allocator's peak on GPU, the process's peak resident set on CPU (a lifetime high-water
mark, so run each configuration in a fresh process for clean CPU numbers).
"""

from __future__ import annotations

import resource
import tempfile
import time
from pathlib import Path

import torch

from anonymask.models.action.clips import ClipDataset
from anonymask.models.action.feature_cache import build_feature_cache
from anonymask.models.action.mvit import build_action_model
from anonymask.models.action.settings import TrainSettings
from anonymask.models.action.synthetic import make_synthetic_store
from anonymask.models.action.trainer import Trainer


def _peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def bench_epoch(
    with_cache: bool,
    *,
    arch: str = "tiny",
    mode: str = "nonprivate",
    trainable: str = "last_blocks_norm",
    videos_per_class: int = 8,
    num_classes: int = 4,
    batch_size: int = 8,
    device: str | None = None,
    workdir: str | None = None,
) -> dict:
    """Seconds per epoch (and peak memory) of ``mode`` training on a synthetic store."""
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    clip_len, size = (16, (224, 224)) if arch == "mvit_v2_s" else (8, (32, 32))
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        url = str(Path(tmp) / "bench.zarr")
        make_synthetic_store(
            url, num_classes=num_classes, videos_per_class={"train": videos_per_class}, frames=clip_len + 4, size=size
        )
        ds = ClipDataset(url, "xsub", "train", "rend_diff", "r", clip_len=clip_len, frame_stride=1, size=size)
        model = build_action_model(num_classes, arch=arch, trainable=trainable)
        cfg = TrainSettings(
            mode=mode, epochs=2, batch_size=batch_size, device=str(dev), noise_multiplier=1.0, num_workers=0,
            warmup_epochs=1.0, noise_seed=0, sampling_seed=0, public_seed=1, log_every=10**9, fpdp_psi="public",
            compare_accountants=(),
        )  # fmt: skip
        variants = {"nonprivate": ("full",), "dpsgd": ("full",), "maskdp": ("private", "public"),
                    "fpdp": ("full", "public")}[mode]  # fmt: skip
        cache_seconds = None
        train_data = ds
        public = ds if mode == "fpdp" else None  # benchmark only: a real run passes a public set
        if with_cache:
            t0 = time.perf_counter()
            cache = build_feature_cache(model, ds, variants=variants, batch_size=batch_size, device=dev)
            cache_seconds = time.perf_counter() - t0
            train_data = cache.dataset(variants)
            if public is not None:
                public = cache.dataset(("full",)) if "full" in variants else None
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
        marks: list[float] = []
        trainer = Trainer(model, train_data, cfg, public_data=public,
                          progress=lambda e: marks.append(time.perf_counter()) if e["event"] == "epoch" else None)
        t_start = time.perf_counter()
        trainer.fit()
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        seconds = marks[1] - marks[0] if len(marks) == 2 else time.perf_counter() - t_start
        return {
            "with_cache": with_cache,
            "mode": mode,
            "arch": arch,
            "trainable": trainable,
            "device": str(dev),
            "clips": len(ds),
            "batch_size": batch_size,
            "seconds_per_epoch": seconds,
            "first_epoch_seconds": marks[0] - t_start if marks else None,
            "cache_build_seconds": cache_seconds,
            "peak_memory_mb": _peak_memory_mb(dev),
        }
