"""FP-DP: blur features, public subspace, projection of the noisy private sum, clean public grad."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import ndimage

from anonymask.models.privacy.accountant import Accountant
from anonymask.models.privacy.clipping import flatten, per_sample_grads, summed_grads, unflatten
from anonymask.models.privacy.fpdp import (
    FPDPOptimizerStep,
    PublicSubspace,
    fpdp_gradients,
    fpdp_parts,
    gaussian_blur_video,
)
from anonymask.models.privacy.toy import tiny_model_factory


def test_blur_matches_scipy_per_frame_and_keeps_constants():
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(2, 3, 4, 12, 10, generator=gen, dtype=torch.float64)
    got = gaussian_blur_video(x, 1.0).numpy()
    # torch "reflect" padding is scipy's "mirror"; radius ceil(3 sigma) = scipy truncate 3.
    ref = ndimage.gaussian_filter(x.numpy(), sigma=(0, 0, 0, 1.0, 1.0), mode="mirror", truncate=3.0)
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12)
    const = torch.full((1, 3, 2, 8, 8), 0.25)
    torch.testing.assert_close(gaussian_blur_video(const, 2.0), const)
    assert torch.equal(gaussian_blur_video(x, 0.0), x)
    # No temporal mixing: blurring frame by frame gives the same result.
    one_frame = gaussian_blur_video(x[:, :, 1:2], 1.0)
    torch.testing.assert_close(one_frame, torch.from_numpy(got[:, :, 1:2]))
    # It removes detail: a checkerboard loses most of its energy.
    checker = ((torch.arange(8)[:, None] + torch.arange(8)[None]) % 2).float().expand(1, 1, 1, 8, 8)
    assert gaussian_blur_video(checker, 1.0).var() < 0.05 * checker.var()
    assert gaussian_blur_video(torch.zeros(0, 3, 2, 8, 8), 1.0).shape == (0, 3, 2, 8, 8)


def test_subspace_is_top_eigenspace_of_uncentred_second_moment():
    gen = torch.Generator().manual_seed(1)
    g = torch.randn(10, 40, generator=gen, dtype=torch.float64) * torch.linspace(3, 0.1, 40, dtype=torch.float64)
    sub = PublicSubspace(k=4, refresh_every=5)
    basis = sub.update(g, step=0)
    assert basis.shape == (40, 4)
    torch.testing.assert_close(basis.T @ basis, torch.eye(4, dtype=torch.float64))
    second_moment = g.T @ g / g.shape[0]
    evals = torch.linalg.eigvalsh(second_moment).flip(0)[:4]
    torch.testing.assert_close(sub.eigenvalues, evals)
    torch.testing.assert_close(second_moment @ basis, basis * sub.eigenvalues)  # eigenvectors
    # Projection is idempotent and removes orthogonal directions.
    v = torch.randn(40, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(sub.project(sub.project(v)), sub.project(v))
    torch.testing.assert_close(basis.T @ (v - sub.project(v)), torch.zeros(4, dtype=torch.float64))


def test_subspace_rank_schedule_and_state():
    sub = PublicSubspace(k=8, refresh_every=3)
    with pytest.raises(RuntimeError):
        sub.project(torch.zeros(5))
    assert sub.due(0)
    g = torch.randn(3, 20, dtype=torch.float64)
    assert sub.update(g, step=0).shape == (20, 3)  # rank 3 < k: no made-up directions
    assert not sub.due(1) and not sub.due(2) and sub.due(3)
    copy = PublicSubspace(1, 1)
    copy.load_state_dict(sub.state_dict())
    assert copy.k == 8 and copy.refresh_every == 3 and torch.equal(copy.basis, sub.basis)
    with pytest.raises(ValueError):
        sub.update(torch.zeros(4, 20))


def test_no_clip_no_noise_is_projected_private_plus_blurred_public(model, batch):
    x, y = batch
    px, py = x[:4] * 0.5, y[:4]
    sub = PublicSubspace(k=3, refresh_every=10)
    got = fpdp_gradients(model, None, x, y, float("inf"), 0.0, 8.0, sub, px, py, step=0, blur_sigma=1.5)
    private = summed_grads(model, x, y)
    projected = unflatten(sub.project(flatten(private)), private)
    public = summed_grads(model, gaussian_blur_video(x, 1.5), y)
    for n in private:
        torch.testing.assert_close(got[n], (projected[n] + public[n]) / 8.0, rtol=1e-5, atol=1e-7)


def test_public_gradient_is_noise_free_and_psi_overrides(model, batch):
    x, y = batch
    sub = PublicSubspace(k=2, refresh_every=1)
    a = fpdp_parts(model, None, x, y, 0.5, 3.0, sub, x[:3], y[:3], generator=torch.Generator().manual_seed(0))
    b = fpdp_parts(model, None, x, y, 0.5, 3.0, sub, x[:3], y[:3], generator=torch.Generator().manual_seed(1))
    for n in a.public_sum:
        assert torch.equal(a.public_sum[n], b.public_sum[n])  # different noise, same public part
    assert any(not torch.equal(a.noise[n], b.noise[n]) for n in a.noise)
    feats = torch.zeros_like(x)
    c = fpdp_parts(model, None, x, y, 0.5, 3.0, sub, x[:3], y[:3], public_features=feats)
    d = fpdp_parts(model, None, x, y, 0.5, 3.0, sub, x[:3], y[:3], psi=torch.zeros_like)
    ref = summed_grads(model, feats, y)
    for n in ref:
        torch.testing.assert_close(c.public_sum[n], ref[n])
        torch.testing.assert_close(d.public_sum[n], ref[n])


def test_optimizer_step_refreshes_every_k_steps(batch):
    x, y = batch
    model = tiny_model_factory(0)
    ledger = Accountant("rdp")
    stepper = FPDPOptimizerStep(
        model, torch.optim.SGD(model.parameters(), lr=0.1), 1.0, 1.0, 8.0, PublicSubspace(4, refresh_every=2),
        x[:3], y[:3], torch.Generator().manual_seed(0), accountant=ledger, sample_rate=0.01,
    )  # fmt: skip
    refreshed = [stepper.step(x, y).refreshed for _ in range(5)]
    assert refreshed == [True, False, True, False, True]
    assert ledger.history == [(0.01, 1.0, 5)]
    # A refresh uses the public set at the CURRENT parameters (the model moved since step 0).
    before = stepper.subspace.basis.clone()
    stepper.step(x, y)  # step 5: no refresh
    assert torch.equal(stepper.subspace.basis, before)
    expected = PublicSubspace(4, 1)
    expected.update(flatten(per_sample_grads(model, x[:3], y[:3]), batched=True))
    stepper.step(x, y)  # step 6: refresh, from the public set at the parameters it starts from
    assert torch.equal(stepper.subspace.basis, expected.basis)
    assert not torch.equal(stepper.subspace.basis, before)


def test_refresh_without_public_set_fails(model, batch):
    x, y = batch
    with pytest.raises(ValueError, match="public set"):
        fpdp_parts(model, None, x, y, 1.0, 1.0, PublicSubspace(2, 1))
