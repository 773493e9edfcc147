"""Fixtures for flow tests: a temporary Prefect API (real server, SQLite)."""

import pytest


@pytest.fixture(scope="session")
def prefect_api():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


