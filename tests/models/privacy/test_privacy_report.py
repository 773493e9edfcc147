"""Privacy report carried by checkpoints."""

from __future__ import annotations

import json
import math

import pytest

from anonymask.models.privacy.accountant import Accountant, composed_epsilon
from anonymask.models.privacy.report import PrivacyReport, dataset_fingerprint


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
