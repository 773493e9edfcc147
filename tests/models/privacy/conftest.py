"""Shared fixtures of the privacy tests: a tiny token-masking video model and a small batch."""

from __future__ import annotations

import pytest
import torch

from anonymask.models.training.privacy.toy import tiny_model_factory


@pytest.fixture
def model():
    return tiny_model_factory(seed=0)


@pytest.fixture
def batch():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(6, 3, 4, 16, 16, generator=gen)
    y = torch.randint(0, 5, (6,), generator=gen)
    return x, y


@pytest.fixture
def public_tokens(model):
    """(6, 32) mask with every kind of sample: all private, all public, mixed."""
    gen = torch.Generator().manual_seed(2)
    mask = torch.rand(6, model.num_tokens, generator=gen) < 0.5
    mask[0] = False  # no public token
    mask[1] = True  # no private token
    return mask
