"""One chunked Zarr v3 store per dataset: manifest, per-video stage arrays and stage records.

Contract (DESIGN.md, "Store layout"): a stage writes its arrays first and its record last, so a
record with status ``done`` means the arrays it lists are complete. Anything else is recomputed.
Each video lives in its own group and only one process writes a given video at a time (the
video's claim, :mod:`anonymask.storage.claims`), which makes concurrent writers of different
videos safe: every shard has one writer.

Frame-chunked arrays (videos, masks) are chunks of ``CLIP_FRAMES`` full frames grouped into shards
of at most ``SHARD_BYTES`` (uncompressed) each, so a stage can stream a video of any length through
:class:`FrameArrayWriter` with memory bounded by one shard, whatever the video's length.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import math
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import zarr
from zarr.codecs import ZstdCodec

from anonymask import PIPELINE_VERSION
from anonymask.core.errors import AnonymaskError, InputsChangedError, StoreError
from anonymask.storage.faults import fault_line, storage_oserror
from anonymask.storage.hashing import ArrayHasher, array_checksum, combine_hashes, config_hash

CLIP_FRAMES = 16
#: upper bound of one shard's uncompressed size (a shard holds at least one chunk of CLIP_FRAMES)
SHARD_BYTES = 64 * 2**20
#: zarr's runtime settings for the arrays a stage writes. ``write_empty_chunks``: every chunk is
#: stored, also one that is all fill value. Zarr's default (False) first compares each chunk with
#: the fill value, element by element: on the 640x480 pipeline bench that comparison was 2.7 s of
#: the store thread's 8 s (py-spy), while encoding an all-zero chunk is cheap and small. The data read
#: back is the same either way (a missing chunk reads as fill value).
WRITE_CONFIG = {"write_empty_chunks": True}
STATUS_DONE = "done"
STATUS_FAILED = "failed"
STATUS_RUNNING = "running"
STATUS_MISSING = "missing"
#: a record whose arrays were found damaged, or whose upstream was: recompute on the next run
STATUS_STALE = "stale"
_VIDEO_ID_FORBIDDEN = set("/\\\0")


@dataclass
class VideoInfo:
    """What a dataset adapter knows about one video before anything is computed."""

    video_id: str
    path: str | None = None
    label: int | None = None
    label_name: str | None = None
    split: dict[str, str] = field(default_factory=dict)
    subject: str | None = None
    camera: str | None = None
    setup: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VideoInfo:
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def _check_video_id(video_id: str) -> None:
    if not video_id or set(video_id) & _VIDEO_ID_FORBIDDEN or video_id in (".", ".."):
        raise StoreError(f"invalid video id {video_id!r}: must be non-empty and contain no '/' or '\\'")


class DatasetStore:
    """A dataset's store: ``<root>/manifest``, ``<root>/videos/<id>/...``, ``<root>/cache``."""

    def __init__(self, group: zarr.Group, url: str):
        self.group = group
        self.url = url

    # ------------------------------------------------------------------ open / create
    @classmethod
    def create(
        cls,
        url: str,
        dataset: str,
        *,
        source: str = "",
        classes: Iterable[str] = (),
        splits: Iterable[str] = (),
        stages: Iterable[str] = (),
        config: dict[str, Any] | None = None,
        overwrite: bool = False,
    ) -> DatasetStore:
        """Create a store (or open an existing one of the same dataset unless ``overwrite``).

        Safe against a second process creating or opening the same store at the same moment
        (the store lock serialises it).
        """
        from anonymask.storage.claims import store_lock

        url = str(url)
        if overwrite:
            group = zarr.open_group(url, mode="w", zarr_format=3)
            return cls._init_group(group, url, dataset, source, classes, splits, stages, config)
        with store_lock(url):
            try:
                existing = cls.open(url)
            except StoreError:
                existing = None
            if existing is not None:
                if existing.dataset != dataset:
                    raise StoreError(
                        f"{url}: holds dataset {existing.dataset!r}, not {dataset!r} (use another path)"
                    )
                existing.update_attrs(
                    source=source or existing.attrs.get("source", ""),
                    classes=list(classes) or existing.attrs.get("classes", []),
                    splits=list(splits) or existing.attrs.get("splits", []),
                    stages=list(stages) or existing.attrs.get("stages", []),
                )
                return existing
            group = zarr.open_group(url, mode="a", zarr_format=3)
            return cls._init_group(group, url, dataset, source, classes, splits, stages, config)

    @classmethod
    def _init_group(cls, group, url, dataset, source, classes, splits, stages, config) -> DatasetStore:
        group.attrs.update(
            {
                "anonymask": True,
                "dataset": dataset,
                "source": str(source),
                "classes": list(classes),
                "splits": list(splits),
                "stages": list(stages),
                "pipeline_version": PIPELINE_VERSION,
                "config": config or {},
                "created_at": _now(),
            }
        )
        group.require_group("videos")
        group.require_group("cache")
        man = group.require_group("manifest")
        if "videos" not in man.attrs:
            man.attrs["videos"] = []
        return cls(group, url)

    @classmethod
    def open(cls, url: str, mode: str = "r+") -> DatasetStore:
        """Open an existing store; a path that is not an anonymask store raises StoreError."""
        from anonymask.storage.claims import local_store_path

        url = str(url)
        local = local_store_path(url)
        if local is not None:
            if not local.exists():
                raise StoreError(f"{url}: no such store (the folder does not exist)")
            if not local.is_dir():
                raise StoreError(f"{url}: not a store (a file, not a folder)")
            if not (local / "zarr.json").exists():
                raise StoreError(f"{url}: not a Zarr store (no zarr.json in the folder)")
        try:
            group = zarr.open_group(url, mode=mode, zarr_format=3)
        except (FileNotFoundError, zarr.errors.GroupNotFoundError, ValueError, KeyError) as e:
            raise StoreError(f"{url}: not a Zarr store ({type(e).__name__}: {e})") from None
        except zarr.errors.ContainsArrayError:
            raise StoreError(f"{url}: a Zarr array, not an anonymask dataset store") from None
        if not group.attrs.get("anonymask"):
            raise StoreError(f"{url}: a Zarr group, but not an anonymask dataset store")
        return cls(group, url)

    # ------------------------------------------------------------------ dataset attrs
    @property
    def attrs(self) -> dict[str, Any]:
        return dict(self.group.attrs)

    @property
    def dataset(self) -> str:
        return str(self.group.attrs.get("dataset"))

    @property
    def classes(self) -> list[str]:
        return list(self.group.attrs.get("classes", []))

    @property
    def stages(self) -> list[str]:
        return list(self.group.attrs.get("stages", []))

    def update_attrs(self, **kw: Any) -> None:
        self.group.attrs.update(kw)

    # ------------------------------------------------------------------ manifest
    def register_videos(self, infos: Iterable[VideoInfo]) -> list[str]:
        """Add videos to the manifest (idempotent: known ids keep their group and records).

        Holds the store lock, so two runs registering at once lose no row.
        """
        from anonymask.storage.claims import store_lock

        infos = list(infos)
        for info in infos:
            _check_video_id(info.video_id)
        with store_lock(self.url):
            man = self.group.require_group("manifest")
            rows = {r["video_id"]: r for r in zarr.open_group(self.url, mode="r", path="manifest").attrs.get(
                "videos", [])}
            videos = self.group.require_group("videos")
            added = []
            for info in infos:
                d = info.to_dict()
                g = videos.require_group(info.video_id)
                if "info" not in g.attrs or g.attrs["info"] != d or "stages" not in g.attrs:
                    self._update_group_info(info.video_id, d)
                rows[info.video_id] = d
                added.append(info.video_id)
            man.attrs["videos"] = [rows[k] for k in sorted(rows)]
        return added

    def _update_group_info(self, video_id: str, info: dict[str, Any]) -> None:
        """Write a video's info (and an empty record table if it has none) under its claim: the
        group's metadata is one document, and a run holding the claim may be writing records into
        it. A video busy in another run keeps its info (that run registered it)."""
        from anonymask.core.errors import VideoBusyError
        from anonymask.storage.claims import claim_video

        try:
            with claim_video(self.url, video_id):
                g = zarr.open_group(self.url, mode="r+", path=f"videos/{video_id}")
                if g.attrs.get("info") != info:
                    g.attrs["info"] = info
                if "stages" not in g.attrs:
                    g.attrs["stages"] = {}
        except VideoBusyError:
            pass

    def manifest_rows(self) -> list[dict[str, Any]]:
        """The manifest's rows as stored (the adapter's info per registered video)."""
        if "manifest" not in self.group:
            return []
        return list(self.group["manifest"].attrs.get("videos", []))

    def video_ids(self) -> list[str]:
        rows = self.group["manifest"].attrs.get("videos", [])
        ids = {r["video_id"] for r in rows}
        ids |= set(self.group["videos"].group_keys())
        return sorted(ids)

    def has_video(self, video_id: str) -> bool:
        return video_id in self.group["videos"]

    def video(self, video_id: str) -> VideoEntry:
        _check_video_id(video_id)
        videos = self.group["videos"]
        if video_id not in videos:
            raise StoreError(f"{self.url}: no video {video_id!r} in the store")
        return VideoEntry(self, video_id, videos[video_id])

    def videos(self) -> Iterator[VideoEntry]:
        for vid in self.video_ids():
            if self.has_video(vid):
                yield self.video(vid)

    def manifest(self) -> list[dict[str, Any]]:
        """Manifest rows: the adapter's info plus frames/fps and an overall status per video."""
        out = []
        for entry in self.videos():
            info = entry.info.to_dict()
            recs = entry.records()
            expected = self.stages or list(recs)
            status = overall_status([recs.get(s, {}).get("status", STATUS_MISSING) for s in expected]
                                    + [r.get("status") for s, r in recs.items() if s not in expected])
            info.update(
                frames=entry.attrs.get("frames"),
                fps=entry.attrs.get("fps"),
                status=status,
            )
            out.append(info)
        return out

    # ------------------------------------------------------------------ cache
    def cache_group(self, key: str) -> zarr.Group:
        """Group for derived training artifacts (frozen-prefix features), keyed by content."""
        return self.group.require_group("cache").require_group(key)


