"""Two `anonymask anonymize` processes on one store at the same moment, repeated: both succeed,
every video is computed by exactly one of them, and the store verifies clean."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from anonymask.storage.inspect import verify_store
from anonymask.storage.store import DatasetStore
from anonymask.tasks.common import stage_deps

SUMMARY = re.compile(r"^anonymize demo: (\d+) done, (\d+) skipped \(already complete\), (\d+) failed of (\d+) videos")


@pytest.mark.slow
@pytest.mark.parametrize("trial", range(3))
def test_two_runs_on_one_store_cooperate(tiny_dataset, tmp_path, trial):
    src = tmp_path / "raw"
    shutil.copytree(tiny_dataset, src)
    store = tmp_path / "s.zarr"
    env = dict(os.environ, PYOPENGL_PLATFORM="egl", ANONYMASK_LOG_DIR=str(tmp_path / "logs"))
    cmd = [sys.executable, "-m", "anonymask.cli", "anonymize", "--dataset", "demo", "--source", str(src),
           "--store", str(store), "--set", "pose4d.backend=gt", "segment.backend=gt"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    done = 0
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, (out, err[-3000:])
        m = SUMMARY.match(out.splitlines()[0])
        assert m, out
        d, skipped, failed, videos = (int(x) for x in m.groups())
        assert failed == 0 and videos == 3 and d + skipped == 3
        done += d
        assert "Traceback" not in out + err
    assert done == 3, outs  # each video computed by exactly one run
    s = DatasetStore.open(str(store))
    assert verify_store(s, deps=stage_deps()).ok
    for e in s.videos():
        assert all(r["status"] == "done" for r in e.records().values()), e.video_id
