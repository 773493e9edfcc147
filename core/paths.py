"""Where data lives by default: ``$ANONYMASK_DATA`` (default ``./data``).

Raw videos under ``raw/<dataset>/``, stores at ``stores/<dataset>.zarr``.
"""

from __future__ import annotations

import os
from pathlib import Path


def data_root() -> Path:
    return Path(os.environ.get("ANONYMASK_DATA", "data")).resolve()


def default_source(dataset: str) -> Path:
    return data_root() / "raw" / dataset


def default_store(dataset: str) -> Path:
    return data_root() / "stores" / f"{dataset}.zarr"


def weights_root() -> Path | None:
    """``$ANONYMASK_WEIGHTS``, the one folder every weight-backed model loads from (None: unset).
    The only place the variable is read."""
    w = os.environ.get("ANONYMASK_WEIGHTS")
    return Path(w) if w else None
