"""Per-sample gradients, flat clipping and Gaussian noise."""

from __future__ import annotations

import math

import pytest
import torch

from anonymask.models.training.privacy import clipping as clip
from anonymask.models.training.privacy.toy import tiny_model_factory


def _loop_grads(model, x, y, keep=None):
    out = {}
    for i in range(x.shape[0]):
        model.zero_grad()
        k = None if keep is None else keep[i : i + 1]
        clip.cross_entropy_per_sample(model(x[i : i + 1], token_keep=k), y[i : i + 1]).sum().backward()
        for n, p in model.named_parameters():
            out.setdefault(n, []).append(p.grad.detach().clone())
    return {n: torch.stack(v) for n, v in out.items()}


def test_per_sample_grads_match_one_backward_per_sample(model, batch, public_tokens):
    x, y = batch
    keep = ~public_tokens
    got = clip.per_sample_grads(model, x, y, token_keep=keep)
    ref = _loop_grads(model, x, y, keep)
    assert set(got) == set(ref)
    for n in ref:
        torch.testing.assert_close(got[n], ref[n], rtol=1e-5, atol=1e-6)


def test_only_trainable_parameters_and_sum_matches_autograd(batch):
    model = tiny_model_factory(0)
    model.patch_embed.requires_grad_(False)
    x, y = batch
    per = clip.per_sample_grads(model, x, y, chunk_size=4)
    assert not any(n.startswith("patch_embed") for n in per)
    total = clip.summed_grads(model, x, y)
    for n in per:
        torch.testing.assert_close(per[n].sum(0), total[n], rtol=1e-5, atol=1e-6)
    assert all(p.grad is None for p in model.parameters())  # nothing written into .grad


def test_clipping_bounds_every_norm_and_keeps_direction(model, batch):
    x, y = batch
    per = clip.per_sample_grads(model, x, y)
    norms = clip.per_sample_norms(per)
    c = float(norms.median())  # some samples above, some below
    clipped, reported = clip.clip_per_sample(per, c)
    torch.testing.assert_close(reported, norms)
    after = clip.per_sample_norms(clipped)
    assert torch.all(after <= c + 1e-6)
    big = norms > c
    assert big.any() and (~big).any()
    torch.testing.assert_close(after[big], torch.full_like(after[big], c), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(after[~big], norms[~big], rtol=1e-5, atol=1e-7)  # min(1, .) keeps small ones
    flat_before, flat_after = clip.flatten(per, batched=True), clip.flatten(clipped, batched=True)
    cos = torch.nn.functional.cosine_similarity(flat_before, flat_after, dim=1)
    torch.testing.assert_close(cos, torch.ones_like(cos))
    unchanged, _ = clip.clip_per_sample(per, math.inf)
    for n in per:
        assert torch.equal(unchanged[n], per[n])


def test_noise_std_and_generator():
    ref = {"a": torch.zeros(200, 50), "b": torch.zeros(3000)}
    draws = torch.cat([clip.flatten(clip.gaussian_noise_like(ref, 0.7, torch.Generator().manual_seed(s))) for s in range(5)])
    assert draws.std().item() == pytest.approx(0.7, rel=0.01)
    assert abs(draws.mean().item()) < 4 * 0.7 / math.sqrt(draws.numel())
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert torch.equal(clip.gaussian_noise_like(ref["a"], 1.0, g1), clip.gaussian_noise_like(ref["a"], 1.0, g2))
    assert torch.equal(clip.gaussian_noise_like(ref["a"], 0.0), ref["a"])


def test_empty_batch_and_flatten_roundtrip(model, batch):
    x, y = batch
    per = clip.per_sample_grads(model, x[:0], y[:0])
    assert all(g.shape[0] == 0 for g in per.values())
    clipped, norms = clip.clip_per_sample(per, 1.0)
    assert norms.shape == (0,)
    summed = clip.sum_over_batch(clipped)
    assert all(torch.count_nonzero(g) == 0 for g in summed.values())
    flat = clip.flatten(summed)
    back = clip.unflatten(flat + 1, summed)
    assert all(torch.equal(back[n], summed[n] + 1) for n in summed)
    with pytest.raises(ValueError):
        clip.unflatten(flat[:-1], summed)
