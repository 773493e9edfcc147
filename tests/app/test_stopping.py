"""SIGTERM and Ctrl-C (SIGINT to the process group) stop `anonymize` and `make serve` within 10 s,
with no traceback, no process left behind, and the run in flight recorded as crashed, never left
"Running". Real processes, a real Prefect server."""

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "ph"), ANONYMASK_DATA=str(tmp_path / "data"),
               ANONYMASK_LOG_DIR=str(tmp_path / "logs"), PYOPENGL_PLATFORM="egl", **extra)
    return env


def _session_alive(sid: int) -> list[int]:
    """Pids still running in session ``sid`` (zombies excluded)."""
    import psutil

    alive = []
    for p in psutil.process_iter(["pid", "status"]):
        try:
            if os.getsid(p.info["pid"]) == sid and p.info["status"] != psutil.STATUS_ZOMBIE:
                alive.append(p.info["pid"])
        except (ProcessLookupError, PermissionError, psutil.Error):
            pass
    return alive


def _wait_for(path: Path, text: str, timeout: float) -> None:
    t0 = time.time()
    while time.time() - t0 < timeout:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        time.sleep(0.5)
    raise TimeoutError(f"{text!r} not in {path} after {timeout}s: {path.read_text(errors='replace')[-2000:]}")


def _stop_and_time(pgid: int, sig: int, to_group: bool) -> float:
    (os.killpg if to_group else os.kill)(pgid, sig)
    t0 = time.time()
    while _session_alive(pgid) and time.time() - t0 < 30:
        time.sleep(0.1)
    return time.time() - t0


@pytest.mark.parametrize("sig, to_group", [(signal.SIGTERM, False), (signal.SIGINT, True)], ids=["sigterm", "ctrl-c"])
def test_anonymize_stops_within_10s_and_records_the_run_crashed(tiny_dataset, tmp_path, sig, to_group):
    err = tmp_path / "err.log"
    cmd = [sys.executable, "-m", "anonymask.cli", "anonymize", "--dataset", "demo", "--source", str(tiny_dataset),
           "--store", str(tmp_path / "s.zarr"), "--set", "pose4d.backend=gt", "segment.backend=gt"]
    with open(tmp_path / "out.log", "w") as out, open(err, "w") as e:
        p = subprocess.Popen(cmd, stdout=out, stderr=e, env=_env(tmp_path), start_new_session=True)
    try:
        _wait_for(err, "Beginning subflow run", 300)  # a video's stages are in flight
        time.sleep(1.0)
        seconds = _stop_and_time(p.pid, sig, to_group)
    finally:
        for pid in _session_alive(p.pid):
            os.kill(pid, signal.SIGKILL)
    p.wait(5)
    text = err.read_text()
    assert seconds < 10, (seconds, text[-3000:])
    assert p.returncode == 128 + sig, text[-3000:]
    assert "Traceback" not in text
    assert f"stopping on {signal.Signals(sig).name}" in text
    db = sqlite3.connect(tmp_path / "ph" / "prefect.db")
    states = dict(db.execute("select name, state_type from flow_run").fetchall())
    assert states and "RUNNING" not in states.values(), states  # the temporary server outlived the signal


@pytest.mark.server
@pytest.mark.parametrize("sig, to_group", [(signal.SIGINT, True), (signal.SIGTERM, False)], ids=["ctrl-c", "sigterm"])
def test_make_serve_stops_within_10s_without_traceback(tmp_path, sig, to_group, free_port):
    log = tmp_path / "serve.log"
    env = _env(tmp_path, PREFECT_PORT=str(free_port), PYTHON=sys.executable)
    with open(log, "w") as out:
        p = subprocess.Popen(["bash", str(ROOT / "scripts" / "serve.sh")], stdout=out, stderr=subprocess.STDOUT,
                             env=env, start_new_session=True, cwd=ROOT)
    try:
        _wait_for(log, "serving", 240)  # the deployments are being served
        _wait_for(log, "Your deployments are being served", 120)
        seconds = _stop_and_time(p.pid, sig, to_group)
        assert seconds < 10, (seconds, log.read_text()[-3000:])
        assert not _session_alive(p.pid)
        # the server ran in a session of its own: it must be gone too
        server_pids = [q for q in _children_sessions(tmp_path)]
        assert server_pids == [], server_pids
    finally:
        for pid in _session_alive(p.pid):
            os.kill(pid, signal.SIGKILL)
    text = log.read_text()
    assert "Traceback" not in text and "NoEventLoopError" not in text, text[-3000:]


def _children_sessions(tmp_path) -> list[int]:
    """Prefect server processes started with this test's PREFECT_HOME that are still running."""
    import psutil

    home = str(tmp_path / "ph")
    found = []
    for p in psutil.process_iter(["pid", "cmdline", "environ"]):
        try:
            if "server" in " ".join(p.info["cmdline"] or []) and (p.info["environ"] or {}).get("PREFECT_HOME") == home:
                found.append(p.info["pid"])
        except psutil.Error:
            pass
    return found


