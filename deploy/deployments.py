"""Prefect deployments: ``anonymize/<dataset>``, ``export/<dataset>`` and ``train/<mode>-<dataset>``.

Served by one process (``make serve`` / ``python -m anonymask.deploy.serve``). Data locations come
from ``ANONYMASK_DATA`` in the serving process (raw videos in ``raw/<dataset>/``, stores in
``stores/<dataset>.zarr``); every parameter can be overridden per run, e.g.
``prefect deployment run anonymize/ntu -p limit=10``.
"""

from __future__ import annotations

from typing import Any

ANONYMIZE_DATASETS = ["demo", "sample", "ntu", "ntu120", "tsh", "ucf101", "hmdb51"]
TRAIN_DATASETS = ["demo", "synthetic", "ntu", "ntu120", "tsh", "ucf101", "hmdb51"]
TRAIN_MODES = ["nonprivate", "dp", "maskdp", "fpdp"]


def anonymize_deployments() -> list[Any]:
    from anonymask.flows.anonymize import anonymize

    return [
        anonymize.to_deployment(
            name=ds,
            parameters={"dataset": ds},
            description=f"Anonymize {ds}: raw videos under $ANONYMASK_DATA/raw/{ds}, store "
            f"$ANONYMASK_DATA/stores/{ds}.zarr (override with -p source=... -p store=...); "
            f"-p export_to=default then exports the publishable videos to $ANONYMASK_DATA/exports/{ds}.",
            tags=["anonymize", ds],
        )
        for ds in ANONYMIZE_DATASETS
    ]


def export_deployments() -> list[Any]:
    """The step after ``anonymize/<dataset>``: its publishable videos out to
    ``$ANONYMASK_DATA/exports/<dataset>`` (resumable: run it after every anonymize run)."""
    from anonymask.flows.export import export

    return [
        export.to_deployment(
            name=ds,
            parameters={"dataset": ds},
            description=f"Export {ds} after anonymize: one mp4 per done and audited video, audio copied, "
            f"manifest.jsonl, into $ANONYMASK_DATA/exports/{ds} (override with -p out=... -p lossless=true).",
            tags=["export", ds],
        )
        for ds in ANONYMIZE_DATASETS
    ]


def train_deployments() -> list[Any]:
    from anonymask.flows.train import train

    return [
        train.to_deployment(
            name=f"{mode}-{ds}",
            parameters={"mode": mode, "dataset": ds},
            description=f"Train the action model on {ds} with {mode}.",
            tags=["train", mode, ds],
        )
        for mode in TRAIN_MODES
        for ds in TRAIN_DATASETS
    ]


def skeleton_deployments() -> list[Any]:
    from anonymask.flows.skeleton import train_skeleton_anon

    return [
        train_skeleton_anon.to_deployment(name=f"skeleton-anon-{ds}", parameters={"dataset": ds},
                                          tags=["train", "skeleton", ds])  # fmt: skip
        for ds in TRAIN_DATASETS
    ]


def all_deployments() -> list[Any]:
    return anonymize_deployments() + export_deployments() + train_deployments() + skeleton_deployments()
