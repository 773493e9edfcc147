"""Flow ``export``: after ``anonymize``, the publishable videos of a store as files a user can hand on.

Runs the same code as ``anonymask export`` (storage/export.py): one H.264 mp4 per video whose
every stage is done and whose audit passed, the source's audio copied, ``manifest.jsonl`` and
``README.txt`` beside them; videos not exported are listed with their reason. Defaults: the
store ``$ANONYMASK_DATA/stores/<dataset>.zarr``, the folder ``$ANONYMASK_DATA/exports/<dataset>``.
A rerun writes only what is missing or stale. Publishes a table artifact (one row per video).
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_table_artifact

from anonymask.tasks.artifacts import artifact_key
from anonymask.tasks.export import export_task


def default_export_dir(dataset: str) -> str:
    from anonymask.core.paths import data_root

    return str(data_root() / "exports" / dataset)


@flow(name="export", flow_run_name="export-{dataset}", persist_result=False)
def export(
    dataset: str = "demo",
    store: str | None = None,
    out: str | None = None,
    lossless: bool = False,
    with_masks: str | None = None,
    crf: int = 18,
    video_ids: list[str] | None = None,
) -> dict[str, Any]:
    """Export ``dataset``'s store (or ``store``) into ``out``; returns the summary (written,
    unchanged, excluded with reasons, errors, manifest path)."""
    from anonymask.core.paths import default_store

    logger = get_run_logger()
    store_url = store or str(default_store(dataset))
    out = out or default_export_dir(dataset)
    res = export_task(store_url, out, lossless=lossless, with_masks=with_masks, crf=crf, video_ids=video_ids)
    rows = ([{"video": v, "export": "written", "reason": ""} for v in res["written"]]
            + [{"video": v, "export": "unchanged", "reason": ""} for v in res["unchanged"]]
            + [{"video": v, "export": "not exported", "reason": r} for v, r in res["excluded"].items()]
            + [{"video": v, "export": "FAILED", "reason": r} for v, r in res["errors"].items()])
    create_table_artifact(key=artifact_key("export", dataset), table=sorted(rows, key=lambda r: r["video"]),
                          description=f"export of {dataset} into {out}")
    logger.info("export %s: %d written, %d unchanged, %d not exported, %d failed -> %s", dataset,
                len(res["written"]), len(res["unchanged"]), len(res["excluded"]), len(res["errors"]), out)
    return res
