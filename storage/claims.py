"""Claims: at most one process works on a video of a store at a time.

Two ``anonymize`` runs on one store (two terminals, a retried deployment, two Dask workers given
the same video) must never interleave their writes to a video: zarr shards have one writer, and a
stage must not read arrays another process is rewriting. Every writer of a video therefore holds
the video's claim: an exclusive ``flock`` on ``<store>/locks/<video_id>.lock``.

* The kernel releases a ``flock`` when its process dies (``kill -9`` included), so a crashed run
  never leaves a stale claim behind; nothing to clean up, no timeouts to tune.
* The lock file holds who took it (host, pid, run, time) for the message a second run prints.
* Claims are re-entrant per thread (the flow claims a video, then each stage claims it again).
* ``store_lock`` serialises store-wide metadata updates (creating the store, the manifest).

Claims work on a local filesystem and on shared POSIX filesystems with working ``flock`` (NFSv4,
Lustre, GPFS with the usual mount options), which covers SLURM clusters. On object stores
(``s3://``, ``gs://``) there is no lock primitive: claims are not available there, a warning says
so once per process, and only one run may write such a store at a time.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import fcntl
import json
import os
import socket
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from anonymask.core.environment import environment
from anonymask.core.errors import VideoBusyError

LOCK_GROUP = "locks"
_STORE_LOCK = "_store_.lock"
_held: dict[str, tuple[int, int, Any]] = {}  # path -> (thread id, depth, open file)
_held_lock = threading.Lock()
_warned_remote: set[str] = set()


def local_store_path(store_url: str) -> Path | None:
    """The store's folder when it is on a POSIX filesystem, else None (object stores)."""
    url = str(store_url)
    if url.startswith("file://"):
        return Path(url[len("file://") :])
    if "://" in url:
        return None
    return Path(url)


def _lock_dir(store_url: str, create: bool) -> Path | None:
    root = local_store_path(store_url)
    if root is None:
        if store_url not in _warned_remote and not store_url.startswith("memory://"):
            _warned_remote.add(store_url)
            warnings.warn(
                f"{store_url}: per-video claims need a POSIX filesystem; on an object store run one "
                "anonymize at a time",
                stacklevel=3,
            )
        return None
    d = root / LOCK_GROUP
    if create and not (d / "zarr.json").exists():
        d.mkdir(parents=True, exist_ok=True)
        # a zarr group of its own, so listing the store's root shows no foreign object
        meta = {"zarr_format": 3, "node_type": "group",
                "attributes": {"about": "anonymask claim files (flock); safe to delete when no run is active"}}
        tmp = d / f".zarr.json.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(meta))
        os.replace(tmp, d / "zarr.json")
    return d


def _lock_name(video_id: str) -> str:
    return f"{video_id}.lock"


def owner_info(run: str | None = None) -> dict[str, Any]:
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "run": run or environment().run_id,
        "since": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }


def read_holder(path: Path) -> dict[str, Any] | None:
    """What the lock file says about its holder (None when empty or unreadable)."""
    try:
        text = path.read_text()
    except OSError:
        return None
    try:
        return json.loads(text) if text.strip() else None
    except json.JSONDecodeError:
        return None


def describe_holder(info: dict[str, Any] | None) -> str:
    if not info:
        return "another process"
    run = f", run {info['run']}" if info.get("run") else ""
    return f"pid {info.get('pid')} on {info.get('host')}{run}, since {info.get('since')}"


def _try_lock(f) -> bool:
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise


@contextlib.contextmanager
def _claim_path(path: Path, what: str, wait: bool | float, poll: float = 0.2) -> Iterator[None]:
    key = str(path)
    me = threading.get_ident()
    with _held_lock:
        held = _held.get(key)
        if held is not None and held[0] == me:
            _held[key] = (me, held[1] + 1, held[2])
            reentrant = True
        else:
            reentrant = False
    if reentrant:
        try:
            yield
        finally:
            with _held_lock:
                tid, depth, f = _held[key]
                _held[key] = (tid, depth - 1, f)
        return
    f = open(path, "a+")  # noqa: SIM115 - held for the whole claim
    try:
        deadline = None if wait is True else (time.monotonic() + float(wait) if wait else 0.0)
        while not _try_lock(f):
            if deadline is not None and time.monotonic() >= deadline:
                raise VideoBusyError(f"{what} is being processed by {describe_holder(read_holder(path))}")
            time.sleep(poll)
        f.seek(0)
        f.truncate()
        f.write(json.dumps(owner_info()))
        f.flush()
        with _held_lock:
            _held[key] = (me, 1, f)
        try:
            yield
        finally:
            with _held_lock:
                _held.pop(key, None)
            with contextlib.suppress(OSError):
                f.seek(0)
                f.truncate()
                f.flush()
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    finally:
        f.close()


@contextlib.contextmanager
def claim_video(store_url: str, video_id: str, *, wait: bool | float = False) -> Iterator[None]:
    """Hold ``video_id``'s claim for the block.

    ``wait=False``: raise :class:`VideoBusyError` (naming the holder) at once when another process
    holds it; ``True``: wait as long as it takes; a number: wait at most that many seconds.
    """
    d = _lock_dir(str(store_url), create=True)
    if d is None:
        yield
        return
    with _claim_path(d / _lock_name(video_id), f"video {video_id!r} of {store_url}", wait):
        yield


@contextlib.contextmanager
def store_lock(store_url: str, *, wait: bool | float = 120.0) -> Iterator[None]:
    """Short store-wide lock for metadata that every run updates (creation, the manifest)."""
    d = _lock_dir(str(store_url), create=True)
    if d is None:
        yield
        return
    with _claim_path(d / _STORE_LOCK, f"the manifest of {store_url}", wait):
        yield


def video_holder(store_url: str, video_id: str) -> dict[str, Any] | None:
    """Who holds ``video_id``'s claim now (None when free or claims are unavailable)."""
    d = _lock_dir(str(store_url), create=False)
    if d is None:
        return None
    path = d / _lock_name(video_id)
    if not path.exists():
        return None
    with open(path, "a+") as f:
        if _try_lock(f):
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
            return None
    return read_holder(path) or {}
