"""`make bench` / `anonymask bench`: run every benchmark, write one JSON per benchmark + all.json.

Benchmarks measure; tests never assert timings. Each entry records the machine and the date so
numbers copied into docs/BENCHMARKS.md can be reproduced.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    import torch

    info = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    try:
        info["mem_gb"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        pass
    return info


def _store(quick: bool) -> dict[str, Any]:
    from anonymask.storage.bench import bench_store

    return bench_store(frames=64 if quick else 300)


def _render(quick: bool) -> dict[str, Any]:
    from anonymask.models.render.bench import bench_render

    n = 10 if quick else 60
    return {"one_body": bench_render(640, 480, bodies=1, frames=n), "two_bodies": bench_render(640, 480, bodies=2, frames=n)}


def _offline_stages(quick: bool) -> dict[str, Any]:
    from anonymask.models.compose.bench import bench_offline_stages

    return bench_offline_stages(T=16 if quick else 64, H=480, W=640)


def _refine_tiny(quick: bool) -> dict[str, Any]:
    import tempfile

    from anonymask.models.refine.bench import bench_refine
    from anonymask.models.refine.tiny import build_tiny_refiner_weights

    with tempfile.TemporaryDirectory() as d:
        build_tiny_refiner_weights(d)
        return bench_refine(d, frames=8 if quick else 16, size=64, steps=2)


def _privacy_steps(quick: bool) -> dict[str, Any]:
    from anonymask.models.privacy.bench import bench_default

    return bench_default(quick=quick)


def _cache_epoch(quick: bool) -> dict[str, Any]:
    from anonymask.models.action.bench import bench_epoch

    return {"with_cache": bench_epoch(with_cache=True, quick=quick), "without_cache": bench_epoch(with_cache=False, quick=quick)}


BENCHMARKS: dict[str, Callable[[bool], dict[str, Any]]] = {
    "store": _store,
    "render": _render,
    "offline_stages": _offline_stages,
    "refine_tiny": _refine_tiny,
    "privacy_steps": _privacy_steps,
    "cache_epoch": _cache_epoch,
}


def run_benchmarks(out_dir: Path, only: list[str] | None = None, quick: bool = False) -> int:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    names = only or list(BENCHMARKS)
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
