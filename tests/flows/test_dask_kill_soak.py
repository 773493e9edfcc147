"""Dask workers killed (kill -9) mid-stage at random points while `anonymize` runs on a real
LocalCluster: every video done once (no finished stage computed again), verify clean, no temporary
file, every array bit-identical to a local run (scripts/dask_kill_soak.py; the 20-kill run is in
docs/RESULTS.md)."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "dask_kill_soak.py"


def _soak_module():
    spec = importlib.util.spec_from_file_location("dask_kill_soak", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _check(rep: dict, kills: int) -> None:
    assert rep["kills"] >= kills, rep
    for rnd in rep["rounds"]:
        assert rnd["arrays"] > 50 and rnd["differ"] == [], rnd
        assert not rnd["recomputed_after_finish"], rnd
        assert all(v == ["done"] for v in rnd["per_video"].values()), rnd
    assert rep["ok"], rep


@pytest.mark.slow  # ~2 min on 2 loaded cores; the fast tier's Dask kill test is test_dask_lost_worker.py
def test_two_worker_kills_mid_stage(prefect_api, tiny_dataset, tiny_anonymized, tmp_path):
    """2 kills in one run; the reference is the tiny set computed locally (stages run directly,
    no Prefect)."""
    rep = _soak_module().soak(2, tmp_path, seed=3, per_round=2, max_delay=1.5, reference=Path(tiny_anonymized),
                               source=Path(tiny_dataset))
    _check(rep, 2)


@pytest.mark.slow
def test_twenty_worker_kills_mid_stage(prefect_api, tmp_path):
    rep = _soak_module().soak(20, tmp_path, seed=0)
    _check(rep, 20)
    assert len(rep["stages_hit"]) >= 3, rep["stages_hit"]  # the kills land in different stages
