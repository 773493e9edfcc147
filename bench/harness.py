"""`make bench` / `anonymask bench`: run every benchmark, write one JSON per benchmark + all.json.

Benchmarks measure; tests never assert timings. Each entry records the machine and the date so
numbers copied into docs/BENCHMARKS.md can be reproduced.
"""

from __future__ import annotations

import datetime as dt
import json
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from anonymask.bench.common import machine, ntu60_projection


def _store(quick: bool) -> dict[str, Any]:
    from anonymask.bench.storage import bench_store

    return bench_store(frames=64 if quick else 300)


def _render(quick: bool) -> dict[str, Any]:
    from anonymask.bench.render import bench_render

    n = 10 if quick else 60
    return {"one_body": bench_render(640, 480, bodies=1, frames=n), "two_bodies": bench_render(640, 480, bodies=2, frames=n)}


def _offline_stages(quick: bool) -> dict[str, Any]:
    from anonymask.bench.compose import bench_offline_stages

    return bench_offline_stages(T=16 if quick else 64, H=480, W=640)


def _refine_tiny(quick: bool) -> dict[str, Any]:
    import tempfile

    from anonymask.bench.refine import bench_refine
    from anonymask.models.anonymizer.refine.tiny import build_tiny_refiner_weights

    with tempfile.TemporaryDirectory() as d:
        build_tiny_refiner_weights(d)
        return bench_refine(d, frames=8 if quick else 16, size=64, steps=2)


def _privacy_steps(quick: bool) -> dict[str, Any]:
    """Step time per mode on the same action model and batch; ratios to the non-private step."""
    import torch

    from anonymask.bench.privacy import bench_steps
    from anonymask.models.training.action.mvit import build_action_model

    out = {}
    setups = [("tiny", 16, 8, 32)] if quick else [("tiny", 16, 8, 32), ("mvit_v2_s", 2, 16, 224)]
    for arch, batch, t, size in setups:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(batch, 3, t, size, size, generator=g)
        y = torch.randint(0, 10, (batch,), generator=g)
        res = bench_steps(lambda a=arch, t=t, s=size: build_action_model(10, arch=a, clip_len=t, size=(s, s)),
                          (x, y), repeats=2 if quick else 3)
        base = res["modes"]["nonprivate"].get("median_s")
        for r in res["modes"].values():
            if base and "median_s" in r:
                r["ratio_to_nonprivate"] = round(r["median_s"] / base, 2)
        out[f"{arch}_batch{batch}"] = res
    return out


def _cache_epoch(quick: bool) -> dict[str, Any]:
    from anonymask.bench.action import bench_epoch

    kw = {"arch": "tiny"} if quick else {"arch": "mvit_v2_s", "videos_per_class": 1, "num_classes": 4, "batch_size": 2}
    res = {"with_cache": bench_epoch(with_cache=True, **kw), "without_cache": bench_epoch(with_cache=False, **kw)}
    a, b = res["with_cache"].get("seconds_per_epoch"), res["without_cache"].get("seconds_per_epoch")
    if a and b:
        res["epoch_speedup"] = round(b / a, 2)
    return res


def _tail_steps(quick: bool) -> dict[str, Any]:
    """Step time per private mode on the cached tail (what an epoch costs once the prefix is cached)."""
    from anonymask.bench.action import bench_tail_steps

    if quick:
        return bench_tail_steps(arch="tiny", batch_size=8, num_classes=10, repeats=2)
    return bench_tail_steps(arch="mvit_v2_s", batch_size=8, repeats=3)


