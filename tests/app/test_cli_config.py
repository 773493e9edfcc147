"""`anonymask config show`: the effective settings, validated, one line on a bad one."""

import json

from anonymask.cli import main


def test_config_show_train_prints_resolved_settings(capsys):
    assert main(["config", "show", "--train", "maskdp", "--dataset", "ntu", "--set", "epochs=20"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["mode"] == "maskdp" and shown["epochs"] == 20 and shown["delta"] == 1e-6
    assert shown["adjacency"] == "replace" and shown["mask_source"] == "r"  # "auto" decided


def test_config_show_rejects_a_typo_in_one_line(capsys):
    assert main(["config", "show", "--train", "dp", "--dataset", "ntu", "--set", "epohs=20"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown setting 'epohs'" in err[0]


def test_config_show_pipeline(capsys):
    assert main(["config", "show", "--dataset", "demo"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert "ingest" in shown and "segment" in shown