def overall_status(stage_statuses: list[str | None]) -> str:
    """A video's status from its stages': failed if any failed, done if all done, partial if some."""
    if any(st == STATUS_FAILED for st in stage_statuses):
        return STATUS_FAILED
    if stage_statuses and all(st == STATUS_DONE for st in stage_statuses):
        return STATUS_DONE
    if any(st == STATUS_DONE for st in stage_statuses):
        return "partial"
    return STATUS_MISSING


class VideoEntry:
    """One video's group: arrays by stage name and the stage records in its attrs."""

    def __init__(self, store: DatasetStore, video_id: str, group: zarr.Group):
        self.store = store
        self.video_id = video_id
        self.group = group
        #: arrays created while a stage runs (freed again when a storage fault fails it)
        self._created: list[str] | None = None

    def __repr__(self) -> str:
        return f"VideoEntry({self.store.url!r}, {self.video_id!r})"

    @property
    def attrs(self) -> dict[str, Any]:
        return dict(self.group.attrs)

    @property
    def info(self) -> VideoInfo:
        return VideoInfo.from_dict(self.group.attrs.get("info", {"video_id": self.video_id}))

    def update_attrs(self, **kw: Any) -> None:
        self.group.attrs.update(kw)

    # ------------------------------------------------------------------ arrays
    def _parent_and_leaf(self, name: str, create: bool) -> tuple[zarr.Group, str]:
        parts = [p for p in name.split("/") if p]
        if not parts:
            raise StoreError(f"empty array name for video {self.video_id!r}")
        g = self.group
        for p in parts[:-1]:
            if create:
                g = g.require_group(p)
            else:
                if p not in g:
                    raise KeyError(name)
                g = g[p]
        return g, parts[-1]

    def create_array(
        self,
        name: str,
        shape: tuple[int, ...],
        dtype,
        *,
        frame_chunked: bool = True,
        growable: bool = False,
        shard_bytes: int | None = None,
    ) -> zarr.Array:
        """Create (replace) an array for streaming writes.

        Frame-chunked arrays (videos, masks, per-frame maps) get chunks of ``CLIP_FRAMES`` full
        frames inside shards of :func:`shard_frames` frames, Zstd-compressed; small arrays (poses,
        boxes) one plain chunk. ``growable``: the frame count is not known yet (the array starts
        with ``shape[0]`` frames and :class:`FrameArrayWriter` resizes it), so the chunk length is
        ``CLIP_FRAMES`` even for a short first guess. ``shard_bytes``: a smaller shard, for
        arrays of which a stage writes many at once (one per track), each holding a shard.
        """
        if self._created is not None:
            self._created.append(name)
        parent, leaf = self._parent_and_leaf(name, create=True)
        shape = tuple(int(s) for s in shape)
        if frame_chunked and len(shape) >= 2:
            t = max(shape[0], 1)
            chunk_t = CLIP_FRAMES if growable else min(CLIP_FRAMES, t)
            chunks = (chunk_t, *[max(s, 1) for s in shape[1:]])
            per_shard = shard_frames(shape[1:], dtype, chunk_t, shard_bytes)
            shard_t = per_shard if growable else min(per_shard, math.ceil(t / chunk_t) * chunk_t)
            shards = (shard_t, *chunks[1:])
            return parent.create_array(
                leaf,
                shape=shape,
                dtype=dtype,
                chunks=chunks,
                shards=shards,
                compressors=ZstdCodec(level=3),
                overwrite=True,
                config=WRITE_CONFIG,
            )
        chunks = tuple(max(s, 1) for s in shape) or None
        return parent.create_array(
            leaf, shape=shape, dtype=dtype, chunks=chunks, compressors=ZstdCodec(level=3), overwrite=True,
            config=WRITE_CONFIG,
        )

    def write_array(self, name: str, data, *, frame_chunked: bool = True) -> dict[str, Any]:
        """Write a whole array; returns its output description (shape, dtype, checksum).

        Frame-chunked arrays are written shard by shard (see :class:`FrameArrayWriter`).
        """
        data = np.asarray(data)
        if frame_chunked and data.ndim >= 2:
            w = FrameArrayWriter(self, name, data.shape[1:], data.dtype, frames=data.shape[0])
            w.write(data)
            return w.close()
        arr = self.create_array(name, data.shape, data.dtype, frame_chunked=frame_chunked)
        if data.size:
            arr[...] = data
        return describe_array(data)

    def frame_writer(self, name: str, frame_shape, dtype, frames: int | None = None,
                     hint: int | None = None, shard_bytes: int | None = None) -> FrameArrayWriter:
        """A :class:`FrameArrayWriter` for ``name`` (``frames`` None: the count is not known yet;
        ``hint``: a likely count; ``shard_bytes``: see :meth:`create_array`)."""
        return FrameArrayWriter(self, name, frame_shape, dtype, frames=frames, hint=hint, shard_bytes=shard_bytes)

    @property
    def num_frames(self) -> int:
        """Frames of ``raw`` as ingested (the length every per-frame array of this video has)."""
        if self.has_array("raw"):
            return int(self.array("raw").shape[0])
        return int(self.group.attrs.get("frames") or 0)

    def has_array(self, name: str) -> bool:
        try:
            parent, leaf = self._parent_and_leaf(name, create=False)
        except KeyError:
            return False
        return leaf in parent and isinstance(parent[leaf], zarr.Array)

    def array(self, name: str) -> zarr.Array:
        """The zarr array (lazy): slice it to read only some frames."""
        try:
            parent, leaf = self._parent_and_leaf(name, create=False)
            node = parent[leaf]
        except KeyError:
            raise StoreError(f"{self.store.url}: video {self.video_id!r} has no array {name!r}") from None
        if not isinstance(node, zarr.Array):
            raise StoreError(f"{self.store.url}: {self.video_id}/{name} is a group, not an array")
        return node

    def read(self, name: str, frames: slice | None = None) -> np.ndarray:
        arr = self.array(name)
        return np.asarray(arr[frames if frames is not None else slice(None)])

    # ------------------------------------------------------------------ stage records
    def records(self) -> dict[str, dict[str, Any]]:
        return dict(self.group.attrs.get("stages", {}))

    def record(self, stage: str) -> dict[str, Any] | None:
        return self.records().get(stage)

    def write_record(self, stage: str, record: dict[str, Any]) -> None:
        stages = self.records()
        stages[stage] = record
        self.group.attrs["stages"] = stages

    def mark_stale(self, stages: Iterable[str], reason: str) -> list[str]:
        """Mark these stages' records stale (recomputed on the next run); returns those changed.

        The record keeps what it said (backend, outputs, ...) plus ``stale_reason``; a stage
        without a record has nothing to mark.
        """
        recs = self.records()
        changed = []
        for st in stages:
            rec = recs.get(st)
            if rec is None or rec.get("status") == STATUS_STALE:
                continue
            recs[st] = dict(rec, status=STATUS_STALE, stale_reason=reason, previous_status=rec.get("status"))
            changed.append(st)
        if changed:
            self.group.attrs["stages"] = recs
        return changed

    def is_done(self, stage: str, *, config_hash: str | None = None, input_hash: str | None = None) -> bool:
        """True when the stage's record is complete and (if given) matches config and inputs."""
        rec = self.record(stage)
        if not rec or rec.get("status") != STATUS_DONE:
            return False
        if config_hash is not None and rec.get("config_hash") != config_hash:
            return False
        if input_hash is not None and rec.get("input_hash") != input_hash:
            return False
        return all(self.has_array(name) for name in rec.get("outputs", {}))

    def output_hash(self, stage: str) -> str:
        """Hash identifying a completed stage's result (its config, inputs and array checksums)."""
        rec = self.record(stage)
        if not rec or rec.get("status") != STATUS_DONE:
            raise StoreError(f"{self.video_id}: stage {stage!r} has no complete record")
        sums = [f"{k}={v.get('checksum')}" for k, v in sorted(rec.get("outputs", {}).items())]
        return combine_hashes(rec.get("config_hash", ""), rec.get("input_hash", ""), *sums)

    @contextlib.contextmanager
    def stage(
        self,
        stage: str,
        *,
        backend: str,
        config: dict[str, Any] | None = None,
        input_hash: str = "",
        deps: Iterable[str] = (),
        inputs_unchanged: Callable[[], str | None] | None = None,
        settings_hash: str | None = None,
    ) -> Iterator[StageWriter]:
        """Run a stage's writes: arrays first, the record last.

        ``settings_hash`` is recorded as the config hash when given (the part of ``config`` that
        can change results), else the hash of the whole ``config``.

        On success writes a ``done`` record listing every array written through the writer; on an
        exception writes a ``failed`` record with the error and re-raises. ``deps`` (the stages
        it read) go into the record, so repair can find a damaged stage's dependants from the
        store alone. ``inputs_unchanged`` is called after the stage's work and before its record:
        it returns None when the inputs are still those the stage started from, else a reason;
        then the stage is recorded ``failed`` (never ``done``) and :class:`InputsChangedError`
        is raised.
        """
        writer = StageWriter(self, stage)
        cfg = config or {}
        base = {
            "stage": stage,
            "backend": backend,
            "config": cfg,
            "config_hash": settings_hash or config_hash(cfg),
            "input_hash": input_hash,
            "deps": list(deps),
            "pipeline_version": PIPELINE_VERSION,
        }
        t0 = time.perf_counter()
        self._created = []
        try:
            yield writer
            changed = inputs_unchanged() if inputs_unchanged is not None else None
            if changed:
                raise InputsChangedError(f"{self.video_id}/{stage}: inputs changed while it ran ({changed})")
        except BaseException as e:
            # our own errors already name the file at fault (a source the user cannot read, ...)
            fault = None if isinstance(e, AnonymaskError) else fault_line(e, self.store.url, f"{self.video_id}/{stage}")
            err = StoreError(fault) if fault else e
            if fault and storage_oserror(e).errno in (errno.ENOSPC, errno.EDQUOT):
                self._drop_created()  # incomplete anyway: the space goes back to the record and other videos
            rec = dict(
                base,
                status=STATUS_FAILED,
                error=f"{type(err).__name__}: {err}",
                traceback=traceback.format_exc(limit=8),
                seconds=round(time.perf_counter() - t0, 3),
                finished_at=_now(),
                outputs={},
                metrics=writer.metrics,
            )
            try:
                self.write_record(stage, rec)
            except OSError:
                if not fault:
                    raise
                # the store takes no record either: without a complete one the stage reruns
            finally:
                self._created = None
            if fault:
                raise err from e
            raise
        rec = dict(
            base,
            status=STATUS_DONE,
            error=None,
            seconds=round(time.perf_counter() - t0, 3),
            finished_at=_now(),
            outputs=writer.outputs,
            metrics=writer.metrics,
        )
        try:
            self.write_record(stage, rec)
        except OSError as e:  # complete arrays, but no record: they would be recomputed anyway
            fault = fault_line(e, self.store.url, f"{self.video_id}/{stage} (its record)")
            if not fault:
                raise
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                self._drop_created()
            raise StoreError(fault) from e
        finally:
            self._created = None

    def _drop_created(self) -> None:
        """Delete the arrays the failing stage created (no complete record lists them)."""
        for name in dict.fromkeys(self._created or []):
            try:
                parent, leaf = self._parent_and_leaf(name, create=False)
                if leaf in parent:
                    del parent[leaf]
            except Exception:  # best effort: a later run overwrites them anyway
                pass

    # ------------------------------------------------------------------ metrics
    def metrics(self) -> dict[str, Any]:
        """Quality metrics of every stage record merged (later stages win on equal keys)."""
        out: dict[str, Any] = {}
        for rec in self.records().values():
            if rec.get("status") == STATUS_DONE:
                out.update(rec.get("metrics") or {})
        out.update(self.group.attrs.get("metrics", {}))
        return out


