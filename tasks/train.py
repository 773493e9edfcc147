"""Prefect tasks of the ``train`` flow: build the feature cache, fit, evaluate, write the report.

Each task wraps one step of models/training/action/run.py (where the work is done, without Prefect) and
adds what Prefect shows: the task's logger, a progress artifact per run, the result as a markdown
artifact. Tasks exchange settings, store URLs, cache keys and run folders, never arrays or
models. Every output lives in the run folder (storage/runs.py); each step is skipped when its
output is present and current, so an interrupted job rerun with the same settings picks up where
it stopped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_progress_artifact, update_progress_artifact
from prefect.cache_policies import NONE

from anonymask.models.training.action.run import build_caches, evaluate_run, fit_run, write_result
from anonymask.models.training.action.settings import TrainSettings
from anonymask.tasks.artifacts import artifact_key


@task(name="build-feature-cache", cache_policy=NONE, persist_result=False)
def build_cache_task(settings: TrainSettings, store_url: str) -> dict[str, Any]:
    return build_caches(settings, store_url, get_run_logger())


@task(name="fit", cache_policy=NONE, persist_result=False)
def fit_task(settings: TrainSettings, store_url: str, run_dir: str, caches: dict[str, Any],
             until_epoch: int | None = None, progress_bar: bool = False) -> dict[str, Any]:  # fmt: skip
    """fit_run with a progress artifact (epochs done / epochs) per run."""
    key = artifact_key("train-progress", Path(run_dir).name)
    artifact: dict[str, Any] = {}

    def on_progress(pct: float) -> None:
        if "id" not in artifact:
            artifact["id"] = create_progress_artifact(progress=pct, key=key, description=f"epochs of {Path(run_dir).name}")
        else:
            update_progress_artifact(artifact["id"], progress=pct)

    return fit_run(settings, store_url, run_dir, caches, until_epoch, progress_bar, on_progress, get_run_logger())


@task(name="evaluate", cache_policy=NONE, persist_result=False)
def evaluate_task(settings: TrainSettings, store_url: str, run_dir: str, caches: dict[str, Any],
                  fit: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    return evaluate_run(settings, store_url, run_dir, caches, fit, get_run_logger())


@task(name="report", cache_policy=NONE, persist_result=False)
def report_task(run_dir: str, metrics: dict[str, Any]) -> str:
    """result.md in the run folder and as a Prefect markdown artifact."""
    path, md = write_result(run_dir, metrics)
    create_markdown_artifact(key=artifact_key("train-result", Path(run_dir).name), markdown=md,
                             description=f"result of {Path(run_dir).name}")  # fmt: skip
    return path
