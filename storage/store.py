"""One chunked Zarr v3 store per dataset: manifest, per-video stage arrays and stage records.

Contract (DESIGN.md, "Store layout"): a stage writes its arrays first and its record last, so a
record with status ``done`` means the arrays it lists are complete. Anything else is recomputed.
Each video lives in its own group and only one process writes a given video, which makes
concurrent writers of different videos safe (each array is one shard, written by one writer).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import math
import time
import traceback
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import zarr
from zarr.codecs import ZstdCodec

from anonymask import PIPELINE_VERSION
from anonymask.errors import StoreError
from anonymask.storage.hashing import array_checksum, combine_hashes, config_hash

CLIP_FRAMES = 16
STATUS_DONE = "done"
STATUS_FAILED = "failed"
STATUS_RUNNING = "running"
STATUS_MISSING = "missing"
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
        """Create a store (or open an existing one of the same dataset unless ``overwrite``)."""
        url = str(url)
        if not overwrite:
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
        group = zarr.open_group(url, mode="w" if overwrite else "a", zarr_format=3)
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
        url = str(url)
        try:
            group = zarr.open_group(url, mode=mode, zarr_format=3)
        except (FileNotFoundError, zarr.errors.GroupNotFoundError, ValueError, KeyError) as e:
            raise StoreError(f"{url}: not a Zarr store ({type(e).__name__}: {e})") from None
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

        Call from one process (the flow's coordinator); per-video writes can then run anywhere.
        """
        man = self.group.require_group("manifest")
        rows = {r["video_id"]: r for r in man.attrs.get("videos", [])}
        videos = self.group.require_group("videos")
        added = []
        for info in infos:
            _check_video_id(info.video_id)
            d = info.to_dict()
            g = videos.require_group(info.video_id)
            if "info" not in g.attrs or g.attrs["info"] != d:
                g.attrs["info"] = d
            if "stages" not in g.attrs:
                g.attrs["stages"] = {}
            rows[info.video_id] = d
            added.append(info.video_id)
        man.attrs["videos"] = [rows[k] for k in sorted(rows)]
        return added

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
        self, name: str, shape: tuple[int, ...], dtype, *, frame_chunked: bool = True
    ) -> zarr.Array:
        """Create (replace) an array for streaming writes.

        Frame-chunked arrays (videos, masks, per-frame maps) get chunks of ``CLIP_FRAMES`` full
        frames inside a single shard holding the whole array, Zstd-compressed; small arrays
        (poses, boxes) one plain chunk.
        """
        parent, leaf = self._parent_and_leaf(name, create=True)
        shape = tuple(int(s) for s in shape)
        if frame_chunked and len(shape) >= 2:
            t = max(shape[0], 1)
            chunk_t = min(CLIP_FRAMES, t)
            chunks = (chunk_t, *[max(s, 1) for s in shape[1:]])
            shard_t = math.ceil(t / chunk_t) * chunk_t
            shards = (shard_t, *chunks[1:])
            return parent.create_array(
                leaf,
                shape=shape,
                dtype=dtype,
                chunks=chunks,
                shards=shards,
                compressors=ZstdCodec(level=3),
                overwrite=True,
            )
        chunks = tuple(max(s, 1) for s in shape) or None
        return parent.create_array(
            leaf, shape=shape, dtype=dtype, chunks=chunks, compressors=ZstdCodec(level=3), overwrite=True
        )

    def write_array(self, name: str, data, *, frame_chunked: bool = True) -> dict[str, Any]:
        """Write a whole array; returns its output description (shape, dtype, checksum)."""
        data = np.asarray(data)
        arr = self.create_array(name, data.shape, data.dtype, frame_chunked=frame_chunked)
        if data.size:
            arr[...] = data
        return describe_array(data)

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
    ) -> Iterator[StageWriter]:
        """Run a stage's writes: arrays first, the record last.

        On success writes a ``done`` record listing every array written through the writer; on an
        exception writes a ``failed`` record with the error and re-raises.
        """
        writer = StageWriter(self, stage)
        cfg = config or {}
        base = {
            "stage": stage,
            "backend": backend,
            "config": cfg,
            "config_hash": config_hash(cfg),
            "input_hash": input_hash,
            "pipeline_version": PIPELINE_VERSION,
        }
        t0 = time.perf_counter()
        try:
            yield writer
        except BaseException as e:
            rec = dict(
                base,
                status=STATUS_FAILED,
                error=f"{type(e).__name__}: {e}",
                traceback=traceback.format_exc(limit=8),
                seconds=round(time.perf_counter() - t0, 3),
                finished_at=_now(),
                outputs={},
                metrics=writer.metrics,
            )
            self.write_record(stage, rec)
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
        self.write_record(stage, rec)

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
