"""Flow ``anonymize``: one dataset run, one subflow run per video (named by its id).

Each video's stages run as Prefect tasks in DAG order; a progress artifact per video is updated as
stages finish. A failing video is recorded in the store with its stage and reason and the dataset
run goes on; the summary (returned, and as table and markdown artifacts) lists every failure.

Two runs on one store cooperate: each video is processed under its claim
(:mod:`anonymask.storage.claims`). A video another run holds is put aside and taken up after the
others, once that run lets go of it (its completed stages are then simply skipped), so every
video is computed once. Tracebacks go to the run's log file only (:mod:`anonymask.core.runlog`).
"""

from __future__ import annotations

import contextlib
import os
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

from anonymask.config.pipeline import RunnerSettings, pipeline_config, runner_config
from anonymask.config.presets import with_presets
from anonymask.config.stages import PipelineSettings, check_weights
from anonymask.core.errors import VideoBusyError, VideoTimeoutError
from anonymask.storage.datasets import check_video_ids, get_adapter
from anonymask.storage.faults import fault_line
from anonymask.storage.store import DatasetStore
from anonymask.tasks.artifacts import artifact_key
from anonymask.tasks.common import ORDER, run_video
from anonymask.tasks.prefect_tasks import failure_message, stage_task


class StageFailed(Exception):
    """A stage task ended Failed; its message is the one-line reason."""


def _progress(store_url: str, video_id: str):
    """A progress artifact for one video and the callback that advances it per stage."""
    dataset = DatasetStore.open(store_url).dataset
    pid = create_progress_artifact(
        progress=0.0, key=artifact_key("progress", dataset, video_id), description=f"stages of {video_id}"
    )

    def on_stage(i: int, name: str, res: dict[str, Any]) -> None:
        get_run_logger().info("%s: %s %s (%.2fs)%s", video_id, name, res["status"], res["seconds"],
                              f" [repaired: {res['repaired']}]" if res.get("repaired") else "")
        update_progress_artifact(pid, progress=100.0 * (i + 1) / len(ORDER))

    return on_stage


def _prefect_stage(store_url: str, video_id: str, name: str, config: PipelineSettings, verify_done: bool):
    """One stage as the Prefect task ``stage``; ``config``: the video's typed settings (run_video), passed as they are."""
    state = stage_task(store_url, video_id, name, config, verify_done, return_state=True)
    if not state.is_completed():
        raise StageFailed(state.message or f"{name}: {state.name}")
    return state.result()


@flow(name="anonymize-video", flow_run_name="{video_id}", log_prints=False, persist_result=False)
def anonymize_video(
    store_url: str, video_id: str, config: dict[str, Any], wait: bool = False, verify_done: bool = True,
    time_budget_s: float | None = None,
):
    """All stages of one video, in order, under the video's claim; Failed on the first failing
    stage (message: stage and reason). A video another run holds returns status "busy"."""
    t0 = time.perf_counter()
    try:
        results = run_video(store_url, video_id, config, wait=wait, verify_done=verify_done,
                            run_stage=_prefect_stage, on_stage=_progress(store_url, video_id),
                            time_budget_s=time_budget_s)
    except VideoBusyError as e:
        get_run_logger().info("%s: %s; taken up later", video_id, e)
        return {"video_id": video_id, "status": "busy", "frames": 0, "seconds": 0.0, "holder": str(e)}
    except StageFailed as e:
        return Failed(message=str(e))
    except VideoTimeoutError as e:
        return Failed(message=f"budget: {e}")
    except OSError as e:  # a full or read-only store outside a stage (its claim): one line, no traceback
        if fault_line(e, store_url) is None:
            raise
        return Failed(message=fault_line(e, store_url, video_id))
    return video_result(store_url, video_id, results, t0)


@task(name="anonymize-video", task_run_name="{video_id}", cache_policy=NONE, persist_result=False)
def video_task(
    store_url: str, video_id: str, config: dict[str, Any], wait: bool = False, verify_done: bool = True,
    time_budget_s: float | None = None,
):
    """One video as one coarse task (the Dask path): stages run in order inside the worker, with
    the same claim, progress artifact and one-line failure as the local path."""
    t0 = time.perf_counter()
    on_stage = _progress(store_url, video_id)
    stage_now = {"name": ORDER[0]}

    def run_stage(store_url, video_id, name, config, verify_done):
        from anonymask.tasks.common import execute_stage

        stage_now["name"] = name
        return execute_stage(store_url, video_id, name, config, verify_done)

    try:
        results = run_video(store_url, video_id, config, wait=wait, verify_done=verify_done,
                            run_stage=run_stage, on_stage=on_stage, time_budget_s=time_budget_s)
    except VideoBusyError as e:
        return {"video_id": video_id, "status": "busy", "frames": 0, "seconds": 0.0, "holder": str(e)}
    except VideoTimeoutError as e:
        return Failed(message=f"budget: {e}")
    except Exception as e:
        return Failed(message=failure_message(stage_now["name"], e, store_url))
    return video_result(store_url, video_id, results, t0)


