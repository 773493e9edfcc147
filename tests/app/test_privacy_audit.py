"""`anonymask privacy audit RUN_DIR` on real tiny run folders (trained here) and on tampered copies:
every tampering that would make a published claim false is caught, with exit code 1."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from anonymask.cli.main import main
from anonymask.config.training import default_run_name, settings_hash, train_settings
from anonymask.models.training.action.run import build_caches, evaluate_run, fit_run, write_result
from anonymask.models.training.action.synthetic import make_synthetic_store
from anonymask.storage.runs import prepare_run_dir

TINY = {"size": [32, 32], "clip_len": 8, "frame_stride": 1, "epochs": 1, "batch_size": 4, "compare_accountants": []}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("audit")
    store = str(root / "syn.zarr")
    make_synthetic_store(store, num_classes=3, videos_per_class={"train": 4, "test": 2}, frames=10, size=(32, 32))
    out = {}
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for key, mode, extra in [("fpdp", "fpdp", {}), ("sigma0", "dp", {"noise_multiplier": 0.0})]:
            s = train_settings(mode, "synthetic", epsilon=8.0, overrides=dict(TINY, **extra))
            run_dir = root / "runs" / default_run_name(s)
            prepare_run_dir(run_dir, s.to_json_dict(), settings_hash(s), store)
            caches = build_caches(s, store)
            fit = fit_run(s, store, str(run_dir), caches)
            write_result(str(run_dir), evaluate_run(s, store, str(run_dir), caches, fit))
            out[key] = run_dir
    finally:
        torch.set_num_threads(old)
    return out


def _audit(run_dir, capsys) -> tuple[int, str]:
    code = main(["privacy", "audit", str(run_dir)])
    return code, capsys.readouterr().out


@pytest.mark.parametrize("key", ["fpdp", "sigma0"])
def test_a_real_run_passes_every_check(runs, key, capsys):
    code, out = _audit(runs[key], capsys)
    assert code == 0 and "FAIL" not in out and out.rstrip().endswith("all checks passed")
    names = {line.split()[1].rstrip(":") for line in out.splitlines() if line.startswith("PASS")}
    assert {"epsilon", "seeds", "adjacency", "disclosures", "published"} <= names
    if key == "fpdp":
        assert {"psi_floor", "scope"} <= names
    else:
        assert "sigma0" in names


def _tampered(src, tmp_path, edit, name=None):
    dst = tmp_path / (name or src.name)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("checkpoint.pt"))
    rep = json.loads((dst / "privacy.json").read_text())
    edit(rep, dst)
    (dst / "privacy.json").write_text(json.dumps(rep))
    return dst


def _set(**kv):
    return lambda rep, _: rep.update(kv)


TAMPER = {  # what a false claim looks like -> the check that must fail
    "epsilon": _set(epsilon=1.0),
    "seeds": lambda rep, _: rep["seeds"].update(fixed_pairwise_distinct=False),
    "adjacency": _set(adjacency="replace"),
    "psi_floor": lambda rep, _: rep["psi"].update(sigma_px=0.001),
    "disclosures": _set(disclosures={}),
    "published": _set(dataset_fingerprint="ab" * 32),
    "scope": _set(guarantee="(8, 1e-05)-DP per video; protects: everything"),
    "history": lambda rep, _: rep.update(steps=rep["steps"] + 1),
}


@pytest.mark.parametrize("check", sorted(TAMPER))
def test_a_tampered_fpdp_run_fails_the_right_check(runs, tmp_path, capsys, check):
    code, out = _audit(_tampered(runs["fpdp"], tmp_path, TAMPER[check]), capsys)
    assert code == 1, out
    failed = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert any(line.startswith(f"FAIL {check}:") for line in failed), out


def test_a_sigma0_run_named_for_its_target_fails(runs, tmp_path, capsys):
    renamed = _tampered(runs["sigma0"], tmp_path, lambda rep, _: None,
                        name=runs["sigma0"].name.replace("sigma0", "eps8"))  # fmt: skip
    code, out = _audit(renamed, capsys)
    assert code == 1 and "FAIL sigma0:" in out
    code, out = _audit(_tampered(runs["sigma0"], tmp_path / "p", _set(private=True)), capsys)
    assert code == 1 and "FAIL sigma0:" in out


def test_a_missing_folder_is_an_error(tmp_path, capsys):
    assert main(["privacy", "audit", str(tmp_path / "nope")]) == 2
    assert main(["privacy", "audit", str(tmp_path)]) == 1  # a folder without privacy.json
    assert "FAIL report" in capsys.readouterr().out
