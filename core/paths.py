"""Where data lives by default: ``$ANONYMASK_DATA`` (default ``./data``).

Raw videos under ``raw/<dataset>/``, stores at ``stores/<dataset>.zarr``.
"""

from __future__ import annotations

from pathlib import Path

from anonymask.core.environment import environment


def data_root() -> Path:
    return environment().data


def default_source(dataset: str) -> Path:
    return data_root() / "raw" / dataset


def default_store(dataset: str) -> Path:
    return data_root() / "stores" / f"{dataset}.zarr"


def weights_root() -> Path | None:
    """``$ANONYMASK_WEIGHTS``, the one folder every weight-backed model loads from (None: unset)."""
    return environment().weights