def video_result(store_url: str, video_id: str, results: list[dict[str, Any]], t0: float) -> dict[str, Any]:
    """One video's outcome: "done" if any stage computed, "skipped" if all were complete."""
    frames = int(DatasetStore.open(store_url).video(video_id).attrs.get("frames") or 0)
    repaired = {r["stage"]: r["repaired"] for r in results if r.get("repaired")}
    return {
        "video_id": video_id,
        "status": "done" if any(r["status"] == "done" for r in results) else "skipped",
        "frames": frames,
        "seconds": round(time.perf_counter() - t0, 3),
        "stages": {r["stage"]: r for r in results},
        "repaired": repaired,
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
    workers: int | None = None,
    verify_done: bool = True,
    runner_overrides: dict[str, Any] | None = None,
    log_dir: str | None = None,
    export_to: str | None = None,
    presets: list[str] | None = None,
):
    """Anonymize a dataset into its store (resumable; failures isolated per video).

    ``presets``: named sets of settings (config/presets.py) laid under ``overrides``, e.g.
    ``prefect deployment run anonymize/tsh --param 'presets=["yolo"]'``.

    ``export_to``: afterwards, run the ``export`` flow into this folder ("default":
    ``$ANONYMASK_DATA/exports/<dataset>``): the publishable videos as files, as a subflow run.

    ``runner``: "local" (in this process), "dask" (a local Dask cluster of ``workers`` processes)
    or a Dask scheduler address of an existing cluster. ``verify_done``: check the checksums of
    completed stages before skipping them (damaged ones are recomputed). The returned summary
    lists every failed video with its stage and reason and names the run's log file.
    """
    from anonymask.core.runlog import run_log

    with run_log(f"anonymize-{dataset}", log_dir) as log_path:
        state = _anonymize(dataset, source, store, with_presets(presets, overrides), limit, video_ids, runner,
                           workers, verify_done, runner_overrides, log_path)
        if export_to:
            _export_after(dataset, store, export_to, state)
        return state


def _export_after(dataset: str, store: str | None, export_to: str, state) -> None:
    """The step after anonymizing: every publishable video of the store out as files (only
    done and audited videos are written; the others are listed with their reason)."""
    from anonymask.core.paths import default_store
    from anonymask.flows.export import default_export_dir, export

    out = default_export_dir(dataset) if export_to == "default" else export_to
    res = export(dataset=dataset, store=store or str(default_store(dataset)), out=out)
    if isinstance(getattr(state, "data", None), dict):
        state.data["export"] = {"out": out, "written": len(res["written"]), "unchanged": len(res["unchanged"]),
                                "excluded": len(res["excluded"]), "errors": len(res["errors"])}


def _anonymize(dataset, source, store, overrides, limit, video_ids, runner, workers, verify_done,
               runner_overrides, log_path):
    from anonymask.core.paths import default_source, default_store
    from anonymask.core.runlog import traceback_logger

    logger = get_run_logger()
    source = source or str(default_source(dataset))
    store_url = store or str(default_store(dataset))
    config = pipeline_config(dataset, overrides)
    check_weights(config)  # a missing weight file stops the run here, not at that stage of every video
    rcfg = runner_config(runner_overrides, workers=workers)
    adapter = get_adapter(dataset, source)
    infos, seen = [], set()
    for info in adapter.records():  # an adapter that lists a video twice must not run it twice
        if info.video_id in seen:
            logger.warning("%s: listed twice by the %s adapter; processed once", info.video_id, dataset)
            continue
        seen.add(info.video_id)
        infos.append(info)
    if video_ids:
        check_video_ids(dataset, {i.video_id for i in infos}, video_ids)
        wanted = set(video_ids)
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
    ds.update_attrs(config=config)
    logger.info("%s: %d videos -> %s (log: %s)", dataset, len(infos), store_url, log_path)

    t0 = time.perf_counter()
    ids = [i.video_id for i in infos]
    outcomes = _run_videos(store_url, ids, config, runner, rcfg, verify_done, wait=False)
    busy = [vid for vid in ids if outcomes[vid]["ok"] and outcomes[vid]["result"].get("status") == "busy"]
    if busy:
        logger.info("%d video(s) held by another run: waiting for them: %s", len(busy), ", ".join(busy))
        again = _run_videos(store_url, busy, config, runner, rcfg, verify_done, wait=True)
        for vid in busy:
            outcomes[vid] = dict(again[vid], waited=True)
    rows = []
    tb_log = traceback_logger()
    for vid in ids:
        rows.append(_row(ds, vid, outcomes[vid], tb_log))
        if rows[-1]["status"] == "failed":
            logger.warning("%s FAILED at %s: %s", vid, rows[-1]["stage"], rows[-1]["error"])
    wall = time.perf_counter() - t0
    summary = summarize(rows, wall)
    summary["log"] = str(log_path)
    summary["store"] = store_url
    summary["runner"] = runner
    create_table_artifact(key=artifact_key("videos", dataset), table=rows,
                          description=f"status of every video in {store_url}")
    create_markdown_artifact(key=artifact_key("summary", dataset),
                             markdown=summary_markdown(dataset, store_url, summary))
    msg = (f"{summary['done']} done, {summary['skipped']} skipped (already complete), {summary['failed']} failed "
           f"of {summary['videos']} videos; {summary['frames_per_s']:.2f} frames/s")
    logger.info(msg)
    if summary["videos"] and summary["failed"] == summary["videos"]:
        return Failed(message=msg, data=summary)
    return Completed(message=msg, data=summary)


