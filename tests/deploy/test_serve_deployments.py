"""A real Prefect server (SQLite) + the serve process + `prefect deployment run anonymize/demo`."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.server
VENV_BIN = Path(sys.executable).parent


def test_deployment_run_completes_against_real_server(tiny_dataset, tmp_path, free_port, wait_healthy):
    port = free_port
    api = f"http://127.0.0.1:{port}/api"
    data = tmp_path / "data"
    shutil.copytree(tiny_dataset, data / "raw" / "demo")
    env = dict(os.environ, PREFECT_HOME=str(tmp_path / "prefect"), PREFECT_API_URL=api,
               ANONYMASK_DATA=str(data), PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1",
               PREFECT_SERVER_API_HOST="127.0.0.1", PREFECT_SERVER_API_PORT=str(port))
    env.pop("PREFECT_API_KEY", None)
    logs = tmp_path / "logs"
    logs.mkdir()
    server = subprocess.Popen([str(VENV_BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                              env=env, stdout=open(logs / "server.log", "w"), stderr=subprocess.STDOUT)
    serve = None
    try:
        wait_healthy(api, 120)
        serve = subprocess.Popen([sys.executable, "-m", "anonymask.deploy.serve"], env=env,
                                 stdout=open(logs / "serve.log", "w"), stderr=subprocess.STDOUT)
        params = {"overrides": {"pose4d": {"backend": "gt"}, "segment": {"backend": "gt"}}}
        out = None
        for _ in range(60):  # the serve process registers the deployments first
            out = subprocess.run([str(VENV_BIN / "prefect"), "deployment", "run", "anonymize/demo",
                                  "--params", json.dumps(params), "--watch", "--watch-timeout", "400"],
                                 env=env, capture_output=True, text=True, timeout=480)
            if "not found" not in (out.stdout + out.stderr).lower():
                break
            time.sleep(2)
        text = out.stdout + out.stderr
        assert out.returncode == 0, text + (logs / "serve.log").read_text()[-3000:]
        assert "Completed" in text, text
        runs = subprocess.run([str(VENV_BIN / "prefect"), "flow-run", "ls", "--limit", "20"],
                              env=dict(env, COLUMNS="250"),
                              capture_output=True, text=True, timeout=60).stdout
        for vid in ("s01_a01_r01", "s02_a01_r01", "s01s02_a02_r01"):
            assert vid in runs, runs  # one run per video, named by its id
        assert (data / "stores" / "demo.zarr").exists()
        # a preset is a deployment parameter too: the yolo preset's discovery settings under the
        # ground-truth pose backend are refused in one line, so the flow run fails, before any video
        out = subprocess.run([str(VENV_BIN / "prefect"), "deployment", "run", "anonymize/demo",
                              "--params", json.dumps({**params, "presets": ["yolo"]}), "--watch",
                              "--watch-timeout", "300"], env=env, capture_output=True, text=True, timeout=400)
        text = out.stdout + out.stderr
        assert out.returncode != 0 and "Failed" in text, text
        assert "pose4d.detector is a setting of backend 'mediapipe'" in (logs / "serve.log").read_text()
    finally:
        for p in (serve, server):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGINT)  # a serve process ignores SIGTERM once its server is gone
                try:
                    p.wait(20)
                except subprocess.TimeoutExpired:
                    p.kill()
