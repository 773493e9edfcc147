"""Flow ``anonymize``: one dataset run, one subflow run per video (named by its id).

Each video's stages run as Prefect tasks in DAG order; a progress artifact per video is updated as
stages finish. A failing video is recorded in the store with its reason and the dataset run goes
on; the final state's message says how many videos finished, were skipped and failed.
"""

from __future__ import annotations

import time
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import (
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)
from prefect.cache_policies import NONE
from prefect.states import Completed, Failed

from anonymask.config import pipeline_config
from anonymask.storage.datasets import get_adapter
from anonymask.storage.store import DatasetStore
from anonymask.tasks.common import ORDER
from anonymask.tasks.prefect_tasks import stage_task


def _artifact_key(*parts: str) -> str:
    """Prefect artifact keys allow lowercase letters, digits and dashes only."""
    raw = "-".join(parts).lower()
    key = "".join(c if c.isalnum() else "-" for c in raw)
    return "-".join(filter(None, key.split("-")))[:100]


@flow(name="anonymize-video", flow_run_name="{video_id}", log_prints=False, persist_result=False)
def anonymize_video(store_url: str, video_id: str, config: dict[str, Any]) -> dict[str, Any]:
    """All stages of one video, in order; raises on the first failing stage."""
    logger = get_run_logger()
    store = DatasetStore.open(store_url)
    progress_id = create_progress_artifact(
        progress=0.0,
        key=_artifact_key("progress", store.dataset, video_id),
        description=f"stages of {video_id}",
    )
    results = []
    t0 = time.perf_counter()
    for i, name in enumerate(ORDER):
        res = stage_task(store_url, video_id, name, config)
        results.append(res)
        logger.info("%s: %s %s (%.2fs)", video_id, name, res["status"], res["seconds"])
        update_progress_artifact(progress_id, progress=100.0 * (i + 1) / len(ORDER))
    return video_result(store_url, video_id, results, t0)


def video_result(store_url: str, video_id: str, results: list[dict[str, Any]], t0: float) -> dict[str, Any]:
    """One video's outcome: "done" if any stage computed, "skipped" if all were complete."""
    frames = int(DatasetStore.open(store_url).video(video_id).attrs.get("frames") or 0)
    return {
        "video_id": video_id,
        "status": "done" if any(r["status"] == "done" for r in results) else "skipped",
        "frames": frames,
        "seconds": round(time.perf_counter() - t0, 3),
        "stages": {r["stage"]: r for r in results},
    }


@flow(name="anonymize", persist_result=False)
def anonymize(
    dataset: str = "demo",
    source: str | None = None,
    store: str | None = None,
    overrides: dict[str, Any] | None = None,
    limit: int | None = None,
    video_ids: list[str] | None = None,
    runner: str = "local",
    workers: int = 2,
):
    """Anonymize a dataset into its store (resumable; failures isolated per video)."""
    from anonymask.paths import default_source, default_store

    logger = get_run_logger()
    source = source or str(default_source(dataset))
    store_url = store or str(default_store(dataset))
    config = pipeline_config(dataset, overrides)
    adapter = get_adapter(dataset, source)
    infos = list(adapter.records())
    if video_ids:
        wanted = set(video_ids)
        unknown = wanted - {i.video_id for i in infos}
        if unknown:
            raise ValueError(f"unknown video id(s) for {dataset}: {', '.join(sorted(unknown))}")
        infos = [i for i in infos if i.video_id in wanted]
    if limit:
        infos = infos[: int(limit)]
    desc = adapter.describe()
    ds = DatasetStore.create(
        store_url,
        dataset,
        source=desc.get("source", source),
        classes=desc.get("classes", []),
        splits=desc.get("splits", []),
        stages=ORDER,
        config=config,
    )
    ds.register_videos(infos)
    logger.info("%s: %d videos -> %s", dataset, len(infos), store_url)

    t0 = time.perf_counter()
    ids = [i.video_id for i in infos]
    if runner == "local":
        outcomes = [_outcome(anonymize_video(store_url, vid, config, return_state=True)) for vid in ids]
    else:
        outcomes = _run_on_dask(store_url, ids, config, runner, workers)
    rows = []
    for vid, out in zip(ids, outcomes):
        if out["ok"]:
            r = out["result"]
            rows.append({"video": vid, "status": r["status"], "frames": r["frames"],
                         "seconds": r["seconds"], "error": ""})
        else:
            err = _failure_reason(ds, vid) or (out["message"] or "failed")
            logger.warning("%s FAILED: %s", vid, err)
            rows.append({"video": vid, "status": "failed", "frames": 0, "seconds": 0, "error": err})
    wall = time.perf_counter() - t0
    summary = summarize(rows, wall)
    create_table_artifact(key=_artifact_key("videos", dataset), table=rows,
                          description=f"status of every video in {store_url}")
    create_markdown_artifact(key=_artifact_key("summary", dataset), markdown=summary_markdown(dataset, store_url, summary))
    msg = (f"{summary['done']} done, {summary['skipped']} skipped (already complete), {summary['failed']} failed "
           f"of {summary['videos']} videos; {summary['frames_per_s']:.2f} frames/s")
    logger.info(msg)
    if summary["videos"] and summary["failed"] == summary["videos"]:
        return Failed(message=msg, data=summary)
    return Completed(message=msg, data=summary)