class StageWriter:
    """Collects the arrays and metrics a stage produces, for its record."""

    def __init__(self, entry: VideoEntry, stage: str):
        self.entry = entry
        self.stage = stage
        self.outputs: dict[str, dict[str, Any]] = {}
        self.metrics: dict[str, Any] = {}

    def write(self, name: str, data, *, frame_chunked: bool = True) -> None:
        self.outputs[name] = self.entry.write_array(name, data, frame_chunked=frame_chunked)

    @contextlib.contextmanager
    def frames(self, name: str, frame_shape, dtype, frames: int | None = None,
               shard_bytes: int | None = None) -> Iterator[FrameArrayWriter]:
        """Stream a frame-chunked output: ``with w.frames("merged", (H, W, 3), np.uint8, T) as f:
        f.write(block)``; the array becomes an output of the stage when the block closes.
        ``shard_bytes``: a smaller shard (and buffer), for a stage that writes many arrays at once."""
        fw = self.entry.frame_writer(name, frame_shape, dtype, frames=frames, shard_bytes=shard_bytes)
        yield fw
        self.outputs[name] = fw.close()

    def add_output(self, name: str, description: dict[str, Any]) -> None:
        """Register an array written through a :class:`FrameArrayWriter` (its ``close()`` value)."""
        self.outputs[name] = description

    def add_written(self, name: str) -> None:
        """Register an array written with ``entry.create_array`` (streamed) as an output."""
        self.outputs[name] = describe_array(self.entry.array(name))

    def metric(self, **kw: Any) -> None:
        for k, v in kw.items():
            self.metrics[k] = float(v) if isinstance(v, (np.floating, np.integer)) else v


