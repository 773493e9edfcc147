"""kill -9 at random points of a real `anonymask anonymize` run, then a resume: verify clean after
every kill, no temporary file left, outputs bit-identical to an uninterrupted run
(scripts/kill_soak.py; the 100-kill run is in docs/RESULTS.md)."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "kill_soak.py"


@pytest.mark.slow
def test_three_kills_then_resume_is_bit_identical(tmp_path):
    spec = importlib.util.spec_from_file_location("kill_soak", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rep = mod.soak(3, tmp_path, real=False, seed=1)
    assert rep["arrays"] > 50 and rep["differ"] == []
    assert rep["ok"], rep
