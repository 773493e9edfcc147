"""Training strategies and private modes of the pose model (tiny model, tiny synthetic crops)."""

from __future__ import annotations

import math

import pytest
import torch

from anonymask.models.training.hpe.data import split_public
from anonymask.models.training.hpe.model import build_pose_model, simcc_loss_fn, tiny_config
from anonymask.models.training.hpe.train import (
    GradientRule,
    HPETrainConfig,
    StepInputs,
    blur_images,
    evaluate_pose_model,
    train_pose_model,
)
from anonymask.models.training.privacy.clipping import (
    clip_per_sample,
    flatten,
    per_sample_grads,
    summed_grads,
)


def _model(seed: int = 0):
    return build_pose_model(tiny_config(num_keypoints=16), "random", seed=seed)


def _head_params(model):
    return {k: p for k, p in model.head.named_parameters()}


def test_nonprivate_training_lowers_the_loss(tiny_crops):
    train, _ = tiny_crops
    model = _model()
    before = evaluate_pose_model(model, train)["loss"]
    cfg = HPETrainConfig(strategy="scratch", mode="nonprivate", epochs=6, batch_size=8, lr=3e-3, seed=0)
    result = train_pose_model(model, train, cfg)
    after = evaluate_pose_model(model, train)["loss"]
    assert after < before - 0.3
    losses = [row["train_loss"] for row in result.history]
    assert losses[-1] < losses[0]
    assert result.privacy["mode"] == "nonprivate" and result.privacy["epsilon"] == "inf"


@pytest.mark.parametrize("mode", ["nonprivate", "fpdp"])
def test_frozen_strategy_leaves_the_backbone_unchanged(tiny_crops, mode):
    train, test = tiny_crops
    private, public = split_public(train, 0.3)
    model = _model()
    backbone = {k: v.clone() for k, v in model.backbone.state_dict().items()}
    head = {k: v.clone() for k, v in model.head.state_dict().items()}
    cfg = HPETrainConfig(strategy="frozen", mode=mode, epochs=2, batch_size=4, noise_multiplier=1.0, noise_seed=0)
    train_pose_model(model, private, cfg, public=public, test=test)
    for k, v in model.backbone.state_dict().items():
        assert torch.equal(v, backbone[k]), k
    assert any(not torch.equal(v, head[k]) for k, v in model.head.state_dict().items())


def _step_setup(tiny_crops, mode: str, C: float, sigma: float = 0.0, k: int = 4):
    train, _ = tiny_crops
    private, public = split_public(train, 0.3)
    model = _model(seed=1)
    model.set_trainable("frozen")  # the head: small, exact checks stay cheap
    net, params = model.head, _head_params(model)
    x, y = private.tensors()
    feats = model.features(x[:6]).detach()
    pub_x, pub_y = public.tensors()
    pub_feats = model.features(pub_x[:8]).detach()
    psi = model.features(blur_images(x[:6], 2.0)).detach()
    cfg = HPETrainConfig(mode=mode, max_grad_norm=C, noise_multiplier=sigma, subspace_k=k, noise_seed=0)
    rule = GradientRule(cfg, simcc_loss_fn(model.config), sigma, expected_batch_size=5.0, device=torch.device("cpu"))
    inp = StepInputs(feats, y[:6], psi_x=psi, psi_y=y[:6], public_x=pub_feats, public_y=pub_y[:8])
    return rule, net, params, inp


