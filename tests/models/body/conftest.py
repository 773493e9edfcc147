"""Body-model tests use the procedural SMPL-H file (tests/conftest.py procedural_body_cache)."""

import pytest


@pytest.fixture(scope="session", autouse=True)
def _body_cache(procedural_body_cache):
    yield
