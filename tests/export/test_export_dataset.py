"""The dataset API (anonymask/data.py, issue 30 item 3): clips straight from Zarr chunks, variants,
masks r and q, labels, the stream, the per-video Poisson sampler, and the export-folder reader."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from anonymask.core.errors import DatasetError
from anonymask.data import (
    ExportClips,
    StoreClips,
    StoreClipStream,
    clip_starts_every,
    dp_batch_sampler,
    dp_collate,
)
from anonymask.storage.export import ExportOptions, export_store
from anonymask.storage.store import DatasetStore


def test_clip_positions():
    assert clip_starts_every(8, 4, 1, 4) == [0, 4]
    assert clip_starts_every(8, 4, 1, 2) == [0, 2, 4]
    assert clip_starts_every(8, 3, 2, 1) == [0, 1, 2, 3]  # span 5
    assert clip_starts_every(3, 4, 2, 1) == [0]  # shorter than one clip: one clip


def test_store_clips_read_the_stored_frames_masks_and_labels(audio_store):
    url, _ = audio_store
    ds = StoreClips(url, "rend_diff", clip_len=4, frame_stride=2, clip_stride=1)
    store = DatasetStore.open(url, mode="r")
    assert len(ds) == 3 * len(clip_starts_every(8, 4, 2, 1)) and ds.skipped == {}
    for i in (0, len(ds) - 1):
        item = ds[i]
        e = store.video(item["video_id"])
        idx = item["start"] + np.arange(4) * 2
        assert item["video"].shape == (3, 4, 48, 64) and item["video"].dtype == torch.float32
        want = torch.from_numpy(e.read("anonymized")[idx]).permute(3, 0, 1, 2).float() / 255
        torch.testing.assert_close(item["video"], want, rtol=0, atol=0)
        np.testing.assert_array_equal(item["r"].numpy(), e.read("public_mask")[idx].astype(bool))
        np.testing.assert_allclose(item["q"].numpy(), e.read("person_mask")[idx] / 255.0, rtol=0, atol=1e-7)
        assert item["label"] == e.info.label
    raw8 = StoreClips(url, "rend_diff", clip_len=4, frame_stride=2, clip_stride=1, uint8=True)[len(ds) - 1]
    assert raw8["video"].dtype == torch.uint8 and raw8["video"].shape == (3, 4, 48, 64)
    torch.testing.assert_close(raw8["video"], (want * 255).round().to(torch.uint8), rtol=0, atol=0)
    render = StoreClips(url, "render", clip_len=2, clip_stride=8)
    it = render[0]
    e = store.video(it["video_id"])
    np.testing.assert_array_equal(it["r"].numpy(), e.read("render/mask")[:2].astype(bool))
    real = StoreClips(url, "real", clip_len=2, clip_stride=8)
    assert not real[0]["r"].any()  # the raw video has no synthetic pixel


def test_resized_r_is_conservative(store_copy):
    url, _ = store_copy
    e = DatasetStore.open(url).video("s01_a01_r01")
    r = np.zeros((8, 48, 64), bool)
    r[:, 10:31, 7:40] = True  # odd edges: half-covered output pixels must come out private
    r[:, 20, 20] = r[:, 14, 31] = False  # one private pixel: its 3/4-public block is private too
    e.write_array("public_mask", r)
    ds = StoreClips(url, "rend_diff", clip_len=8, size=(24, 32), videos=["s01_a01_r01"])
    it = ds[0]
    assert it["video"].shape == (3, 8, 24, 32) and it["q"].shape == (8, 24, 32)
    block_all_public = r.reshape(8, 24, 2, 32, 2).all(axis=(2, 4))
    got = it["r"].numpy()
    assert got.sum() > 0.5 * block_all_public.sum() and not (got & ~block_all_public).any()


def test_only_done_videos_by_default_for_the_render_variants(store_copy):
    url, _ = store_copy
    store = DatasetStore.open(url)
    bad = store.video_ids()[0]
    e = store.video(bad)
    e.write_record("audit", dict(e.record("audit"), status="failed", error="AuditError: a face"))
    ds = StoreClips(url, "rend_diff", clip_len=8)
    assert bad not in ds.record_ids() and "not done" in ds.skipped[bad]
    assert bad in StoreClips(url, "real", clip_len=8).record_ids()  # your own raw video: yours
    with pytest.raises(DatasetError):
        StoreClips(url, "rend_diff", videos=[bad])


def test_stream_gives_the_same_clips_video_by_video(audio_store):
    url, _ = audio_store
    kw = dict(clip_len=4, clip_stride=2)
    ref = {(it["video_id"], it["start"]) for it in StoreClips(url, **kw)}
    stream = StoreClipStream(url, shuffle=True, seed=3, **kw)
    got = [(it["video_id"], it["start"]) for it in stream]
    assert set(got) == ref and len(got) == len(ref)
    runs = [v for k, (v, _) in enumerate(got) if k == 0 or got[k - 1][0] != v]
    assert len(runs) == len(set(runs)) == 3  # all clips of a video together
    assert got == [(it["video_id"], it["start"]) for it in stream]  # same epoch, same order
    orders = set()
    for epoch in range(6):
        stream.set_epoch(epoch)
        orders.add(tuple(it["video_id"] for it in stream if it["start"] == 0))
    assert len(orders) > 1  # shuffled per epoch


def test_dp_sampler_draws_videos_one_clip_each_and_allows_empty_batches(audio_store):
    url, _ = audio_store
    ds = StoreClips(url, clip_len=2, clip_stride=1)
    sampler = dp_batch_sampler(ds, 0.5, steps=40, seed=0)
    assert sampler.num_samples == 3 and sampler.expected_batch_size == 1.5
    loader = DataLoader(ds, batch_sampler=sampler, collate_fn=dp_collate(ds))
    sizes = []
    for batch in loader:
        sizes.append(batch["video"].shape[0])
        assert len(set(batch["video_id"][: sizes[-1]])) == sizes[-1]  # at most one clip per video
        assert batch["video"].shape[1:] == (3, 2, 48, 64)
    assert 0 in sizes and max(sizes) <= 3 and len(sizes) == 40


def test_export_clips_decode_to_the_store_clips(audio_store, tmp_path):
    url, _ = audio_store
    export_store(url, tmp_path / "out", ExportOptions(lossless=True))
    a = StoreClips(url, clip_len=4, frame_stride=2, clip_stride=3, masks=False)
    b = ExportClips(tmp_path / "out", clip_len=4, frame_stride=2, clip_stride=3)
    assert len(a) == len(b) and a.record_ids() == b.record_ids()
    for i in range(len(a)):
        x, y = a[i], b[i]
        assert (x["video_id"], x["start"], x["label"]) == (y["video_id"], y["start"], y["label"])
        torch.testing.assert_close(x["video"], y["video"], rtol=0, atol=0)
    a8 = StoreClips(url, clip_len=4, clip_stride=3, masks=False, uint8=True, size=(24, 32))
    b8 = ExportClips(tmp_path / "out", clip_len=4, clip_stride=3, uint8=True, size=(24, 32))
    torch.testing.assert_close(a8[1]["video"], b8[1]["video"], rtol=0, atol=0)
    assert a8[1]["video"].dtype == torch.uint8 and a8[1]["video"].shape == (3, 4, 24, 32)


def test_opacus_one_liner_accounts_videos_at_the_sampled_rate(audio_store):
    opacus = pytest.importorskip("opacus")
    from anonymask.data import opacus_private

    url, _ = audio_store
    ds = StoreClips(url, clip_len=2, clip_stride=2, size=(8, 8), masks=False)
    assert len(ds) > 3  # several clips per video: a record is a video, not a clip
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 2 * 8 * 8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    engine = opacus.PrivacyEngine(accountant="rdp")
    model, opt, loader = opacus_private(engine, model, opt, ds, sample_rate=0.5, noise_multiplier=1.0,
                                        max_grad_norm=1.0, seed=0, loss_reduction="sum")
    assert opt.expected_batch_size == 1.5  # q x 3 videos (Opacus alone: int(clips / steps))
    sizes = []
    for _ in range(10):  # epochs
        for batch in loader:  # an empty batch is a step too: noise, and the accountant counts it
            sizes.append(len(batch["label"]))
            opt.zero_grad()
            out = model(batch["video"])
            torch.nn.functional.cross_entropy(out, batch["label"].clamp(min=0), reduction="sum").backward()
            opt.step()
    assert len(sizes) == 20 and all(n <= 3 for n in sizes) and 0 in sizes
    assert engine.accountant.history == [(1.0, 0.5, 20)]  # every step, at the rate sampled