def test_private_step_clips_each_sample_to_C(tiny_crops):
    C = 1e-3  # far below the raw per-sample norms, so clipping is active for every sample
    rule, net, params, inp = _step_setup(tiny_crops, "dpsgd", C)
    per = per_sample_grads(net, inp.x, inp.y, params, loss_fn=rule.loss_fn)
    clipped, norms = clip_per_sample(per, C)
    assert (norms > C).all()
    clipped_norms = flatten(clipped, batched=True).norm(dim=1)
    assert (clipped_norms <= C * (1 + 1e-5)).all()
    grads = rule(net, params, inp, step=0)  # sigma = 0: exactly the clipped sum / (q N)
    expected = {n: g.sum(0) / 5.0 for n, g in clipped.items()}
    for n in params:
        torch.testing.assert_close(grads[n], expected[n], rtol=1e-4, atol=1e-9)
    # the whole update is bounded by B*C/(qN): no single sample can dominate it
    assert float(flatten(grads).norm()) <= 6 * C / 5.0 * (1 + 1e-5)


def test_noise_std_is_sigma_C_over_expected_batch(tiny_crops):
    C, sigma = 0.5, 2.0
    rule, net, params, inp = _step_setup(tiny_crops, "dpsgd", C, sigma)
    empty = StepInputs(inp.x[:0], inp.y[:0])
    noise = flatten(rule(net, params, empty, step=0))  # an empty Poisson batch: noise only
    assert noise.numel() > 5000
    assert float(noise.std()) == pytest.approx(sigma * C / 5.0, rel=0.05)


def test_projection_dp_update_lies_in_the_public_subspace(tiny_crops):
    rule, net, params, inp = _step_setup(tiny_crops, "projdp", C=1e-3, sigma=1.0, k=4)
    g = flatten(rule(net, params, inp, step=0))
    basis = rule.subspace.basis
    assert basis.shape[1] == 4
    torch.testing.assert_close(basis @ (basis.T @ g), g, rtol=1e-4, atol=1e-7)
    # the basis spans public per-sample gradients only: it is unchanged when private inputs change
    before = basis.clone()
    rule2, net2, params2, inp2 = _step_setup(tiny_crops, "projdp", C=1e-3, sigma=1.0, k=4)
    inp2.x = inp2.x + torch.randn_like(inp2.x)
    rule2(net2, params2, inp2, step=0)
    torch.testing.assert_close(rule2.subspace.basis.abs(), before.abs())


def test_feature_dp_adds_the_noise_free_public_gradient(tiny_crops):
    C = 1e-3
    rule, net, params, inp = _step_setup(tiny_crops, "featdp", C)
    grads = rule(net, params, inp, step=0)
    clipped, _ = clip_per_sample(per_sample_grads(net, inp.x, inp.y, params, loss_fn=rule.loss_fn), C)
    public = summed_grads(net, inp.psi_x, inp.psi_y, params, loss_fn=rule.loss_fn)
    for n in params:
        torch.testing.assert_close(grads[n], (clipped[n].sum(0) + public[n]) / 5.0, rtol=1e-4, atol=1e-8)
    assert float(flatten(public).norm()) > 100 * C  # the public part is not clipped


def test_dp_run_spends_the_target_epsilon_epoch_by_epoch(tiny_records):
    train, test = tiny_records
    private, public = split_public(train, 0.3)
    cfg = HPETrainConfig(strategy="frozen", mode="fpdp", epochs=3, batch_size=4, target_epsilon=2.0, delta=1e-5,
                         subspace_k=4, subspace_refresh=2, noise_seed=0)  # fmt: skip
    result = train_pose_model(_model(), private, cfg, public=public, test=test)
    eps = [row["epsilon"] for row in result.history]
    assert len(eps) == 3 and eps == sorted(eps) and eps[0] > 0
    assert 2.0 * 0.99 <= eps[-1] <= 2.0 + 1e-9
    report = result.privacy
    assert report["mode"] == "fpdp" and report["steps"] == result.steps
    videos = len(set(private.video_ids.tolist()))
    assert videos < len(private)  # q counts records (videos), not crops
    assert report["q"] == pytest.approx(4 / videos) and math.isclose(report["sigma"], result.sigma)
    assert report["record"] == "video" and "per video" in report["guarantee"]
    assert 0.0 <= result.final["pckh"] <= 1.0


