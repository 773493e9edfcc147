"""MaskDP-SGD through the one private step: private tokens clipped + noised, public tokens of an
independent public batch clean, both divided by the expected batch size."""

from __future__ import annotations

import pytest
import torch

from anonymask.models.training.privacy.accountant import Accountant
from anonymask.models.training.privacy.clipping import (
    cross_entropy_per_sample,
    summed_grads,
    trainable_params,
)
from anonymask.models.training.privacy.dpsgd import dpsgd_gradients
from anonymask.models.training.privacy.mechanism import (
    Inputs,
    PrivateStep,
    private_token_inputs,
    public_token_inputs,
)


def maskdp(model, x, y, pub, C=1.0, sigma=0.0, eb=8.0, seed=None, public=None, **kw):
    """Parts of one MaskDP step; ``public`` = (x, y, public_tokens) of the public batch (default:
    the same batch, which is what these algebraic tests need; training draws it independently)."""
    gen = torch.Generator().manual_seed(seed) if seed is not None else None
    step = PrivateStep("maskdp", max_grad_norm=C, noise_multiplier=sigma, expected_batch_size=eb, generator=gen, **kw)
    px, py, ppub = public if public is not None else (x, y, pub)
    return step, step.parts(model, trainable_params(model), private_token_inputs(x, y, pub),
                            public_token_inputs(px, py, ppub))  # fmt: skip


def test_all_tokens_private_reduces_to_dpsgd(model, batch):
    x, y = batch
    none_public = torch.zeros(x.shape[0], model.num_tokens, dtype=torch.bool)
    _, parts = maskdp(model, x, y, none_public, 0.3, 1.1, seed=5)
    got = parts.combined(8.0)
    ref = dpsgd_gradients(model, None, x, y, 0.3, 1.1, 8.0, torch.Generator().manual_seed(5))
    for n in ref:
        torch.testing.assert_close(got[n], ref[n], rtol=0, atol=0)
    assert parts.public_count == 0


def test_no_clip_no_noise_all_private_is_the_plain_gradient(model, batch):
    x, y = batch
    none_public = torch.zeros(x.shape[0], model.num_tokens, dtype=torch.bool)
    _, parts = maskdp(model, x, y, none_public, float("inf"))
    plain = summed_grads(model, x, y)
    for n in plain:
        torch.testing.assert_close(parts.combined(8.0)[n], plain[n] / 8.0, rtol=1e-5, atol=1e-7)


def test_no_clip_no_noise_is_private_tokens_of_one_batch_plus_public_tokens_of_another(model, batch, public_tokens):
    """Reference written out sample by sample: the private loss on each private sample's private
    tokens (if any) plus the public loss on each PUBLIC-batch sample's public tokens (if any)."""
    x, y = batch
    px, py, ppub = x.flip(0) * 0.7, y.flip(0), public_tokens.roll(2, 0)
    _, parts = maskdp(model, x, y, public_tokens, float("inf"), public=(px, py, ppub))
    got = parts.combined(8.0)
    model.zero_grad()
    total = 0.0
    for i in range(x.shape[0]):
        if (~public_tokens[i]).any():
            total = total + cross_entropy_per_sample(model(x[i : i + 1], token_keep=~public_tokens[i : i + 1]), y[i : i + 1]).sum()
        if ppub[i].any():
            total = total + cross_entropy_per_sample(model(px[i : i + 1], token_keep=ppub[i : i + 1]), py[i : i + 1]).sum()
    (total / 8.0).backward()
    for n, p in trainable_params(model).items():
        torch.testing.assert_close(got[n], p.grad, rtol=1e-5, atol=1e-7)


def test_public_term_is_divided_by_the_expected_public_batch_size(model, batch, public_tokens):
    x, y = batch
    _, a = maskdp(model, x, y, public_tokens, 1.0)
    step, b = maskdp(model, x, y, public_tokens, 1.0, expected_public_batch_size=4.0)
    for n in a.public_sum:
        torch.testing.assert_close(b.combined(8.0, 4.0)[n] - a.combined(8.0)[n], a.public_sum[n] / 8.0)
    assert step.expected_public_batch_size == 4.0


def test_samples_without_public_or_private_tokens_contribute_zero(model, batch, public_tokens):
    x, y = batch
    _, parts = maskdp(model, x, y, public_tokens)
    # Sample 0 has no public token: it never enters the public pass.
    _, without0 = maskdp(model, x[1:], y[1:], public_tokens[1:])
    assert parts.public_count == 5 and without0.public_count == 5
    for n in parts.public_sum:
        torch.testing.assert_close(parts.public_sum[n], without0.public_sum[n], rtol=1e-6, atol=1e-7)
    # Sample 1 has no private token: zero weight, private sum unchanged without it.
    assert parts.private_norms[1] == 0
    keep = [0, 2, 3, 4, 5]
    _, without1 = maskdp(model, x[keep], y[keep], public_tokens[keep])
    for n in parts.private_sum:
        torch.testing.assert_close(parts.private_sum[n], without1.private_sum[n], rtol=1e-6, atol=1e-7)


def test_step_accounts_every_call_empty_batches_included(model, batch, public_tokens):
    x, y = batch
    ledger = Accountant("rdp", "replace")
    step = PrivateStep("maskdp", max_grad_norm=1.0, noise_multiplier=1.0, expected_batch_size=8.0,
                       accountant=ledger, sample_rate=0.002)  # fmt: skip
    params = trainable_params(model)
    step(model, params, private_token_inputs(x, y, public_tokens), public_token_inputs(x, y, public_tokens))
    g = step(model, params, private_token_inputs(x[:0], y[:0], public_tokens[:0]),
             public_token_inputs(x[:0], y[:0], public_tokens[:0]))  # fmt: skip
    assert ledger.history == [(0.002, 1.0, 2)] and ledger.adjacency == "replace"
    assert any(torch.count_nonzero(v) for v in g.values())  # the empty step is noise, not nothing
    with pytest.raises(ValueError, match="accountant needs the sampling rate"):
        PrivateStep("maskdp", max_grad_norm=1.0, noise_multiplier=1.0, expected_batch_size=8.0, accountant=ledger)


def test_public_batch_is_required_and_only_where_a_public_term_exists(model, batch, public_tokens):
    x, y = batch
    params = trainable_params(model)
    step = PrivateStep("maskdp", max_grad_norm=1.0, noise_multiplier=1.0, expected_batch_size=8.0)
    with pytest.raises(ValueError, match="needs a public batch"):
        step(model, params, private_token_inputs(x, y, public_tokens))
    dp = PrivateStep("dpsgd", max_grad_norm=1.0, noise_multiplier=1.0, expected_batch_size=8.0)
    with pytest.raises(ValueError, match="no public term"):
        dp(model, params, Inputs(x, y), Inputs(x, y))


def test_rejects_bad_masks(model, batch):
    x, y = batch
    with pytest.raises(TypeError):
        private_token_inputs(x, y, torch.zeros(6, model.num_tokens))
    with pytest.raises(ValueError):
        public_token_inputs(x, y, torch.zeros(5, model.num_tokens, dtype=torch.bool))
    with pytest.raises(ValueError, match="labels"):
        Inputs(x, y[:3])
