"""`anonymask report`: the accuracy-vs-epsilon table from real run folders (trained here, tiny)."""

from __future__ import annotations

import csv
import json
import math
import statistics

import pytest
import torch

from anonymask.cli.report import accuracy_table, collect_runs, epsilon_column, method_label, write_report
from anonymask.config.training import default_run_name, settings_hash, train_settings
from anonymask.models.training.action.run import build_caches, evaluate_run, fit_run, write_result
from anonymask.models.training.action.synthetic import make_synthetic_store
from anonymask.storage.runs import prepare_run_dir

TINY = {"size": [32, 32], "clip_len": 8, "frame_stride": 1, "epochs": 1, "batch_size": 4,
        "sampling_seed": 100, "compare_accountants": []}  # fmt: skip
RUNS = [  # (mode, epsilon, variant, seed, extra settings)
    ("nonprivate", None, "render", 0, {}),
    ("dp", 2.0, "render", 0, {}),
    ("dp", 8.0, "render", 0, {}),
    ("dp", 8.0, "render", 0, {"noise_multiplier": 0.0}),  # sigma = 0: not private, whatever the target
    ("maskdp", 2.0, "render", 0, {}),
    ("maskdp", 2.0, "render", 1, {}),
    ("maskdp", 8.0, "render", 0, {}),
    ("maskdp", 2.0, "real", 0, {}),
]


def _train(store: str, runs_dir, mode, eps, variant, seed, extra=None, until=None):
    s = train_settings(mode, "synthetic", epsilon=eps, variant=variant,
                       overrides=dict(TINY, seed=seed, noise_seed=seed, epochs=2 if until else 1, **(extra or {})))  # fmt: skip
    run_dir = runs_dir / default_run_name(s)
    prepare_run_dir(run_dir, s.to_json_dict(), settings_hash(s), store)
    caches = build_caches(s, store)
    fit = fit_run(s, store, str(run_dir), caches, until_epoch=until)
    write_result(str(run_dir), evaluate_run(s, store, str(run_dir), caches, fit))


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    store = str(root / "syn.zarr")
    make_synthetic_store(store, num_classes=3, videos_per_class={"train": 4, "test": 2}, frames=10, size=(32, 32))
    runs = root / "runs"
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for mode, eps, variant, seed, extra in RUNS:
            _train(store, runs, mode, eps, variant, seed, extra)
        _train(store, runs, "dp", 4.0, "render", 0, until=1)  # stopped early: left out of the table
    finally:
        torch.set_num_threads(old)
    return runs


def _metrics(runs_dir):
    return [json.loads(p.read_text()) for p in sorted(runs_dir.glob("*/metrics.json"))]


def test_table_cells_are_the_runs_metrics(runs_dir):
    all_runs = _metrics(runs_dir)
    assert len(all_runs) == len(RUNS) + 1
    runs = collect_runs(runs_dir)
    assert len(runs) == len(RUNS)  # the incomplete run is not in the table
    assert len(collect_runs(runs_dir, include_incomplete=True)) == len(RUNS) + 1
    table = accuracy_table(runs, "top1")
    assert table["columns"] == [2.0, 8.0, math.inf]
    cells = {(r["row"], r["method"]): r["cells"] for r in table["rows"]}
    assert list(cells) == [("Real*", "MaskDP (not private)"), ("Render", "Non-private"), ("Render", "DP-SGD"),
                           ("Render", "DP-SGD (sigma=0, not private)"), ("Render", "MaskDP")]  # fmt: skip
    for (row, method), by_eps in cells.items():
        for eps, (mean, std, n) in by_eps.items():
            vals = [m["top1"] for m in all_runs if m["row"] == row and m["complete"] and method_label(m) == method
                    and epsilon_column(m) == eps]  # fmt: skip
            assert n == len(vals) and mean == pytest.approx(sum(vals) / len(vals))
            assert std == pytest.approx(statistics.stdev(vals) if n > 1 else 0.0)
    assert cells[("Render", "MaskDP")][2.0][2] == 2  # two seeds averaged
    assert set(cells[("Render", "Non-private")]) == {math.inf}
    # the sigma = 0 run asked for eps 8 but sits under non-private, never under eps=8
    assert set(cells[("Render", "DP-SGD (sigma=0, not private)")]) == {math.inf}
    sigma0 = [m for m in all_runs if m["mode"] == "dpsgd" and m["sigma"] == 0]
    assert len(sigma0) == 1 and "-sigma0-" in sigma0[0]["run"] and "eps8" not in sigma0[0]["run"]
    assert set(cells[("Real*", "MaskDP (not private)")]) == {2.0}


def test_report_files_and_cli(runs_dir, tmp_path, capsys):
    out = tmp_path / "report"
    res = write_report(runs_dir, out)
    files = res["datasets"]["synthetic"]
    md = (out / "accuracy_synthetic.md").read_text()
    assert "| Render | MaskDP |" in md and "| Real* | MaskDP (not private) |" in md and "non-private" in md
    with open(files["csv"]) as f:
        rows = list(csv.DictReader(f))
    by = {(r["data"], r["method"]): r for r in rows}
    dp8 = [m for m in _metrics(runs_dir) if m["mode"] == "dpsgd" and m["target_epsilon"] == 8.0][0]
    assert float(by[("Render", "DP-SGD")]["eps=8"]) == pytest.approx(dp8["top1"], abs=1e-6)
    assert by[("Render", "DP-SGD")]["non-private"] == ""
    png = (out / "accuracy_synthetic.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    with open(out / "runs.csv") as f:
        listed = list(csv.DictReader(f))
    assert len(listed) == len(RUNS)
    for r in listed:
        if r["private"] == "True":
            assert r["mode"] != "nonprivate" and r["guarantee"].startswith("(")
            assert 0 < float(r["epsilon"]) <= float(r["target_epsilon"]) + 1e-9
        else:
            assert r["epsilon"] == "inf" and r["guarantee"].startswith("none")

    from anonymask.cli.main import main

    assert main(["report", str(runs_dir), "--out", str(tmp_path / "cli"), "--metric", "mean_class_acc"]) == 0
    printed = capsys.readouterr().out
    assert "metric mean_class_acc" in printed and (tmp_path / "cli" / "accuracy_synthetic.csv").is_file()


def test_report_without_runs_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="no finished training run"):
        write_report(tmp_path, tmp_path / "out")


def test_a_run_whose_psi_is_below_the_floor_sits_under_non_private():
    """Issue 28 item 3: the report says private false (psi below the paper's floor); the table puts
    the row under non-private with the reason, never under its nominal epsilon."""
    m = {"mode": "fpdp", "row": "Render", "private": False, "sigma": 1.2, "epsilon": math.inf,
         "target_epsilon": 8.0, "accounting": "sound", "adjacency": "add_remove",
         "guarantee": "none: psi is a blur below the paper's floor (sigma 0.001 px < 1.25 px): ..."}  # fmt: skip
    assert epsilon_column(m) == math.inf
    assert method_label(m) == "FP-DP (psi below floor, not private)"
    real_star = dict(m, mode="maskdp", row="Real*", guarantee="none: mask_source=q ...", adjacency="replace")
    assert epsilon_column(real_star) == 8.0 and method_label(real_star) == "MaskDP (not private)"
