import numpy as np
import pytest
import torch

from anonymask.models.anonymizer.skeleton.anonymizers import build_anonymizer
from anonymask.models.anonymizer.skeleton.data import SkeletonArrays, normalize_sequence, split_by_sequence
from anonymask.models.anonymizer.skeleton.evaluate import (
    ClassifierConfig,
    bone_length_attack,
    evaluate_anonymized,
    gaussian_noise,
    mean_joint_displacement,
    plot_tradeoff,
    results_table_markdown,
    run_skeleton_experiment,
    select_best,
    selection_score,
)
from anonymask.models.anonymizer.skeleton.graphs import NTU25, retarget_bone_lengths

TOY = [
    {"method": "original", "action_acc": 0.95, "reid_acc": 0.90, "recon_error": 0.0},
    {"method": "gaussian", "sigma": 0.1, "action_acc": 0.50, "reid_acc": 0.20, "recon_error": 0.16},
    {"method": "adversarial", "alpha": 1.0, "beta": 1.0, "action_acc": 0.90, "reid_acc": 0.60, "recon_error": 0.05},  # 0.36
    {"method": "adversarial", "alpha": 2.0, "beta": 1.0, "action_acc": 0.80, "reid_acc": 0.40, "recon_error": 0.08},  # 0.48
    {"method": "adversarial", "alpha": 4.0, "beta": 0.1, "action_acc": 0.30, "reid_acc": 0.05, "recon_error": 0.3},  # 0.285
]


def test_selection_rule_picks_the_best_trade_off():
    assert selection_score(TOY[3]) == pytest.approx(0.48)
    assert select_best(TOY) is TOY[3]
    assert select_best(TOY, method=None) is TOY[3]  # 0.48 beats gaussian's 0.40 too
    assert select_best(TOY, method="gaussian") is TOY[1]
    with pytest.raises(ValueError, match="unet"):
        select_best(TOY, method="unet")


def test_results_table_and_plot(tmp_path):
    table = results_table_markdown(TOY)
    lines = table.strip().splitlines()
    assert len(lines) == 2 + len(TOY)
    assert lines[0].startswith("| method |")
    best = [line for line in lines if "(best)" in line]
    assert len(best) == 1 and "| 2.000 | 1.000 |" in best[0] and "0.480" in best[0]
    path = plot_tradeoff(TOY, tmp_path / "plots" / "tradeoff.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_gaussian_noise_and_displacement():
    x = np.zeros((50, 20, 25, 3), np.float32)
    y = gaussian_noise(x, 0.1, seed=1)
    assert y.dtype == np.float32 and y.std() == pytest.approx(0.1, rel=0.02)
    assert np.array_equal(y, gaussian_noise(x, 0.1, seed=1))
    # mean Euclidean norm of a 3-D Gaussian with std s is s * 2 * sqrt(2 / pi)
    assert mean_joint_displacement(x, y) == pytest.approx(0.1 * 2 * np.sqrt(2 / np.pi), rel=0.02)


def _arrays(synthetic, normalize=True):
    x = synthetic["sequences"]
    if normalize:
        x, _ = normalize_sequence(x, 0, align_hips=(12, 16))
    return SkeletonArrays(x, synthetic["actions"], synthetic["subjects"], synthetic["genders"])


def test_bone_length_attack_sees_proportions_not_position(synthetic):
    data = _arrays(synthetic, normalize=False)
    train_idx, test_idx = split_by_sequence(data.subject, data.action, 0.25)
    train, test = data.subset(train_idx), data.subset(test_idx)
    assert bone_length_attack(train, test, NTU25) > 0.9
    # give everyone the same proportions (rescale every bone to the population mean): the attack
    # falls to about chance
    mean_len = NTU25.bone_lengths(data.x).mean(axis=(0, 1))
    rebuilt = retarget_bone_lengths(data.x, NTU25, mean_len)
    uniform = SkeletonArrays(rebuilt, data.action, data.subject, data.gender)
    assert bone_length_attack(uniform.subset(train_idx), uniform.subset(test_idx), NTU25) < 0.5


def test_evaluate_anonymized_reports_every_metric(synthetic):
    data = _arrays(synthetic)
    train_idx, test_idx = split_by_sequence(data.subject, data.action, 0.25)
    train, test = data.subset(train_idx), data.subset(test_idx)
    cfg = ClassifierConfig(channels=(8, 16), epochs=6, lr=5e-3, batch_size=16)
    noisy_train = SkeletonArrays(gaussian_noise(train.x, 0.03, 1), train.action, train.subject, train.gender)
    noisy_test = SkeletonArrays(gaussian_noise(test.x, 0.03, 2), test.action, test.subject, test.gender)
    out = evaluate_anonymized(noisy_train, noisy_test, test.x, num_actions=3, num_subjects=6, graph=NTU25, config=cfg)
    assert set(out) == {"action_acc", "reid_acc", "gender_acc", "reid_acc_bones", "recon_error"}
    assert all(0.0 <= out[k] <= 1.0 for k in ("action_acc", "reid_acc", "gender_acc", "reid_acc_bones"))
    assert out["action_acc"] >= 0.8  # actions stay readable under mild noise
    assert out["recon_error"] == pytest.approx(mean_joint_displacement(test.x, noisy_test.x))


def test_run_skeleton_experiment_rows_and_saved_anonymizer(synthetic):
    cfg = ClassifierConfig(channels=(8,), epochs=1, batch_size=16)
    logs = []
    results = run_skeleton_experiment(
        list(synthetic["sequences"]), synthetic["actions"], synthetic["subjects"], synthetic["genders"],
        alphas=(1.0,), betas=(10.0, 100.0), sigmas=(0.05,), epochs=1, adv_epochs=1, length=16,
        anonymizer="mlp", anonymizer_options={"hidden": 16, "layers": 2}, classifier=cfg,
        keep_states=True, log=logs.append,
    )
    assert [r["method"] for r in results] == ["original", "gaussian", "retarget", "adversarial", "adversarial"]
    assert results[0]["recon_error"] == 0.0
    assert results[1]["sigma"] == 0.05 and results[1]["recon_error"] > 0.05
    for r in results:
        for key in ("action_acc", "reid_acc", "gender_acc", "action_acc_frozen", "reid_acc_frozen", "reid_acc_bones"):
            assert 0.0 <= r[key] <= 1.0
        assert r["score"] == pytest.approx(selection_score(r))
    adv = results[3]
    assert (adv["alpha"], adv["beta"]) == (1.0, 10.0)
    anon = build_anonymizer(adv["anonymizer_config"])
    anon.load_state_dict(adv["anonymizer_state"])
    assert anon(torch.zeros(1, 16, 25, 3)).shape == (1, 16, 25, 3)
    assert any("original" in line for line in logs)
    assert "(best)" in results_table_markdown(results)
