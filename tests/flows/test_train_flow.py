"""The train flow through real Prefect, Zarr and the trainer on a tiny synthetic action store:
every mode, the privacy report's fields and numbers, cache reuse, resume, settings."""

from __future__ import annotations

import json
import math

import pytest
import torch

from anonymask.config.training import default_run_name, train_settings
from anonymask.models.training.action.synthetic import make_synthetic_store
from anonymask.models.training.privacy.accountant import epsilon as account
from anonymask.storage.store import DatasetStore

TINY = {
    "size": [32, 32], "clip_len": 8, "frame_stride": 1, "epochs": 1, "batch_size": 4, "noise_seed": 0,
    "sampling_seed": 1, "compare_accountants": [], "fpdp_public_size": 4, "fpdp_k": 2,
}  # fmt: skip
PRIVACY_FIELDS = {"mode", "epsilon", "delta", "sigma", "q", "steps", "C", "accountant", "mask_policy",
                  "seeds", "disclosures", "adjacency", "accounting", "private", "guarantee", "record",
                  "public_term", "psi", "labels"}  # fmt: skip


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    url = str(tmp_path_factory.mktemp("train") / "syn.zarr")
    make_synthetic_store(url, num_classes=3, videos_per_class={"train": 4, "test": 2}, frames=10, size=(32, 32))
    return url


def run(store, runs, mode, **kw):
    from anonymask.flows.train import train

    overrides = dict(TINY, **kw.pop("overrides", {}))
    state = train(mode=mode, dataset="synthetic", store=store, runs_dir=str(runs), overrides=overrides,
                  return_state=True, **kw)  # fmt: skip
    assert state.is_completed(), state.message
    return state.result()


@pytest.mark.parametrize(
    ("mode", "variant", "row"),
    [("nonprivate", "render", "Render"), ("dp", "render", "Render"), ("maskdp", "render", "Render"),
     ("maskdp", "real", "Real*"), ("fpdp", "real", "Real")],
)  # fmt: skip
def test_each_mode_writes_metrics_and_privacy_report(prefect_api, store, tmp_path, mode, variant, row):
    overrides = {"compare_accountants": ["pld"]} if mode == "dp" else {}
    res = run(store, tmp_path, mode, epsilon=4.0, variant=variant, overrides=overrides)
    run_dir = tmp_path / res["run"]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    privacy = json.loads((run_dir / "privacy.json").read_text())
    assert (run_dir / "checkpoint.pt").is_file() and (run_dir / "result.md").is_file()
    assert metrics["row"] == row and metrics["complete"] and metrics["epochs"] == 1
    assert 0.0 <= metrics["top1"] <= 1.0 and 0.0 <= metrics["mean_class_acc"] <= 1.0
    assert set(metrics["per_class_acc"]) == {"action0", "action1", "action2"}
    assert metrics["eval_videos"] == 6
    assert PRIVACY_FIELDS <= set(privacy)
    assert "dataset_fingerprint" not in privacy and "fingerprint" not in (run_dir / "result.md").read_text()
    if mode != "nonprivate":  # which streams were fixed, never their values
        assert privacy["seeds"]["source"] == {"noise": "fixed", "sampling": "fixed", "public": "os_entropy"}
    trainer_mode = {"dp": "dpsgd"}.get(mode, mode)
    assert privacy["mode"] == trainer_mode and metrics["mode"] == trainer_mode
    if mode == "nonprivate" or row == "Real*":  # Real*: the real person is public, no guarantee
        assert privacy["epsilon"] == "inf" and metrics["epsilon"] == "inf"
        assert not privacy["private"] and privacy["guarantee"].startswith("none")
        return
    eps = float(privacy["epsilon"])
    assert privacy["private"] and privacy["accounting"] == "sound" and metrics["private"]
    assert math.isfinite(eps) and 0.9 * 4.0 <= eps <= 4.0 + 1e-6
    assert privacy["accountant"] == "rdp" and privacy["C"] == 1.0 and privacy["delta"] == 1e-5
    assert privacy["adjacency"] == ("replace" if mode == "maskdp" else "add_remove") == metrics["adjacency"]
    # the report's numbers are what an independent accountant call gives for its (q, sigma, steps)
    again = account(privacy["q"], privacy["sigma"], privacy["steps"], privacy["delta"], "rdp", privacy["adjacency"])
    assert again == pytest.approx(eps)
    n_train = 12 - (1 if mode == "fpdp" else 0)  # FP-DP holds one video out as its public set
    assert privacy["q"] == pytest.approx(4 / n_train)
    assert "train_clips" not in metrics  # the private set's size is not published
    if mode == "dp":
        assert 0 < privacy["epsilon_other"]["pld"] <= eps  # the tight accountant beside RDP
    if mode == "maskdp":
        assert f"mask_source={'q' if variant == 'real' else 'r'}" in privacy["mask_policy"]
    if mode == "fpdp":  # the holdout video is named: it trains raw, without protection
        assert metrics["public_clips"] == 1
        d = privacy["disclosures"]
        assert d["unprotected_count"] == 1 and len(d["unprotected_videos"]) == 1
        assert d["unprotected_videos"][0] in (run_dir / "result.md").read_text()
    else:
        assert privacy["disclosures"] == {}


