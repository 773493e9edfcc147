"""PCKh and PCK on constructed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from anonymask.models.training.hpe.metrics import pck_bbox, pck_per_keypoint, pckh


@pytest.fixture
def case():
    rng = np.random.default_rng(0)
    gt = rng.uniform(0, 64, size=(5, 4, 2))
    visible = np.ones((5, 4), bool)
    head = rng.uniform(4, 10, size=5)
    return gt, visible, head


def test_perfect_prediction_scores_one(case):
    gt, visible, head = case
    assert pckh(gt.copy(), gt, visible, head) == 1.0
    assert pck_bbox(gt.copy(), gt, visible, np.full(5, 30.0)) == 1.0


def test_far_prediction_scores_zero(case):
    gt, visible, head = case
    assert pckh(gt + 100.0, gt, visible, head) == 0.0


def test_threshold_is_half_the_head_size(case):
    gt, visible, head = case
    just_inside = gt.copy()
    just_inside[..., 0] += 0.5 * head[:, None] * 0.99
    just_outside = gt.copy()
    just_outside[..., 0] += 0.5 * head[:, None] * 1.01
    assert pckh(just_inside, gt, visible, head) == 1.0
    assert pckh(just_outside, gt, visible, head) == 0.0
    assert pckh(just_outside, gt, visible, 2 * head) == 1.0  # a bigger head forgives more


def test_pools_over_annotated_keypoints_only(case):
    gt, visible, head = case
    pred = gt.copy()
    pred[:, 0] += 100.0  # keypoint 0 always wrong
    assert pckh(pred, gt, visible, head) == pytest.approx(0.75)
    hidden = visible.copy()
    hidden[:, 0] = False  # ... but not annotated: it does not count
    assert pckh(pred, gt, hidden, head) == 1.0
    per = pck_per_keypoint(pred, gt, hidden, head, 0.5)
    assert math.isnan(per[0]) and np.all(per[1:] == 1.0)
    assert math.isnan(pckh(pred, gt, np.zeros_like(visible), head))


def test_shape_mismatch_is_an_error(case):
    gt, visible, head = case
    with pytest.raises(ValueError, match="shape mismatch"):
        pckh(gt, gt, visible[:, :2], head)
