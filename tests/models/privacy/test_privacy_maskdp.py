"""MaskDP-SGD: private tokens clipped + noised, public tokens clean, divided by q*N."""

from __future__ import annotations

import pytest
import torch

from anonymask.models.privacy.accountant import Accountant
from anonymask.models.privacy.clipping import cross_entropy_per_sample, summed_grads, trainable_params
from anonymask.models.privacy.dpsgd import dpsgd_gradients
from anonymask.models.privacy.maskdp import MaskDPOptimizerStep, maskdp_gradients, maskdp_parts
from anonymask.models.privacy.toy import tiny_model_factory


def test_all_tokens_private_reduces_to_dpsgd(model, batch):
    x, y = batch
    none_public = torch.zeros(x.shape[0], model.num_tokens, dtype=torch.bool)
    got = maskdp_gradients(model, None, x, y, none_public, 0.3, 1.1, 8.0, torch.Generator().manual_seed(5))
    ref = dpsgd_gradients(model, None, x, y, 0.3, 1.1, 8.0, torch.Generator().manual_seed(5))
    for n in ref:
        torch.testing.assert_close(got[n], ref[n], rtol=0, atol=0)


def test_no_clip_no_noise_all_private_is_the_plain_gradient(model, batch):
    x, y = batch
    none_public = torch.zeros(x.shape[0], model.num_tokens, dtype=torch.bool)
    got = maskdp_gradients(model, None, x, y, none_public, float("inf"), 0.0, 8.0)
    plain = summed_grads(model, x, y)
    for n in plain:
        torch.testing.assert_close(got[n], plain[n] / 8.0, rtol=1e-5, atol=1e-7)


def test_no_clip_no_noise_mixed_is_the_gradient_of_both_masked_losses(model, batch, public_tokens):
    """Reference written out sample by sample: private loss on private tokens (if any) plus
    public loss on public tokens (if any), summed, over the expected batch size."""
    x, y = batch
    got = maskdp_gradients(model, None, x, y, public_tokens, float("inf"), 0.0, 8.0)
    model.zero_grad()
    total = 0.0
    for i in range(x.shape[0]):
        pub = public_tokens[i : i + 1]
        if (~pub).any():
            total = total + cross_entropy_per_sample(model(x[i : i + 1], token_keep=~pub), y[i : i + 1]).sum()
        if pub.any():
            total = total + cross_entropy_per_sample(model(x[i : i + 1], token_keep=pub), y[i : i + 1]).sum()
    (total / 8.0).backward()
    for n, p in trainable_params(model).items():
        torch.testing.assert_close(got[n], p.grad, rtol=1e-5, atol=1e-7)


def test_samples_without_public_or_private_tokens_contribute_zero(model, batch, public_tokens):
    x, y = batch
    parts = maskdp_parts(model, None, x, y, public_tokens, 1.0, 0.0)
    # Sample 0 has no public token: dropping it leaves the public sum unchanged.
    without0 = maskdp_parts(model, None, x[1:], y[1:], public_tokens[1:], 1.0, 0.0)
    for n in parts.public_sum:
        torch.testing.assert_close(parts.public_sum[n], without0.public_sum[n], rtol=1e-6, atol=1e-7)
    # Sample 1 has no private token: zero private norm, private sum unchanged without it.
    assert parts.private_norms[1] == 0
    keep = [0, 2, 3, 4, 5]
    without1 = maskdp_parts(model, None, x[keep], y[keep], public_tokens[keep], 1.0, 0.0)
    for n in parts.private_sum:
        torch.testing.assert_close(parts.private_sum[n], without1.private_sum[n], rtol=1e-6, atol=1e-7)


def test_optimizer_step_writes_grads_steps_and_accounts(batch, public_tokens):
    x, y = batch
    model, twin = tiny_model_factory(0), tiny_model_factory(0)
    ledger = Accountant("rdp")
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    stepper = MaskDPOptimizerStep(
        model, opt, 1.0, 1.0, 8.0, torch.Generator().manual_seed(3), accountant=ledger, sample_rate=0.002
    )
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    stepper.step(x, y, public_tokens)
    ref = maskdp_gradients(twin, None, x, y, public_tokens, 1.0, 1.0, 8.0, torch.Generator().manual_seed(3))
    for n, p in model.named_parameters():
        torch.testing.assert_close(before[n] - p.detach(), 0.5 * ref[n], rtol=1e-5, atol=1e-7)
    stepper.step(x[:0], y[:0], public_tokens[:0])  # empty Poisson batch: still a step
    assert ledger.history == [(0.002, 1.0, 2)]


def test_rejects_bad_masks(model, batch):
    x, y = batch
    with pytest.raises(TypeError):
        maskdp_gradients(model, None, x, y, torch.zeros(6, model.num_tokens), 1.0, 1.0, 8.0)
    with pytest.raises(ValueError):
        maskdp_gradients(model, None, x, y, torch.zeros(5, model.num_tokens, dtype=torch.bool), 1.0, 1.0, 8.0)
