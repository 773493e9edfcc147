"""Privacy report carried by checkpoints."""

from __future__ import annotations

import json
import math

import pytest

from anonymask.models.training.privacy.accountant import Accountant, composed_epsilon
from anonymask.models.training.privacy.report import PrivacyReport, dataset_fingerprint


def test_report_from_ledger_and_roundtrip():
    ledger = Accountant("rdp")
    ledger.step(0.01, 1.2, n=500)
    fp = dataset_fingerprint([("v1", 3), ("v0", 1)])
    report = PrivacyReport.from_accountant(
        "maskdp", ledger, 1e-5, C=1.0, mask_policy="full-patch-synthetic", dataset_fingerprint=fp
    )
    assert report.epsilon == pytest.approx(composed_epsilon([(0.01, 1.2, 500)], 1e-5, "rdp"))
    assert set(report.epsilon_other) == {"pld"}
    assert report.epsilon_other["pld"] < report.epsilon  # the tight accountant, for comparison
    assert (report.q, report.sigma, report.steps, report.accountant) == (0.01, 1.2, 500, "rdp")
    again = PrivacyReport.from_dict(json.loads(report.to_json()))
    assert again == report


def test_nonprivate_reports_infinite_epsilon_and_survives_json():
    report = PrivacyReport.nonprivate(steps=100, dataset_fingerprint="abc")
    assert math.isinf(report.epsilon)
    data = json.loads(json.dumps(report.to_dict(), allow_nan=False))  # strict JSON
    back = PrivacyReport.from_dict(data)
    assert math.isinf(back.epsilon) and back.mode == "nonprivate" and back.steps == 100


def test_fingerprint_is_order_independent_and_content_sensitive():
    a = dataset_fingerprint(["x", "y", "z"])
    assert a == dataset_fingerprint(["z", "x", "y"])
    assert a != dataset_fingerprint(["x", "y"])
    assert len(a) == 64


def test_rejects_unknown_mode_or_accountant():
    with pytest.raises(ValueError):
        PrivacyReport("dp", 1.0, 1e-5, 1.0, 0.01, 10, 1.0, "rdp")
    with pytest.raises(ValueError):
        PrivacyReport("dpsgd", 1.0, 1e-5, 1.0, 0.01, 10, 1.0, "moments")


def test_report_states_adjacency_record_public_term_and_guarantee():
    ledger = Accountant("rdp", "replace")
    ledger.step(0.01, 1.2, n=500)
    rep = PrivacyReport.from_accountant(
        "maskdp", ledger, 1e-5, 1.0, record="video", public_term="public tokens on an independent batch",
    )
    assert rep.private and rep.accounting == "sound" and rep.adjacency == "replace" and rep.labels == "public"
    assert rep.epsilon == pytest.approx(composed_epsilon([(0.01, 1.2, 500)], 1e-5, "rdp", adjacency="replace"))
    assert rep.epsilon_other["pld"] == pytest.approx(
        composed_epsilon([(0.01, 1.2, 500)], 1e-5, "pld", adjacency="replace"), rel=1e-6
    )
    assert "replacing the private tokens of one video" in rep.guarantee and "Definition 2" in rep.guarantee
    assert f"{rep.epsilon:.4g}" in rep.guarantee
    assert PrivacyReport.from_dict(json.loads(rep.to_json())) == rep


def test_paper_accounting_is_never_reported_as_a_guarantee():
    ledger = Accountant("rdp")
    ledger.step(0.01, 1.2, n=500)
    rep = PrivacyReport.from_accountant("maskdp", ledger, 1e-5, 1.0, accounting="paper")
    assert not rep.private and "not a valid DP guarantee" in rep.guarantee
    # what a sound analysis gives for that same-batch mechanism, beside the paper's number
    assert rep.epsilon_other["same_batch_sound_add_remove"] > 5 * rep.epsilon
    assert rep.epsilon_other["same_batch_sound_replace"] > rep.epsilon_other["same_batch_sound_add_remove"]
    with pytest.raises(ValueError, match="never reported"):
        PrivacyReport("maskdp", 1.0, 1e-5, 1.0, 0.01, 10, 1.0, "rdp", accounting="paper", private=True)


def test_sigma_zero_and_real_star_runs_are_labelled_not_private():
    ledger = Accountant("rdp")
    ledger.step(0.01, 0.0, n=10)
    rep = PrivacyReport.from_accountant("dpsgd", ledger, 1e-5, 1.0)
    assert math.isinf(rep.epsilon) and not rep.private and "sigma = 0" in rep.guarantee
    ledger = Accountant("rdp", "replace")
    ledger.step(0.01, 1.0, n=10)
    rep = PrivacyReport.from_accountant("maskdp", ledger, 1e-5, 1.0, not_private_reason="the person is public")
    assert math.isinf(rep.epsilon) and not rep.private and rep.guarantee == "none: the person is public"
    assert any("nominal epsilon" in n for n in rep.notes)


def test_fixed_seeds_and_a_weak_psi_are_stated():
    ledger = Accountant("rdp")
    ledger.step(0.01, 1.0, n=10)
    psi = {"kind": "gaussian_blur", "sigma_px": 1.0, "floor_px": 8.75, "below_paper_floor": True}
    seeded = PrivacyReport.from_accountant("fpdp", ledger, 1e-5, 1.0, fixed_seeds=("noise_seed",))
    assert seeded.private and seeded.guarantee.endswith("only while the fixed noise_seed stay secret")
    # a psi below the paper's floor voids the guarantee (issue 28): private false, epsilon inf, reason
    weak = PrivacyReport.from_accountant("fpdp", ledger, 1e-5, 1.0, psi=psi)
    assert not weak.private and math.isinf(weak.epsilon) and "below the paper's floor" in weak.guarantee
    assert any("nominal epsilon" in n for n in weak.notes)
    clean = PrivacyReport.from_accountant("fpdp", ledger, 1e-5, 1.0)
    assert clean.private and "secret" not in clean.guarantee and not clean.notes
