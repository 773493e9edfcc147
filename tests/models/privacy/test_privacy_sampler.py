"""Poisson batch sampling (invariant 4, sampling half): independent inclusions, empty steps kept."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from anonymask.models.training.privacy.sampler import (
    PoissonBatchSampler,
    collate_allowing_empty,
    epochs_to_steps,
)


def test_batch_sizes_are_binomial():
    n, q, steps = 200, 0.05, 4000
    sizes = np.array([len(b) for b in PoissonBatchSampler(n, q, steps=steps, seed=3)])
    mean, var = n * q, n * q * (1 - q)
    assert abs(sizes.mean() - mean) < 4 * math.sqrt(var / steps)
    assert sizes.var(ddof=1) == pytest.approx(var, rel=0.1)
    # A fixed-size or shuffled sampler would have zero variance.
    assert sizes.min() < mean < sizes.max()


def test_each_sample_included_independently_with_probability_q():
    n, q, steps = 40, 0.2, 3000
    hits = np.zeros((steps, n), dtype=bool)
    for t, b in enumerate(PoissonBatchSampler(n, q, steps=steps, seed=4)):
        hits[t, b] = True
        assert b == sorted(set(b))  # no duplicates
    freq = hits.mean(axis=0)
    se = math.sqrt(q * (1 - q) / steps)
    assert np.all(np.abs(freq - q) < 5 * se)
    # Inclusions of different samples are uncorrelated (Poisson, not sampling without replacement,
    # whose pairwise correlation would be -1/(n-1) = -0.026, i.e. ~ -1.4 standard errors here).
    corr = np.corrcoef(hits.T.astype(float))[np.triu_indices(n, 1)]
    assert abs(corr.mean()) < 0.005


def test_empty_batches_occur_for_small_q_and_are_yielded():
    n, q, steps = 50, 0.01, 2000
    batches = list(PoissonBatchSampler(n, q, steps=steps, seed=5))
    assert len(batches) == steps  # empty steps are steps
    p_empty = (1 - q) ** n
    frac = sum(len(b) == 0 for b in batches) / steps
    assert abs(frac - p_empty) < 4 * math.sqrt(p_empty * (1 - p_empty) / steps)


def test_expected_batch_size_steps_and_seeding():
    s = PoissonBatchSampler(40000, 128 / 40000, epochs=150, seed=0)
    assert s.expected_batch_size == pytest.approx(128.0)
    assert len(s) == 150 * 40000 // 128 == epochs_to_steps(150, 128 / 40000)
    a = list(PoissonBatchSampler(100, 0.1, steps=20, seed=9))
    b = list(PoissonBatchSampler(100, 0.1, steps=20, seed=9))
    c = list(PoissonBatchSampler(100, 0.1, steps=20, seed=10))
    assert a == b and a != c
    with pytest.raises(ValueError):
        PoissonBatchSampler(100, 0.1)
    with pytest.raises(ValueError):
        PoissonBatchSampler(100, 0.0, steps=3)


def test_dataloader_passes_empty_batches_as_zero_length_tensors():
    data = TensorDataset(torch.randn(30, 3, 2, 4, 4), torch.arange(30))
    sampler = PoissonBatchSampler(len(data), 0.02, steps=200, seed=1)
    loader = DataLoader(data, batch_sampler=sampler, collate_fn=collate_allowing_empty(data[0]))
    shapes = [tuple(x.shape) for x, _ in loader]
    assert len(shapes) == 200
    assert (0, 3, 2, 4, 4) in shapes
    assert any(s[0] > 0 for s in shapes)
