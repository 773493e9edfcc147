"""The Prefect task every stage runs as: arrays never pass through Prefect, only store keys."""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NONE

from anonymask.tasks.common import execute_stage


@task(name="stage", task_run_name="{name}", cache_policy=NONE, persist_result=False, retries=0)
def stage_task(store_url: str, video_id: str, name: str, config: dict[str, Any]) -> dict[str, Any]:
    """Run (or skip, when its record is complete and current) one stage of one video."""
    return execute_stage(store_url, video_id, name, config)
