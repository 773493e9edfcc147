"""The "What each mode protects" table: README.md and docs/ARCHITECTURE.md hold exactly what
models/training/privacy/protects.py generates, and every private report's guarantee names its row."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from anonymask.models.training.privacy.accountant import Accountant
from anonymask.models.training.privacy.protects import (
    PROTECTS,
    guarantee_scope,
    protection_key,
    protects_markdown,
)
from anonymask.models.training.privacy.report import PrivacyReport

ROOT = Path(__file__).resolve().parents[3]
BLOCK = re.compile(r"<!-- protects-table:start[^>]*-->\n(.*?)<!-- protects-table:end -->", re.S)


@pytest.mark.parametrize("doc", ["README.md", "docs/ARCHITECTURE.md"])
def test_the_docs_table_is_the_code_table(doc):
    found = BLOCK.findall((ROOT / doc).read_text())
    assert found == [protects_markdown()], f"{doc}: regenerate the table from models/training/privacy/protects.py"


def test_every_row_has_every_column_and_dpsgd_alone_covers_membership():
    for _, cells in PROTECTS.values():
        assert len(cells) == 6
    covers = {k for k, (_, cells) in PROTECTS.items() if cells["membership"].startswith("yes")}
    assert covers == {"dpsgd"}


@pytest.mark.parametrize(("mode", "adjacency", "key"), [
    ("dpsgd", "add_remove", "dpsgd"), ("maskdp", "replace", "maskdp_replace"),
    ("maskdp", "add_remove", "maskdp_add_remove"), ("fpdp", "add_remove", "fpdp"), ("featdp", "add_remove", "fpdp"),
])  # fmt: skip
def test_a_report_guarantee_names_its_row(mode, adjacency, key):
    ledger = Accountant("rdp", adjacency)
    ledger.step(0.01, 1.0, n=10)
    rep = PrivacyReport.from_accountant(mode, ledger, 1e-5, 1.0)
    assert rep.private and rep.protection == key and rep.guarantee.endswith(guarantee_scope(key))
    if mode == "maskdp":
        assert "not protected: video membership, label" in rep.guarantee


def test_row_of_real_star_and_rend_diff():
    assert protection_key("maskdp", "replace", "real", "q") == "real_star"
    assert protection_key("maskdp", "replace", "rend_diff", "r") == "maskdp_rend_diff"
    assert protection_key("dpsgd", "add_remove", "real", "q") == "dpsgd"  # DP-SGD ignores the mask
