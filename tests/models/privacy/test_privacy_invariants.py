"""DESIGN.md privacy invariants 1-5 and 8, pinned on the tiny token model (6 and 9 live in
test_privacy_accountant.py / test_privacy_report.py).

The real token masks come from the action model (models/training/action); here invariant 1 is pinned on
the reference implementation in toy.py, and invariants 2-5 on the one private step
(models/training/privacy/mechanism.py). Invariant 8 is pinned here as the attack it prevents (a membership
test on the update) and, through the trainers' own samplers, in tests/models/action and hpe."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from anonymask.models.training.privacy.clipping import (
    clip_per_sample,
    flatten,
    per_sample_grads,
    per_sample_norms,
    summed_grads,
)
from anonymask.models.training.privacy.dpsgd import dpsgd_gradients
from anonymask.models.training.privacy.mechanism import (
    Inputs,
    PrivateStep,
    private_token_inputs,
    public_token_inputs,
)
from anonymask.models.training.privacy.sampler import PoissonBatchSampler


def maskdp_parts(model, x, y, public_tokens, C, sigma, generator=None):
    """One MaskDP step whose public batch is the same records (the algebra under test here)."""
    step = PrivateStep("maskdp", max_grad_norm=C, noise_multiplier=sigma, expected_batch_size=8.0, generator=generator)
    return step.parts(model, dict(model.named_parameters()), private_token_inputs(x, y, public_tokens),
                      public_token_inputs(x, y, public_tokens))  # fmt: skip


def fpdp_parts(model, x, y, C, sigma, subspace_x, subspace_y, k=8, refresh=5, generator=None, step=None):
    step = step or PrivateStep("fpdp", max_grad_norm=C, noise_multiplier=sigma, expected_batch_size=8.0,
                               generator=generator, subspace_k=k, subspace_refresh=refresh)  # fmt: skip
    parts = step.parts(model, dict(model.named_parameters()), Inputs(x, y), Inputs(x * 0.5, y),
                       Inputs(subspace_x, subspace_y))  # fmt: skip
    return step, parts


def _private_pixels(model, public_tokens):
    """(B, 1, T, H, W) bool: pixels NOT covered by a public token's patch (non-overlapping patches)."""
    pt, ph, pw = model.patch
    gt, gh, gw = model.grid
    b = public_tokens.shape[0]
    grid = public_tokens.reshape(b, gt, gh, gw)
    pixels = grid.repeat_interleave(pt, 1).repeat_interleave(ph, 2).repeat_interleave(pw, 3)
    return (~pixels).unsqueeze(1)


# -- 1. A public token never contains a real pixel -----------------------------------------------
def test_invariant_1_token_public_iff_whole_patch_synthetic(model):
    gen = torch.Generator().manual_seed(0)
    synthetic = torch.ones(2, 4, 16, 16, dtype=torch.bool)
    synthetic[0, :2, :4, :4] = torch.rand(2, 4, 4, generator=gen) < 0.9  # token 0 of sample 0: mixed
    synthetic[0, 0, 0, 0] = False  # make sure at least one real pixel
    synthetic[1, 3, 15, 15] = False  # one real pixel in the last token of sample 1
    public = model.tokens_from_pixel_mask(synthetic)
    assert public.shape == (2, model.num_tokens)
    assert not public[0, 0] and public[0, 1:].all()
    assert not public[1, -1] and public[1, :-1].all()
    # Every public token's patch is entirely synthetic.
    covered = ~_private_pixels(model, public).squeeze(1)
    assert torch.all(synthetic[covered])


# -- 2. The public gradient does not change when private pixels change ---------------------------
def test_invariant_2_public_gradient_bit_identical_under_private_pixel_changes(model, batch, public_tokens):
    x, y = batch
    private = _private_pixels(model, public_tokens).expand_as(x)
    gen = torch.Generator().manual_seed(9)
    x2 = torch.where(private, 1e3 * torch.randn(x.shape, generator=gen), x)
    assert not torch.equal(x, x2)
    a = maskdp_parts(model, x, y, public_tokens, 1.0, 1.0, torch.Generator().manual_seed(0))
    b = maskdp_parts(model, x2, y, public_tokens, 1.0, 1.0, torch.Generator().manual_seed(0))
    for n in a.public_sum:  # patch embedding included: it is trained in the toy model
        assert torch.equal(a.public_sum[n], b.public_sum[n]), n
    # ... while the private part does see the change (so the test can fail).
    assert any(not torch.equal(a.private_sum[n], b.private_sum[n]) for n in a.private_sum)


