"""Train your own model on the result: PyTorch datasets over an anonymask store or export folder.

    from anonymask.data import StoreClips, dp_batch_sampler, dp_collate
    ds = StoreClips("data/stores/ntu.zarr", variant="rend_diff", clip_len=16, frame_stride=2,
                    clip_stride=16, size=(112, 112), protocol="xsub", split="train")
    x = ds[0]   # {"video": (3,T,H,W) float32 in [0,1], "r": (T,H,W) bool, "q": (T,H,W) float32,
                #  "label": int, "video_id": str, "start": int}

``uint8=True``: ``video`` as stored (uint8, 3,T,H,W), for a GPU-side conversion (4x fewer bytes
through the loader's workers).

* ``StoreClips`` (map-style) reads the store's Zarr chunks directly (no video decoding): the clip's
  frame range, then the frames it picks. Every clip of every video: starts ``0, clip_stride, ...``
  while a whole clip fits (a video shorter than one clip gives one clip, its last frame repeated).
* ``variant``: ``real`` (the ``raw`` ingest), ``render`` (``merged``: the avatar on the inpainted
  background) or ``rend_diff`` (``anonymized``: the published result) - the names and arrays of
  models/training/action/clips.py.
* ``r``: True where the pixel is synthetic (public) - ``render/mask`` for ``render``, ``public_mask``
  otherwise; all False for ``real`` (the raw video has no synthetic pixel). Resized conservatively:
  a pixel is public only if no private source pixel weighs in it. ``q``: the person mask (the
  segmentation of the REAL person, in [0, 1]); it is derived from the real person, so it is yours
  to train with, not to publish.
* ``only_done`` (default: for the render variants): only videos whose every stage is done and whose
  audit passed - the videos ``anonymask export`` would publish.
* ``StoreClipStream`` is the ``IterableDataset`` of the same clips, in video order (shuffled per
  epoch with ``shuffle=True``), split between DataLoader workers by video.
* ``ExportClips`` gives the same clips (video and label) from an export folder by decoding its mp4s
  with PyAV: for a recipient without the store (and the baseline of ``anonymask bench --only
  dataset``).
* ``dp_batch_sampler(ds, q, steps=...)``: the project's Poisson sampler
  (models/training/privacy/sampler.py) over VIDEOS (a record is a video, each draw takes one of its clips),
  so a DP guarantee is per video; pair it with ``collate_fn=dp_collate(ds)`` (an empty batch is a
  valid step). Opacus, in one line: ``model, opt, loader = opacus_private(PrivacyEngine(), model,
  opt, ds, sample_rate=0.01, noise_multiplier=1.0, max_grad_norm=1.0)``: ``make_private`` over that
  sampler, with Opacus's accountant and its optimizer's divisor set for it (Opacus alone would take
  the sample rate as 1/len(loader) and the batch as clips/len(loader); a record here is a video).

Stores open lazily in each worker (nothing of Zarr is pickled); use ``multiprocessing_context=
"spawn"`` for workers (forked workers can deadlock on zarr v3).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import Dataset, IterableDataset, get_worker_info

from anonymask.core.errors import DatasetError
from anonymask.models.training.action.clips import (
    VARIANT_ARRAYS,
    clip_frame_indices,
    mask_array_name,
    resize_clip,
)
from anonymask.models.training.privacy.sampler import (
    PoissonBatchSampler,
    collate_allowing_empty,
    record_groups,
)
from anonymask.storage.store import STATUS_DONE, DatasetStore


def clip_starts_every(frames: int, clip_len: int, frame_stride: int, clip_stride: int) -> list[int]:
    """First frames of every clip: 0, clip_stride, ... while the clip's span fits (at least [0])."""
    span = (clip_len - 1) * frame_stride + 1
    return list(range(0, max(frames - span, 0) + 1, clip_stride))


def _check(clip_len: int, frame_stride: int, clip_stride: int | None) -> int:
    if clip_len < 1 or frame_stride < 1 or (clip_stride is not None and clip_stride < 1):
        raise ValueError("clip_len, frame_stride and clip_stride must be >= 1")
    return int(clip_stride or (clip_len - 1) * frame_stride + 1)


