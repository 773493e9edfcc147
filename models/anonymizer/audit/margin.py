"""How far a video's audit verdict is from flipping, per check and overall.

A pass at 0.99 of a threshold and a pass at 0.01 of it are the same verdict today, but only the
second survives another machine's decoder, one more thread or a grey level of sensor noise. Each
check's *headroom* is its limit divided by what was observed, so every check reads the same way:

- above 1: passes, with that factor to spare (2.0: the observed value could double);
- at or below 1: fails (the ground-truth leak fails only strictly above its limit, so exactly 1.0
  there still passes);
- ``HEADROOM_CAP`` when nothing was observed at all.

The video's margin is the smallest headroom, named by its check.
"""

from __future__ import annotations

from dataclasses import dataclass

HEADROOM_CAP: float = 1000.0
"""Headroom recorded when a check observed nothing (a JSON-safe stand-in for infinity); any value
this large means "no evidence at all", not "1000 times less than the limit"."""


def headroom(limit: float, observed: float) -> float:
    if observed <= 0:
        return HEADROOM_CAP
    return min(HEADROOM_CAP, float(limit) / float(observed))


@dataclass(frozen=True)
class AuditMargin:
    checks: dict[str, float]  # check name -> headroom

    @property
    def tightest(self) -> tuple[str, float]:
        if not self.checks:
            return "none", HEADROOM_CAP
        name = min(self.checks, key=lambda k: self.checks[k])
        return name, self.checks[name]

    def metrics(self) -> dict[str, object]:
        name, value = self.tightest
        return {"audit_margin": value, "audit_margin_check": name,
                "audit_margins": dict(self.checks)}


def audit_margin(*, detector_frames: dict[str, int], frames_needed: dict[str, int],
                 gt: tuple[float, float] | None = None, erased: tuple[float, float] | None = None) -> AuditMargin:
    """``detector_frames``: the most audited frames one candidate finding of each kind reached
    (a finding needs ``frames_needed[kind]``); ``gt``: (leaked share, allowed share);
    ``erased``: (largest uncovered region, the share that makes it a person)."""
    checks = {kind: headroom(need, detector_frames.get(kind, 0)) for kind, need in frames_needed.items()}
    if gt is not None:
        checks["gt_leak"] = headroom(gt[1], gt[0])
    if erased is not None:
        checks["erased"] = headroom(erased[1], erased[0])
    return AuditMargin(checks)
