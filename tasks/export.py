"""Task ``export``: the store's publishable videos out to files (storage/export.py does the work).

One coarse task per dataset: the export reads each video's arrays chunk by chunk and writes its
files itself; only paths and the result summary pass through Prefect.
"""

from __future__ import annotations

from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NONE

from anonymask.storage.export import ExportOptions, export_store


@task(name="export", task_run_name="export-{store_url}", cache_policy=NONE, persist_result=False, retries=0)
def export_task(store_url: str, out: str, lossless: bool = False, with_masks: str | None = None,
                crf: int = 18, video_ids: list[str] | None = None) -> dict[str, Any]:
    """Export (or bring up to date) ``out`` from ``store_url``; returns the export's summary."""
    logger = get_run_logger()
    opts = ExportOptions(lossless=lossless, with_masks=with_masks, crf=crf)
    return export_store(store_url, out, opts, videos=video_ids, log=logger.info)
