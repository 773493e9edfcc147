"""The MaskDP paper's fine-tuning protocol as a dry run on generated data, timed (issue 12).

    python scripts/paper_protocol_dry_run.py --clips 2000 --epochs 2 --out dry_run.json

What runs: a synthetic action store of ``--clips`` training videos at 224x224, 16 frames (plus a
small test split), then the `train` flow's own steps (models/training/action/run.py) with the paper's
NTU defaults: MViTv2-S (random weights here: no Kinetics file on this machine), norms of the last
two blocks + head trainable, Poisson batch 128, C = 1, lr 0.01, 150 epochs with 20 warmup +
cosine, sound MaskDP (independent public batch, replace-one adjacency), delta 1e-6. The cache is
built in full; ``--epochs`` of the 150 are trained and timed (the schedule is the full run's), and
the rest is projected: an epoch on the cached tail costs the same every epoch.

Writes JSON: generation, cache build and per-epoch seconds, peak RSS, the model's FLOPs per clip
(prefix forward, tail forward + backward) from torch's FLOP counter, and projections to 150
epochs and to NTU-60's 40,320 training clips (xsub), on this machine (measured rates) and on one
GPU (an ASSUMED sustained throughput, stated in the output; nothing here ran on a GPU).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

NTU60_TRAIN_CLIPS = 40320  # xsub training videos of NTU RGB+D 60


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def flops_per_clip(model) -> dict[str, float]:
    """FLOPs of one clip: prefix forward, and tail forward + backward (torch's FLOP counter)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from anonymask.models.training.action.prefix import FrozenPrefix, TrainableTail

    prefix, tail = FrozenPrefix(model), TrainableTail(model)
    x = torch.zeros(1, *model.input_shape)
    with torch.no_grad(), FlopCounterMode(display=False) as fc:
        feats = prefix(x)
    pre = fc.get_total_flops()
    with FlopCounterMode(display=False) as fc:
        tail(feats).sum().backward()
    return {"prefix_forward": float(pre), "tail_forward_backward": float(fc.get_total_flops())}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--clips", type=int, default=2000)
    p.add_argument("--classes", type=int, default=6)
    p.add_argument("--epochs", type=int, default=2, help="epochs actually trained and timed (of 150)")
    p.add_argument("--mode", default="maskdp", choices=["dp", "maskdp", "fpdp", "nonprivate"])
    p.add_argument("--work", default=None, help="folder for the store and run (default: a temp folder)")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--gpu-tflops", type=float, default=200.0,
                   help="ASSUMED sustained bf16 TFLOP/s of one GPU for the projection (not measured)")
    p.add_argument("--gen-workers", type=int, default=1, help="processes that generate the store (default 1)")
    p.add_argument("--tiny", action="store_true",
                   help="the same steps with the tiny network on 32x32 clips of 8 frames (seconds; tests)")
    p.add_argument("--no-amp", action="store_true", help="train and cache in float32 on CUDA (default: bf16 autocast)")
    p.add_argument("--out", default="dry_run.json")
    a = p.parse_args(argv)

    import torch

    from anonymask.config.training import settings_hash, train_settings
    from anonymask.models.training.action.run import build_caches, build_model, fit_run
    from anonymask.models.training.action.synthetic import make_synthetic_store
    from anonymask.storage.runs import prepare_run_dir

    work = Path(a.work or tempfile.mkdtemp(prefix="dryrun-"))
    work.mkdir(parents=True, exist_ok=True)
    store = str(work / "store.zarr")
    report: dict = {"clips": a.clips, "mode": a.mode, "threads": torch.get_num_threads(), "work": str(work),
                    "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
                    "tiny": a.tiny, "phase": "generate"}  # fmt: skip

    def save() -> None:  # after every phase, so a run cut short still tells what it measured
        Path(a.out).write_text(json.dumps(report, indent=2))

    save()
    per_class = max(1, a.clips // a.classes)
    size, frames = ((32, 32), 10) if a.tiny else ((224, 224), 20)
    t0 = time.perf_counter()
    if not (Path(store) / "zarr.json").exists():
        make_synthetic_store(store, num_classes=a.classes, videos_per_class={"train": per_class, "test": 1},
                             frames=frames, size=size, seed=0, workers=a.gen_workers)  # fmt: skip
    report["generate_seconds"] = round(time.perf_counter() - t0, 1)
    report["gen_workers"] = a.gen_workers
    overrides = {"weights": "random", "frame_stride": 1, "num_workers": a.workers, "eval_every": 0,
                 "compare_accountants": [], "log_every": 10**6}  # fmt: skip
    if a.no_amp:
        overrides["amp"] = False
    if a.tiny:
        overrides.update(arch="tiny", size=list(size), clip_len=8, batch_size=8, cache_batch_size=8)
    settings = train_settings(a.mode, "ntu", overrides=overrides)
    report["settings"] = settings.to_json_dict()
    report["train_clips"] = per_class * a.classes

    report["phase"] = "cache"
    save()
    t0 = time.perf_counter()
    caches = build_caches(settings, store)
    report["cache_build_seconds"] = round(time.perf_counter() - t0, 2)
    report["peak_rss_gb_after_cache"] = round(peak_rss_gb(), 2)
    report["phase"] = "fit"
    save()

    run_dir = work / "run"
    prepare_run_dir(run_dir, settings.to_json_dict(), settings_hash(settings), store)
    t0 = time.perf_counter()
    fit = fit_run(settings, store, str(run_dir), caches, until_epoch=a.epochs)
    report["fit_seconds"] = round(time.perf_counter() - t0, 1)
    report["epochs_trained"] = fit["epochs_run"]
    report["steps"] = fit["steps"]
    report["seconds_per_epoch"] = round(fit["seconds"] / max(fit["epochs_run"], 1), 2)
    report["peak_rss_gb"] = round(peak_rss_gb(), 2)
    if torch.cuda.is_available():
        report["peak_gpu_memory_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    report["phase"] = "projection"
    save()

    model = build_model(settings, a.classes)
    flops = flops_per_clip(model)
    report["flops_per_clip"] = flops
    n = report["train_clips"]
    cache_per_clip = report["cache_build_seconds"] / n
    epoch_per_clip = report["seconds_per_epoch"] / n
    variants = len(settings.train_variants())
    report["projection_this_machine"] = {
        "full_run_seconds": round(report["cache_build_seconds"] + 150 * report["seconds_per_epoch"]),
        "ntu60_cache_seconds": round(cache_per_clip * NTU60_TRAIN_CLIPS),
        "ntu60_epoch_seconds": round(epoch_per_clip * NTU60_TRAIN_CLIPS),
        "ntu60_full_run_hours": round((cache_per_clip + 150 * epoch_per_clip) * NTU60_TRAIN_CLIPS / 3600, 1),
    }
    gpu = a.gpu_tflops * 1e12
    # the cache computes the prefix once per variant (+ the eval/public sets, left out here); an
    # epoch runs the tail forward + backward on every private sample and on as many public ones
    passes = 2 if a.mode in ("maskdp", "fpdp") else 1
    report["projection_one_gpu_assumed"] = {
        "assumed_sustained_tflops": a.gpu_tflops,
        "ntu60_cache_seconds": round(variants * flops["prefix_forward"] * NTU60_TRAIN_CLIPS / gpu),
        "ntu60_epoch_seconds": round(passes * flops["tail_forward_backward"] * NTU60_TRAIN_CLIPS / gpu),
        "note": "FLOPs / an assumed throughput, not a measurement (projection_this_machine uses the measured rates)",
    }
    report["projection_one_gpu_assumed"]["ntu60_full_run_hours"] = round(
        (report["projection_one_gpu_assumed"]["ntu60_cache_seconds"]
         + 150 * report["projection_one_gpu_assumed"]["ntu60_epoch_seconds"]) / 3600, 2)  # fmt: skip
    report["phase"] = "done"
    save()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    sys.exit(main())