def _row(ds: DatasetStore, vid: str, out: dict[str, Any], tb_log) -> dict[str, Any]:
    """One summary row; for a failure, the failed stage and its reason (from the store record
    when there is one, else the run's message) and the traceback into the log file."""
    waited = bool(out.get("waited"))
    if out["ok"]:
        r = out["result"]
        status = r["status"]
        if status == "busy":  # still held after waiting (should not happen): say so, not "done"
            return {"video": vid, "status": "failed", "stage": "", "error": r.get("holder", "busy"),
                    "frames": 0, "seconds": 0, "repaired": "", "waited": waited}
        return {"video": vid, "status": status, "stage": "", "error": "", "frames": r["frames"],
                "seconds": r["seconds"], "waited": waited,
                "repaired": "; ".join(f"{k}: {v}" for k, v in (r.get("repaired") or {}).items())}
    rec_stage, rec_err, tb = _failure_record(ds, vid)
    message = out.get("message") or "failed"
    head, _, rest = message.partition(": ")
    if (head in ORDER or head == "budget") and rest:  # our one-line failure: "<stage>: <reason>"
        stage, err = head, rest
    else:  # the run ended some other way (a crashed worker, a timeout): keep what Prefect said
        stage, err = rec_stage, (f"{rec_err} ({message})" if rec_err else message)
    tb_log.error("%s failed at %s: %s\n%s", vid, stage or "?", err, tb or f"(no traceback recorded) {message}")
    return {"video": vid, "status": "failed", "stage": stage, "error": err or message, "frames": 0,
            "seconds": 0, "repaired": "", "waited": waited}


def _run_videos(store_url, ids, config, runner, rcfg, verify_done, wait) -> dict[str, dict[str, Any]]:
    if not ids:
        return {}
    budget = rcfg.video_timeout_s
    if runner == "local":
        return {vid: _outcome(anonymize_video(store_url, vid, config, wait, verify_done, budget, return_state=True))
                for vid in ids}
    return _run_on_dask(store_url, ids, config, runner, rcfg, verify_done, wait)


@flow(name="anonymize-fan-out", persist_result=False)
def _fan_out(store_url: str, video_ids: list[str], config: dict[str, Any], wait: bool, verify_done: bool,
             time_budget_s: float | None = None) -> dict[str, Any]:
    futures = {vid: video_task.submit(store_url, vid, config, wait, verify_done, time_budget_s)
               for vid in video_ids}
    for f in futures.values():
        f.wait()
    return {vid: _outcome(f.state) for vid, f in futures.items()}


def dask_task_runner(runner: str, rcfg: RunnerSettings):
    """The DaskTaskRunner for ``runner``: "dask" starts a LocalCluster of ``rcfg.workers``
    processes (one thread each, ``video_memory_gb`` each); any other value is the address of an
    existing scheduler (``tcp://host:8786``), e.g. one started by dask-jobqueue or
    dask-kubernetes (see docs/SCALING.md)."""
    from prefect_dask import DaskTaskRunner

    if runner != "dask":
        return DaskTaskRunner(address=runner)
    kw: dict[str, Any] = {"n_workers": rcfg.workers, "threads_per_worker": 1, "processes": True}
    if rcfg.video_memory_gb:
        kw["memory_limit"] = f"{rcfg.video_memory_gb}GiB"
    return DaskTaskRunner(cluster_kwargs=kw)


