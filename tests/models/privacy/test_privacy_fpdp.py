"""FP-DP: blur features and their floor, public subspace, projection of the noisy private sum,
clean public gradient on an independent psi batch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import ndimage

from anonymask.models.training.privacy.accountant import Accountant
from anonymask.models.training.privacy.clipping import (
    flatten,
    per_sample_grads,
    summed_grads,
    unflatten,
    write_grads,
)
from anonymask.models.training.privacy.fpdp import (
    PublicSubspace,
    blur_floor,
    check_psi_blur,
    gaussian_blur_video,
)
from anonymask.models.training.privacy.mechanism import Inputs, PrivateStep
from anonymask.models.training.privacy.toy import tiny_model_factory


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


def _fpdp(k=3, refresh=10, gen_seed=None, eb=8.0, C=float("inf"), sigma=0.0, **kw):
    gen = torch.Generator().manual_seed(gen_seed) if gen_seed is not None else None
    return PrivateStep("fpdp", max_grad_norm=C, noise_multiplier=sigma, expected_batch_size=eb, generator=gen,
                       subspace_k=k, subspace_refresh=refresh, **kw)  # fmt: skip


def test_no_clip_no_noise_is_projected_private_plus_public_psi_batch(model, batch):
    x, y = batch
    px, py = x[:4] * 0.5, y[:4]
    psi_x, psi_y = gaussian_blur_video(x.flip(0), 1.5), y.flip(0)  # an independent public batch
    step = _fpdp()
    got = step(model, dict(model.named_parameters()), Inputs(x, y), Inputs(psi_x, psi_y), Inputs(px, py))
    private = summed_grads(model, x, y)
    projected = unflatten(step.subspace.project(flatten(private)), private)
    public = summed_grads(model, psi_x, psi_y)
    for n in private:
        torch.testing.assert_close(got[n], (projected[n] + public[n]) / 8.0, rtol=1e-5, atol=1e-7)


def test_public_gradient_is_noise_free_and_weighted(model, batch):
    x, y = batch
    params = dict(model.named_parameters())
    public = Inputs(gaussian_blur_video(x, 2.0), y)
    a = _fpdp(k=2, refresh=1, gen_seed=0, C=0.5, sigma=3.0).parts(model, params, Inputs(x, y), public, Inputs(x[:3], y[:3]))
    b = _fpdp(k=2, refresh=1, gen_seed=1, C=0.5, sigma=3.0).parts(model, params, Inputs(x, y), public, Inputs(x[:3], y[:3]))
    for n in a.public_sum:
        assert torch.equal(a.public_sum[n], b.public_sum[n])  # different noise, same public part
    assert any(not torch.equal(a.noise[n], b.noise[n]) for n in a.noise)
    c = _fpdp(k=2, refresh=1, public_weight=0.25).parts(model, params, Inputs(x, y), public, Inputs(x[:3], y[:3]))
    for n in a.public_sum:
        torch.testing.assert_close(c.public_sum[n], 0.25 * a.public_sum[n])


def test_step_refreshes_every_k_steps_from_the_current_parameters(batch):
    x, y = batch
    model = tiny_model_factory(0)
    params = dict(model.named_parameters())
    ledger = Accountant("rdp")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = _fpdp(k=4, refresh=2, gen_seed=0, C=1.0, sigma=1.0, accountant=ledger, sample_rate=0.01)
    public, subspace_set = Inputs(gaussian_blur_video(x, 2.0), y), Inputs(x[:3], y[:3])

    def one():
        parts = step.parts(model, params, Inputs(x, y), public, subspace_set if step.needs_subspace_set() else None)
        opt.zero_grad()
        write_grads(params, parts.combined(8.0))
        opt.step()
        return parts.refreshed

    assert [one() for _ in range(5)] == [True, False, True, False, True]
    assert ledger.history == [(0.01, 1.0, 5)]
    before = step.subspace.basis.clone()
    one()  # step 5: no refresh
    assert torch.equal(step.subspace.basis, before)
    expected = PublicSubspace(4, 1)
    expected.update(flatten(per_sample_grads(model, x[:3], y[:3]), batched=True))
    one()  # step 6: refresh, from the public set at the parameters it starts from
    assert torch.equal(step.subspace.basis, expected.basis)
    assert not torch.equal(step.subspace.basis, before)


def test_refresh_without_public_set_and_missing_public_batch_fail(model, batch):
    x, y = batch
    params = dict(model.named_parameters())
    with pytest.raises(ValueError, match="subspace_set"):
        _fpdp(k=2, refresh=1).parts(model, params, Inputs(x, y), Inputs(x, y))
    with pytest.raises(ValueError, match="public batch"):
        _fpdp(k=2, refresh=1).parts(model, params, Inputs(x, y), None, Inputs(x, y))


def test_psi_blur_floor_is_the_papers_blur_scaled_to_the_input():
    assert blur_floor((256, 192)) == pytest.approx(7.5)
    assert blur_floor((224, 224)) == pytest.approx(8.75)
    ok = check_psi_blur(8.75, (224, 224))
    assert ok["kind"] == "gaussian_blur" and not ok["below_paper_floor"]
    # blur_0.001 is the identity (kernel [0, 1, 0]): refused, named, with the way out
    with pytest.raises(ValueError, match="weaker than the paper"):
        check_psi_blur(0.001, (224, 224))
    with pytest.raises(ValueError, match="weaker than the paper"):
        check_psi_blur(1.0, (224, 224))  # the old default
    weak = check_psi_blur(1.0, (224, 224), allow_weaker=True)
    assert weak["below_paper_floor"] is True
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            check_psi_blur(bad, (224, 224), allow_weaker=True)
    x = torch.rand(1, 1, 1, 9, 9)
    torch.testing.assert_close(gaussian_blur_video(x, 0.001), x)  # why the floor exists
