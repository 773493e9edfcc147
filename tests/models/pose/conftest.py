"""Pose tests share one procedural SMPL-H body model, generated once per session into a temp cache."""

import os

import numpy as np
import pytest


@pytest.fixture(scope="session")
def body(tmp_path_factory):
    """The procedural body model (never the user's licensed files: results must not depend on them)."""
    saved = {k: os.environ.get(k) for k in ("ANONYMASK_CACHE", "ANONYMASK_SMPLH_DIR")}
    if not saved["ANONYMASK_CACHE"]:
        os.environ["ANONYMASK_CACHE"] = str(tmp_path_factory.mktemp("anonymask_cache"))
    os.environ.pop("ANONYMASK_SMPLH_DIR", None)
    from anonymask.models.body.model import get_body_model

    yield get_body_model()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture
def rng():
    return np.random.default_rng(0)