@pytest.mark.parametrize("sig, bridge", [(signal.SIGINT, False), (signal.SIGTERM, True)],
                         ids=["ctrl-c", "sigterm-in-a-flow-run"])
def test_a_signal_during_an_import_waits_for_the_import_to_finish(tmp_path, sig, bridge):
    """A stop raised inside an import can abort the interpreter (torch's C++ import code did: exit
    -6 instead of 130 or 143). The stop must let the import finish, then unwind as usual. In a flow
    run SIGTERM first meets Prefect's own handler (``capture_sigterm``, what every flow engine
    installs), which must wait too."""
    (tmp_path / "slowmod.py").write_text(
        "import pathlib, time\n"
        f"pathlib.Path({str(tmp_path / 'started')!r}).touch()\n"
        "time.sleep(2.0)\n"
        f"pathlib.Path({str(tmp_path / 'imported')!r}).touch()\n")
    inner = ("        import slowmod\n"
             "        time.sleep(30)\n")
    script = ("import sys, time, contextlib\n"
              f"sys.path.insert(0, {str(tmp_path)!r})\n"
              "import anonymask.flows\n"
              "from prefect.utilities.engine import capture_sigterm\n"
              "from anonymask.core.stopping import stop_on_signals\n"
              "with stop_on_signals():\n"
              f"    with {'capture_sigterm()' if bridge else 'contextlib.nullcontext()'}:\n" + inner)
    p = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stderr=subprocess.PIPE, text=True,
                         env=_env(tmp_path))
    t0 = time.time()
    while not (tmp_path / "started").exists() and time.time() - t0 < 60:
        time.sleep(0.05)
    t0 = time.time()
    os.kill(p.pid, sig)
    _, err = p.communicate(timeout=20)
    assert p.returncode == 128 + sig, err
    assert (tmp_path / "imported").exists(), "the stop broke into the import"
    assert "Traceback" not in err and f"stopping on {signal.Signals(sig).name}" in err, err
    assert time.time() - t0 < 5.0  # stopped right after the import, not at the grace timeout


_CHILD_TASK_RUNNING = '''
import asyncio, sys, time
import anyio
from anonymask.core.stopping import stop_on_signals

async def child():
    print("ready", flush=True)
    while True:
        time.sleep(0.01)  # the main thread is inside this child task's step when the signal lands

async def main():
    async with anyio.create_task_group() as tg:
        tg.start_soon(child)

with stop_on_signals():
    try:
        asyncio.run(main())
    except KeyboardInterrupt:  # what prefect.serve does
        print("shutting down", flush=True)
'''


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_a_stop_inside_an_event_loops_child_task_prints_no_traceback(tmp_path, sig):
    """The race behind a red CI run: Ctrl-C while Prefect's runner was connecting to its API at
    start-up raised the interrupt inside a child task, and asyncio printed the parent's exception
    group at shutdown. Reproduced deterministically: the child task holds the main thread."""
    script = tmp_path / "loop.py"
    script.write_text(_CHILD_TASK_RUNNING)
    log = tmp_path / "out.log"
    with open(log, "w") as out:
        p = subprocess.Popen([sys.executable, str(script)], stdout=out, stderr=subprocess.STDOUT,
                             env=_env(tmp_path), cwd=tmp_path)
    try:
        _wait_for(log, "ready", 60)
        p.send_signal(sig)
        assert p.wait(timeout=20) == 128 + sig
    finally:
        p.kill()
    text = log.read_text()
    assert "stopping on" in text and "shutting down" in text, text
    assert "Traceback" not in text and "unhandled exception" not in text, text


def test_errors_other_than_the_stop_are_still_logged():
    """The filter drops only a group of interrupts, and only once a stop was requested."""
    import asyncio
    import logging

    from anonymask.core import stopping

    def record(exc):
        return logging.LogRecord("asyncio", logging.ERROR, __file__, 1, "x", None, (type(exc), exc, None))

    quiet = stopping._QuietStopShutdown()
    group = BaseExceptionGroup("g", [KeyboardInterrupt(), asyncio.CancelledError()])
    mixed = BaseExceptionGroup("g", [KeyboardInterrupt(), ValueError("real")])
    assert quiet.filter(record(group))  # no stop requested: shown
    stopping._stopping["signal"] = signal.SIGINT
    try:
        assert not quiet.filter(record(group))
        assert not quiet.filter(record(KeyboardInterrupt()))
        assert quiet.filter(record(mixed))
        assert quiet.filter(record(ValueError("real")))
    finally:
        stopping._stopping.pop("signal", None)
