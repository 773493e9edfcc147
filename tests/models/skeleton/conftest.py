"""Shared fixtures for the skeleton tests: a tiny synthetic test bed, one thread."""

import numpy as np
import pytest

from anonymask.models.anonymizer.skeleton.synthetic import make_synthetic_skeletons


@pytest.fixture(scope="session")
def synthetic() -> dict[str, np.ndarray]:
    """6 subjects x 3 actions x 4 repetitions, 24 frames of the 25 NTU joints."""
    return make_synthetic_skeletons(num_subjects=6, num_actions=3, repetitions=4, length=24, seed=0)
