"""`make gpu-check`'s tiny mode: every section of the GPU check, at toy sizes on this CPU, through the
same processes, budgets and JSON as the real run (so the command cannot rot without a GPU)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from anonymask.bench import gpu_check

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu") / "check.json"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "anonymask.bench.gpu_check", "--tiny", "--out", str(out),
                           "--copy-to", str(out.parent / "copied")], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=540)  # fmt: skip
    return proc, out


def test_tiny_check_runs_every_section_and_writes_the_json(tiny_run):
    proc, out = tiny_run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["tiny"] is True
    assert list(report["sections"]) == list(gpu_check.ORDER)
    statuses = {k: v["status"] for k, v in report["sections"].items()}
    assert statuses == {"mvit": "ok", "refine": "ok", "paper_protocol": "ok", "pipeline": "skipped"}, statuses
    assert (out.parent / "copied" / out.name).read_text() == out.read_text()
    assert "[gpu-check] summary" in proc.stdout


def test_tiny_check_measures_what_the_gpu_run_reports(tiny_run):
    _, out = tiny_run
    report = json.loads(out.read_text())
    s = report["summary"]
    for key in ("mvit_prefix_clips_per_s", "mvit_dpsgd_step_s", "mvit_maskdp_step_s", "mvit_fpdp_step_s",
                "refine_seconds_per_frame", "refine_seconds_per_step", "dry_run_cache_build_seconds",
                "dry_run_seconds_per_epoch"):  # fmt: skip
        assert isinstance(s[key], (int, float)) and s[key] > 0, (key, s.get(key))
    assert set(s["mvit_ratios_to_dpsgd"]) == {"nonprivate", "maskdp", "fpdp"}
    assert s["ntu60_projection"]["ntu60_full_run_hours"] > 0
    refine = report["sections"]["refine"]
    assert refine["result"]["frames"] == gpu_check.TINY["refine"]["frames"] and refine["result"]["steps_run"] == 2
    dry = report["sections"]["paper_protocol"]["dry_run"]
    assert dry["phase"] == "done" and dry["train_clips"] == 12 and dry["epochs_trained"] == 1
    # the pipeline section names what it would need (nothing is missing in the project's venv)
    assert report["sections"]["pipeline"]["missing_packages"] == []


def test_a_failing_section_is_recorded_and_the_check_fails(tmp_path, monkeypatch):
    """A section that raises records its error; the run goes on and exits 1."""
    rec = gpu_check.Recorder(tmp_path / "s.json")

    def boom(rec, cfg, work):
        rec.set(phase="half-way")
        raise RuntimeError("planted")

    monkeypatch.setitem(gpu_check.SECTIONS, "mvit", boom)
    assert gpu_check.run_section("mvit", rec.path, tmp_path / "w", tiny=True) == 1
    saved = json.loads(rec.path.read_text())
    assert saved["status"] == "error" and "planted" in saved["error"] and saved["phase"] == "half-way"


def test_a_section_past_its_budget_is_stopped_and_keeps_what_it_wrote(tmp_path):
    """The budget is enforced on the section's process; what it saved before is kept."""
    result = tmp_path / "mvit.json"
    res = gpu_check._spawn_section("mvit", result, tmp_path / "w", tiny=True, budget=0.5)
    assert res["status"] == "timeout" and "budget" in res["error"]


def test_without_a_gpu_it_says_so_in_one_line_and_exits_2(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    env = {k: v for k, v in os.environ.items() if k != "PYTHON"}
    env["PYTHON"] = sys.executable
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh"), "--out", str(tmp_path / "x.json")],
                          capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert proc.returncode == gpu_check.EXIT_NO_GPU
    assert proc.stdout.strip().count("\n") == 0 and "no CUDA GPU" in proc.stdout, proc.stdout
    assert not (tmp_path / "x.json").exists()
    assert gpu_check.run_check(tmp_path / "y.json") == gpu_check.EXIT_NO_GPU
