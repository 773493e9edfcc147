"""The privacy report every checkpoint carries: what was spent, how it was computed, on what data.

A report is self-describing: the (q, sigma, steps) history it was computed from is stored, so
any accountant can recompute it later, and it states what the number means: the adjacency (what
neighbouring datasets differ in), the record unit, what is public (labels, psi, the public term
and how its batch is drawn), and in one sentence the guarantee, or why there is none. Runs
without a valid guarantee (non-private, sigma = 0, the paper's same-batch accounting, Real*)
carry ``private: false``; non-private ones report epsilon = inf (never 0 or None), so a consumer
that compares budgets cannot mistake one for a private model.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

from .accountant import ACCOUNTANTS, ADJACENCIES, Accountant, composed_epsilon, revealed_sampling_epsilon

MODES = ("nonprivate", "dpsgd", "maskdp", "fpdp", "projdp", "featdp")
ACCOUNTING = ("sound", "paper")
#: modes whose noise-free public term uses the label: labels are public data there
LABELS_PUBLIC = ("maskdp", "fpdp", "featdp")

PAPER_NOT_VALID = (
    "paper's bound; not a valid DP guarantee: the noise-free public term is computed on the private "
    "batch, so it reveals which records each step sampled, and Theorem 1 accounts add/remove with "
    "sensitivity C"
)


def adjacency_text(mode: str, adjacency: str, record: str) -> str:
    """What two neighbouring datasets differ in, for this mode (the sentence every report carries)."""
    verb = "adding or removing" if adjacency == "add_remove" else "replacing"
    if mode == "maskdp":
        tail = " (the paper's Definition 2)" if adjacency == "replace" else ""
        return f"{verb} the private tokens of one {record}; its public tokens and label are public{tail}"
    if mode in ("fpdp", "featdp"):
        return f"{verb} the raw pixels of one {record}; psi(x) of every {record} and the labels are public"
    return f"{verb} one {record} (pixels and label)"


def _encode(value: float) -> float | str:
    return "inf" if isinstance(value, float) and math.isinf(value) else value


def _decode(value: float | str) -> float:
    return math.inf if value == "inf" else float(value)


@dataclass
class PrivacyReport:
    mode: str
    epsilon: float
    delta: float
    sigma: float
    q: float
    steps: int
    C: float
    accountant: str
    adjacency: str = "add_remove"
    #: "sound" (the mechanism as built by default) or "paper" (the paper's same-batch public term
    #: and Theorem 1 accounting, reproduced on request; never a valid guarantee)
    accounting: str = "sound"
    #: False when the run gives no valid DP guarantee for what it claims to protect
    private: bool = True
    guarantee: str = ""
    record: str = "clip"  # the unit one epsilon protects: clip, video, crop
    public_term: str | None = None  # what the noise-free term is computed on, and how it is drawn
    psi: dict | None = None  # FP-DP's public feature map
    labels: str = "private"  # "public" when the noise-free public term uses them
    mask_policy: str | None = None
    #: kept in the (private) checkpoint only: ``published()`` drops it, since a hash of ids and
    #: labels tells neighbouring datasets apart
    dataset_fingerprint: str = ""
    #: how the noise / sampling / public streams were seeded (models/training/privacy/seeds.py), never the values
    seeds: dict | None = None
    #: data used WITHOUT protection, named (e.g. FP-DP's holdout: {"unprotected_videos": [...]})
    disclosures: dict = field(default_factory=dict)
    #: the run's row of the "What each mode protects" table (protects.PROTECTS)
    protection: str = ""
    #: epsilon of the same history under other accountants (e.g. {"pld": 3.98}), or, for the
    #: paper's accounting, what a sound analysis gives for that same-batch mechanism
    epsilon_other: dict[str, float] = field(default_factory=dict)
    #: segments [(q, sigma, steps), ...] the numbers were computed from.
    history: list[tuple[float, float, int]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown training mode {self.mode!r}; choose one of {MODES}")
        if self.mode != "nonprivate" and self.accountant not in ACCOUNTANTS:
            raise ValueError(f"unknown accountant {self.accountant!r}; choose one of {ACCOUNTANTS}")
        if self.adjacency not in ADJACENCIES:
            raise ValueError(f"unknown adjacency {self.adjacency!r}; choose one of {ADJACENCIES}")
        if self.accounting not in ACCOUNTING:
            raise ValueError(f"unknown accounting {self.accounting!r}; choose one of {ACCOUNTING}")
        if self.accounting == "paper" and self.private:
            raise ValueError("the paper's accounting is never reported as a valid guarantee")

    @classmethod
    def from_accountant(
        cls,
        mode: str,
        ledger: Accountant,
        delta: float,
        C: float,
        *,
        accounting: str = "sound",
        record: str = "clip",
        public_term: str | None = None,
        psi: dict | None = None,
        mask_policy: str | None = None,
        dataset_fingerprint: str = "",
        compare_with: Sequence[str] | None = None,
        not_private_reason: str | None = None,
        notes: Sequence[str] = (),
        fixed_seeds: Sequence[str] = (),
        seeds: dict | None = None,
        disclosures: dict | None = None,
        protection: str | None = None,
    ) -> PrivacyReport:
        """Report of a private run from its ledger.

        ``compare_with`` defaults to the other accountant family (PLD for an RDP ledger, RDP for a
        tight one), under the ledger's adjacency. ``not_private_reason``: the run releases data it
        claims to protect (e.g. Real*: the real person's pixels treated as public): epsilon is then
        reported as inf and the reason stated. ``fixed_seeds``: randomness the settings fixed (for a
        reproducible experiment); the guarantee then holds only while those seeds stay secret.
        """
        from .protects import guarantee_scope, protection_key

        history = ledger.history
        adjacency = ledger.adjacency
        protection = protection or protection_key(mode, adjacency)
        q, sigma = (history[-1][0], history[-1][1]) if history else (0.0, math.inf)
        eps = ledger.epsilon(delta)
        others: dict[str, float] = {}
        notes = list(notes)
        if accounting == "paper":
            private, guarantee = False, PAPER_NOT_VALID
            if len(history) == 1:
                for adj in ADJACENCIES:
                    others[f"same_batch_sound_{adj}"] = revealed_sampling_epsilon(q, sigma, history[0][2], delta, adj)
        else:
            if compare_with is None:
                compare_with = ("pld",) if ledger.accountant == "rdp" else ("rdp",)
            others = {
                name: composed_epsilon(history, delta, name, adjacency=adjacency)
                for name in compare_with
                if name != ledger.accountant and not (name == "prv" and adjacency != "add_remove")
            }
            private = math.isfinite(eps)
            guarantee = (
                f"({eps:.4g}, {delta:g})-DP per {record} under {adjacency_text(mode, adjacency, record)}; "
                f"{ledger.accountant} accountant"
                if private
                else "none: sigma = 0 (no noise), epsilon is infinite"
            )
            if private:
                guarantee += f"; {guarantee_scope(protection)}"
            if private and fixed_seeds:
                guarantee += f"; holds only while the fixed {' and '.join(fixed_seeds)} stay secret"
        if psi and psi.get("below_paper_floor") and not not_private_reason:
            not_private_reason = (
                f"psi is a blur below the paper's floor (sigma {psi.get('sigma_px')} px < {psi.get('floor_px')} px): "
                "the 'public' features psi(x) carry the private detail the guarantee claims to protect"
            )
        if not_private_reason:
            notes.append(f"nominal epsilon of the private part alone: {eps:.4g}")
            eps, private, guarantee = math.inf, False, f"none: {not_private_reason}"
        return cls(
            mode=mode, epsilon=eps, delta=delta, sigma=sigma, q=q, steps=ledger.steps, C=C,
            accountant=ledger.accountant, adjacency=adjacency, accounting=accounting, private=private,
            guarantee=guarantee, record=record, public_term=public_term, psi=psi,
            labels="public" if mode in LABELS_PUBLIC else "private", mask_policy=mask_policy,
            dataset_fingerprint=dataset_fingerprint, epsilon_other=others, history=history, notes=notes,
            seeds=seeds, disclosures=dict(disclosures or {}), protection=protection,
        )  # fmt: skip

    @classmethod
    def nonprivate(cls, steps: int, dataset_fingerprint: str = "", q: float = 0.0) -> PrivacyReport:
        return cls(
            mode="nonprivate", epsilon=math.inf, delta=0.0, sigma=0.0, q=q, steps=steps, C=math.inf,
            accountant="none", private=False, guarantee="none: non-private training",
            dataset_fingerprint=dataset_fingerprint,
        )  # fmt: skip

    def to_dict(self) -> dict:
        """JSON-safe dict (inf written as the string "inf")."""
        out = asdict(self)
        for key in ("epsilon", "sigma", "C", "delta", "q"):
            out[key] = _encode(out[key])
        out["epsilon_other"] = {k: _encode(v) for k, v in self.epsilon_other.items()}
        out["history"] = [list(h) for h in self.history]
        return out

    @classmethod
    def from_dict(cls, data: dict) -> PrivacyReport:
        data = dict(data)
        for key in ("epsilon", "sigma", "C", "delta", "q"):
            data[key] = _decode(data[key])
        data["steps"] = int(data["steps"])
        data["epsilon_other"] = {k: _decode(v) for k, v in data.get("epsilon_other", {}).items()}
        data["history"] = [(float(q), float(s), int(n)) for q, s, n in data.get("history", [])]
        return cls(**data)

    def published(self) -> dict:
        """``to_dict()`` less what must stay private (the dataset fingerprint): what privacy.json,
        result.md and experiment tables may carry."""
        return published_privacy(self.to_dict())

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


#: report fields that are functions of the private data outside the accountant
PRIVATE_FIELDS = ("dataset_fingerprint",)


def published_privacy(report: dict) -> dict:
    """A report dict without its private fields (for privacy.json, result.md, tables)."""
    return {k: v for k, v in report.items() if k not in PRIVATE_FIELDS}


def dataset_fingerprint(items: Iterable[str | tuple]) -> str:
    """Order-independent SHA-256 of the training items (e.g. (video_id, label, content hash))."""
    digest = hashlib.sha256()
    for line in sorted(json.dumps(item if isinstance(item, str) else list(item)) for item in items):
        digest.update(line.encode())
        digest.update(b"\n")
    return digest.hexdigest()