def _pipeline(quick: bool) -> dict[str, Any]:
    """Every stage of the offline path (mediapipe pose + segmentation, temporal-median inpainting,
    refine=none) on synthetic 640x480 videos: per-stage and end-to-end frames/s over every frame
    processed (a video the audit fails took the time too; ``frames_done`` counts the done ones)."""
    import tempfile

    from anonymask.config.pipeline import pipeline_config
    from anonymask.models.shared.synthetic.generator import generate_demo
    from anonymask.storage.datasets import get_adapter
    from anonymask.storage.store import DatasetStore
    from anonymask.tasks.common import ORDER, execute_stage

    frames = 16 if quick else 48
    with tempfile.TemporaryDirectory() as d:
        root = generate_demo(Path(d) / "raw", preset="tiny", seed=0, width=640, height=480, frames=frames)
        adapter = get_adapter("demo", root)
        url = str(Path(d) / "b.zarr")
        store = DatasetStore.create(url, "demo", stages=ORDER)
        infos = list(adapter.records())
        store.register_videos(infos)
        # person_free_check off: a second fill that only synthetic data (ground truth) pays, for
        # the audit's measurement; the bench times what a real video costs
        cfg = pipeline_config("bench-640", {"ingest": {"max_side": 640}, "inpaint": {"person_free_check": False}})
        per_stage = {s: 0.0 for s in ORDER}
        total_frames, done_frames, failed = 0, 0, []
        t_all = time.perf_counter()
        for info in infos:
            try:
                for s in ORDER:
                    t0 = time.perf_counter()
                    try:
                        execute_stage(url, info.video_id, s, cfg)
                    finally:
                        per_stage[s] += time.perf_counter() - t0
                        if s == "ingest":  # every processed frame counts: a failed video took the time too
                            total_frames += int(DatasetStore.open(url).video(info.video_id).attrs.get("frames", 0))
                done_frames += int(DatasetStore.open(url).video(info.video_id).attrs["frames"])
            except Exception as e:  # report, keep measuring the others
                failed.append(f"{info.video_id}: {type(e).__name__}: {e}")
        wall = time.perf_counter() - t_all
        metrics = {e.video_id: {k: e.metrics().get(k) for k in ("mpjpe_mm", "mask_iou", "background_psnr_db",
                                                                  "person_leak")} for e in DatasetStore.open(url).videos()}
    return {
        "videos": len(infos), "frames": total_frames, "frames_done": done_frames, "size": [480, 640], "failed": failed,
        "stage_seconds": {k: round(v, 2) for k, v in per_stage.items()},
        "stage_fps": {k: round(total_frames / v, 1) if v > 0 else None for k, v in per_stage.items()},
        "end_to_end_fps": round(total_frames / wall, 2) if wall > 0 else None,
        "metrics": metrics,
    }


def _throughput(quick: bool) -> dict[str, Any]:
    """The anonymize flow on one set with the local runner and then the Dask runner (a LocalCluster
    of 2 worker processes), default offline backends: videos/hour and frames/s of each, in one run."""
    import tempfile

    from anonymask.flows.anonymize import anonymize
    from anonymask.models.shared.synthetic.generator import generate_demo

    out: dict[str, Any] = {"workers": 2}
    with tempfile.TemporaryDirectory() as d:
        preset = "tiny" if quick else "demo"
        root = generate_demo(Path(d) / "raw", preset=preset, seed=0)
        overrides = {"pose4d": {"backend": "gt"}, "segment": {"backend": "gt"}} if quick else {}
        out["set"] = {"preset": preset, "backends": "gt pose/segment" if quick else "defaults (mediapipe)"}
        for runner in ("local", "dask"):
            t0 = time.perf_counter()
            state = anonymize(dataset="demo", source=str(root), store=str(Path(d) / f"{runner}.zarr"),
                              overrides=overrides, runner=runner, workers=2, log_dir=str(Path(d) / "logs"),
                              return_state=True)
            wall = time.perf_counter() - t0
            s = state.result(raise_on_failure=False)
            if not isinstance(s, dict):
                out[runner] = {"error": f"{type(s).__name__}: {s}"}
                continue
            secs = float(s["seconds"])
            out[runner] = {
                "videos": s["videos"], "done": s["done"], "failed": s["failed"], "frames": s["frames"],
                "seconds": round(secs, 1), "wall_with_startup_s": round(wall, 1),
                # per video processed (done or failed: a failed video used the time too) and done
                "videos_per_hour": round(3600.0 * s["videos"] / secs, 1) if secs else None,
                "done_per_hour": round(3600.0 * s["done"] / secs, 1) if secs else None,
                "frames_per_s_done": round(s["frames"] / secs, 2) if secs else None,
                "seconds_per_video": round(secs / s["videos"], 2) if s["videos"] else None,
                "failures": s["failures"],
            }
    if out.get("local", {}).get("seconds") and out.get("dask", {}).get("seconds"):
        out["dask_speedup"] = round(out["local"]["seconds"] / out["dask"]["seconds"], 2)
    # per-worker cost per frame: the local runner is one worker; the Dask run kept 2 workers busy
    for runner, busy in (("local", 1), ("dask", 2)):
        r = out.get(runner, {})
        if r.get("seconds") and r.get("frames"):
            r["seconds_per_frame_per_worker"] = round(r["seconds"] * busy / r["frames"], 4)
    spf = out.get("dask", {}).get("seconds_per_frame_per_worker") or out.get("local", {}).get(
        "seconds_per_frame_per_worker")
    if spf:
        out["ntu60_projection_at_this_size"] = ntu60_projection(spf)
    return out


