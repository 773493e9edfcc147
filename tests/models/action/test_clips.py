"""ClipDataset: variants, masks, conservative resizing, deterministic clips, spawn workers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from anonymask.core.errors import DatasetError
from anonymask.models.training.action.clips import (
    KINETICS_MEAN,
    KINETICS_STD,
    ClipDataset,
    Collate,
    clip_starts,
    make_loader,
    resize_clip,
)
from anonymask.models.training.action.synthetic import make_synthetic_store
from anonymask.storage.store import DatasetStore


@pytest.fixture(scope="module")
def store_url(tmp_path_factory):
    url = str(tmp_path_factory.mktemp("clips") / "syn.zarr")
    make_synthetic_store(url, num_classes=2, videos_per_class={"train": 2, "test": 1}, frames=20, size=(24, 28))
    return url


def test_variants_read_their_arrays_at_fixed_positions(store_url):
    store = DatasetStore.open(store_url, mode="r")
    for variant, name in [("real", "raw"), ("render", "merged"), ("rend_diff", "anonymized")]:
        ds = ClipDataset(store_url, "xsub", "train", variant, None, clip_len=4, frame_stride=3,
                         size=(24, 28), clips_per_video=2, normalize=False)
        assert len(ds) == 2 * 2 * 2
        s = ds[3]
        vid, ci = s["video_id"], s["clip_index"]
        start = clip_starts(20, 4, 3, 2)[ci]
        raw = store.video(vid).read(name)[start : start + 10 : 3]
        want = torch.from_numpy(raw).permute(3, 0, 1, 2).float() / 255
        assert s["video"].shape == (3, 4, 24, 28) and s["video"].dtype == torch.float32
        torch.testing.assert_close(s["video"], want)
        assert s["label"] == store.video(vid).info.label
        assert not s["pixel_public"].any()  # mask_source None: nothing public
    assert clip_starts(20, 4, 3, 2) == [3, 8]
    assert clip_starts(5, 4, 3, 3) == [0, 0, 0]


def test_normalisation_uses_kinetics_statistics(store_url):
    a = ClipDataset(store_url, "xsub", "test", "render", None, clip_len=2, size=(24, 28), normalize=False)[0]
    b = ClipDataset(store_url, "xsub", "test", "render", None, clip_len=2, size=(24, 28))[0]
    mean = torch.tensor(KINETICS_MEAN).view(3, 1, 1, 1)
    std = torch.tensor(KINETICS_STD).view(3, 1, 1, 1)
    torch.testing.assert_close(b["video"], (a["video"] - mean) / std)


def test_a_clip_at_the_model_size_is_bit_identical_to_the_reference_arithmetic(store_url):
    """The no-resize path (one float copy into (3,T,H,W), in-place arithmetic) gives exactly the
    values of the general path: uint8 / 255, minus the Kinetics mean, divided by its std."""
    ds = ClipDataset(store_url, "xsub", "train", "render", "r", clip_len=4, frame_stride=2, size=(24, 28))
    for i in (0, 3):
        s = ds[i]
        vid, _, start, frames = ds.clips[i]
        raw, private = ds.read_clip(vid, start, frames)
        v = torch.from_numpy(raw).permute(0, 3, 1, 2).float().div_(255.0)
        v = (v - torch.tensor(KINETICS_MEAN).view(1, 3, 1, 1)) / torch.tensor(KINETICS_STD).view(1, 3, 1, 1)
        assert s["video"].is_contiguous() and s["video"].shape == (3, 4, 24, 28)
        assert torch.equal(s["video"], v.permute(1, 0, 2, 3))
        assert torch.equal(s["pixel_public"], ~torch.from_numpy(private))


def test_mask_sources(store_url):
    store = DatasetStore.open(store_url, mode="r")
    r = ClipDataset(store_url, "xsub", "train", "rend_diff", "r", clip_len=3, frame_stride=1, size=(24, 28))
    q = ClipDataset(store_url, "xsub", "train", "real", "q", clip_len=3, frame_stride=1, size=(24, 28))
    sr, sq = r[0], q[0]
    entry = store.video(sr["video_id"])
    start = clip_starts(20, 3, 1, 1)[0]
    assert torch.equal(sr["pixel_public"], torch.from_numpy(entry.read("public_mask")[start : start + 3]))
    person = entry.read("person_mask")[start : start + 3]
    assert torch.equal(sq["pixel_public"], torch.from_numpy(person > 0))
    # Real* (the paper's row): the person region q > 0, which contains the avatar region, is public
    assert torch.equal(sq["pixel_public"] | sr["pixel_public"], sq["pixel_public"])
    assert 0 < sq["pixel_public"].float().mean() < 0.5
    with pytest.raises(ValueError, match="no synthetic pixels"):
        ClipDataset(store_url, "xsub", "train", "real", "r")
    with pytest.raises(ValueError, match="variant 'real' only"):  # q on a render variant: real background public
        ClipDataset(store_url, "xsub", "train", "render", "q")


def test_resize_keeps_masks_conservative():
    g = torch.Generator().manual_seed(0)
    for size in [(10, 13), (40, 50)]:
        video = torch.rand(3, 3, 24, 28, generator=g)
        private = torch.zeros(3, 24, 28, dtype=torch.bool)
        private[:, 5:12, 7:15] = True
        private[1, 20, 3] = True
        v1, p1 = resize_clip(video, private, size)
        changed = video.clone()
        changed[private[:, None].expand_as(video)] = torch.rand(int(private.sum()) * 3, generator=g)
        v2, p2 = resize_clip(changed, private, size)
        assert torch.equal(p1, p2) and p1.shape == (3, *size)
        public = ~p1[:, None].expand_as(v1)
        assert torch.equal(v1[public], v2[public])  # public output pixels never see a private pixel
        assert not torch.allclose(v1[~public], v2[~public])
        assert public.float().mean() > 0.4  # not trivially all-private


def test_split_filter_skips_and_errors(tmp_path, store_url):
    test = ClipDataset(store_url, "xsub", "test", "render", "r", clip_len=2, size=(24, 28))
    assert {s.split("_")[0] for s, *_ in test.clips} == {"test"}
    assert test.num_classes == 2 and test.class_names == ["action0", "action1"]
    with pytest.raises(DatasetError, match="no usable videos"):
        ClipDataset(store_url, "xview", "train", "render", "r")
    url = str(tmp_path / "partial.zarr")
    make_synthetic_store(url, num_classes=1, videos_per_class={"train": 2}, frames=4, size=(8, 8))
    DatasetStore.open(url).video("train_c0_v1").group.__delitem__("anonymized")
    ds = ClipDataset(url, "xsub", "train", "rend_diff", "r", clip_len=2, size=(8, 8))
    assert ds.skipped == {"train_c0_v1": "no array 'anonymized'"} and len(ds) == 1


def test_short_video_repeats_last_frame(store_url):
    ds = ClipDataset(store_url, "xsub", "test", "render", None, clip_len=8, frame_stride=4, size=(24, 28),
                     normalize=False)
    s = ds[0]
    assert torch.equal(s["video"][:, -1], s["video"][:, -2])  # frames 19, 19 (clamped)


def test_collate_handles_empty_batches(store_url):
    ds = ClipDataset(store_url, "xsub", "test", "render", "r", clip_len=2, size=(16, 16))
    batch = Collate(ds.sample_shapes())([])
    assert batch["video"].shape == (0, 3, 2, 16, 16) and batch["pixel_public"].dtype == torch.bool
    assert batch["label"].shape == (0,) and batch["video_id"] == []
    full = Collate(ds.sample_shapes())([ds[0], ds[1]])
    assert full["video"].shape == (2, 3, 2, 16, 16) and full["label"].dtype == torch.int64


def test_spawn_workers_return_the_same_data_as_the_main_process(store_url):
    ds = ClipDataset(store_url, "xsub", "train", "rend_diff", "r", clip_len=2, size=(16, 16))
    ds[0]  # opens handles in this process; they must not travel to the workers
    assert ds._arrays
    main = list(make_loader(ds, batch_size=3, num_workers=0))
    spawned = list(make_loader(ds, batch_size=3, num_workers=2))
    assert len(main) == len(spawned) == 2
    for a, b in zip(main, spawned):
        assert a["video_id"] == b["video_id"]
        assert torch.equal(a["video"], b["video"]) and torch.equal(a["pixel_public"], b["pixel_public"])
        assert torch.equal(a["label"], b["label"])
    assert np.isfinite(main[0]["video"].numpy()).all()
