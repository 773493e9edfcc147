"""Frozen-prefix features of every training clip, cached in the dataset's store.

Under DP fine-tuning nothing before the first trainable layer changes and clips are not
augmented, so the activations there are a pure function of (prefix weights, model config, split
point, clip spec, mask policy). They are computed once per clip and per input variant into
``<store>/cache/<key>/``, keyed by the hash of exactly those things, and every epoch reads them
instead of running the prefix.

Variants: ``full`` (no token mask), ``private`` (token_keep = private tokens: the public ones are
zeroed; MaskDP's private pass), ``public`` (token_keep = public tokens; MaskDP's public pass, or
FP-DP's public features), ``blur_<sigma>`` (the clip Gaussian-blurred per frame with that sigma
in pixels, FP-DP's default public feature map psi). With a pixel mask, the per-clip public-token
mask is stored too (``tokens``, (n, N_tokens) bool).

Layout of a cache group: attrs (spec, feature shape, dtype, clip list), ``label`` (n,), one
array per variant (n, *feature_shape) with one chunk per clip (shards of up to 64 clips), and
``done_<variant>`` (n,) bool flags written after the features (resume computes only the rest).
One process writes a cache.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, Subset
from zarr.codecs import ZstdCodec

from anonymask.core.errors import StoreError
from anonymask.models.training.action.clips import ClipDataset, Collate, make_loader
from anonymask.models.training.action.mvit import ActionModel
from anonymask.models.training.action.prefix import FrozenPrefix
from anonymask.models.training.action.token_masks import model_public_tokens
from anonymask.storage.hashing import combine_hashes, config_hash
from anonymask.storage.store import DatasetStore

VARIANTS = ("full", "private", "public")  # plus "blur_<sigma>"
TOKENS = "tokens"
SHARD_CLIPS = 64
_FORMAT = "action-prefix-features-v2"  # v2: Real* (q) tokens are the person, content ids in the key


def feature_key(variant: str) -> str:
    """Sample key of a variant's features: ``features`` (full) or ``features_<variant>``."""
    return "features" if variant == "full" else f"features_{variant}"


def blur_sigma(variant: str) -> float | None:
    """The sigma of a ``blur_<sigma>`` variant (None for other variants)."""
    if not variant.startswith("blur_"):
        return None
    try:
        sigma = float(variant[5:])
    except ValueError:
        raise ValueError(f"bad blur variant {variant!r}: expected blur_<sigma>, e.g. blur_1.5") from None
    if not sigma > 0:
        raise ValueError(f"blur variant {variant!r} needs sigma > 0")
    return sigma


def check_variants(variants: Sequence[str]) -> None:
    for v in variants:
        if v not in VARIANTS and blur_sigma(v) is None:
            raise ValueError(f"unknown feature variant {v!r}; choose from {VARIANTS} or blur_<sigma>")


