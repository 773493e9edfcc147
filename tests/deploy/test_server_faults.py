"""The Prefect server killed mid-run, and a restarted `make serve` picking up a scheduled run.

Real processes throughout: `bash scripts/serve.sh` (what `make serve` runs: a Prefect server on
SQLite and `python -m anonymask.deploy.serve`), `prefect deployment run anonymize/demo` on the
tiny set with ground-truth pose and masks.

1. kill -9 the server while a video is in flight: `make serve` ends by itself in bounded time with
   one line saying why (it used to sit there for minutes, the flow-run process doing nothing), no
   process is left, and `verify` finds no damage.
2. With `make serve` down, start the server alone (same PREFECT_HOME) and create a run: it waits,
   Scheduled. Stop the server. Start `make serve` again: it picks the run up and completes it,
   and no stage that finished before the kill is computed again (`finished_at` unchanged).
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from anonymask.storage.inspect import verify_store
from anonymask.storage.store import DatasetStore
from anonymask.tasks.common import ORDER, stage_deps

pytestmark = pytest.mark.server
ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
VIDS = ["s01_a01_r01", "s02_a01_r01", "s01s02_a02_r01"]
PARAMS = {"overrides": {"pose4d": {"backend": "gt"}, "segment": {"backend": "gt"}}}
GIVE_UP_BOUND_S = 90  # serve.API_LOST_S (30) + the stop of its children + margin for 2 loaded cores


def _flow_run_state(api: str, run_id: str) -> str:
    with urllib.request.urlopen(f"{api}/flow_runs/{run_id}", timeout=10) as r:
        return json.load(r)["state"]["type"]


def _create_run(env: dict, timeout: float = 180) -> str:
    """`prefect deployment run anonymize/demo` (retried while the deployment is not registered yet)."""
    t0 = time.time()
    while True:
        out = subprocess.run([str(VENV_BIN / "prefect"), "deployment", "run", "anonymize/demo",
                              "--params", json.dumps(PARAMS)], env=env, capture_output=True, text=True, timeout=120)
        m = re.search(r"UUID: ([0-9a-f-]{36})", out.stdout)
        if out.returncode == 0 and m:
            return m.group(1)
        if time.time() - t0 > timeout:
            raise AssertionError(out.stdout + out.stderr)
        time.sleep(2)


def _finished(store: Path) -> dict[str, str]:
    """video/stage -> finished_at of every stage recorded done."""
    out = {}
    if not (store / "zarr.json").exists():
        return out
    try:
        s = DatasetStore.open(str(store), mode="r")
        for vid in VIDS:
            if s.has_video(vid):
                for name, rec in s.video(vid).records().items():
                    if isinstance(rec, dict) and rec.get("status") == "done":
                        out[f"{vid}/{name}"] = rec.get("finished_at")
    except Exception:  # a record being written this instant
        pass
    return out


def _processes(root_pid: int) -> list:
    import psutil

    try:
        p = psutil.Process(root_pid)
        return [p, *p.children(recursive=True)]
    except psutil.Error:
        return []


def _alive(procs) -> list[str]:
    import psutil

    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(f"{p.pid} {p.status()} {' '.join(p.cmdline()[:4])}")
        except psutil.Error:
            pass
    return out


def _stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


@pytest.mark.slow
def test_server_killed_mid_run_then_a_restarted_make_serve_completes_a_scheduled_run(tiny_dataset, tmp_path, free_port,
                                                                                   wait_healthy):
    import shutil

    port = free_port
    api = f"http://127.0.0.1:{port}/api"
    data = tmp_path / "data"
    shutil.copytree(tiny_dataset, data / "raw" / "demo")
    store = data / "stores" / "demo.zarr"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "prefect"), PREFECT_PORT=str(port), PYTHON=sys.executable,
               ANONYMASK_DATA=str(data), ANONYMASK_LOG_DIR=str(tmp_path / "logs"), PYOPENGL_PLATFORM="egl",
               DO_NOT_TRACK="1", PREFECT_SERVER_ANALYTICS_ENABLED="false")
    client_env = dict(env, PREFECT_API_URL=api)
    serve_cmd = ["bash", str(ROOT / "scripts" / "serve.sh")]

    # -- 1. make serve, a deployment run, kill -9 the server while a video is in flight
    log1 = tmp_path / "serve1.log"
    serve = subprocess.Popen(serve_cmd, env=env, stdout=open(log1, "w"), stderr=subprocess.STDOUT,
                             start_new_session=True)
    try:
        wait_healthy(api, 240)
        first = _create_run(client_env)
        t0 = time.time()
        while len(_finished(store)) < 4:  # the first video is in its stages
            assert time.time() - t0 < 400 and serve.poll() is None, log1.read_text()[-3000:]
            time.sleep(0.2)
        procs = _processes(serve.pid)
        server = [p for p in procs if "server" in p.cmdline() and "start" in p.cmdline()]
        assert server, [p.cmdline() for p in procs]
        assert any("prefect.engine" in " ".join(p.cmdline()) for p in procs), "no flow-run process"
        os.killpg(server[0].pid, signal.SIGKILL)  # the server's whole session (serve.sh starts it with setsid)
        killed_at = time.time()
        try:
            rc = serve.wait(GIVE_UP_BOUND_S + 60)
        except subprocess.TimeoutExpired:
            rc = None
        took = time.time() - killed_at
        text = log1.read_text(errors="replace")
        assert rc is not None and took < GIVE_UP_BOUND_S, f"make serve still running {took:.0f}s after the server died"
        assert rc == 3, (rc, text[-3000:])
        assert text.count("anonymask serve: the Prefect API at") == 1, text[-3000:]
        t1 = time.time()
        while _alive(procs) and time.time() - t1 < 15:  # a killed process may take a moment to exit
            time.sleep(0.5)
        assert not _alive(procs), _alive(procs)
        print(f"make serve gave up {took:.1f} s after the server was killed (exit {rc})")
    finally:
        _stop(serve)
    before = _finished(store)
    assert 4 <= len(before) < len(VIDS) * len(ORDER), before
    assert verify_store(DatasetStore.open(str(store)), deps=stage_deps()).ok

    # -- 2. the server alone: a run created while nothing serves waits, Scheduled
    server = subprocess.Popen([str(VENV_BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                              env=client_env, stdout=open(tmp_path / "server2.log", "w"), stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        wait_healthy(api, 240)
        second = _create_run(client_env)
        time.sleep(2)
        assert _flow_run_state(api, second) == "SCHEDULED"
        assert _flow_run_state(api, first) != "COMPLETED"
    finally:
        _stop(server)

    # -- 3. make serve again: it runs the scheduled run to completion, finished stages kept
    log3 = tmp_path / "serve3.log"
    serve = subprocess.Popen(serve_cmd, env=env, stdout=open(log3, "w"), stderr=subprocess.STDOUT,
                             start_new_session=True)
    try:
        wait_healthy(api, 240)
        t0 = time.time()
        state = None
        while time.time() - t0 < 480:
            state = _flow_run_state(api, second)
            if state in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
                break
            assert serve.poll() is None, log3.read_text()[-3000:]
            time.sleep(2)
        assert state == "COMPLETED", (state, log3.read_text()[-3000:])
        took = time.time() - t0
    finally:
        _stop(serve)
    after = _finished(store)
    assert len(after) == len(VIDS) * len(ORDER), sorted(set(f"{v}/{s}" for v in VIDS for s in ORDER) - set(after))
    assert {k: after[k] for k in before} == before  # nothing that had finished was computed again
    assert verify_store(DatasetStore.open(str(store)), deps=stage_deps()).ok
    print(f"the run scheduled while nothing served completed {took:.0f} s after make serve restarted; "
          f"{len(before)} stages had finished before the kill, none recomputed")
