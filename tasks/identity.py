"""A source is known by its bytes, not by where it lies.

The input hash of ``ingest`` (and so of every stage downstream, which chain from it) holds the
sha256 of the files ingest reads: the source video and, for synthetic data, its ground truth. No
path is hashed, so the same corpus moved, reached through a symlink or mounted elsewhere on a
worker skips every finished stage; only a file whose bytes changed recomputes.

Hashing a file is a full read, so the checksum is cached in the video's attrs
(``source_checksums``), keyed by (resolved path, size, mtime_ns): it survives runs, travels with
the store (local or remote) and is written only under the video's claim, like the records beside
it. A moved file misses the cache once (a new resolved path) and is hashed once more.

Stores written before this identity hashed (path, size, mtime) into ingest's input hash. Such a
video (no ``source_identity`` attr) whose recorded ``source_checksum`` equals its file's bytes now
is upgraded in place: each done record whose input hash matches the old chain gets the new one,
nothing recomputes. A legacy video whose file changed recomputes as before.
"""

from __future__ import annotations

import os
from typing import Any

from anonymask.storage.hashing import combine_hashes, file_checksum
from anonymask.storage.store import STATUS_DONE, VideoEntry

#: cache entries kept per video (a few mount points of one file)
CACHE_SIZE = 4
CACHE_KEY = "source_checksums"


def cached_checksum(entry: VideoEntry, path: str | os.PathLike) -> str | None:
    """sha256 of the file's bytes, from the video's cache when (real path, size, mtime_ns) match;
    None when the file cannot be read. A miss hashes the file and records it in the cache."""
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except (OSError, TypeError, ValueError):
        return None
    cache: dict[str, Any] = dict(entry.group.attrs.get(CACHE_KEY) or {})
    hit = cache.get(real)
    if isinstance(hit, dict) and hit.get("size") == st.st_size and hit.get("mtime_ns") == st.st_mtime_ns:
        return str(hit["sha256"])
    try:
        digest = file_checksum(real)
    except OSError:
        return None
    cache.pop(real, None)
    cache[real] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest}
    entry.update_attrs(**{CACHE_KEY: dict(list(cache.items())[-CACHE_SIZE:])})
    return digest


def source_identity(entry: VideoEntry) -> str:
    """Content of every file ingest reads (source video, ground truth): never their paths."""
    info = entry.info
    parts = [f"source={cached_checksum(entry, info.path) if info.path else None}"]
    gt = (info.extra or {}).get("gt")
    if gt:
        parts.append(f"gt={cached_checksum(entry, gt)}")
    return "sha256:" + ",".join(parts)


def legacy_identity(path: str | None) -> str:
    """The identity stores written before content identity hashed (path, size, mtime_ns)."""
    try:
        st = os.stat(path)
    except (OSError, TypeError):
        return f"{path}:missing"
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def prepare_source(entry: VideoEntry) -> None:
    """Before ingest's input hash, under the claim: upgrade a legacy video whose bytes are
    unchanged, and record where the source lies now (``status`` shows it; nothing recomputes)."""
    attrs = entry.attrs
    if "source_identity" not in attrs:
        _upgrade_legacy(entry, attrs)
    path = entry.info.path
    if path and attrs.get("source") not in (None, str(path)):
        entry.update_attrs(source=str(path))


def _upgrade_legacy(entry: VideoEntry, attrs: dict[str, Any]) -> bool:
    from anonymask.tasks.common import ORDER, load_stages

    recs = entry.records()
    ing = recs.get("ingest")
    if not ing or ing.get("status") != STATUS_DONE or not attrs.get("source_checksum"):
        return False
    if cached_checksum(entry, entry.info.path) != attrs["source_checksum"]:
        return False  # the bytes changed since they were ingested: recompute, as before
    stages = load_stages()
    old_out: dict[str, str] = {}
    new_out: dict[str, str] = {}
    identity = source_identity(entry)
    for name in ORDER:
        rec = recs.get(name)
        if not rec or rec.get("status") != STATUS_DONE:
            continue
        sd = stages[name]
        if sd.deps and not all(d in old_out for d in sd.deps):
            continue  # an upstream was not upgraded: this stage recomputes
        if sd.deps:
            old_in = combine_hashes(*[f"{d}:{old_out[d]}" for d in sd.deps])
            new_in = combine_hashes(*[f"{d}:{new_out[d]}" for d in sd.deps])
        else:  # ingest: any legacy identity (the file may have moved since, its bytes did not)
            old_in, new_in = rec.get("input_hash"), combine_hashes(f"external:{identity}")
        if rec.get("input_hash") != old_in:
            continue  # stale already: recomputes as it would have
        sums = [f"{k}={v.get('checksum')}" for k, v in sorted(rec.get("outputs", {}).items())]
        old_out[name] = combine_hashes(rec.get("config_hash", ""), old_in, *sums)
        new_out[name] = combine_hashes(rec.get("config_hash", ""), new_in, *sums)
        recs[name] = dict(rec, input_hash=new_in, upgraded_from=old_in)
    entry.group.attrs.update({"stages": recs, "source_identity": identity})
    return True
