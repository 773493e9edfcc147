import json

import numpy as np
import pytest

from anonymask.cli.skeleton import main
from anonymask.core.errors import DatasetError
from anonymask.models.anonymizer.skeleton.anonymizers import anonymize_track, load_anonymizer


def test_cli_writes_results_and_a_loadable_checkpoint(tmp_path):
    out = tmp_path / "run"
    results = main([
        "--data", "synthetic", "--out", str(out), "--subjects", "3", "--actions", "2", "--repetitions", "3",
        "--frames", "12", "--length", "12", "--epochs", "1", "--adv-epochs", "1", "--alphas", "1",
        "--betas", "10", "--sigmas", "0.05", "--threads", "1",
    ])
    rows = json.loads((out / "results.json").read_text())
    assert [r["method"] for r in rows] == [r["method"] for r in results] == ["original", "gaussian", "retarget", "adversarial"]
    assert "anonymizer_state" not in rows[-1]
    assert (out / "results.md").read_text().count("\n") == 2 + len(rows)
    assert (out / "tradeoff.png").stat().st_size > 1000
    model, meta = load_anonymizer(out / "anonymizer_best.pt")
    assert meta["config"]["kind"] == "mlp" and meta["normalization"] == {"root_joint": 0, "align_hips": [12, 16]}
    assert meta["evaluation"]["reid_acc"] == rows[-1]["reid_acc"]
    track = np.random.default_rng(0).normal(size=(7, 25, 3)).astype(np.float32) + 2.0
    assert anonymize_track(model, track, **meta["normalization"]).shape == (7, 25, 3)


def test_cli_rejects_bad_data_files(tmp_path):
    bad = tmp_path / "bad.npz"
    np.savez(bad, sequences=np.zeros((2, 4, 25, 3)), actions=np.zeros(2))
    with pytest.raises(DatasetError, match="bad.npz: missing array"):
        main(["--data", str(bad), "--out", str(tmp_path / "o")])
    with pytest.raises(DatasetError, match="nothere.npz: data file not found"):
        main(["--data", str(tmp_path / "nothere.npz"), "--out", str(tmp_path / "o")])
    mismatch = tmp_path / "mismatch.npz"
    np.savez(mismatch, sequences=np.zeros((2, 4, 25, 3)), actions=np.zeros(2), subjects=np.zeros(3))
    with pytest.raises(DatasetError, match="subjects has 3 entries for 2"):
        main(["--data", str(mismatch), "--out", str(tmp_path / "o")])


def test_save_anonymizer_needs_the_state(tmp_path):
    from anonymask.models.anonymizer.skeleton.anonymizers import save_anonymizer

    with pytest.raises(ValueError, match="keep_states"):
        save_anonymizer(tmp_path / "a.pt", {"anonymizer_config": {"kind": "mlp", "num_joints": 25}})
    with pytest.raises(FileNotFoundError, match="a.pt"):
        load_anonymizer(tmp_path / "a.pt")
