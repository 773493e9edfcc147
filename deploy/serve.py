"""Serve every deployment from this process: ``python -m anonymask.deploy.serve``.

Needs a Prefect API (``PREFECT_API_URL``, e.g. the server ``make serve`` starts). Stop with Ctrl-C.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from prefect import serve

    from anonymask.deploy.deployments import all_deployments

    deployments = all_deployments()
    print(f"serving {len(deployments)} deployments", flush=True)
    from anonymask.stopping import stop_on_signals

    with stop_on_signals():  # SIGTERM too, and a hard stop within seconds: runs in flight are marked crashed
        serve(*deployments, print_starting_message=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
