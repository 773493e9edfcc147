"""Frozen-prefix feature cache: same logits and gradients as the uncached path; keys; resume."""

from __future__ import annotations

import pytest
import torch

from anonymask.core.errors import StoreError
from anonymask.models.training.action.clips import ClipDataset, Collate
from anonymask.models.training.action.feature_cache import (
    FeatureCache,
    build_feature_cache,
    cache_key,
    feature_key,
)
from anonymask.models.training.action.mvit import build_action_model
from anonymask.models.training.action.prefix import FrozenPrefix, TrainableTail, feature_shape
from anonymask.models.training.action.synthetic import make_synthetic_store
from anonymask.models.training.action.token_masks import model_public_tokens
from anonymask.storage.store import DatasetStore


@pytest.fixture(scope="module")
def store_url(tmp_path_factory):
    url = str(tmp_path_factory.mktemp("fc") / "syn.zarr")
    make_synthetic_store(url, num_classes=3, videos_per_class={"train": 2}, frames=12, size=(32, 32))
    return url


def _dataset(url, **kw):
    args = dict(clip_len=8, frame_stride=1, size=(32, 32), clips_per_video=2)
    args.update(kw)
    return ClipDataset(url, "xsub", "train", "rend_diff", "r", **args)


def _grads(model, logits, labels):
    model.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(logits, labels).backward()
    return [p.grad.clone() for p in model.trainable_parameters()]


@pytest.mark.parametrize("trainable", ["last_blocks_norm", "head"])
def test_cached_and_uncached_paths_give_the_same_logits_and_gradients(store_url, trainable):
    model = build_action_model(3, arch="tiny", trainable=trainable, seed=4)
    model.train()
    ds = _dataset(store_url)
    cache = build_feature_cache(model, ds, variants=("full", "private", "public"), batch_size=5)
    assert cache.num_clips == len(ds) == 12
    assert set(cache.complete_variants()) == {"full", "private", "public", "tokens"}
    assert cache.feature_shape == feature_shape(model)
    cached = cache.dataset(("full", "private", "public"))
    idx = [0, 3, 7, 11]
    vb = Collate(ds.sample_shapes())([ds[i] for i in idx])
    cb = Collate(cached.sample_shapes())([cached[i] for i in idx])
    assert torch.equal(vb["label"], cb["label"]) and vb["video_id"] == cb["video_id"]
    tail = TrainableTail(model)
    keep_pub = model_public_tokens(model, vb["pixel_public"])
    assert keep_pub.any() and not keep_pub.all()
    assert torch.equal(cb["public_tokens"], keep_pub)
    for variant, keep in [("full", None), ("private", ~keep_pub), ("public", keep_pub)]:
        logits = model(vb["video"], token_keep=keep)
        g_ref = _grads(model, logits, vb["label"])
        logits_c = tail(cb[feature_key(variant)])
        g_c = _grads(model, logits_c, cb["label"])
        torch.testing.assert_close(logits_c, logits, rtol=1e-5, atol=1e-5)
        for a, b in zip(g_c, g_ref):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    # the variants really differ
    assert not torch.allclose(cb["features"], cb["features_private"])
    with pytest.raises(ValueError, match="already carry"):
        tail(cb["features"], token_keep=keep_pub)


def test_prefix_matches_model_run_and_tail_owns_only_tail_params():
    model = build_action_model(3, arch="tiny", seed=2)
    tail = TrainableTail(model)
    own = {id(p) for p in tail.parameters()}
    assert {id(p) for p in model.trainable_parameters()} <= own
    assert id(model.net.conv_proj.weight) not in own
    x = torch.randn(2, *model.input_shape)
    prefix = FrozenPrefix(model)
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(tail(prefix(x)), model(x), rtol=0, atol=0)
    model.set_trainable("all")
    with pytest.raises(ValueError, match="no frozen prefix"):
        FrozenPrefix(model)