@task(name="anonymize-video", task_run_name="{video_id}", cache_policy=NONE, persist_result=False)
def video_task(store_url: str, video_id: str, config: dict[str, Any]) -> dict[str, Any]:
    """One video as one coarse task (the Dask path): stages run in order inside the worker."""
    from anonymask.tasks.common import execute_stage

    t0 = time.perf_counter()
    results = [execute_stage(store_url, video_id, name, config) for name in ORDER]
    return video_result(store_url, video_id, results, t0)


@flow(name="anonymize-fan-out", persist_result=False)
def _fan_out(store_url: str, video_ids: list[str], config: dict[str, Any]) -> list[Any]:
    futures = [video_task.submit(store_url, vid, config) for vid in video_ids]
    for f in futures:
        f.wait()
    return [_outcome(f.state) for f in futures]


def _run_on_dask(store_url: str, video_ids: list[str], config: dict[str, Any], runner: str, workers: int):
    """Videos as tasks on a Dask cluster: ``runner="dask"`` starts a local cluster, any other
    value is taken as a scheduler address (``tcp://host:8786``) of an existing cluster."""
    from prefect_dask import DaskTaskRunner

    if runner == "dask":
        tr = DaskTaskRunner(cluster_kwargs={"n_workers": int(workers), "threads_per_worker": 1, "processes": True})
    else:
        tr = DaskTaskRunner(address=runner)
    return _fan_out.with_options(task_runner=tr)(store_url, video_ids, config)


def _outcome(state) -> dict[str, Any]:
    """A finished run's state as plain data (states must not be returned from flows)."""
    if state.is_completed():
        return {"ok": True, "result": state.result(raise_on_failure=False), "message": state.message}
    return {"ok": False, "result": None, "message": state.message or state.name}


def _failure_reason(ds: DatasetStore, video_id: str) -> str:
    for stage, rec in ds.video(video_id).records().items():
        if rec.get("status") == "failed":
            return f"{stage}: {rec.get('error')}"
    return ""


def summarize(rows: list[dict[str, Any]], wall_seconds: float) -> dict[str, Any]:
    done = [r for r in rows if r["status"] == "done"]
    frames = sum(int(r["frames"]) for r in done)
    return {
        "videos": len(rows),
        "done": len(done),
        "skipped": sum(r["status"] == "skipped" for r in rows),
        "failed": sum(r["status"] == "failed" for r in rows),
        "frames": frames,
        "seconds": round(wall_seconds, 2),
        "frames_per_s": frames / wall_seconds if wall_seconds > 0 and frames else 0.0,
        "failures": [{"video": r["video"], "error": r["error"]} for r in rows if r["status"] == "failed"],
    }


def summary_markdown(dataset: str, store_url: str, s: dict[str, Any]) -> str:
    lines = [f"# anonymize {dataset}", "", f"store: `{store_url}`", "",
             f"- videos: {s['videos']}", f"- done: {s['done']}", f"- skipped (complete): {s['skipped']}",
             f"- failed: {s['failed']}", f"- frames/s: {s['frames_per_s']:.2f}"]
    if s["failures"]:
        lines += ["", "## failures", ""] + [f"- `{f['video']}`: {f['error']}" for f in s["failures"]]
    return "\n".join(lines)

