"""`make demo`: build the synthetic demo data, anonymize it in-process, print a summary.

Uses Prefect's ephemeral mode (no server needed); the same flow serves `anonymize/demo`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path


def run_demo(root: Path, anonymize: bool = True, seed: int = 0, preset: str = "demo") -> int:
    from anonymask.models.shared.synthetic.generator import generate_demo
    from anonymask.storage.inspect import format_status_table, status_report
    from anonymask.storage.store import DatasetStore

    raw = root / "raw" / "demo"
    store_url = str(root / "stores" / "demo.zarr")
    t0 = time.perf_counter()
    if not (raw / "dataset.json").exists():
        print(f"[demo] generating the synthetic demo dataset into {raw} ...", flush=True)
        generate_demo(raw, preset=preset, seed=seed)
        print(f"[demo] generated in {time.perf_counter() - t0:.1f}s", flush=True)
    else:
        print(f"[demo] using existing demo data in {raw}", flush=True)
    if not anonymize:
        from anonymask.storage.datasets import get_adapter

        adapter = get_adapter("demo", raw)
        desc = adapter.describe()
        ds = DatasetStore.create(store_url, "demo", source=str(raw), classes=desc["classes"], splits=desc["splits"])
        ds.register_videos(list(adapter.records()))
        print(f"[demo] store with {len(ds.video_ids())} videos at {store_url}")
        return 0

    from anonymask.cli.prefect_startup import prepare_database

    prepare_database()
    from anonymask.flows.anonymize import anonymize as anonymize_flow

    print(f"[demo] anonymizing into {store_url} (Prefect, in-process) ...", flush=True)
    t1 = time.perf_counter()
    state = anonymize_flow(dataset="demo", source=str(raw), store=store_url, return_state=True)
    summary = state.result(raise_on_failure=False) if hasattr(state, "result") else None
    print(f"[demo] flow finished: {state.name}: {state.message} ({time.perf_counter() - t1:.1f}s)")
    store = DatasetStore.open(store_url, mode="r")
    print(format_status_table(status_report(store)))
    from anonymask.cli.preview import write_preview

    page = write_preview(store, Path(root) / "preview" / "demo")
    print(f"[demo] preview: {page}")
    if isinstance(summary, dict):
        print(json.dumps({k: summary[k] for k in ("videos", "done", "failed", "frames_per_s") if k in summary}))
    return 0 if state.is_completed() else 1
