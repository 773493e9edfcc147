"""Checks of a run's dataset, source and store that need no Prefect, no server and no video.

A bad argument found inside the flow costs a server start (~20 s) and buries the one line that
matters under Prefect's log. These run first, in well under a second, and each failure names the
path and the reason.
"""

from __future__ import annotations

import errno
import os
import uuid
from pathlib import Path

from anonymask.core.errors import DatasetError, StoreError


def check_dataset_name(dataset: str) -> bool:
    """Raises for an unknown name; returns whether the dataset reads its source folder."""
    from anonymask.storage.datasets.base import _REGISTRY, available

    names = available()
    if dataset not in names:
        raise DatasetError(f"unknown dataset {dataset!r}; known: {', '.join(names)}")
    return _REGISTRY[dataset].reads_root


def check_source(source: str) -> None:
    """The source folder exists, is a folder and can be listed."""
    p = Path(source).expanduser()
    if not p.exists():
        raise DatasetError(f"{p}: source folder does not exist")
    if not p.is_dir():
        raise DatasetError(f"{p}: source is not a folder")
    try:
        next(os.scandir(p), None)
    except PermissionError:
        raise DatasetError(f"{p}: source folder cannot be read (permission denied)") from None
    except OSError as e:
        raise DatasetError(f"{p}: source folder cannot be read ({e.strerror})") from None


def _probe_write(folder: Path, what: str) -> None:
    """Create and remove a file: the only test that holds for root, read-only mounts and ACLs."""
    probe = folder / f".anonymask-write-probe-{uuid.uuid4().hex}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        reason = "read-only file system" if e.errno == errno.EROFS else (e.strerror or str(e)).lower()
        raise StoreError(f"{folder}: {what} is not writable ({reason})") from None


def check_store_target(store: str) -> None:
    """A local store path is a folder (or can be made one) that this process can write.

    Remote URLs (s3://, gs://) are checked by the flow when it opens them."""
    from anonymask.storage.claims import local_store_path

    local = local_store_path(store)
    if local is None:
        return
    p = local.expanduser()
    if p.exists():
        if not p.is_dir():
            raise StoreError(f"{p}: store path is a file, not a store folder")
        _probe_write(p, "store folder")
        return
    parent = p.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise StoreError(f"{p}: cannot create the store: {parent} is a file, not a folder")
    _probe_write(parent, f"folder {parent} (where the store {p.name} would be created)")


def check_run_target(dataset: str, source: str, store: str) -> None:
    """Everything about where a run reads and writes, before any server starts."""
    if check_dataset_name(dataset):
        check_source(source)
    check_store_target(store)
