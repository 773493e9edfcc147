"""Body-model tests generate the procedural SMPL-H file once per session into a temporary cache."""

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _body_cache(tmp_path_factory):
    if not os.environ.get("ANONYMASK_CACHE"):
        os.environ["ANONYMASK_CACHE"] = str(tmp_path_factory.mktemp("anonymask_cache"))
    os.environ.pop("ANONYMASK_SMPLH_DIR", None)
    yield
