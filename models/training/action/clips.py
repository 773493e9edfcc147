"""Training clips from a dataset store: a map-style dataset and a loader with safe workers.

Variants (rows of the paper's tables) and the arrays they read:

- ``real``      -> ``raw``         (the original video, "Real")
- ``render``    -> ``merged``      (avatar rendered onto the inpainted background, "Render")
- ``rend_diff`` -> ``anonymized``  (render refined by video diffusion, "Rend.+Diff")

Pixel masks (True = public) for MaskDP:

- ``mask_source="r"``: ``public_mask`` = r, the pixels that are synthetic. Not allowed with
  ``real``: the raw video has no synthetic pixels, calling its person region public would leak.
- ``mask_source="q"``: the paper's "Real*" row, allowed with ``real`` only: public = the PERSON
  region (q > ``q_threshold``), private = the rest. The real person is then public, so such a run
  protects nothing about who was filmed; the trainer reports it as not private (an upper bound).
  On the render variants q would call real background pixels public: refused.
- ``None``: nothing is public (all False).

Resizing uses bilinear interpolation with antialiasing (non-negative weights). The private
indicator goes through the same operator, and a resized pixel is public only if no private source
pixel has any weight in it: masks stay conservative at every scale.

Clip positions are fixed: ``clips_per_video`` clips whose centres split the video evenly, so every
epoch and every run sees the same clips (what makes results and the feature cache reproducible).
Stores open lazily inside each worker (no zarr handle is pickled); loaders with workers use the
"spawn" start method (forked workers can deadlock on zarr v3, see STACK.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

from anonymask.core.errors import DatasetError
from anonymask.storage.hashing import array_checksum
from anonymask.storage.store import DatasetStore

VARIANT_ARRAYS = {"real": "raw", "render": "merged", "rend_diff": "anonymized"}
MASK_ARRAYS = {"r": "public_mask", "q": "person_mask"}
#: In the Render variant (``merged``) the avatar is composited with its hard render mask, so every
#: pixel of ``render/mask`` holds exactly the avatar: that mask is the exact (larger) r there.
#: ``public_mask`` is the conservative r of the final, reintegrated video.
RENDER_EXACT_MASK = "render/mask"


def mask_array_name(entry, variant: str, mask_source: str) -> str:
    """Store array holding the public/person mask for this variant (see RENDER_EXACT_MASK)."""
    if mask_source == "r" and variant == "render" and entry.has_array(RENDER_EXACT_MASK):
        return RENDER_EXACT_MASK
    return MASK_ARRAYS[mask_source]
KINETICS_MEAN = (0.45, 0.45, 0.45)
KINETICS_STD = (0.225, 0.225, 0.225)


def clip_starts(num_frames: int, clip_len: int, frame_stride: int, clips_per_video: int) -> list[int]:
    """Deterministic first frames: clip centres at the middle of ``clips_per_video`` equal segments."""
    span = (clip_len - 1) * frame_stride + 1
    room = max(num_frames - span, 0)
    return [int(np.floor(room * (i + 0.5) / clips_per_video + 0.5)) for i in range(clips_per_video)]


def clip_frame_indices(start: int, num_frames: int, clip_len: int, frame_stride: int) -> np.ndarray:
    """Frame indices of a clip; a video shorter than the span repeats its last frame."""
    return np.minimum(start + np.arange(clip_len) * frame_stride, num_frames - 1)


def resize_clip(
    video: torch.Tensor, private: torch.Tensor, size: tuple[int, int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """(T,3,H,W) float and (T,H,W) bool private -> resized, with the mask kept conservative."""
    if tuple(video.shape[-2:]) == tuple(size):
        return video, private
    video = F.interpolate(video, size=size, mode="bilinear", antialias=True, align_corners=False)
    weight = F.interpolate(
        private[:, None].float(), size=size, mode="bilinear", antialias=True, align_corners=False
    )
    return video, weight[:, 0] > 0


class ClipDataset(Dataset):
    """Clips of one split of a store: dict(video, pixel_public, label, video_id, clip_index).

    ``video`` (3,T,H,W) float32 (normalised with the Kinetics mean/std when ``normalize``),
    ``pixel_public`` (T,H,W) bool, ``label`` int, ``video_id`` str, ``clip_index`` int.
    ``protocol``/``split`` select videos whose ``info.split[protocol] == split`` (``split=None``:
    every video). Videos lacking the variant's array or the mask are skipped (listed in
    ``skipped``); none left raises DatasetError.
    """

    def __init__(
        self,
        store_url: str,
        protocol: str | None,
        split: str | None,
        variant: str = "rend_diff",
        mask_source: str | None = "r",
        *,
        clip_len: int = 16,
        frame_stride: int = 2,
        size: tuple[int, int] = (224, 224),
        clips_per_video: int = 1,
        normalize: bool = True,
        q_threshold: int = 0,
        video_ids: Sequence[str] | None = None,
    ):
        if variant not in VARIANT_ARRAYS:
            raise ValueError(f"unknown variant {variant!r}; choose one of {sorted(VARIANT_ARRAYS)}")
        if mask_source not in (None, *MASK_ARRAYS):
            raise ValueError(f"unknown mask_source {mask_source!r}; choose 'r', 'q' or None")
        if variant == "real" and mask_source == "r":
            raise ValueError(
                "variant 'real' has no synthetic pixels: mask_source 'r' would call real pixels public "
                "(use 'q' for the Real* setting, or None)"
            )
        if variant != "real" and mask_source == "q":
            raise ValueError(
                f"mask_source 'q' (the Real* row: the person region public) applies to variant 'real' only; "
                f"on {variant!r} the pixels outside the avatar are real background: use mask_source 'r'"
            )
        if clip_len < 1 or frame_stride < 1 or clips_per_video < 1:
            raise ValueError("clip_len, frame_stride and clips_per_video must be >= 1")
        self.store_url = str(store_url)
        self.protocol = protocol
        self.split = split
        self.variant = variant
        self.mask_source = mask_source
        self.clip_len = int(clip_len)
        self.frame_stride = int(frame_stride)
        self.size = (int(size[0]), int(size[1]))
        self.clips_per_video = int(clips_per_video)
        self.normalize = bool(normalize)
        self.q_threshold = int(q_threshold)
        self._store: DatasetStore | None = None
        self._arrays: dict[str, tuple[Any, Any]] = {}

        store = DatasetStore.open(self.store_url, mode="r")
        self.class_names = store.classes
        wanted = set(video_ids) if video_ids is not None else None
        self.clips: list[tuple[str, int, int, int]] = []  # (video_id, clip_index, start, frames)
        self.labels: list[int] = []
        self.skipped: dict[str, str] = {}
        self.video_labels: dict[str, int] = {}
        for entry in store.videos():
            info = entry.info
            if wanted is not None and entry.video_id not in wanted:
                continue
            if split is not None and (info.split or {}).get(protocol or "") != split:
                continue
            arr_name = VARIANT_ARRAYS[variant]
            if not entry.has_array(arr_name):
                self.skipped[entry.video_id] = f"no array {arr_name!r}"
                continue
            if mask_source is not None and not entry.has_array(mask_array_name(entry, variant, mask_source)):
                self.skipped[entry.video_id] = f"no array {mask_array_name(entry, variant, mask_source)!r}"
                continue
            if info.label is None:
                raise DatasetError(f"{self.store_url}: video {entry.video_id!r} has no label")
            frames = int(entry.array(arr_name).shape[0])
            if frames < 1:
                self.skipped[entry.video_id] = "no frames"
                continue
            self.video_labels[entry.video_id] = int(info.label)
            for ci, start in enumerate(
                clip_starts(frames, self.clip_len, self.frame_stride, self.clips_per_video)
            ):
                self.clips.append((entry.video_id, ci, start, frames))
                self.labels.append(int(info.label))
        if not self.clips:
            raise DatasetError(
                f"{self.store_url}: no usable videos for protocol={protocol!r} split={split!r} "
                f"variant={variant!r} mask_source={mask_source!r} (skipped: {len(self.skipped)})"
            )
        n_labels = max(self.labels) + 1
        self.num_classes = max(len(self.class_names), n_labels)

    # ------------------------------------------------------------------ pickling: no zarr handles
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_store"] = None
        state["_arrays"] = {}
        return state

    def _open(self, video_id: str):
        if video_id not in self._arrays:
            entry = self._store_handle().video(video_id)
            video = entry.array(VARIANT_ARRAYS[self.variant])
            mask = (entry.array(mask_array_name(entry, self.variant, self.mask_source))
                    if self.mask_source else None)
            self._arrays[video_id] = (video, mask)
        return self._arrays[video_id]

    # ------------------------------------------------------------------ dataset protocol
    def __len__(self) -> int:
        return len(self.clips)

    def spec(self) -> dict[str, Any]:
        """What determines a clip's pixels and mask (hashed into feature-cache keys)."""
        return {
            "store": self.store_url,
            "variant": self.variant,
            "mask_source": self.mask_source,
            "q_threshold": self.q_threshold,
            "clip_len": self.clip_len,
            "frame_stride": self.frame_stride,
            "size": list(self.size),
            "clips_per_video": self.clips_per_video,
            "normalize": self.normalize,
        }

    def array_names(self, video_id: str) -> list[str]:
        """Store arrays a video's clips are read from (the variant's video, the mask)."""
        names = [VARIANT_ARRAYS[self.variant]]
        if self.mask_source:
            entry = self._store_handle().video(video_id)
            names.append(mask_array_name(entry, self.variant, self.mask_source))
        return names

    def _store_handle(self) -> DatasetStore:
        if self._store is None:
            self._store = DatasetStore.open(self.store_url, mode="r")
        return self._store

    def content_ids(self) -> list[list[str]]:
        """Per video: id, label and the identity of every array its clips read.

        The identity is the checksum the writing stage recorded for the array (a stage that
        reruns with other results changes it), or, for arrays written without a stage record,
        the checksum of the array's content. Feature-cache keys hash these, so cached features
        never outlive the pixels, masks or labels they came from.
        """
        out = []
        for video_id in sorted(self.video_labels):
            entry = self._store_handle().video(video_id)
            recorded = {
                name: desc.get("checksum")
                for rec in entry.records().values()
                if rec.get("status") == "done"
                for name, desc in (rec.get("outputs") or {}).items()
            }
            ids = [video_id, str(self.video_labels[video_id])]
            for name in self.array_names(video_id):
                ids.append(f"{name}={recorded.get(name) or array_checksum(entry.array(name))}")
            out.append(ids)
        return out

    def sample_shapes(self) -> dict[str, tuple[tuple[int, ...], str]]:
        t, (h, w) = self.clip_len, self.size
        return {
            "video": ((3, t, h, w), "float32"),
            "pixel_public": ((t, h, w), "bool"),
            "label": ((), "int64"),
            "clip_index": ((), "int64"),
            "video_id": ((), "str"),
        }

    def read_clip(self, video_id: str, start: int, frames: int) -> tuple[np.ndarray, np.ndarray]:
        """Raw uint8 frames (T,H,W,3) and the private indicator (T,H,W) at store resolution."""
        video_arr, mask_arr = self._open(video_id)
        idx = clip_frame_indices(start, frames, self.clip_len, self.frame_stride)
        lo, hi = int(idx.min()), int(idx.max()) + 1
        video = np.asarray(video_arr[lo:hi])[idx - lo]
        if mask_arr is None:
            private = np.ones(video.shape[:3], dtype=bool)
        else:
            mask = np.asarray(mask_arr[lo:hi])[idx - lo]
            if mask.shape != video.shape[:3]:
                raise DatasetError(
                    f"{self.store_url}: video {video_id!r} mask shape {mask.shape} != frames {video.shape[:3]}"
                )
            if self.mask_source == "r":
                private = ~mask.astype(bool)
            else:  # Real*: the person region (q) is public
                private = ~(mask > self.q_threshold)
        return video, private

    def __getitem__(self, i: int) -> dict[str, Any]:
        video_id, clip_index, start, frames = self.clips[i]
        raw, private = self.read_clip(video_id, start, frames)
        if tuple(raw.shape[1:3]) == self.size:
            # at the model's size: one float copy straight into the (3,T,H,W) layout, then in-place
            # arithmetic (the same operations on the same values as below, without the three
            # intermediate copies of a 10 MB clip)
            video = torch.empty((3, *raw.shape[:3]), dtype=torch.float32)
            video.copy_(torch.from_numpy(np.ascontiguousarray(raw)).permute(3, 0, 1, 2)).div_(255.0)
            if self.normalize:
                video.sub_(torch.tensor(KINETICS_MEAN).view(3, 1, 1, 1)).div_(torch.tensor(KINETICS_STD).view(3, 1, 1, 1))
            priv = torch.from_numpy(private)
        else:
            video = torch.from_numpy(np.ascontiguousarray(raw)).permute(0, 3, 1, 2).float().div_(255.0)
            video, priv = resize_clip(video, torch.from_numpy(private), self.size)
            if self.normalize:
                mean = torch.tensor(KINETICS_MEAN).view(1, 3, 1, 1)
                std = torch.tensor(KINETICS_STD).view(1, 3, 1, 1)
                video = (video - mean) / std
            video = video.permute(1, 0, 2, 3).contiguous()
        return {
            "video": video,
            "pixel_public": ~priv,
            "label": self.labels[i],
            "video_id": video_id,
            "clip_index": clip_index,
        }