def test_modes_that_need_a_public_set_refuse_to_run_without_one(tiny_crops):
    train, _ = tiny_crops
    cfg = HPETrainConfig(strategy="frozen", mode="projdp", epochs=1, noise_multiplier=1.0)
    with pytest.raises(ValueError, match="public set"):
        train_pose_model(_model(), train, cfg)
    with pytest.raises(ValueError, match="noise_multiplier or target_epsilon"):
        HPETrainConfig(mode="dpsgd")


def _run(tiny_crops, mode="featdp", **kw):
    train, _ = tiny_crops
    private, public = split_public(train, 0.3)
    seen = []
    base = dict(strategy="frozen", mode=mode, epochs=2, batch_size=4, noise_multiplier=1.0, noise_seed=0,
                sampling_seed=1, public_seed=2, lr=0.0, subspace_k=4)  # fmt: skip
    cfg = HPETrainConfig(**{**base, **kw})
    result = train_pose_model(_model(), private, cfg, public=public,
                              inspect=lambda step, rule: seen.append(rule.last_parts))  # fmt: skip
    return result, seen


def test_psi_term_is_drawn_independently_of_the_private_batch(tiny_records):
    """Invariant 8 through the pose trainer: other private draws, same public seed -> the same
    noise-free psi terms at every step; the paper's same-batch term follows the private draw."""
    _, a = _run(tiny_records, sampling_seed=1)
    _, b = _run(tiny_records, sampling_seed=5)
    assert len(a) == len(b) > 3
    assert any(pa.private_norms.shape != pb.private_norms.shape for pa, pb in zip(a, b))  # other batches
    for pa, pb in zip(a, b):
        assert all(torch.equal(pa.public_sum[n], pb.public_sum[n]) for n in pa.public_sum)
    _, c = _run(tiny_records, sampling_seed=1, accounting="paper")
    _, d = _run(tiny_records, sampling_seed=5, accounting="paper")
    assert any(not torch.equal(pc.public_sum[n], pd.public_sum[n]) for pc, pd in zip(c, d) for n in pc.public_sum)
    res, _ = _run(tiny_records, accounting="paper")
    assert not res.privacy["private"] and "not a valid DP guarantee" in res.privacy["guarantee"]


def test_sampling_is_secret_by_default(tiny_records):
    """The private Poisson draws come from the OS unless a seed is given (the old code seeded them
    with the public config seed)."""
    fixed = [_run(tiny_records, mode="dpsgd", lr=1e-2, sampling_seed=3)[0] for _ in range(2)]
    free = [_run(tiny_records, mode="dpsgd", lr=1e-2, sampling_seed=None)[0] for _ in range(2)]
    same = [torch.equal(p, q) for p, q in zip(fixed[0].model.head.parameters(), fixed[1].model.head.parameters())]
    differ = [torch.equal(p, q) for p, q in zip(free[0].model.head.parameters(), free[1].model.head.parameters())]
    assert all(same) and not all(differ)


def test_report_states_psi_and_adjacency_and_refuses_a_weak_blur(tiny_records):
    res, _ = _run(tiny_records, mode="fpdp")
    rep = res.privacy
    assert rep["private"] and rep["adjacency"] == "add_remove" and rep["record"] == "video"
    assert rep["psi"]["sigma_px"] == pytest.approx(2.5) and rep["labels"] == "public"  # 10 px at 256 -> 64 px input
    assert "independent Poisson batch" in rep["public_term"]
    with pytest.raises(ValueError, match="weaker than the paper"):
        _run(tiny_records, mode="fpdp", blur_sigma=0.001)
    res, _ = _run(tiny_records, mode="fpdp", blur_sigma=1.0, blur_allow_weak=True)
    rep = res.privacy  # a psi below the floor voids the guarantee: said so, never "private"
    assert rep["psi"]["below_paper_floor"] and rep["private"] is False and rep["epsilon"] == "inf"
    assert "below the paper's floor" in rep["guarantee"]