def _resize_q(q: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    if tuple(q.shape[-2:]) == tuple(size):
        return q
    return F.interpolate(q[:, None], size=size, mode="bilinear", antialias=True, align_corners=False)[:, 0]


class StoreClips(Dataset):
    """Clips of a store's videos; see the module docstring for the fields and options."""

    def __init__(
        self,
        store: str,
        variant: str = "rend_diff",
        *,
        clip_len: int = 16,
        frame_stride: int = 1,
        clip_stride: int | None = None,
        size: tuple[int, int] | None = None,
        protocol: str | None = None,
        split: str | None = None,
        videos: Sequence[str] | None = None,
        only_done: bool | None = None,
        masks: bool = True,
        uint8: bool = False,
    ):
        if variant not in VARIANT_ARRAYS:
            raise ValueError(f"unknown variant {variant!r}; choose one of {sorted(VARIANT_ARRAYS)}")
        self.clip_stride = _check(clip_len, frame_stride, clip_stride)
        self.store_url = str(store)
        self.variant = variant
        self.clip_len, self.frame_stride = int(clip_len), int(frame_stride)
        self.size = None if size is None else (int(size[0]), int(size[1]))
        self.masks = bool(masks)
        self.uint8 = bool(uint8)
        only_done = variant != "real" if only_done is None else bool(only_done)
        store_ = DatasetStore.open(self.store_url, mode="r")
        self.classes = store_.classes
        wanted = set(videos) if videos is not None else None
        self.clips: list[tuple[str, int, int]] = []  # (video_id, start, frames)
        self.skipped: dict[str, str] = {}
        self.labels: dict[str, int] = {}
        self._mask_names: dict[str, str | None] = {}
        array = VARIANT_ARRAYS[variant]
        for entry in store_.videos():
            vid, info = entry.video_id, entry.info
            if wanted is not None and vid not in wanted:
                continue
            if split is not None and (info.split or {}).get(protocol or "") != split:
                continue
            recs = entry.records()
            stages = store_.stages or list(recs)
            if only_done and not all((recs.get(s) or {}).get("status") == STATUS_DONE for s in stages):
                self.skipped[vid] = "not done (or its audit failed)"
                continue
            needed = [array] + (["person_mask"] if self.masks else [])
            r_name = mask_array_name(entry, variant, "r") if variant != "real" else None
            if self.masks and r_name:
                needed.append(r_name)
            missing = [n for n in needed if not entry.has_array(n)]
            if missing:
                self.skipped[vid] = f"no array {missing[0]!r}"
                continue
            frames = int(entry.array(array).shape[0])
            if frames < 1:
                self.skipped[vid] = "no frames"
                continue
            self._mask_names[vid] = r_name
            self.labels[vid] = -1 if info.label is None else int(info.label)
            self.clips += [(vid, s, frames) for s in clip_starts_every(frames, clip_len, frame_stride,
                                                                        self.clip_stride)]
        if not self.clips:
            raise DatasetError(f"{self.store_url}: no clips (variant {variant!r}, split {split!r}; "
                               f"skipped: {self.skipped or 'none'})")
        self._store: DatasetStore | None = None
        self._arrays: dict[str, tuple[Any, Any, Any]] = {}

    def __getstate__(self) -> dict[str, Any]:
        return dict(self.__dict__, _store=None, _arrays={})

    def __len__(self) -> int:
        return len(self.clips)

    def record_ids(self) -> list[str]:
        """The video of every clip (the record a DP guarantee protects)."""
        return [c[0] for c in self.clips]

    def _open(self, vid: str):
        if vid not in self._arrays:
            if self._store is None:
                self._store = DatasetStore.open(self.store_url, mode="r")
            e = self._store.video(vid)
            r_name = self._mask_names[vid]
            self._arrays[vid] = (
                e.array(VARIANT_ARRAYS[self.variant]),
                e.array(r_name) if self.masks and r_name else None,
                e.array("person_mask") if self.masks else None,
            )
        return self._arrays[vid]

    def read(self, vid: str, start: int, frames: int) -> dict[str, np.ndarray]:
        """The clip at store resolution: uint8 frames (T,H,W,3), and r, q (T,H,W) when ``masks``."""
        video, r, q = self._open(vid)
        idx = clip_frame_indices(start, frames, self.clip_len, self.frame_stride)
        lo, hi = int(idx.min()), int(idx.max()) + 1
        out = {"video": np.asarray(video[lo:hi])[idx - lo]}
        if self.masks:
            out["q"] = np.asarray(q[lo:hi])[idx - lo]
            out["r"] = (np.asarray(r[lo:hi])[idx - lo].astype(bool) if r is not None
                        else np.zeros(out["video"].shape[:3], bool))
        return out

    def __getitem__(self, i: int) -> dict[str, Any]:
        vid, start, frames = self.clips[i]
        raw = self.read(vid, start, frames)
        item: dict[str, Any] = {"label": self.labels[vid], "video_id": vid, "start": start}
        if self.size is None:
            item["video"] = _channels_first(raw["video"], self.uint8)
            if self.masks:
                item["r"] = torch.from_numpy(raw["r"])
                item["q"] = torch.from_numpy(raw["q"].astype(np.float32) / 255.0)
            return item
        video = torch.from_numpy(np.ascontiguousarray(raw["video"])).permute(0, 3, 1, 2).float().div_(255.0)
        if self.masks:
            video, private = resize_clip(video, torch.from_numpy(~raw["r"]), self.size)
            item["r"] = ~private
            item["q"] = _resize_q(torch.from_numpy(raw["q"].astype(np.float32) / 255.0), self.size)
        else:
            video = F.interpolate(video, size=self.size, mode="bilinear", antialias=True, align_corners=False)
        item["video"] = _finish(video, self.uint8)
        return item


def _channels_first(frames: np.ndarray, uint8: bool) -> torch.Tensor:
    """(T,H,W,3) uint8 -> (3,T,H,W): uint8 as stored, or float32 in [0,1] (transposed as uint8,
    a quarter of the bytes of a float transpose)."""
    t = torch.from_numpy(np.ascontiguousarray(frames.transpose(3, 0, 1, 2)))
    return t if uint8 else t.to(torch.float32).div_(255.0)


def _finish(video: torch.Tensor, uint8: bool) -> torch.Tensor:
    """(T,3,H,W) float in [0,1] -> (3,T,H,W), uint8 (rounded) when asked."""
    video = video.permute(1, 0, 2, 3).contiguous()
    return video.mul_(255.0).round_().clamp_(0, 255).to(torch.uint8) if uint8 else video


class StoreClipStream(IterableDataset):
    """The clips of :class:`StoreClips` as a stream: video after video (all clips of a video in
    order), videos shuffled per epoch with ``shuffle``; with DataLoader workers each worker takes
    every n-th video. Takes the same arguments as StoreClips, plus ``shuffle`` and ``seed``."""

    def __init__(self, store: str, variant: str = "rend_diff", *, shuffle: bool = False, seed: int = 0, **kw):
        self.clips = StoreClips(store, variant, **kw)
        self.shuffle, self.seed, self.epoch = bool(shuffle), int(seed), 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return len(self.clips)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        by_video: dict[str, list[int]] = {}
        for i, vid in enumerate(self.clips.record_ids()):
            by_video.setdefault(vid, []).append(i)
        order = list(by_video)
        if self.shuffle:
            g = torch.Generator().manual_seed(self.seed + self.epoch)
            order = [order[j] for j in torch.randperm(len(order), generator=g).tolist()]
        info = get_worker_info()
        if info is not None:
            order = order[info.id :: info.num_workers]
        for vid in order:
            for i in by_video[vid]:
                yield self.clips[i]


class ExportClips(Dataset):
    """Clips (``video``, ``label``, ``video_id``, ``start``) of an export folder's mp4s, decoded with
    PyAV (frame-accurate seeks); labels come from its manifest. Same clip positions as StoreClips."""

    def __init__(self, export_dir: str | Path, *, clip_len: int = 16, frame_stride: int = 1,
                 clip_stride: int | None = None, size: tuple[int, int] | None = None, uint8: bool = False):
        from anonymask.storage.export import read_manifest

        self.clip_stride = _check(clip_len, frame_stride, clip_stride)
        self.root = Path(export_dir)
        self.uint8 = bool(uint8)
        self.clip_len, self.frame_stride = int(clip_len), int(frame_stride)
        self.size = None if size is None else (int(size[0]), int(size[1]))
        _, lines = read_manifest(self.root)
        self.clips: list[tuple[str, int, int]] = []
        self.paths: dict[str, Path] = {}
        self.labels: dict[str, int] = {}
        self.turns: dict[str, int] = {}
        for vid, line in sorted(lines.items()):
            if line.get("status") != "exported":
                continue
            self.paths[vid] = self.root / line["path"]
            # the file's frames are in coded orientation with the source's display rotation flag
            self.turns[vid] = {0: 0, 90: -1, 180: 2, 270: 1}.get(int(line.get("rotation") or 0) % 360, 0)
            self.labels[vid] = -1 if line.get("label") is None else int(line["label"])
            frames = int(line["frames"])
            self.clips += [(vid, s, frames) for s in clip_starts_every(frames, clip_len, frame_stride,
                                                                        self.clip_stride)]
        if not self.clips:
            raise DatasetError(f"{self.root}: no exported video in the manifest")

    def __len__(self) -> int:
        return len(self.clips)

    def record_ids(self) -> list[str]:
        return [c[0] for c in self.clips]

    def __getitem__(self, i: int) -> dict[str, Any]:
        from anonymask.storage.video_io import read_frames

        vid, start, frames = self.clips[i]
        idx = clip_frame_indices(start, frames, self.clip_len, self.frame_stride)
        lo, hi = int(idx.min()), int(idx.max()) + 1
        got = read_frames(self.paths[vid], start=lo, stop=hi)
        if self.turns[vid]:
            got = np.rot90(got, self.turns[vid], axes=(1, 2))
        got = got[idx - lo]
        if self.size is None:
            video = _channels_first(got, self.uint8)
        else:
            video = torch.from_numpy(np.ascontiguousarray(got)).permute(0, 3, 1, 2).float().div_(255.0)
            video = _finish(F.interpolate(video, size=self.size, mode="bilinear", antialias=True,
                                          align_corners=False), self.uint8)
        return {"video": video, "label": self.labels[vid], "video_id": vid, "start": start}


def dp_batch_sampler(dataset, sample_rate: float, *, steps: int | None = None, epochs: float | None = None,
                     seed: int | None = None) -> PoissonBatchSampler:
    """Poisson batches over the dataset's videos (records), one clip per drawn video; ``seed`` None
    draws from the OS's entropy (what a private run should use)."""
    groups = record_groups(dataset.record_ids())
    return PoissonBatchSampler(len(groups), sample_rate, steps=steps, epochs=epochs, seed=seed, groups=groups)


def dp_collate(dataset):
    """Default collation that turns an empty Poisson batch into tensors with batch size 0."""
    return collate_allowing_empty(dataset[0])


def opacus_private(engine, module, optimizer, dataset, *, sample_rate: float, noise_multiplier: float,
                   max_grad_norm: float, seed: int | None = None, loader_kwargs: dict[str, Any] | None = None,
                   **make_private_kwargs):
    """``engine.make_private`` (an Opacus ``PrivacyEngine``) over Poisson batches of videos.

    One pass of the returned loader is one epoch of ``round(1/sample_rate)`` steps; sampling uses
    exactly ``1/steps``, the rate Opacus's accountant records for each step, and the optimizer
    divides by the expected batch, ``rate x videos``. Iterate the loader once per epoch.
    Returns (module, optimizer, loader) as ``make_private`` does.
    """
    from torch.utils.data import DataLoader

    steps = max(1, int(round(1.0 / float(sample_rate))))
    sampler = dp_batch_sampler(dataset, 1.0 / steps, steps=steps, seed=seed)
    loader = DataLoader(dataset, batch_sampler=sampler, collate_fn=dp_collate(dataset), **(loader_kwargs or {}))
    module, optimizer, loader = engine.make_private(
        module=module, optimizer=optimizer, data_loader=loader, noise_multiplier=noise_multiplier,
        max_grad_norm=max_grad_norm, poisson_sampling=False, **make_private_kwargs)
    optimizer.expected_batch_size = sampler.expected_batch_size
    return module, optimizer, loader