def test_cache_key_depends_on_weights_spec_and_mask_policy(store_url):
    m1 = build_action_model(3, arch="tiny", seed=1)
    m2 = build_action_model(3, arch="tiny", seed=2)
    m1b = build_action_model(5, arch="tiny", seed=3)
    m1b.net.load_state_dict({k: v for k, v in m1.net.state_dict().items() if not k.startswith("head.")},
                            strict=False)  # another head, same prefix
    ds = _dataset(store_url)
    k = cache_key(m1, ds)
    assert k == cache_key(m1b, ds)
    assert k != cache_key(m2, ds)
    assert k != cache_key(m1, _dataset(store_url, clips_per_video=1))
    assert k != cache_key(m1, ClipDataset(store_url, "xsub", "train", "rend_diff", None, clip_len=8,
                                          frame_stride=1, size=(32, 32), clips_per_video=2))
    assert k != cache_key(m1, ClipDataset(store_url, "xsub", "train", "rend_diff", "r", clip_len=8, frame_stride=1,
                                          size=(32, 32), clips_per_video=2, video_ids=["train_c0_v0"]))
    m1.set_trainable("head")
    assert k != cache_key(m1, ds)  # other split point


def test_cache_resumes_only_missing_rows(store_url):
    model = build_action_model(3, arch="tiny", seed=7)
    ds = _dataset(store_url, clips_per_video=1)
    cache = build_feature_cache(model, ds, variants=("full",), batch_size=4)
    g = DatasetStore.open(store_url).group["cache"][cache.key]
    ref = g["full"][2].copy()
    g["full"][2] = 0.0
    flags = g["done_full"][...]
    flags[2] = False
    g["done_full"][...] = flags
    calls = []
    build_feature_cache(model, ds, variants=("full",), batch_size=4, progress=lambda a, b: calls.append(b))
    assert calls == [1]
    assert (g["full"][2] == ref).all()
    assert FeatureCache(store_url, cache.key).complete_variants() == ["full", "tokens"]
    with pytest.raises(StoreError, match="lacks complete variants"):
        cache.dataset(("public",))


def test_cache_key_follows_upstream_results_labels_and_weights(tmp_path):
    """A cache never outlives what it was computed from: the key changes when an upstream array
    changes (a recorded stage output, or an array written without a record), when a label
    changes, and when the prefix weights change."""
    import numpy as np

    url = str(tmp_path / "k.zarr")
    make_synthetic_store(url, num_classes=2, videos_per_class={"train": 2}, frames=10, size=(32, 32))
    model = build_action_model(2, arch="tiny", seed=1)
    key = cache_key(model, _dataset(url))
    assert key == cache_key(build_action_model(2, arch="tiny", seed=1), _dataset(url))  # stable
    store = DatasetStore.open(url, mode="r+")
    vid = store.video_ids()[0]
    entry = store.video(vid)
    mask = entry.read("public_mask")
    mask[0, 0, 0] = ~mask[0, 0, 0]
    entry.write_array("public_mask", mask)  # no stage record: the content checksum moves
    key_mask = cache_key(model, _dataset(url))
    assert key_mask != key
    # a stage record's output checksum is what identifies the array when present
    with entry.stage("reintegrate", backend="test", config={}) as w:
        w.write("anonymized", entry.read("anonymized"))
        w.write("public_mask", mask)
    key_rec = cache_key(model, _dataset(url))
    entry.write_array("public_mask", mask)  # same content rewritten: same recorded checksum, same key
    assert cache_key(model, _dataset(url)) == key_rec
    with entry.stage("reintegrate", backend="test", config={"v": 2}) as w:  # a rerun with other masks
        w.write("anonymized", entry.read("anonymized"))
        w.write("public_mask", np.zeros_like(mask))
    assert cache_key(model, _dataset(url)) != key_rec
    # labels
    before = cache_key(model, _dataset(url))
    info = entry.info
    info.label = 1 - int(info.label)
    store.register_videos([info])  # relabelled
    assert cache_key(model, _dataset(url)) != before
    # weights
    assert cache_key(build_action_model(2, arch="tiny", seed=2), _dataset(url)) != cache_key(model, _dataset(url))