# -- 3. Clipped private per-sample norms <= C; noise std = sigma*C -------------------------------
@pytest.mark.parametrize("mode", ["dpsgd", "maskdp"])
def test_invariant_3_clipped_norms_bounded(model, batch, public_tokens, mode):
    x, y = batch
    keep = None if mode == "dpsgd" else ~public_tokens
    per = per_sample_grads(model, x, y, token_keep=keep)
    norms = per_sample_norms(per)
    c = 0.5 * float(norms[norms > 0].min())  # every non-empty sample must be clipped
    clipped, _ = clip_per_sample(per, c)
    assert torch.all(per_sample_norms(clipped) <= c + 1e-6)
    # The summed private release without noise is the sum of those clipped gradients.
    parts = maskdp_parts(model, x, y, torch.zeros_like(public_tokens) if keep is None else public_tokens, c, 0.0)
    summed = flatten(parts.private_sum)
    assert summed.norm() <= x.shape[0] * c + 1e-5
    ref = flatten({n: g.sum(0) for n, g in clipped.items()})
    if mode == "maskdp":  # samples without private tokens carry weight 0 in MaskDP
        ref = flatten({n: (g * (~public_tokens).any(1).view(-1, *[1] * (g.dim() - 1))).sum(0) for n, g in clipped.items()})
    torch.testing.assert_close(summed, ref, rtol=1e-5, atol=1e-7)


def _noise_draws(mode, model, x, y, public_tokens, c, sigma, seeds):
    """Released gradient * expected batch size with a zero data gradient, for each seed."""
    out = []
    for s in seeds:
        gen = torch.Generator().manual_seed(s)
        if mode == "dpsgd":  # empty Poisson batch: nothing but noise
            g = dpsgd_gradients(model, None, x[:0], y[:0], c, sigma, 8.0, gen)
        elif mode == "maskdp":  # every token public: zero private gradient, subtract the clean part
            parts = maskdp_parts(model, x, y, torch.ones_like(public_tokens), c, sigma, gen)
            assert all(torch.count_nonzero(v) == 0 for v in parts.private_sum.values())
            g = {n: (parts.combined(8.0)[n] - parts.public_sum[n] / 8.0) for n in parts.noise}
        else:  # FP-DP noise before projection, on an empty batch
            _, parts = fpdp_parts(model, x[:0], y[:0], c, sigma, x[:2], y[:2], k=2, refresh=10, generator=gen)
            g = {n: v / 8.0 for n, v in parts.noise.items()}
        out.append(8.0 * flatten(g))
    return torch.stack(out)


@pytest.mark.parametrize("mode", ["dpsgd", "maskdp", "fpdp"])
def test_invariant_3_noise_std_is_sigma_times_c(model, batch, public_tokens, mode):
    x, y = batch
    c, sigma = 0.7, 1.9
    draws = _noise_draws(mode, model, x, y, public_tokens, c, sigma, seeds=range(8)).double()
    n = draws.numel()
    assert draws.std().item() == pytest.approx(sigma * c, rel=4 * math.sqrt(1 / (2 * n)) + 1e-3)
    assert abs(draws.mean().item()) < 4 * sigma * c / math.sqrt(n)
    # Gaussian, fresh per step, not a function of the seed's first draw only.
    assert stats.kstest((draws / (sigma * c)).flatten().numpy(), "norm").pvalue > 1e-3
    corr = np.corrcoef(draws.numpy())[np.triu_indices(draws.shape[0], 1)]
    assert np.abs(corr).max() < 0.1
    # The same seed gives the same noise (reproducible audits), independent of the data.
    again = _noise_draws(mode, model, -x, y, public_tokens, c, sigma, seeds=[0])
    torch.testing.assert_close(again[0], draws[0].float(), rtol=1e-5, atol=1e-6)


# -- 4. Poisson sampling; normalisation by the expected batch size -------------------------------
def test_invariant_4_sampling_is_poisson():
    sizes = np.array([len(b) for b in PoissonBatchSampler(400, 0.02, steps=3000, seed=0)])
    assert sizes.mean() == pytest.approx(8, abs=4 * math.sqrt(400 * 0.02 * 0.98 / 3000))
    assert sizes.var(ddof=1) == pytest.approx(400 * 0.02 * 0.98, rel=0.1)
    # Empty steps are yielded too: see test_privacy_sampler.py (P(empty) is e^-8 here).


@pytest.mark.parametrize("mode", ["dpsgd", "maskdp", "fpdp"])
def test_invariant_4_update_divides_by_expected_batch_size(model, batch, public_tokens, mode):
    x, y, pub = batch[0][:3], batch[1][:3], torch.zeros_like(public_tokens[:3])  # realised batch of 3
    if mode == "dpsgd":
        got = dpsgd_gradients(model, None, x, y, math.inf, 0.0, 8.0)
        ref = summed_grads(model, x, y)
    elif mode == "maskdp":
        got = maskdp_parts(model, x, y, pub, math.inf, 0.0).combined(8.0)
        ref = summed_grads(model, x, y)
    else:  # k above the public rank: projection is onto span(public grads); compare per piece
        _, parts = fpdp_parts(model, x, y, math.inf, 0.0, batch[0][3:], batch[1][3:], k=64, refresh=10)
        got = parts.combined(8.0)
        ref = {n: parts.released[n] + parts.public_sum[n] for n in parts.released}
    for n in ref:
        torch.testing.assert_close(got[n], ref[n] / 8.0, rtol=1e-5, atol=1e-7)
        assert not torch.allclose(got[n], ref[n] / 3.0) or torch.count_nonzero(ref[n]) == 0


