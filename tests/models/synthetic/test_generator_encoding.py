"""The generator's videos are the same bytes whatever number of cores the machine has.

libx264's default thread count follows the cores it may run on, and its bitstream changes with the
thread count: the demo's data (and so its verdicts) differed between a 2-core and a many-core
machine. The generator encodes with one thread (``ENCODE``)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys

import pytest

SCRIPT = r"""
import hashlib, sys
import numpy as np
from anonymask.models.shared.synthetic.generator import ENCODE
from anonymask.storage.video_io import write_mp4
opts = ENCODE if sys.argv[2] == "generator" else {"crf": 16, "preset": "medium"}
rng = np.random.default_rng(0)
base = rng.integers(0, 255, (192, 256, 3), dtype=np.uint8)
frames = np.stack([np.roll(base, 3 * t, axis=1) for t in range(12)])  # motion: real motion search
write_mp4(sys.argv[1], frames, 15.0, **opts)
"""


def _encode(tmp_path, cpus: str, which: str) -> str:
    out = tmp_path / f"{which}_{cpus.replace(',', '_')}.mp4"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run(["taskset", "-c", cpus, sys.executable, "-c", SCRIPT, str(out), which], check=True, env=env)
    return hashlib.md5(out.read_bytes()).hexdigest()


@pytest.mark.skipif(shutil.which("taskset") is None or len(os.sched_getaffinity(0)) < 2,
                    reason="needs taskset and 2 cores to vary the cores x264 sees")
def test_generated_video_bytes_do_not_depend_on_the_cores_available(tmp_path):
    cpus = sorted(os.sched_getaffinity(0))
    one, two = str(cpus[0]), f"{cpus[0]},{cpus[1]}"
    # the premise: x264's default really does change with the cores it sees
    assert _encode(tmp_path, one, "default") != _encode(tmp_path, two, "default")
    assert _encode(tmp_path, one, "generator") == _encode(tmp_path, two, "generator")