def test_float16_cache_halves_the_bytes_and_records_its_rounding(store_url):
    import numpy as np

    model = build_action_model(3, arch="tiny", seed=4)
    ds = _dataset(store_url)
    full = build_feature_cache(model, ds, variants=("full",), batch_size=6)
    half = build_feature_cache(model, ds, variants=("full",), batch_size=6, storage_dtype="float16")
    assert half.key != full.key and half.dtype == "float16"
    err = float(half.attrs["float16_max_rel_error"])
    assert 0 < err < 1e-3  # float16 has 11 significant bits: <= 2**-11 relative, for normal values
    a = np.stack([np.asarray(full.dataset()[i]["features"]) for i in range(len(ds))])
    b = np.stack([np.asarray(half.dataset()[i]["features"]) for i in range(len(ds))])
    big = np.abs(a) >= 1e-3
    assert np.abs(a - b)[big].max() / np.abs(a[big]).max() < 1e-3 and not np.array_equal(a, b)
    with pytest.raises(ValueError, match="storage_dtype"):
        build_feature_cache(model, ds, variants=("full",), storage_dtype="int8")


def test_cache_writes_a_shard_at_a_time_and_resumes_across_shards(store_url, monkeypatch):
    """A write into part of a zarr shard rewrites the whole shard, so the build writes each shard's
    rows in one call (not one call per clip: ~0.3 s per clip and variant at MViTv2-S's feature size),
    stores every row where the per-batch prefix puts it, and resumes rows missing across shards."""
    import numpy as np
    import zarr

    from anonymask.models.training.action import feature_cache as fc

    monkeypatch.setattr(fc, "SHARD_CLIPS", 4)
    model = build_action_model(3, arch="tiny", seed=9)
    ds = _dataset(store_url)  # 12 clips, 3 shards of 4; batches of 5 straddle them
    writes: dict[str, list[tuple[int, int]]] = {}
    real_setitem = zarr.Array.__setitem__

    def counting(self, sel, value):
        if isinstance(sel, slice) and self.ndim == 3:
            writes.setdefault(self.basename, []).append((sel.start, sel.stop))
        return real_setitem(self, sel, value)

    monkeypatch.setattr(zarr.Array, "__setitem__", counting)
    cache = build_feature_cache(model, ds, variants=("full", "private"), batch_size=5)
    assert writes == {"full": [(0, 4), (4, 8), (8, 12)], "private": [(0, 4), (4, 8), (8, 12)]}
    g = DatasetStore.open(store_url).group["cache"][cache.key]
    assert g["full"].shards[0] == 4
    stored = np.asarray(g["full"][...])
    vb = Collate(ds.sample_shapes())([ds[i] for i in range(len(ds))])
    with torch.no_grad():
        want = FrozenPrefix(model)(vb["video"]).numpy()
    np.testing.assert_allclose(stored, want, rtol=1e-5, atol=1e-5)  # each row in its place
    assert all(not np.allclose(stored[i], stored[i + 1]) for i in range(len(ds) - 1))
    # resume: rows 1, 2, 6 and 11 lost (two shards partly, one at its end)
    lost = [1, 2, 6, 11]
    flags = g["done_full"][...]
    flags[lost] = False
    g["done_full"][...] = flags
    for r in lost:
        g["full"][r] = 0.0
    writes.clear()
    build_feature_cache(model, ds, variants=("full", "private"), batch_size=5)
    assert writes == {"full": [(1, 3), (6, 7), (11, 12)]}
    np.testing.assert_array_equal(np.asarray(g["full"][...]), stored)
    assert g["done_full"][...].all()
