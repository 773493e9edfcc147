"""Action classes of the synthetic dataset: which captured clip(s) each person performs.

A one-person action is a pybullet clip by its name (``walk``, ``jump``, ``kick``, ...). Two-person
actions (NTU RGB+D has 11 in 60 classes) pair clips with a layout:

* ``facing``: the first person performs the clip towards the second, who stands where the punch
  or kick lands (the farthest reach of a hand or foot), facing the first.
* ``side_by_side``: both perform their clips next to each other, facing roughly the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from anonymask.models.shared.synthetic.mocap import STAND, available_clips


@dataclass(frozen=True)
class ActionSpec:
    name: str
    clips: tuple[str, ...]  # one per person
    layout: str = "single"  # "single" | "facing" | "side_by_side"

    @property
    def n_people(self) -> int:
        return len(self.clips)

    def to_dict(self) -> dict:
        return {"clips": list(self.clips), "layout": self.layout, "people": self.n_people}


TWO_PERSON_ACTIONS: dict[str, ActionSpec] = {
    "punch_other": ActionSpec("punch_other", ("punch", STAND), "facing"),
    "kick_other": ActionSpec("kick_other", ("kick", STAND), "facing"),
    "dance_pair": ActionSpec("dance_pair", ("dance_a", "dance_b"), "side_by_side"),
}


def action_spec(name: str) -> ActionSpec:
    """The spec of action ``name``: a clip name, ``stand``, or one of :data:`TWO_PERSON_ACTIONS`."""
    if name in TWO_PERSON_ACTIONS:
        return TWO_PERSON_ACTIONS[name]
    if name == STAND or name in available_clips():
        return ActionSpec(name, (name,))
    known = available_clips() + [STAND] + list(TWO_PERSON_ACTIONS)
    raise ValueError(f"unknown action {name!r}; known: {', '.join(known)}")
