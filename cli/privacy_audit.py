"""``anonymask privacy audit RUN_DIR``: re-check a finished run's privacy claim from its files alone.

Why: a reviewer (or CI) should be able to trust a published run without reading the code. The
audit reads privacy.json (and config.json, metrics.json, result.md when present), re-derives
epsilon from the recorded (q, sigma, steps) history with the named accountant and adjacency, and
checks what the report must say for the claim to hold: independent random streams, the method's
adjacency, psi at or above the paper's floor, the unprotected data named, nothing private
published (fingerprint, private-set size, metrics on the training split), a sigma = 0 run named
for what it is. One line per check; any FAIL makes the command exit 1.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REL_TOL = 1e-6  # epsilon re-derived with the same code path: equal up to float noise


@dataclass
class Check:
    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'PASS' if self.ok else 'FAIL'} {self.name}: {self.detail}"


def _num(v: Any) -> float:
    return math.inf if v == "inf" else float(v)


def _read(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def audit_run(run_dir: str | Path) -> list[Check]:
    """Every check of one run folder (privacy.json is required)."""
    from anonymask.models.training.privacy.accountant import composed_epsilon
    from anonymask.models.training.privacy.fpdp import blur_floor
    from anonymask.models.training.privacy.protects import PROTECTS, guarantee_scope
    from anonymask.models.training.privacy.report import PRIVATE_FIELDS
    from anonymask.models.training.privacy.seeds import INDEPENDENT_DERIVATIONS

    run = Path(run_dir)
    rep = _read(run / "privacy.json")
    if rep is None:
        return [Check("report", False, f"{run}/privacy.json is missing")]
    config = (_read(run / "config.json") or {}).get("settings", {})
    metrics = _read(run / "metrics.json") or {}
    result_md = (run / "result.md").read_text() if (run / "result.md").is_file() else ""
    checks: list[Check] = []
    add = lambda name, ok, detail: checks.append(Check(name, bool(ok), detail))  # noqa: E731

    mode = rep.get("mode")
    private = rep.get("private") is True
    eps = _num(rep.get("epsilon", "inf"))
    history = [(float(q), float(s), int(n)) for q, s, n in rep.get("history", [])]
    nonprivate = mode == "nonprivate"
    add("report", True, f"mode {mode}, private {private}, epsilon {rep.get('epsilon')}, record {rep.get('record')}")

    # 1. epsilon from the recorded history
    if nonprivate:
        add("epsilon", math.isinf(eps) and not private, "non-private run: epsilon inf, private false")
    elif not history:
        add("epsilon", False, "no (q, sigma, steps) history recorded: epsilon cannot be re-derived")
    else:
        steps_ok = sum(n for _, _, n in history) == int(rep.get("steps", -1))
        last_ok = math.isclose(history[-1][0], _num(rep["q"])) and math.isclose(history[-1][1], _num(rep["sigma"]))
        add("history", steps_ok and last_ok,
            f"{len(history)} segment(s), {sum(n for _, _, n in history)} steps (report: {rep.get('steps')}), "
            f"last q={history[-1][0]:.6g} sigma={history[-1][1]:.6g}")  # fmt: skip
        accountant, adjacency = rep.get("accountant"), rep.get("adjacency", "add_remove")
        if rep.get("accounting") == "paper":
            accountant, adjacency = "rdp", "add_remove"  # Theorem 1, as the report says
        try:
            again = composed_epsilon(history, float(rep["delta"]), accountant, adjacency=adjacency)
            problem = None
        except ValueError as err:
            again, problem = math.nan, str(err)
        if problem:
            add("epsilon", False, f"cannot re-derive with {accountant}/{adjacency}: {problem}")
        elif private:
            same = math.isfinite(again) and math.isclose(again, eps, rel_tol=REL_TOL)
            add("epsilon", same, f"re-derived {again:.6g} ({accountant}, {adjacency}, delta {rep['delta']}) "
                                 f"vs reported {eps:.6g}")  # fmt: skip
        elif rep.get("accounting") == "paper":
            add("epsilon", math.isclose(again, eps, rel_tol=REL_TOL) and "not a valid DP guarantee" in rep.get("guarantee", ""),
                f"the paper's bound {again:.6g} vs reported {eps:.6g}, stated as not valid DP")  # fmt: skip
        else:
            add("epsilon", math.isinf(eps) and str(rep.get("guarantee", "")).startswith("none"),
                f"no guarantee: epsilon {rep.get('epsilon')}, guarantee {rep.get('guarantee', '')[:80]!r}")  # fmt: skip

    # 2. sigma = 0 is never private, and its folder says so
    if not nonprivate and history and any(s == 0 for _, s, _ in history):
        named = "sigma0" in run.name and "-eps" not in run.name
        add("sigma0", not private and named, f"sigma = 0: private {private}, folder {run.name!r}")

    # 3. independent streams
    if not nonprivate:
        seeds = rep.get("seeds") or {}
        ok = seeds.get("derivation") in INDEPENDENT_DERIVATIONS and seeds.get("fixed_pairwise_distinct") is True
        src = seeds.get("source") or {}
        add("seeds", ok, f"derivation {seeds.get('derivation')!r}, sources {src or 'missing'}"
                         + (f"; fixed {seeds.get('fixed')} (guarantee holds while they stay secret)" if seeds.get("fixed") else ""))  # fmt: skip
        seed_values = [config.get(k) for k in ("noise_seed", "sampling_seed", "public_seed") if config.get(k) is not None]
        if seed_values:
            add("seeds_distinct", len(set(seed_values)) == len(seed_values), f"{len(seed_values)} fixed seed(s) in config.json")

    # 4. adjacency: the method's claim, and the accountant supports it
    if not nonprivate:
        adjacency = rep.get("adjacency")
        claimed = config.get("adjacency") if config.get("adjacency") not in (None, "auto") else (
            "replace" if mode == "maskdp" else "add_remove")  # fmt: skip
        if rep.get("accounting") == "paper":
            claimed = "add_remove"
        ok = adjacency == claimed and not (rep.get("accountant") == "prv" and adjacency == "replace")
        add("adjacency", ok, f"{adjacency} (method/config: {claimed}), accountant {rep.get('accountant')}")

    # 5. psi at or above the paper's floor, or no claim
    psi = rep.get("psi") or {}
    if psi.get("kind") == "gaussian_blur":
        floor = blur_floor(tuple(psi["input_size"]))
        below = float(psi["sigma_px"]) < floor * (1 - 1e-9)
        add("psi_floor", (not below) or not private,
            f"blur sigma {psi['sigma_px']:g} px, floor {floor:.4g} px at {psi['input_size']}"
            + ("; below the floor and reported private" if below and private else ""))  # fmt: skip

    # 6. disclosures: what trained without protection is named
    disclosures = rep.get("disclosures")
    if mode == "fpdp" and str(config.get("fpdp_public", "holdout")).startswith("holdout"):
        ids = (disclosures or {}).get("unprotected_videos")
        ok = bool(ids) and disclosures.get("unprotected_count") == len(ids)
        ok = ok and (not result_md or all(v in result_md for v in ids))
        add("disclosures", ok, f"FP-DP holdout: {len(ids or [])} video(s) named as unprotected"
                               + (" (in result.md too)" if result_md else ""))  # fmt: skip
    elif not nonprivate:
        add("disclosures", disclosures is not None, f"stated: {disclosures or 'nothing used without protection'}")

    # 7. nothing private published
    leaked = [f for f in PRIVATE_FIELDS if f in rep] + [f for f in ("train_clips",) if f in metrics]
    leaked += ["fingerprint in result.md"] if "fingerprint" in result_md else []
    add("published", not leaked, "no fingerprint or private-set size" if not leaked else f"published: {leaked}")
    if not nonprivate and config:
        same = config.get("eval_split") == config.get("train_split")
        add("eval_split", not same or not private,
            f"eval {config.get('eval_split')!r}, train {config.get('train_split')!r}")

    # 8. the guarantee names what it covers (models/training/privacy/protects.py)
    if private:
        key = rep.get("protection")
        ok = key in PROTECTS and guarantee_scope(key) in rep.get("guarantee", "")
        add("scope", ok, f"row {key!r}: {guarantee_scope(key) if key in PROTECTS else 'unknown row'}")
    return checks


def audit_lines(run_dir: str | Path) -> tuple[list[str], bool]:
    checks = audit_run(run_dir)
    return [c.line() for c in checks], all(c.ok for c in checks)