def _scaling(quick: bool) -> dict[str, Any]:
    from anonymask.bench.scaling import bench_scaling

    return bench_scaling(quick)


def _dataset(quick: bool) -> dict[str, Any]:
    """Clips/s: the dataset API on Zarr chunks vs decoding the exported mp4s (bench/dataset.py)."""
    from anonymask.bench.dataset import bench_dataset

    return bench_dataset(quick)


def _learned(quick: bool) -> dict[str, Any]:
    """Keypoint/Mask R-CNN, FCOS, ProPainter at their default sizes on Pose2Sim's cam01, random weights."""
    import tempfile

    from anonymask.bench.learned import bench_learned, build_random_learned_weights, sample_video

    with tempfile.TemporaryDirectory() as d:
        return bench_learned(build_random_learned_weights(d), sample_video(), frames=4 if quick else 16)


BENCHMARKS: dict[str, Callable[[bool], dict[str, Any]]] = {
    "store": _store,
    "render": _render,
    "offline_stages": _offline_stages,
    "refine_tiny": _refine_tiny,
    "privacy_steps": _privacy_steps,
    "cache_epoch": _cache_epoch,
    "tail_steps": _tail_steps,
    "pipeline": _pipeline,
    "throughput": _throughput,
    "scaling": _scaling,
    "dataset": _dataset,
    "learned": _learned,
}


#: long or memory-hungry: run only when named (``--only scaling``)
ON_REQUEST = {"scaling", "learned"}


def run_benchmarks(out_dir: Path, only: list[str] | None = None, quick: bool = False) -> int:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    names = only or [n for n in BENCHMARKS if n not in ON_REQUEST]
    unknown = set(names) - set(BENCHMARKS)
    if unknown:
        raise SystemExit(f"unknown benchmark(s): {', '.join(sorted(unknown))}; known: {', '.join(BENCHMARKS)}")
    results: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "quick": quick,
        "results": {},
    }
    failed = 0
    for name in names:
        print(f"[bench] {name} ...", flush=True)
        t0 = time.perf_counter()
        try:
            res = BENCHMARKS[name](quick)
            status = "ok"
        except Exception as e:  # a missing optional part must not hide the other numbers
            res = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc(limit=5)}
            status = "error"
            failed += 1
        res = {"status": status, "seconds": round(time.perf_counter() - t0, 2), **res}
        results["results"][name] = res
        (out_dir / f"{name}.json").write_text(json.dumps(res, indent=2, default=str))
        print(json.dumps({name: {k: v for k, v in res.items() if k != "traceback"}}, default=str), flush=True)
    (out_dir / "all.json").write_text(json.dumps(results, indent=2, default=str))
    print(f"[bench] wrote {out_dir}/all.json ({failed} failed)")
    return 1 if failed else 0
