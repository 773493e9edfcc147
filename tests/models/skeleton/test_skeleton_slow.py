"""Slow tier: the claims on the synthetic test bed (minutes on 2 cores)."""

import numpy as np
import pytest

from anonymask.models.anonymizer.skeleton.data import SkeletonArrays, normalize_sequence, split_by_sequence
from anonymask.models.anonymizer.skeleton.evaluate import (
    ClassifierConfig,
    evaluate_anonymized,
    gaussian_noise,
    run_skeleton_experiment,
    select_best,
)
from anonymask.models.anonymizer.skeleton.graphs import NTU25
from anonymask.models.anonymizer.skeleton.synthetic import make_synthetic_skeletons

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bed():
    return make_synthetic_skeletons(num_subjects=6, num_actions=3, repetitions=6, length=24, seed=1)


def test_gaussian_baseline_reduces_reidentification(bed):
    x, _ = normalize_sequence(bed["sequences"], 0, align_hips=(12, 16))
    data = SkeletonArrays(x, bed["actions"], bed["subjects"], bed["genders"])
    tr, te = split_by_sequence(data.subject, data.action, 0.34, seed=0)
    train, test = data.subset(tr), data.subset(te)
    cfg = ClassifierConfig(channels=(16, 32), epochs=15)

    def noisy(a, sigma, seed):
        return SkeletonArrays(gaussian_noise(a.x, sigma, seed), a.action, a.subject, a.gender)

    clean = evaluate_anonymized(train, test, test.x, num_actions=3, num_subjects=6, graph=NTU25, config=cfg)
    noise = evaluate_anonymized(
        noisy(train, 0.1, 1), noisy(test, 0.1, 2), test.x, num_actions=3, num_subjects=6, graph=NTU25, config=cfg
    )
    assert clean["reid_acc"] > 0.6  # identities are learnable (chance is 1/6)
    assert noise["reid_acc"] < clean["reid_acc"] - 0.15
    assert noise["reid_acc_bones"] < clean["reid_acc_bones"]
    assert noise["recon_error"] == pytest.approx(0.1 * 2 * np.sqrt(2 / np.pi), rel=0.05)


def test_minimax_anonymizer_defeats_its_adversary_and_keeps_actions(bed):
    results = run_skeleton_experiment(
        bed["sequences"], bed["actions"], bed["subjects"], bed["genders"],
        alphas=(1.0,), betas=(30.0,), sigmas=(0.1,), epochs=15, adv_epochs=25, length=24,
        test_fraction=0.34, classifier=ClassifierConfig(channels=(16, 32), epochs=15), lr_anon=3e-3,
    )
    original = results[0]
    adversarial = select_best(results)
    assert original["method"] == "original" and adversarial["method"] == "adversarial"
    # The clean-trained attacker it was trained against is fooled ...
    assert adversarial["reid_acc_frozen"] < original["reid_acc_frozen"] - 0.3
    # ... while the frozen action classifier still reads the actions.
    assert adversarial["action_acc_frozen"] >= 0.8
    assert adversarial["action_acc"] >= 0.8
    assert 0.0 < adversarial["recon_error"] < 0.5