def variant_input(
    x: torch.Tensor, variant: str, public_tokens: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The (clip, token_keep) pair the prefix sees for a variant."""
    if variant == "full":
        return x, None
    if variant in ("private", "public"):
        if public_tokens is None:
            raise ValueError(f"variant {variant!r} needs a pixel mask (mask_source)")
        return x, (public_tokens if variant == "public" else ~public_tokens)
    from anonymask.models.training.privacy.fpdp import gaussian_blur_video

    return gaussian_blur_video(x, blur_sigma(variant)), None


def mask_policy(model: ActionModel, dataset: ClipDataset) -> dict[str, Any]:
    """How token masks are derived: pixel mask source + the patch geometry + the token rule."""
    return {
        "mask_source": dataset.mask_source,
        "q_threshold": dataset.q_threshold,
        "rule": "public iff every covered pixel is public (r: synthetic; q: the person region); padding public",
        "kernel": list(model.patch_kernel),
        "stride": list(model.patch_stride),
        "padding": list(model.patch_padding),
    }


def _model_spec(model: ActionModel) -> dict[str, Any]:
    c = model.config
    return {"arch": c.arch, "clip_len": c.clip_len, "size": list(c.size), "tiny_blocks": c.tiny_blocks}


def cache_key(
    model: ActionModel,
    dataset: ClipDataset,
    *,
    precision: str = "float32",
    split: int | None = None,
    storage_dtype: str = "float32",
) -> str:
    """Hash of everything a cached feature depends on: the prefix weights (content hash), model
    config, split point, clip spec + clip list, mask policy, precision, and per video its label and
    the recorded checksums of the arrays it reads (``ClipDataset.content_ids``), so a rerun of an
    upstream stage, a changed mask or a relabelled video never reuses stale features or tokens."""
    split = model.split_index() if split is None else split
    spec = dict(dataset.spec())
    spec.pop("store", None)  # the cache lives in that store; moving it must not invalidate it
    clips = [[vid, int(ci), int(start)] for vid, ci, start, *_ in dataset.clips]
    return combine_hashes(
        _FORMAT,
        model.prefix_hash(),
        config_hash(_model_spec(model)),
        str(split),
        config_hash(spec),
        config_hash(clips),
        config_hash(mask_policy(model, dataset)),
        precision,
        config_hash(dataset.content_ids()),
        *([] if storage_dtype == "float32" else [f"storage={storage_dtype}"]),
    )


def _autocast(device: torch.device, precision: str):
    if precision == "bfloat16":
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    return nullcontext()


class FeatureCache:
    """One cache group: what it holds and which clips/variants are complete."""

    def __init__(self, store_url: str, key: str):
        self.store_url = str(store_url)
        self.key = key
        store = DatasetStore.open(self.store_url, mode="r")
        if key not in store.group["cache"]:
            raise StoreError(f"{self.store_url}: no feature cache {key!r}")
        g = store.group["cache"][key]
        self.attrs = dict(g.attrs)
        self.num_clips = int(self.attrs["num_clips"])
        self.feature_shape = tuple(self.attrs["feature_shape"])
        self.dtype = str(self.attrs["dtype"])
        self._group = g

    def complete_variants(self) -> list[str]:
        """Variants (and ``tokens``) whose every clip is done."""
        out = []
        for name in sorted(self._group.array_keys()):
            if name.startswith("done_") and bool(np.asarray(self._group[name][...]).all()):
                out.append(name[5:])
        return out

    def dataset(self, variants: Sequence[str] = ("full",)) -> CachedFeatureDataset:
        missing = [v for v in variants if v not in self.complete_variants()]
        if missing:
            raise StoreError(f"{self.store_url}: cache {self.key} lacks complete variants {missing}")
        return CachedFeatureDataset(self.store_url, self.key, variants)


def build_feature_cache(
    model: ActionModel,
    dataset: ClipDataset,
    *,
    variants: Sequence[str] = ("full",),
    batch_size: int = 8,
    num_workers: int = 0,
    device: str | torch.device | None = None,
    precision: str | None = None,
    storage_dtype: str = "float32",
    progress: Callable[[int, int], None] | None = None,
    key: str | None = None,
) -> FeatureCache:
    """Compute the missing features of ``dataset``'s clips for ``variants``; returns the cache.

    ``precision``: "float32" or "bfloat16" (autocast); default bfloat16 on CUDA, float32 on CPU.
    Train with the same precision in the uncached path if the two must agree bit for bit.
    ``storage_dtype``: "float32" (exact) or "float16" (half the disk and read bandwidth): every
    stored value is checked to round-trip finite, and the largest relative rounding error is
    recorded in the cache's attrs (``float16_max_rel_error``, about 5e-4 for normal values); a
    feature beyond float16's range makes the build fail rather than store inf.
    ``key``: ``cache_key(model, dataset, precision=..., storage_dtype=...)`` when the caller has just
    computed it (it reads every video's records, or hashes its arrays where none were recorded:
    ~40 ms per video on the project's VM); None computes it here.
    """
    check_variants(variants)
    if any(v in ("private", "public") for v in variants) and dataset.mask_source is None:
        raise ValueError("private/public variants need a dataset with a mask_source")
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    precision = precision or ("bfloat16" if device.type == "cuda" else "float32")
    prefix = FrozenPrefix(model)
    if storage_dtype not in ("float32", "float16"):
        raise ValueError(f"storage_dtype must be float32 or float16, got {storage_dtype!r}")
    if key is None:
        key = cache_key(model, dataset, precision=precision, storage_dtype=storage_dtype)
    fshape = prefix.feature_shape
    n = len(dataset)
    clip_ids = [[vid, int(ci)] for vid, ci, *_ in dataset.clips]

    store = DatasetStore.open(dataset.store_url, mode="r+")
    g = store.cache_group(key)
    if g.attrs.get("clips") not in (None, clip_ids) or (
        "feature_shape" in g.attrs and tuple(g.attrs["feature_shape"]) != fshape
    ) or g.attrs.get("dtype", storage_dtype) != storage_dtype:
        raise StoreError(f"{dataset.store_url}: cache {key} exists with other clips, shape or dtype")
    g.attrs.update(
        {
            "kind": _FORMAT,
            "model": _model_spec(model),
            "split": prefix.split,
            "clip_spec": dataset.spec(),
            "mask_policy": mask_policy(model, dataset),
            "precision": precision,
            "prefix_hash": model.prefix_hash(),
            "feature_shape": list(fshape),
            "dtype": storage_dtype,
            "num_clips": n,
            "clips": clip_ids,
        }
    )
    if "label" not in g:
        g.create_array("label", shape=(n,), dtype="int64", chunks=(max(n, 1),))[...] = np.asarray(
            dataset.labels, dtype=np.int64
        )
    variants = list(dict.fromkeys(variants))
    with_tokens = dataset.mask_source is not None
    if with_tokens:
        variants.append(TOKENS)
    arrays, done = {}, {}
    for v in variants:
        shape, dtype = ((model.num_tokens,), "bool") if v == TOKENS else (fshape, storage_dtype)
        if v not in g:
            g.create_array(
                v,
                shape=(n, *shape),
                dtype=dtype,
                chunks=(1, *shape),
                shards=(min(SHARD_CLIPS, max(n, 1)), *shape),
                compressors=ZstdCodec(level=1),
                fill_value=0,
            )
        if f"done_{v}" not in g:
            g.create_array(f"done_{v}", shape=(n,), dtype="bool", chunks=(max(n, 1),), fill_value=False)
        arrays[v], done[v] = g[v], g[f"done_{v}"]

    flags = {v: np.asarray(done[v][...]).copy() for v in variants}
    worst = 0.0
    todo = [i for i in range(n) if not all(flags[v][i] for v in variants)]
    if todo:
        loader = make_loader(Subset(dataset, todo), batch_size=batch_size, num_workers=num_workers,
                             collate_fn=_collate(dataset))
        writers = {v: _ShardWriter(arrays[v], done[v], flags[v]) for v in variants}
        model_device = next(model.parameters()).device
        model.to(device)
        pos = 0
        try:
            for batch in loader:
                rows = todo[pos : pos + len(batch["label"])]
                pos += len(rows)
                x = batch["video"].to(device, non_blocking=True)
                keep_pub = None
                if with_tokens:
                    keep_pub = model_public_tokens(model, batch["pixel_public"].to(device))
                for v in variants:
                    need = [j for j, r in enumerate(rows) if not flags[v][r]]
                    if not need:
                        continue
                    if v == TOKENS:
                        feats = keep_pub.cpu().numpy()
                    else:
                        xv, keep = variant_input(x, v, keep_pub)
                        with _autocast(device, precision):
                            feats = prefix(xv, keep)
                        exact = feats.float().cpu().numpy()
                        feats = exact.astype(storage_dtype)
                        if storage_dtype != "float32":
                            worst = max(worst, _rounding_error(exact, feats, dataset.store_url, v))
                    writers[v].add([rows[j] for j in need], feats[need])
                if progress is not None:
                    progress(pos, len(todo))
        finally:
            model.to(model_device)
            if storage_dtype != "float32":
                g.attrs[f"{storage_dtype}_max_rel_error"] = max(worst, float(g.attrs.get(f"{storage_dtype}_max_rel_error", 0)))
    return FeatureCache(dataset.store_url, key)


class _ShardWriter:
    """Writes one variant's rows a shard at a time, then their done flags.

    A zarr v3 write into part of a shard reads and rewrites the whole shard (up to SHARD_CLIPS
    clips: ~150 MB of float32 MViTv2-S features), so writing clip by clip made the cost of a build
    grow with clips x shard size (2,000 clips: ~0.3 s of I/O per clip and variant, where a GPU
    computes a clip in 4 ms). Rows are held until every row still to do in their shard is computed,
    then written as contiguous runs in one call per run; their flags follow (a set flag still means
    the row is stored). Rows held when a build stops are recomputed by the next one.
    """

    def __init__(self, array: Any, done: Any, flags: np.ndarray):
        self.array, self.done, self.flags = array, done, flags
        shards = getattr(array, "shards", None)
        self.shard = int((shards or array.chunks)[0])
        self.left: dict[int, int] = {}  # shard -> rows still to compute
        for r in np.flatnonzero(~flags):
            self.left[int(r) // self.shard] = self.left.get(int(r) // self.shard, 0) + 1
        self.held: dict[int, np.ndarray] = {}

    def add(self, rows: Sequence[int], values: np.ndarray) -> None:
        full = []
        for r, value in zip(rows, values):
            self.held[r] = value
            s = r // self.shard
            self.left[s] -= 1
            if self.left[s] == 0:
                full.append(s)
        if full:
            self._write([r for r in sorted(self.held) if r // self.shard in full])

    def _write(self, rows: list[int]) -> None:
        start = 0
        for k in range(1, len(rows) + 1):  # contiguous runs
            if k == len(rows) or rows[k] != rows[k - 1] + 1 or rows[k] // self.shard != rows[start] // self.shard:
                lo, hi = rows[start], rows[k - 1] + 1
                self.array[lo:hi] = np.stack([self.held.pop(r) for r in range(lo, hi)])
                start = k
        self.flags[rows] = True
        self.done[...] = self.flags  # flags last: a set flag means the row is complete


def _rounding_error(exact: np.ndarray, stored: np.ndarray, where: str, variant: str) -> float:
    """Largest relative error of the stored copy (values of magnitude >= 1e-3); inf is refused."""
    if not np.isfinite(stored).all():
        raise StoreError(f"{where}: prefix features of variant {variant!r} exceed the float16 range; "
                         "build the cache with storage_dtype float32")  # fmt: skip
    big = np.abs(exact) >= 1e-3
    if not big.any():
        return 0.0
    return float((np.abs(stored.astype(np.float32) - exact)[big] / np.abs(exact[big])).max())


def _collate(dataset: ClipDataset) -> Collate:
    return Collate(dataset.sample_shapes())


class CachedFeatureDataset(Dataset):
    """Cached prefix features per clip.

    Samples: dict(features[_<variant>] (float32), label, video_id, clip_index) and, when the
    cache has them, ``public_tokens`` (N_tokens,) bool.
    """

    def __init__(self, store_url: str, key: str, variants: Sequence[str] = ("full",)):
        self.store_url = str(store_url)
        self.key = key
        check_variants(variants)
        cache = FeatureCache(self.store_url, key)
        self.with_tokens = TOKENS in cache.complete_variants()
        self.variants = tuple(variants) + ((TOKENS,) if self.with_tokens else ())
        self.num_tokens = int(cache._group[TOKENS].shape[1]) if self.with_tokens else 0
        self.split = int(cache.attrs["split"])
        self.feature_shape = cache.feature_shape
        self.clips = [(vid, int(ci)) for vid, ci in cache.attrs["clips"]]
        self.labels = [int(v) for v in np.asarray(cache._group["label"][...])]
        self.clip_spec = dict(cache.attrs["clip_spec"])
        self.num_classes = max(len(DatasetStore.open(self.store_url, mode="r").classes), max(self.labels) + 1)
        self._arrays: dict[str, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_arrays"] = None
        return state

    def _open(self) -> dict[str, Any]:
        if self._arrays is None:
            g = DatasetStore.open(self.store_url, mode="r").group["cache"][self.key]
            self._arrays = {v: g[v] for v in self.variants}
        return self._arrays

    def __len__(self) -> int:
        return len(self.clips)

    def with_variants(self, variants: Sequence[str]) -> CachedFeatureDataset:
        """The same clips reading only ``variants`` (plus the token masks, if cached)."""
        check_variants(variants)
        missing = [v for v in variants if v not in self.variants]
        if missing:
            raise ValueError(f"the cached features lack variant(s) {missing} (build the cache with them)")
        other = copy.copy(self)
        other.variants = tuple(variants) + ((TOKENS,) if self.with_tokens else ())
        other._arrays = None
        return other

    def sample_shapes(self) -> dict[str, tuple[tuple[int, ...], str]]:
        out: dict[str, tuple[tuple[int, ...], str]] = {
            feature_key(v): (self.feature_shape, "float32") for v in self.variants if v != TOKENS
        }
        if self.with_tokens:
            out["public_tokens"] = ((self.num_tokens,), "bool")
        out.update(label=((), "int64"), clip_index=((), "int64"), video_id=((), "str"))
        return out

    def __getitem__(self, i: int) -> dict[str, Any]:
        arrays = self._open()
        vid, ci = self.clips[i]
        out: dict[str, Any] = {
            feature_key(v): torch.from_numpy(np.asarray(arrays[v][i], dtype=np.float32))
            for v in self.variants
            if v != TOKENS
        }
        if self.with_tokens:
            out["public_tokens"] = torch.from_numpy(np.asarray(arrays[TOKENS][i], dtype=bool))
        out.update(label=self.labels[i], video_id=vid, clip_index=ci)
        return out