def test_paper_accounting_reproduces_the_paper_and_says_it_is_not_valid(prefect_api, store, tmp_path):
    res = run(store, tmp_path, "maskdp", epsilon=4.0, overrides={"accounting": "paper"})
    privacy = json.loads((tmp_path / res["run"] / "privacy.json").read_text())
    assert not privacy["private"] and privacy["accounting"] == "paper" and privacy["adjacency"] == "add_remove"
    assert "not a valid DP guarantee" in privacy["guarantee"]
    assert 0.9 * 4.0 <= float(privacy["epsilon"]) <= 4.0 + 1e-6  # Theorem 1's number, as the paper reports it
    assert privacy["epsilon_other"]["same_batch_sound_add_remove"] > 4.0
    md = (tmp_path / res["run"] / "result.md").read_text()
    assert "not a valid DP guarantee" in md


def test_cache_is_shared_and_resume_does_not_redo_epochs(prefect_api, tmp_path):
    store = str(tmp_path / "own.zarr")
    make_synthetic_store(store, num_classes=3, videos_per_class={"train": 4, "test": 2}, frames=10, size=(32, 32))
    two = {"epochs": 2}
    first = run(store, tmp_path, "dp", epsilon=2.0, overrides=two, until_epoch=1)
    assert first["fit"]["epochs_done"] == 1 and not first["metrics"]["complete"]
    ckpt = tmp_path / first["run"] / "checkpoint.pt"
    assert torch.load(ckpt, weights_only=False)["epoch"] == 1

    second = run(store, tmp_path, "dp", epsilon=2.0, overrides=two)
    fit = second["fit"]
    assert second["run"] == first["run"]
    assert fit["resumed_from_epoch"] == 1 and fit["epochs_run"] == 1 and fit["epochs_done"] == 2
    assert second["metrics"]["complete"] and second["metrics"]["steps"] == 2 * first["metrics"]["steps"]
    assert [h["epoch"] for h in second["metrics"]["history"]] == [1, 2]

    # the resumed run ends where an uninterrupted one does
    straight = run(store, tmp_path, "dp", epsilon=2.0, overrides=two, run_name="straight")
    a = torch.load(ckpt, weights_only=False)["trainable"]
    b = torch.load(tmp_path / "straight" / "checkpoint.pt", weights_only=False)["trainable"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert straight["metrics"]["epsilon"] == second["metrics"]["epsilon"]

    # a finished run is not retrained; its metrics are reused
    again = run(store, tmp_path, "dp", epsilon=2.0, overrides=two)
    assert again["fit"]["epochs_run"] == 0 and again["metrics"] == second["metrics"]

    # DP-SGD and the non-private run read the same cached prefix features (train + eval groups)
    run(store, tmp_path, "nonprivate")
    assert len(list(DatasetStore.open(store, mode="r").group["cache"].group_keys())) == 2


def test_a_run_folder_belongs_to_one_configuration(prefect_api, store, tmp_path):
    run(store, tmp_path, "nonprivate", run_name="fixed")
    from anonymask.flows.train import train

    state = train(mode="nonprivate", dataset="synthetic", store=store, runs_dir=str(tmp_path), run_name="fixed",
                  overrides=dict(TINY, lr=0.5), return_state=True)  # fmt: skip
    assert state.is_failed() and "lr" in state.message


def test_paper_defaults_and_overrides():
    ntu = train_settings("maskdp", "ntu", epsilon=1.0)
    assert (ntu.batch_size, ntu.max_grad_norm, ntu.lr, ntu.epochs, ntu.warmup_epochs) == (
        128, 1.0, 0.01, 150, 20)  # fmt: skip
    assert ntu.delta == 1e-6 and ntu.accountant == "rdp" and ntu.compare_accountants == ("pld",)
    assert ntu.arch == "mvit_v2_s" and ntu.weights == "kinetics400" and ntu.trainable == "last_blocks_norm"
    assert ntu.mode == "maskdp" and ntu.mask_source == "r"
    ucf = train_settings("dp", "ucf101")
    assert ucf.epochs == 300 and ucf.delta == 1e-5 and ucf.mode == "dpsgd" and ucf.mask_source == "none"
    assert train_settings("nonprivate", "tsh").epsilon == math.inf
    assert train_settings("maskdp", "tsh", variant="real").mask_source == "q"  # Real*
    demo = train_settings("fpdp", "demo", overrides={"epochs": 3, "size": 40})
    assert demo.arch == "tiny" and demo.epochs == 3 and demo.size == (40, 40)
    with pytest.raises(ValueError, match="unknown setting 'epoch'"):
        train_settings("dp", "ntu", overrides={"epoch": 3})
    with pytest.raises(ValueError, match="real has no synthetic"):
        train_settings("maskdp", "ntu", variant="real", mask_source="r")
    with pytest.raises(ValueError, match="unknown training mode"):
        train_settings("dpsdg", "ntu")
    # privacy settings: the adjacency each method claims, the paper's accounting only on request
    assert ntu.adjacency == "replace" and ntu.accounting == "sound"
    assert ucf.adjacency == "add_remove"
    assert train_settings("fpdp", "ntu").fpdp_psi == "blur_8.75"  # the paper's blur at 224 px
    paper = train_settings("maskdp", "ntu", overrides={"accounting": "paper"})
    assert "-maskdp-paper-" in default_run_name(paper)
    with pytest.raises(ValueError, match="accounting=paper"):
        train_settings("dp", "ntu", overrides={"accounting": "paper"})
    with pytest.raises(ValueError, match="adjacency"):
        train_settings("dp", "ntu", overrides={"adjacency": "swap"})
    with pytest.raises(ValueError, match="variant real only"):
        train_settings("maskdp", "ntu", variant="render", mask_source="q")
    # the run name follows the settings: same settings resume, changed ones start a new run
    a = default_run_name(train_settings("dp", "demo", epsilon=3))
    assert a == default_run_name(train_settings("dp", "demo", epsilon=3, overrides={"num_workers": 2}))
    assert a != default_run_name(train_settings("dp", "demo", epsilon=3, overrides={"lr": 0.2}))


def test_bad_settings_fail_in_one_line_before_any_work(tmp_path):

    for bad, needle in [({"lr": -1}, "'lr'"), ({"size": "big"}, "'size'"), ({"fpdp_psi": "blur_0"}, "'fpdp_psi'"),
                        ({"batch_size": 0}, "'batch_size'"), ({"noise_multiplier": float("nan")}, "noise_multiplier"),
                        ({"accountant": "moments"}, "'accountant'"), ({"fpdp_public": "holdout:2"}, "'fpdp_public'")]:
        with pytest.raises(ValueError, match=needle):
            train_settings("fpdp", "ntu", overrides=bad)
    # equivalent settings hash the same (defaults included), a changed value does not
    assert train_settings("dp", "ntu").run_hash() == train_settings("dp", "ntu", overrides={"lr": 0.01}).run_hash()
    assert train_settings("dp", "ntu").run_hash() == train_settings("dp", "ntu", overrides={"size": 224}).run_hash()


def test_cli_train(prefect_api, store, tmp_path, capsys):
    from anonymask.cli.main import main

    sets = [f"{k}={json.dumps(v)}" for k, v in TINY.items()]
    rc = main(["train", "--mode", "maskdp", "--dataset", "synthetic", "--store", store, "--epsilon", "3",
               "--runs-dir", str(tmp_path), "--no-progress", "--set", *sets])  # fmt: skip
    assert rc == 0
    out = capsys.readouterr().out
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert run_dir.name.startswith("synthetic-render-maskdp-eps3-") and str(run_dir) in out
    assert json.loads((run_dir / "privacy.json").read_text())["target_epsilon"] == 3.0
