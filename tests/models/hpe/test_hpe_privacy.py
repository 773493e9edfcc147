"""Invariants 8 and 11 through the pose trainer (like tests/models/privacy's test_invariant_8_*).

The adversary sees every intermediate model and all public data (DESIGN.md). Each test runs the
REAL trainer for one step per trial, at tiny size (12 pseudo-videos of 2 crops, frozen backbone)
and measures a membership attack's balanced accuracy: chance (0.5) within its confidence
interval when the noise, the private Poisson draw and the psi batch come from independent
streams. The seeds are the experiment's (``experiment_seeds``): the old code gave noise and
sampling the same seed, and these attacks then score 0.8-1.0.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from anonymask.models.training.hpe.experiment import experiment_seeds
from anonymask.models.training.hpe.model import build_pose_model, simcc_loss_fn, tiny_config
from anonymask.models.training.hpe.train import (
    HPETrainConfig,
    backbone_features,
    blur_images,
    train_pose_model,
)
from anonymask.models.training.privacy.clipping import flatten, summed_grads
from anonymask.models.training.privacy.seeds import SeedError

Q = 0.5  # sampling rate (records): one step per trial


def _model():
    return build_pose_model(tiny_config(num_keypoints=16), "random", seed=0)


def _one_step(crops, mode: str, seeds: dict, **kw):
    """(private records, psi records, released noise of the first parameter, param update)."""
    n = len(set(crops.video_ids.tolist()))
    cfg = HPETrainConfig(strategy="frozen", mode=mode, epochs=Q, batch_size=Q * n, noise_multiplier=1.0,
                         max_grad_norm=kw.pop("C", 1.0), optimizer="sgd", lr=1.0, momentum=0.0, eval_every=0,
                         **seeds, **kw)  # fmt: skip
    model = _model()
    before = {k: p.detach().clone() for k, p in model.head.named_parameters()}
    seen = {}

    def inspect(step, rule):
        seen.update(records=list(rule.last_records), psi=list(rule.last_psi_records), parts=rule.last_parts)

    res = train_pose_model(model, crops, cfg, inspect=inspect)
    assert res.steps == 1
    first = next(iter(seen["parts"].noise.values())).flatten() / cfg.max_grad_norm  # in units of sigma C
    update = flatten({k: before[k] - p.detach() for k, p in model.head.named_parameters()})
    return seen["records"], seen["psi"], first, update


def _balanced_accuracy(member: np.ndarray, guess: np.ndarray) -> tuple[float, float]:
    """(mean of TPR and TNR, its standard error): 0.5 is chance whatever the base rate."""
    tpr, tnr = guess[member].mean(), (~guess[~member]).mean()
    se = 0.5 * math.sqrt(tpr * (1 - tpr) / member.sum() + tnr * (1 - tnr) / (~member).sum())
    return 0.5 * (tpr + tnr), max(se, 0.01)


def test_invariant_11_one_noise_coordinate_says_nothing_about_the_sampling(tiny_records):
    """The attack of issue 28: record r's Poisson uniform was the Box-Muller radius uniform of noise
    coordinate r (same mt19937 stream), so |noise_r| <= sqrt(-2 ln(1-q)) sigma C whenever r was
    sampled. Guess "member" exactly then; with independent streams it is a coin flip."""
    train, _ = tiny_records
    n = len(set(train.video_ids.tolist()))
    bound = math.sqrt(-2 * math.log(1 - Q))
    C = 1e-4  # the clipped sum is then far below the noise in any one coordinate
    for view in ("noise", "update"):  # the noise draw itself, and what the adversary sees: the update
        member, guess = [], []
        for t in range(40):
            records, _, noise, update = _one_step(train, "dpsgd", experiment_seeds(1000 + t), C=C)
            coord = noise if view == "noise" else update * (Q * n) / C  # lr 1: update = (S + noise) / (q N)
            for r in range(8):  # the first Box-Muller block: uniforms 0..7 are radii of coordinates 0..7
                member.append(r in records)
                guess.append(abs(float(coord[r])) <= bound)
        acc, se = _balanced_accuracy(np.array(member), np.array(guess))
        assert abs(acc - 0.5) < 4 * se, (view, acc, se)


def test_invariant_8_one_step_membership_from_the_update_is_at_chance(tiny_records):
    """Feature DP's psi term is noise-free; the adversary scores the update against record 0's own
    psi gradient (public: psi(x) and labels). Chance when the psi batch is independent; the paper's
    same-batch term (positive control) gives membership away."""
    train, _ = tiny_records
    model = _model()
    target = np.nonzero(train.video_ids == train.video_ids[0])[0]
    x, y = train.subset(target).tensors()
    feats = backbone_features(model, blur_images(x, 2.5))
    params = dict(model.head.named_parameters())
    direction = flatten(summed_grads(model.head, feats, y, params, loss_fn=simcc_loss_fn(model.config)))
    direction = direction / direction.norm()

    def attack(accounting: str) -> tuple[float, float]:
        scores, member = [], []
        for t in range(60):
            records, _, _, update = _one_step(train, "featdp", experiment_seeds(2000 + t), C=1e-3,
                                              accounting=accounting)  # fmt: skip
            member.append(0 in records)
            scores.append(float(update @ direction))
        member_a, scores_a = np.array(member), np.array(scores)
        half = len(scores) // 2  # threshold fitted on the first half, scored on the second
        fit_in, fit_out = scores_a[:half][member_a[:half]], scores_a[:half][~member_a[:half]]
        thr = 0.5 * (fit_in.mean() + fit_out.mean())
        sign = 1.0 if fit_in.mean() >= fit_out.mean() else -1.0
        return _balanced_accuracy(member_a[half:], sign * (scores_a[half:] - thr) > 0)

    paper, _ = attack("paper")
    sound, se = attack("sound")
    assert paper > 0.75, paper  # the test can fail: the same-batch term is caught (0.87 measured)
    assert abs(sound - 0.5) < 4 * se, (sound, se)


def test_invariant_8_psi_batch_is_independent_of_the_private_batch(tiny_records):
    train, _ = tiny_records
    member, in_psi, same = [], [], 0
    for t in range(40):  # the experiment's fixed seeds, then the OS's (a real run)
        records, psi, _, _ = _one_step(train, "featdp", experiment_seeds(3000 + t if t % 2 else None))
        same += bool(records) and psi == records
        for r in range(12):
            member.append(r in records)
            in_psi.append(r in psi)
    # Two independent draws of 12 records at q = 0.5 agree with chance 2**-12: two agreements in
    # 40 steps happen with chance 5e-5; a psi batch that reused the private draw agrees in all 40.
    assert same <= 1, same
    acc, se = _balanced_accuracy(np.array(member), np.array(in_psi))
    assert abs(acc - 0.5) < 4 * se, (acc, se)


def test_fixed_seeds_must_be_pairwise_different_and_default_to_the_os():
    for same in ({"noise_seed": 3, "sampling_seed": 3}, {"sampling_seed": 5, "public_seed": 5},
                 {"noise_seed": 7, "public_seed": 7}):  # fmt: skip
        with pytest.raises(SeedError, match="must be independent"):
            HPETrainConfig(mode="dpsgd", noise_multiplier=1.0, **same)
    seeds = experiment_seeds(0)
    assert len(set(seeds.values())) == 3
    assert experiment_seeds(None) == {"noise_seed": None, "sampling_seed": None, "public_seed": None}


def test_report_states_the_streams_and_never_their_values(tiny_records):
    train, _ = tiny_records
    cfg = HPETrainConfig(strategy="frozen", mode="dpsgd", epochs=1, batch_size=4, noise_multiplier=1.0,
                         noise_seed=11, eval_every=0)  # fmt: skip
    rep = train_pose_model(_model(), train, cfg).privacy
    assert rep["seeds"]["source"] == {"noise": "fixed", "sampling": "os_entropy", "public": "os_entropy"}
    assert rep["seeds"]["fixed_pairwise_distinct"] and "11" not in str(rep["seeds"])
    assert "dataset_fingerprint" not in rep or not rep["dataset_fingerprint"]


def test_a_video_is_sampled_whole_and_clipped_once(tiny_records):
    """Record = video: every crop of a drawn video is in the batch, and the video's gradient (the
    mean over its crops) is clipped once, so the sum is bounded by C per VIDEO, not per crop."""
    from anonymask.models.training.privacy.clipping import clip_per_sample, per_sample_grads

    train, _ = tiny_records
    C = 1e-3  # far below every gradient norm: clipping is active for every record
    cfg = HPETrainConfig(strategy="frozen", mode="dpsgd", epochs=1, batch_size=12, noise_multiplier=0.0,
                         max_grad_norm=C, lr=0.0, eval_every=0)  # fmt: skip
    seen = {}
    model = _model()
    train_pose_model(model, train, cfg, inspect=lambda s, rule: seen.setdefault("parts", rule.last_parts))
    parts = seen["parts"]  # q = 1: all 12 videos, 24 crops
    assert parts.private_norms.shape == (12,)
    x, y = train.tensors()
    params = dict(model.head.named_parameters())
    per = per_sample_grads(model.head, backbone_features(model, x), y, params, loss_fn=simcc_loss_fn(model.config))
    per_video = {n: 0.5 * (g[0::2] + g[1::2]) for n, g in per.items()}  # pseudo-videos = crop pairs
    clipped, _ = clip_per_sample(per_video, C)
    for name in params:
        torch.testing.assert_close(parts.private_sum[name], clipped[name].sum(0), rtol=1e-4, atol=1e-9)
    assert float(flatten(parts.private_sum).norm()) <= 12 * C * (1 + 1e-5)
