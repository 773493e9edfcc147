"""Prefect start-up that a new, busy machine survives.

Without ``PREFECT_API_URL`` every flow call starts Prefect's temporary ("ephemeral") API server in a
subprocess and waits for it to answer. Its very first start on a machine also creates and migrates
Prefect's SQLite database before it answers; on two loaded cores that alone outlasts Prefect's
default wait of 20 s, and the run dies with a 40-line traceback. So, before the first flow call:

1. :func:`configure_prefect_env` makes a start-up limit that fits a loaded small machine the
   default (a user's own setting wins), and turns telemetry off (there is no network);
2. :func:`prepare_database` creates/migrates the database in this process, where it has no time
   limit (about 9 s once on a fresh home, 0.04 s every later time), so the server only has to start;
3. :func:`startup_errors` turns a server that still does not answer into one line naming what to do,
   with the traceback in a log file.

Must run before ``import prefect``: Prefect reads its settings from the environment at import.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

from anonymask.core.errors import AnonymaskError

STARTUP_TIMEOUT_ENV = "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"

EPHEMERAL_STARTUP_TIMEOUT_S: int = 300
"""Seconds to wait for the temporary server. Why 300: with the database migrated beforehand the
server answers in 5-8 s idle; under 4 busy processes on 2 cores start-up stretches several-fold, and
a healthy but slow start must never fail a run. A server that is truly stuck still fails, in
minutes rather than never."""

_TIMEOUT_TEXT = "Timed out while attempting to connect to ephemeral Prefect API server"


class PrefectStartupError(AnonymaskError):
    """Prefect's API server did not answer: nothing was computed, rerunning is safe."""


def shield_temporary_server() -> None:
    """Start Prefect's temporary server in a session of its own.

    Ctrl-C in a terminal signals the whole process group. The temporary server used to be in it, so
    it shut down at the same instant as the run, and the run could no longer record that it
    crashed: the UI showed it "Running" forever. In its own session only this process stops it
    (Prefect's exit hook, or :func:`anonymask.core.stopping.finish`). Applies to the launcher of the
    pinned Prefect (3.8.x); another version keeps Prefect's own."""
    import subprocess

    import prefect
    from prefect.server.api import server as srv
    from prefect.settings import get_current_settings

    cls = getattr(srv, "SubprocessASGIServer", None)
    if cls is None or not prefect.__version__.startswith("3.8.") or getattr(cls, "_own_session", False):
        return

    def launch(self):
        env = dict(os.environ, PREFECT_UI_ENABLED="0", PREFECT__SERVER_EPHEMERAL="1", PREFECT__SERVER_FINAL="1")
        env.update(get_current_settings().to_environment_variables(exclude_unset=True))
        app_dir = str(prefect.__module_path__.parent)
        cmd = [sys.executable, "-m", "uvicorn", "--app-dir", app_dir, "--factory",
               "prefect.server.api.server:create_app", "--host", "127.0.0.1", "--port", str(self.port),
               "--log-level", "error", "--lifespan", "on"]
        # it must still end with this process, even on kill -9: the kernel sends it SIGTERM when the
        # thread that started it ends, so only when that thread is the main one (it lives as long)
        import threading

        on_death = _die_with_parent if threading.current_thread() is threading.main_thread() else None
        return subprocess.Popen(cmd, env=env, start_new_session=True, preexec_fn=on_death)

    cls._run_uvicorn_command = launch
    cls._own_session = True


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the parent dies (Linux ``PR_SET_PDEATHSIG``)."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the server then outlives a kill -9 of this process, as Prefect's own does


def configure_prefect_env() -> None:
    """Defaults for this process and every process it starts (Dask workers, the temporary server)."""
    os.environ.setdefault(STARTUP_TIMEOUT_ENV, str(EPHEMERAL_STARTUP_TIMEOUT_S))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")


def uses_temporary_server() -> bool:
    """True when flow calls would start Prefect's temporary server (no API URL configured)."""
    from prefect.settings import PREFECT_API_URL

    return not PREFECT_API_URL.value()


def prefect_home() -> Path:
    from prefect.settings import PREFECT_HOME

    return Path(PREFECT_HOME.value()).expanduser()


def _to_stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)  # stdout's first line is the run's summary


def prepare_database(echo: Callable[[str], None] | None = _to_stderr) -> bool:
    """Create or migrate the temporary server's database now, with no time limit.

    Returns True when this call did work a user waits for (a new database), False when the
    database was already there (an up-to-date migration check takes ~0.04 s) or a real server owns
    the database (``PREFECT_API_URL`` set)."""
    if not uses_temporary_server():
        return False
    shield_temporary_server()
    import asyncio

    from prefect.server.database import provide_database_interface

    fresh = not (prefect_home() / "prefect.db").exists()
    if fresh and echo:
        echo(f"[prefect] first run: creating Prefect's database in {prefect_home()} (once, ~10 s) ...")
    prefect_home().mkdir(parents=True, exist_ok=True)
    asyncio.run(provide_database_interface().create_db())
    return fresh


def is_startup_timeout(exc: BaseException) -> bool:
    return isinstance(exc, RuntimeError) and _TIMEOUT_TEXT in str(exc)


def _write_traceback(exc: BaseException) -> Path | None:
    from anonymask.core.runlog import log_dir

    try:
        folder = log_dir()
        folder.mkdir(parents=True, exist_ok=True)
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        path = folder / f"prefect-startup-{stamp}-{os.getpid()}.log"
        path.write_text("".join(traceback.format_exception(exc)))
        return path
    except OSError:
        return None


@contextlib.contextmanager
def startup_errors() -> Iterator[None]:
    """Around a flow call: Prefect's start-up time-out becomes one :class:`PrefectStartupError`."""
    try:
        yield
    except RuntimeError as e:
        if not is_startup_timeout(e):
            raise
        limit = os.environ.get(STARTUP_TIMEOUT_ENV, "20")
        where = _write_traceback(e)
        raise PrefectStartupError(
            f"Prefect's temporary API server did not answer within {limit} s, so nothing was run "
            f"(rerunning is safe). Raise {STARTUP_TIMEOUT_ENV}, or start a server with `make serve` "
            f"and set PREFECT_API_URL=http://127.0.0.1:4200/api"
            + (f"; traceback in {where}" if where else "")
        ) from None


def ready_for_flows(echo: Callable[[str], None] | None = _to_stderr) -> None:
    """Everything a process does before its first flow call without a server of its own."""
    configure_prefect_env()
    prepare_database(echo)
