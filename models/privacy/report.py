"""The privacy report every checkpoint carries: what was spent, how it was computed, on what data.

A report is self-describing: the (q, sigma, steps) history it was computed from is stored, so
any accountant can recompute it later. Non-private runs report epsilon = inf (never 0 or None),
so a consumer that compares budgets cannot mistake one for a private model.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

from .accountant import ACCOUNTANTS, Accountant, composed_epsilon

MODES = ("nonprivate", "dpsgd", "maskdp", "fpdp", "projdp", "featdp")


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
    mask_policy: str | None = None
    dataset_fingerprint: str = ""
    #: epsilon of the same history under the other accountant(s), for comparison (e.g. {"pld": 3.98}).
    epsilon_other: dict[str, float] = field(default_factory=dict)
    #: segments [(q, sigma, steps), ...] the numbers were computed from.
    history: list[tuple[float, float, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown training mode {self.mode!r}; choose one of {MODES}")
        if self.mode != "nonprivate" and self.accountant not in ACCOUNTANTS:
            raise ValueError(f"unknown accountant {self.accountant!r}; choose one of {ACCOUNTANTS}")

    @classmethod
    def from_accountant(
        cls,
        mode: str,
        ledger: Accountant,
        delta: float,
        C: float,
        mask_policy: str | None = None,
        dataset_fingerprint: str = "",
        compare_with: Sequence[str] | None = None,
    ) -> PrivacyReport:
        """Report of a private run from its ledger; ``compare_with`` defaults to the other
        accountant family (PLD for an RDP ledger, RDP for a tight one)."""
        history = ledger.history
        if compare_with is None:
            compare_with = ("pld",) if ledger.accountant == "rdp" else ("rdp",)
        others = {name: composed_epsilon(history, delta, name) for name in compare_with if name != ledger.accountant}
        q, sigma = (history[-1][0], history[-1][1]) if history else (0.0, math.inf)
        return cls(
            mode=mode,
            epsilon=ledger.epsilon(delta),
            delta=delta,
            sigma=sigma,
            q=q,
            steps=ledger.steps,
            C=C,
            accountant=ledger.accountant,
            mask_policy=mask_policy,
            dataset_fingerprint=dataset_fingerprint,
            epsilon_other=others,
            history=history,
        )

    @classmethod
    def nonprivate(cls, steps: int, dataset_fingerprint: str = "", q: float = 0.0) -> PrivacyReport:
        return cls(
            mode="nonprivate", epsilon=math.inf, delta=0.0, sigma=0.0, q=q, steps=steps, C=math.inf,
            accountant="none", dataset_fingerprint=dataset_fingerprint,
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

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


def dataset_fingerprint(items: Iterable[str | tuple]) -> str:
    """Order-independent SHA-256 of the training items (e.g. (video_id, label, content hash))."""
    digest = hashlib.sha256()
    for line in sorted(json.dumps(item if isinstance(item, str) else list(item)) for item in items):
        digest.update(line.encode())
        digest.update(b"\n")
    return digest.hexdigest()
