"""Benchmark of one training epoch with and without the frozen-prefix feature cache.

Builds a synthetic store in a temporary folder, trains two epochs and times the second (the
first pays for start-up); with the cache, building it is timed separately. Peak memory is the
CUDA allocator's peak on GPU, the process's peak resident set on CPU (a lifetime high-water
mark, so run each configuration in a fresh process for clean CPU numbers).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch

from anonymask.bench.common import peak_rss_gb
from anonymask.models.training.action.clips import ClipDataset
from anonymask.models.training.action.feature_cache import build_feature_cache
from anonymask.models.training.action.mvit import build_action_model
from anonymask.models.training.action.settings import TrainSettings
from anonymask.models.training.action.synthetic import make_synthetic_store
from anonymask.models.training.action.trainer import Trainer


def _peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return peak_rss_gb() * 1024


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
            warmup_epochs=1.0, noise_seed=0, sampling_seed=2, public_seed=1, log_every=10**9, fpdp_psi="public",
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


def bench_tail_steps(
    *,
    arch: str = "mvit_v2_s",
    batch_size: int = 4,
    num_classes: int = 60,
    repeats: int = 3,
    public_fraction: float = 0.3,
    seed: int = 0,
    device: str | None = None,
    precision: str = "float32",
    prefix_batch: int | None = None,
    prefix_precision: str | None = None,
) -> dict:
    """Seconds per training step of each mode on the CACHED TAIL (what every epoch runs once the
    prefix features are cached), and the prefix forward that the cache saves, per clip.

    Inputs are random tensors of the prefix's feature shape (timing does not depend on values).
    MaskDP and FP-DP run their public term on a second batch of the public size (``public_batch``:
    the independent draw; 1.0 = the papers' size). Ratios are to the DP-SGD step of the same run;
    the steps are timed in turns (round robin), so a change of load hits all of them alike.

    ``device`` (default CPU) and ``precision`` ("float32", or "bfloat16": autocast around the prefix
    and every step, as the trainer and the cache do on CUDA); ``prefix_batch`` clips per prefix
    forward (default ``batch_size``), in ``prefix_precision`` (default ``precision``). On CUDA every
    timing synchronises the device.
    """
    import statistics
    from contextlib import nullcontext

    from anonymask.models.training.action.prefix import FrozenPrefix, TrainableTail, feature_shape
    from anonymask.models.training.privacy.clipping import summed_grads
    from anonymask.models.training.privacy.fpdp import PublicSubspace
    from anonymask.models.training.privacy.mechanism import Inputs, PrivateStep

    prefix_precision = prefix_precision or precision
    for p in (precision, prefix_precision):
        if p not in ("float32", "bfloat16"):
            raise ValueError(f"precision must be float32 or bfloat16, got {p!r}")
    dev = torch.device(device or "cpu")
    cuda = dev.type == "cuda"
    g = torch.Generator().manual_seed(seed)
    clip_len, size = (16, (224, 224)) if arch == "mvit_v2_s" else (8, (32, 32))
    model = build_action_model(num_classes, arch=arch, clip_len=clip_len, size=size, seed=seed).to(dev)
    model.train()

    def autocast(which: str = precision):
        return torch.autocast(device_type=dev.type, dtype=torch.bfloat16) if which == "bfloat16" else nullcontext()

    def sync() -> float:
        if cuda:
            torch.cuda.synchronize(dev)
        return time.perf_counter()

    prefix, tail = FrozenPrefix(model), TrainableTail(model)
    params = {n: p for n, p in tail.named_parameters() if p.requires_grad}
    fshape = feature_shape(model)

    def feats(n: int) -> torch.Tensor:
        return torch.randn(n, *fshape, generator=g).to(dev)

    def labels(n: int) -> torch.Tensor:
        return torch.randint(0, num_classes, (n,), generator=g).to(dev)

    def timed(step, which: str = precision) -> dict:
        with autocast(which):
            step()  # warm-up (and FP-DP's first subspace)
        times = []
        for _ in range(repeats):
            t0 = sync()
            with autocast(which):
                step()
            times.append(sync() - t0)
        return {"median_s": statistics.median(times), "times_s": times}

    def round_robin(named: dict) -> dict[str, dict]:
        """Each step warmed up, then timed in turns (A, B, C, A, B, C, ...): a change of load on a
        shared machine hits every step alike, so the ratios stay meaningful."""
        for step in named.values():
            with autocast():
                step()
        times: dict[str, list[float]] = {k: [] for k in named}
        for _ in range(repeats):
            for k, step in named.items():
                t0 = sync()
                with autocast():
                    step()
                times[k].append(sync() - t0)
        return {k: {"median_s": statistics.median(v), "times_s": v} for k, v in times.items()}

    b = batch_size
    x, y = feats(b), labels(b)
    out: dict = {"arch": arch, "batch_size": b, "feature_shape": list(fshape), "trainable_params":
                 sum(p.numel() for p in params.values()), "threads": torch.get_num_threads(),
                 "device": str(dev), "precision": precision, "prefix_precision": prefix_precision}  # fmt: skip
    pb = int(prefix_batch or b)
    if cuda:  # drawn on the device: a CPU draw of a batch of full-size clips takes longer than the forward
        clips = torch.randn(pb, 3, clip_len, *size, generator=torch.Generator(dev).manual_seed(seed), device=dev)
    else:
        clips = torch.randn(pb, 3, clip_len, *size, generator=g)
    with torch.no_grad():
        prefix_t = timed(lambda: prefix(clips), prefix_precision)
    clips = None  # frees the batch before the steps
    out["prefix_batch"] = pb
    out["prefix_forward_per_clip_s"] = prefix_t["median_s"] / pb
    named = {"nonprivate": lambda: summed_grads(tail, x, y, params)}

    def private_step(mode: str, public_n: int | None):
        step = PrivateStep(mode, max_grad_norm=1.0, noise_multiplier=1.0, expected_batch_size=float(b),
                           expected_public_batch_size=float(public_n or b), generator=torch.Generator(dev).manual_seed(1),
                           subspace_k=16, subspace_refresh=10**9)  # fmt: skip
        weights = (torch.rand(b, generator=g) < 0.9).float().to(dev)  # most samples have private tokens
        private = Inputs(x, y, None, weights if mode == "maskdp" else None)
        public = Inputs(feats(public_n), labels(public_n)) if public_n else None
        sub = Inputs(feats(8), labels(8)) if mode == "fpdp" else None
        return lambda: step(tail, params, private, public, sub if step.needs_subspace_set() else None)

    named["dpsgd"] = private_step("dpsgd", None)
    named["maskdp"] = private_step("maskdp", b)
    small = max(1, round(public_fraction * b))
    named[f"maskdp_public{small}"] = private_step("maskdp", small)
    named["fpdp"] = private_step("fpdp", b)
    named[f"fpdp_public{small}"] = private_step("fpdp", small)
    refresh = PublicSubspace(16, 1)
    from anonymask.models.training.privacy.clipping import flatten, per_sample_grads

    pub = feats(8), labels(8)
    named["fpdp_subspace_refresh_8"] = (
        lambda: refresh.update(flatten(per_sample_grads(tail, pub[0], pub[1], params), batched=True), 0)
    )
    steps = round_robin(named)
    base = steps["dpsgd"]["median_s"]
    for r in steps.values():
        r["ratio_to_dpsgd"] = round(r["median_s"] / base, 2)
        r["per_clip_s"] = r["median_s"] / b
    out["steps"] = steps
    # what one epoch costs per clip without the cache (prefix once per variant read) and with it
    tail_clip = steps["dpsgd"]["median_s"] / b
    out["cache_speedup_estimate"] = {
        "dpsgd": round((out["prefix_forward_per_clip_s"] + tail_clip) / tail_clip, 2),
        "maskdp": round((2 * out["prefix_forward_per_clip_s"] + steps["maskdp"]["median_s"] / b)
                        / (steps["maskdp"]["median_s"] / b), 2),
    }  # fmt: skip
    return out