def _run_on_dask(store_url, video_ids, config, runner, rcfg, verify_done, wait):
    tr = dask_task_runner(runner, rcfg)
    with _api_for_workers(), _threads_per_worker(runner, rcfg), _keep_lost_workers(runner):
        return _fan_out.with_options(task_runner=tr)(store_url, video_ids, config, wait, verify_done,
                                                     rcfg.video_timeout_s)


LOST_WORKER_TIMEOUT_S = 7 * 24 * 3600
"""``distributed.deploy.lost-worker-timeout`` for the LocalCluster of ``runner="dask"``. Dask's
default (15 s) closes the nanny of a worker that died and has not re-registered 15 s later, for
good: its timer also fires when the nanny's new worker registered and died again in between. Under
repeated kills (OOM) or a slow restart on a loaded machine the cluster lost its workers one by one,
and with none left the run waited forever (scripts/dask_kill_soak.py, issue 32). Each nanny restarts
its own worker, so nothing needs closing before the run ends."""


@contextlib.contextmanager
def _keep_lost_workers(runner: str):
    """Around a run on a LocalCluster of ours: never close a nanny whose worker was lost (the
    setting is read when a worker is removed, so it must hold for the whole run)."""
    if runner != "dask":
        yield
        return
    import dask

    with dask.config.set({"distributed.deploy.lost-worker-timeout": LOST_WORKER_TIMEOUT_S}):
        yield


@contextlib.contextmanager
def _threads_per_worker(runner: str, rcfg: RunnerSettings):
    """The workers of a LocalCluster inherit this process's environment: give each the cores it
    may use for a model call (models/anonymizer/pose/roi.py ``cpu_threads``), so N workers on N cores do not
    each use several threads. An existing cluster's workers keep their own environment."""
    from anonymask.models.anonymizer.pose.roi import THREADS_ENV, available_cores

    if runner != "dask" or THREADS_ENV in os.environ:
        yield
        return
    os.environ[THREADS_ENV] = str(max(1, available_cores() // rcfg.workers))
    try:
        yield
    finally:
        os.environ.pop(THREADS_ENV, None)


@contextlib.contextmanager
def _api_for_workers():
    """Without a configured Prefect server this process runs a temporary one; Dask workers (other
    processes) would each start their own and their task runs, logs and progress artifacts would
    never reach this run's UI. Point them at this process's server instead."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if PREFECT_API_URL.value():
        yield
        return
    with get_client(sync_client=True) as client:
        url = str(client.api_url)
    if not url.startswith(("http://127.0.0.1", "http://localhost")):
        yield
        return
    with temporary_settings(updates={PREFECT_API_URL: url.rstrip("/")}):
        yield


def _outcome(state) -> dict[str, Any]:
    """A finished run's state as plain data (states must not be returned from flows)."""
    if state.is_completed():
        return {"ok": True, "result": state.result(raise_on_failure=False), "message": state.message}
    return {"ok": False, "result": None, "message": state.message or state.name}


def _failure_record(ds: DatasetStore, video_id: str) -> tuple[str, str, str]:
    """(stage, error, traceback) of the video's failed stage record, or empties."""
    try:
        recs = DatasetStore.open(ds.url).video(video_id).records()
    except Exception:
        return "", "", ""
    for stage in ORDER:
        rec = recs.get(stage) or {}
        if rec.get("status") == "failed":
            return stage, str(rec.get("error") or ""), str(rec.get("traceback") or "")
    return "", "", ""


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
        "failures": [{"video": r["video"], "stage": r["stage"], "error": r["error"]}
                     for r in rows if r["status"] == "failed"],
        "repaired": [{"video": r["video"], "what": r["repaired"]} for r in rows if r.get("repaired")],
        "waited": [r["video"] for r in rows if r.get("waited")],
        "rows": rows,
    }


def summary_markdown(dataset: str, store_url: str, s: dict[str, Any]) -> str:
    lines = [f"# anonymize {dataset}", "", f"store: `{store_url}`", "",
             f"- videos: {s['videos']}", f"- done: {s['done']}", f"- skipped (complete): {s['skipped']}",
             f"- failed: {s['failed']}", f"- frames/s: {s['frames_per_s']:.2f}"]
    if s["failures"]:
        lines += ["", "## failures", ""] + [f"- `{f['video']}` at {f['stage'] or '?'}: {f['error']}"
                                             for f in s["failures"]]
    if s.get("repaired"):
        lines += ["", "## repaired", ""] + [f"- `{r['video']}`: {r['what']}" for r in s["repaired"]]
    return "\n".join(lines)
