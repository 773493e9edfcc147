"""Serve every deployment from this process: ``python -m anonymask.deploy.serve``.

Needs a Prefect API (``PREFECT_API_URL``, e.g. the server ``make serve`` starts). Stop with Ctrl-C.

If the API stops answering (its server was killed, or its machine went away), this process gives
up after ``API_LOST_S`` seconds with one line and exit status 3, and stops the runs it had in
flight as kill -9 would (finished stages are kept; the stage in flight is abandoned atomically).
Without this it never ended: Prefect's loops retried for minutes, printed pages of tracebacks, and
the flow-run processes, whose every task needs the API, sat there doing nothing (issue 32).
"""

from __future__ import annotations

import os
import sys
import threading
import time
import urllib.request

API_LOST_S: float = 30.0
"""Seconds without an answer from the API's ``/health`` before giving up (``ANONYMASK_API_LOST_S``
overrides). Why 30: a healthy local server answers in milliseconds, and a slow one (a busy
database on 2 loaded cores) within a few seconds; no task can change state without the API, so
waiting longer only delays the line telling the user to restart it."""

EXIT_API_LOST = 3


def api_lost_s() -> float:
    from anonymask.core.environment import environment

    lost = environment().api_lost_s
    return API_LOST_S if lost is None else lost


def _answers(health_url: str, timeout: float) -> bool:
    try:
        with urllib.request.urlopen(health_url, timeout=timeout) as r:
            return r.status == 200
    except Exception:  # refused, reset, timed out, 5xx: not answering
        return False


def lost_line(api_url: str, limit: float) -> str:
    return (f"anonymask serve: the Prefect API at {api_url} has not answered for {limit:g} s (its server "
            f"stopped?); stopping. Runs in flight were abandoned as after kill -9 (finished stages are "
            f"kept): restart the server (make serve) and run them again.")


def watch_api(api_url: str, limit: float, on_lost, interval: float = 2.0) -> threading.Thread:
    """A daemon thread that calls ``on_lost()`` once ``api_url`` has not answered for ``limit`` s."""
    health = api_url.rstrip("/") + "/health"

    def loop() -> None:
        last_ok = time.monotonic()
        while True:
            if _answers(health, timeout=min(10.0, max(1.0, limit / 3))):
                last_ok = time.monotonic()
            elif time.monotonic() - last_ok >= limit:
                on_lost()
                return
            time.sleep(interval)

    t = threading.Thread(target=loop, name="anonymask-api-watch", daemon=True)
    t.start()
    return t


def _give_up(api_url: str, limit: float) -> None:
    from anonymask.core.stopping import stop_children

    print(lost_line(api_url, limit), file=sys.stderr, flush=True)
    stop_children()  # the flow-run processes (and their Dask workers): no task can finish without the API
    sys.stdout.flush()
    os._exit(EXIT_API_LOST)


def main(argv: list[str] | None = None) -> int:
    from prefect import serve
    from prefect.settings import PREFECT_API_URL

    from anonymask.deploy.deployments import all_deployments

    api_url = PREFECT_API_URL.value()
    if api_url:
        limit = api_lost_s()
        watch_api(api_url, limit, lambda: _give_up(api_url, limit))
    deployments = all_deployments()
    print(f"serving {len(deployments)} deployments", flush=True)
    from anonymask.core.stopping import stop_on_signals

    with stop_on_signals():  # SIGTERM too, and a hard stop within seconds: runs in flight are marked crashed
        serve(*deployments, print_starting_message=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