# -- 5. FP-DP's subspace comes from public data only ---------------------------------------------
def test_invariant_5_subspace_ignores_private_data_and_spans_public_gradients(model, batch):
    x, y = batch
    public_x, public_y = x[:3] * 0.3 + 0.1, y[:3]
    other_private = torch.randn(x.shape, generator=torch.Generator().manual_seed(4))
    a, _ = fpdp_parts(model, x, y, 1.0, 1.0, public_x, public_y, generator=torch.Generator().manual_seed(0))
    b, _ = fpdp_parts(model, other_private, y.flip(0), 1.0, 1.0, public_x, public_y)
    a, b = a.subspace, b.subspace
    assert torch.equal(a.basis, b.basis)  # bit-identical: private data never enters
    # A different PUBLIC set moves the basis (so the test could fail).
    c, _ = fpdp_parts(model, x, y, 1.0, 1.0, public_x.flip(0) * 2, public_y)
    assert not torch.equal(a.basis, c.subspace.basis)
    # The basis spans exactly the public per-sample gradients (rank 3 < k = 8).
    g = flatten(per_sample_grads(model, public_x, public_y), batched=True)
    assert a.basis.shape[1] == 3
    for row in g:
        torch.testing.assert_close(a.project(row), row, rtol=1e-4, atol=1e-6)
    # A private gradient direction outside that span is removed.
    private = flatten(summed_grads(model, x, y))
    residual = private - a.project(private)
    assert residual.norm() > 1e-3 * private.norm()
    assert (a.basis.T @ residual).abs().max() < 1e-5 * private.norm()


# -- 8. The noise-free public term reveals nothing about which records the private batch holds ---
def _membership_scores(model, x, y, public_tokens, same_batch: bool, trials: int, seed: int) -> tuple[list, list]:
    """One MaskDP step per trial, record 0 in the private batch or not; the adversary knows every
    record's public tokens and label and the model (DESIGN.md's threat model), so it scores the
    update against record 0's own public-token gradient."""
    params = dict(model.named_parameters())
    n = x.shape[0]
    target = public_token_inputs(x[:1], y[:1], public_tokens[:1])
    direction = flatten(summed_grads(model, target.x, target.y, params, token_keep=target.token_keep))
    direction = direction / direction.norm()
    rng = torch.Generator().manual_seed(seed)
    scores = {True: [], False: []}
    step = PrivateStep("maskdp", max_grad_norm=0.1, noise_multiplier=1.0, expected_batch_size=n / 2, generator=rng)
    for t in range(trials):
        member = t % 2 == 0
        draw = torch.rand(n, generator=rng) < 0.5
        draw[0] = member
        private = torch.nonzero(draw).flatten()
        if same_batch:  # the MaskDP paper's Algorithm 2
            public = private
        else:  # the trainers: an independent Poisson draw
            public = torch.nonzero(torch.rand(n, generator=rng) < 0.5).flatten()
        g = step(model, params, private_token_inputs(x[private], y[private], public_tokens[private]),
                 public_token_inputs(x[public], y[public], public_tokens[public]))  # fmt: skip
        scores[member].append(float(flatten(g) @ direction))
    return scores[True], scores[False]


def _attack_accuracy(inside: list, outside: list) -> float:
    """Threshold fitted on the first half of the trials, accuracy on the second half."""
    half_in, half_out = len(inside) // 2, len(outside) // 2
    thr = 0.5 * (np.mean(inside[:half_in]) + np.mean(outside[:half_out]))
    sign = 1.0 if np.mean(inside[:half_in]) >= np.mean(outside[:half_out]) else -1.0
    hits = [sign * (s - thr) > 0 for s in inside[half_in:]] + [sign * (s - thr) <= 0 for s in outside[half_out:]]
    return float(np.mean(hits))


def test_invariant_8_public_term_on_an_independent_batch_defeats_the_membership_test(model, batch, public_tokens):
    x = torch.cat([batch[0], batch[0].flip(0)])  # 12 records
    y = torch.cat([batch[1], batch[1].flip(0)])
    pub = torch.cat([public_tokens, public_tokens.flip(0)])
    pub[0] = torch.rand(pub.shape[1], generator=torch.Generator().manual_seed(5)) < 0.6  # record 0 has public tokens
    pub[0, 0] = False
    same_in, same_out = _membership_scores(model, x, y, pub, same_batch=True, trials=240, seed=0)
    ind_in, ind_out = _membership_scores(model, x, y, pub, same_batch=False, trials=240, seed=0)
    paper, sound = _attack_accuracy(same_in, same_out), _attack_accuracy(ind_in, ind_out)
    assert paper > 0.9, paper  # the same-batch public term gives membership away
    assert sound < 0.65, sound  # chance, up to what the clipped + noised private part allows