class Collate:
    """default-collate for dicts of samples that also turns an empty list into an empty batch.

    Poisson sampling (every DP mode) may draw an empty batch: that is a valid step, and the
    strategy still needs tensors with the right trailing shapes.
    """

    def __init__(self, shapes: dict[str, tuple[tuple[int, ...], str]]):
        self.shapes = {k: (tuple(s), str(d)) for k, (s, d) in shapes.items()}

    def __call__(self, samples: list[dict[str, Any]]) -> dict[str, Any]:
        if samples:
            return torch.utils.data.default_collate(samples)
        out: dict[str, Any] = {}
        for k, (shape, dtype) in self.shapes.items():
            out[k] = [] if dtype == "str" else torch.zeros((0, *shape), dtype=getattr(torch, dtype))
        return out


def make_loader(
    dataset: Dataset,
    *,
    batch_size: int = 1,
    batch_sampler: Any = None,
    shuffle: bool = False,
    num_workers: int = 0,
    seed: int = 0,
    drop_last: bool = False,
    collate_fn: Callable | None = None,
    persistent_workers: bool = False,
    pin_memory: bool = False,
    prefetch_factor: int | None = None,
    multiprocessing_context: str = "spawn",
) -> DataLoader:
    """A DataLoader over a store-backed dataset, with spawn workers and empty-batch-safe collation.

    Give either ``batch_size`` (+ ``shuffle``, seeded by ``seed``) or a ``batch_sampler`` (e.g. the
    Poisson sampler of the DP modes).
    """
    if collate_fn is None:
        shapes = dataset.sample_shapes() if hasattr(dataset, "sample_shapes") else None
        collate_fn = Collate(shapes) if shapes is not None else torch.utils.data.default_collate
    kw: dict[str, Any] = dict(num_workers=num_workers, collate_fn=collate_fn, pin_memory=pin_memory)
    if num_workers > 0:
        kw["multiprocessing_context"] = multiprocessing_context
        kw["persistent_workers"] = persistent_workers
        if prefetch_factor is not None:
            kw["prefetch_factor"] = prefetch_factor
    if batch_sampler is not None:
        return DataLoader(dataset, batch_sampler=batch_sampler, **kw)
    gen = torch.Generator().manual_seed(int(seed)) if shuffle else None
    return DataLoader(
        dataset, batch_size=batch_size, shuffle=shuffle, drop_last=drop_last, generator=gen, **kw
    )
