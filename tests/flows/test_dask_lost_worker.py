"""A worker of `--runner dask`'s LocalCluster killed twice in a row keeps its nanny.

Dask closes the nanny of a worker that was removed and has no successor registered
``distributed.deploy.lost-worker-timeout`` (15 s) later, even when a successor registered and died
in between. Killed that way, the 20-kill soak's cluster lost its workers one by one and its run
waited forever (scripts/dask_kill_soak.py, issue 32). The flow's LocalCluster runs with the timeout
raised (flows/anonymize.py ``_keep_lost_workers``): here the second kill lands just before the
first timer fires, and a worker must come back."""

import os
import signal
import time

import pytest

pytestmark = pytest.mark.filterwarnings("ignore")


def _worker_pid(cluster) -> int | None:
    nannies = list(cluster.workers.values())
    if not nannies or nannies[0].process is None:
        return None
    return nannies[0].process.pid


def _wait_new_worker(client, cluster, old_pid: int, timeout: float) -> int:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        pid = _worker_pid(cluster)
        if pid and pid != old_pid and len(client.scheduler_info()["workers"]) == 1:
            return pid
        time.sleep(0.1)
    raise TimeoutError(f"no worker came back within {timeout}s (nannies left: {len(cluster.workers)})")


def test_a_worker_killed_twice_in_a_row_comes_back():
    import dask
    from distributed import Client, LocalCluster

    from anonymask.flows.anonymize import _keep_lost_workers

    dask_default = dask.utils.parse_timedelta(dask.config.get("distributed.deploy.lost-worker-timeout"))
    with _keep_lost_workers("dask"), \
            LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        client.wait_for_workers(1, timeout=120)
        first = _worker_pid(cluster)
        os.kill(first, signal.SIGKILL)
        t0 = time.monotonic()
        second = _wait_new_worker(client, cluster, first, 120)
        time.sleep(max(0.0, t0 + dask_default - 1.5 - time.monotonic()))  # just before Dask's timer fires
        os.kill(second, signal.SIGKILL)
        time.sleep(max(0.0, t0 + dask_default + 3 - time.monotonic()))  # past it
        _wait_new_worker(client, cluster, second, 120)
        assert client.submit(int, 7).result(timeout=60) == 7
