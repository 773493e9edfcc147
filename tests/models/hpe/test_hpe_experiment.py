"""The experiment runner and its tables (one epoch, tiny model: only the plumbing is checked)."""

from __future__ import annotations

import json
import math

import pytest

from anonymask.models.training.hpe.data import split_public
from anonymask.models.training.hpe.experiment import main, results_details, results_table, run_hpe_experiment
from anonymask.models.training.hpe.model import tiny_config


def test_rows_cover_every_strategy_mode_and_epsilon(tiny_crops):
    train, test = tiny_crops
    private, public = split_public(train, 0.3)
    rows = run_hpe_experiment(
        (private, public, test), strategies=("frozen", "scratch"), modes=("nonprivate", "dpsgd", "projdp"),
        epsilons=(2.0, 8.0), epochs=1, model_config=tiny_config(num_keypoints=16), weights="random",
        train_overrides={"batch_size": 4, "subspace_k": 4},
    )  # fmt: skip
    assert len(rows) == 2 * (1 + 2 * 2)
    seen = {(r["strategy"], r["mode"], r["epsilon_target"]) for r in rows}
    assert ("frozen", "nonprivate", math.inf) in seen and ("scratch", "projdp", 8.0) in seen
    for r in rows:
        assert 0.0 <= r["pckh"] <= 1.0 and r["n_public"] == len(public)
        assert "n_private" not in r  # the private set's size is not published
        if r["mode"] != "nonprivate":
            assert r["epsilon"] <= r["epsilon_target"] + 1e-9 and r["sigma"] > 0
    # a smaller budget needs more noise
    sig = {r["epsilon_target"]: r["sigma"] for r in rows if r["strategy"] == "frozen" and r["mode"] == "dpsgd"}
    assert sig[2.0] > sig[8.0]
    table = results_table(rows).splitlines()
    assert table[0] == "| strategy | mode | ε=2 | ε=8 | ε=inf |"
    assert len(table) == 2 + 2 * 3
    frozen_np = next(line for line in table if line.startswith("| frozen | nonprivate |"))
    value = next(r["pckh"] for r in rows if r["strategy"] == "frozen" and r["mode"] == "nonprivate")
    cells = [c.strip() for c in frozen_np.strip("|").split("|")]
    assert cells == ["frozen", "nonprivate", "", "", f"{100 * value:.1f}"]
    assert len(results_details(rows).splitlines()) == 2 + len(rows)


def test_command_line_entry_point(tiny_dataset, tmp_path, capsys):
    out = tmp_path / "rows.json"
    md = tmp_path / "table.md"
    code = main([
        "--root", str(tiny_dataset), "--strategies", "frozen", "--modes", "nonprivate", "fpdp",
        "--epsilons", "4", "--epochs", "1", "--k", "2", "--batch-size", "4", "--json", str(out), "--markdown", str(md),
    ])  # fmt: skip
    assert code == 0
    rows = json.loads(out.read_text())
    assert [(r["mode"], r["epsilon_target"]) for r in rows] == [("nonprivate", "inf"), ("fpdp", 4.0)]
    # the public videos train raw: named in every row (issue 28 item 4); a larger holdout is refused
    assert all(r["unprotected_videos"] and r["record"] == "video" for r in rows)
    with pytest.raises(ValueError, match="above the cap"):
        main(["--root", str(tiny_dataset), "--modes", "nonprivate", "--epochs", "1", "--public-fraction", "0.5"])
    assert "| frozen | fpdp |" in md.read_text() and "| frozen | fpdp |" in capsys.readouterr().out