def describe_array(arr) -> dict[str, Any]:
    return {
        "shape": [int(s) for s in arr.shape],
        "dtype": str(np.dtype(arr.dtype)),
        "checksum": array_checksum(arr),
    }


def shard_frames(frame_shape, dtype, chunk_t: int = CLIP_FRAMES, shard_bytes: int | None = None) -> int:
    """Frames per shard of a frame-chunked array: whole chunks, at most ``shard_bytes``
    (default ``SHARD_BYTES``; >= 1 chunk)."""
    frame_bytes = max(1, int(np.prod([max(int(s), 1) for s in frame_shape])) * np.dtype(dtype).itemsize)
    chunks = max(1, (shard_bytes or SHARD_BYTES) // (frame_bytes * chunk_t))
    return int(chunks * chunk_t)


class FrameArrayWriter:
    """Streams frames into a frame-chunked array, one whole shard at a time.

    ``write(block)`` appends frames (any number per call); full shards go to the store at once,
    so a shard is never read back and rewritten (zarr rewrites a whole shard on a partial write)
    and memory holds at most one shard plus the block. ``close()`` writes the last partial shard,
    checks the frame count and returns the output description (shape, dtype, checksum).

    With ``frames`` given the checksum is computed while writing; with ``frames=None`` (a decoder
    that cannot promise its count) the array grows as frames arrive and the checksum is read back
    at close, in blocks. Used by every stage that writes per-frame arrays; a stage that reads in
    windows (:mod:`anonymask.storage.windows`) and writes through this keeps its memory bounded
    by the window, whatever the video's length.
    """

    def __init__(self, entry: VideoEntry, name: str, frame_shape, dtype, frames: int | None = None,
                 hint: int | None = None, shard_bytes: int | None = None):
        self.entry = entry
        self.name = name
        self.frame_shape = tuple(int(s) for s in frame_shape)
        self.dtype = np.dtype(dtype)
        self.expected = None if frames is None else int(frames)
        #: a likely count (a header's) when the exact one is unknown: hashing goes on while
        #: writing, and only a wrong guess costs a read-back at close
        self.hint = None if frames is not None or hint is None else max(int(hint), 0)
        start = self.expected if self.expected is not None else (self.hint or 0)
        self.array = entry.create_array(name, (start, *self.frame_shape), self.dtype, growable=self.expected is None,
                                        shard_bytes=shard_bytes)
        shards = getattr(self.array, "shards", None)
        self.shard_t = int((shards or self.array.chunks)[0])
        self.written = 0
        self._buf: list[np.ndarray] = []
        self._buffered = 0
        n = self.expected if self.expected is not None else self.hint
        self._hasher = ArrayHasher((n, *self.frame_shape), self.dtype) if n is not None else None
        self.closed = False

    @property
    def frames(self) -> int:
        """Frames received so far."""
        return self.written + self._buffered

    def write(self, block) -> None:
        b = np.asarray(block)
        if b.shape == self.frame_shape:
            b = b[None]
        if b.shape[1:] != self.frame_shape:
            raise ValueError(
                f"{self.entry.video_id}/{self.name}: block of shape {b.shape} does not fit frames of {self.frame_shape}"
            )
        if b.dtype != self.dtype:
            b = b.astype(self.dtype)
        if self.expected is not None and self.frames + b.shape[0] > self.expected:
            raise ValueError(f"{self.entry.video_id}/{self.name}: more than the {self.expected} frames announced")
        if self._hasher is not None and self.hint is not None and self.frames + b.shape[0] > self.hint:
            self._hasher = None  # the hint was short: read back at close
        if self._hasher is not None:
            self._hasher.update(b)
        if b.shape[0] == 0:
            return
        self._buf.append(b)
        self._buffered += b.shape[0]
        if self._buffered >= self.shard_t:
            self._flush(full_only=True)

    def _flush(self, full_only: bool) -> None:
        if not self._buffered:
            return
        data = self._buf[0] if len(self._buf) == 1 else np.concatenate(self._buf)
        n = (self._buffered // self.shard_t) * self.shard_t if full_only else self._buffered
        if n == 0:
            return
        stop = self.written + n
        if stop > self.array.shape[0]:
            self.array.resize((stop, *self.frame_shape))
        self.array[self.written : stop] = data[:n]
        self.written = stop
        rest = data[n:].copy()  # a copy: a view would keep the whole concatenated block alive
        self._buf = [rest] if len(rest) else []
        self._buffered = len(rest)

    def close(self) -> dict[str, Any]:
        if self.closed:
            raise ValueError(f"{self.name}: writer already closed")
        self._flush(full_only=False)
        self.closed = True
        if self.expected is not None:
            if self.written != self.expected:
                raise ValueError(
                    f"{self.entry.video_id}/{self.name}: {self.written} frames written, {self.expected} announced"
                )
            checksum = self._hasher.hexdigest()
        else:
            if self.array.shape[0] != self.written:
                self.array.resize((self.written, *self.frame_shape))
            if self._hasher is not None and self._hasher.frames == self.written == self.hint:
                checksum = self._hasher.hexdigest()
            else:
                checksum = array_checksum(self.array)
        return {"shape": [self.written, *self.frame_shape], "dtype": str(self.dtype), "checksum": checksum}
