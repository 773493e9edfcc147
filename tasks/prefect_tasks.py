"""The Prefect task every stage runs as: arrays never pass through Prefect, only store keys."""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NONE
from prefect.states import Failed

from anonymask.config.stages import PipelineSettings
from anonymask.tasks.common import execute_stage


def failure_message(stage: str, e: BaseException, store_url: str | None = None) -> str:
    """One line: the stage and the error (whose text names the file for input errors; a full,
    read-only or permission-denied store or source is named with the cause in words)."""
    from anonymask.core.errors import AnonymaskError
    from anonymask.storage.faults import fault_line

    if isinstance(e, AnonymaskError):
        text = str(e)
    else:
        text = fault_line(e, store_url) or f"{type(e).__name__}: {e}"
    return f"{stage}: {text}"


@task(name="stage", task_run_name="{name}", cache_policy=NONE, persist_result=False, retries=0)
def stage_task(
    store_url: str, video_id: str, name: str, config: PipelineSettings | dict[str, Any], verify_done: bool = True
) -> dict[str, Any]:
    """Run (or skip, when its record is complete and current) one stage of one video.

    A failing stage ends in a Failed state whose message is one line (stage: reason); the
    traceback is in the stage's record and the run's log file, not in the console or the UI.
    """
    try:
        return execute_stage(store_url, video_id, name, config, verify_done)
    except Exception as e:
        return Failed(message=failure_message(name, e, store_url))
