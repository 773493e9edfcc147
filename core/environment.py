"""Every ``ANONYMASK_*`` environment variable, read in one place into one typed object.

Prefect reads its own settings the same way (one settings object from the environment). Each
variable is a field with its type, default and a one-line reason; :func:`environment` reads them
afresh on every call (a test or a Dask worker may change the environment between calls), and a
malformed value is one :class:`~anonymask.core.errors.SettingsError` naming the variable. Nothing
else in the project reads ``os.environ`` for an ``ANONYMASK_*`` name (``tests/test_environment.py``
checks the source), so this table is the whole list.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Literal

from anonymask.core.errors import SettingsError

PREFIX = "ANONYMASK_"


def _why(reason: str):
    """A field with its one-line reason (what :func:`describe` lists)."""
    return field(metadata={"why": reason})


@dataclass(frozen=True)
class Environment:
    """The variables (field ``x`` is ``$ANONYMASK_X``); ``None``: unset."""

    data: Path = _why(
        "Where data lives: raw/<dataset>/, stores/<dataset>.zarr, runs/, exports/, logs/ (default "
        "./data)."
    )
    weights: Path | None = _why(
        "The one folder every weight-backed model loads from (docs/WEIGHTS.md); unset: offline "
        "backends only."
    )
    log_dir: Path | None = _why(
        "The run log's folder (default $ANONYMASK_DATA/logs)."
    )
    cache: Path | None = _why(
        "Derived files kept between runs, e.g. the procedural body model (default "
        "~/.cache/anonymask)."
    )
    smplh_dir: Path | None = _why(
        "A folder with the licensed SMPL-H files; unset: the procedural body model."
    )
    cpu_threads: int | None = _why(
        "Threads one landmark-model call may use (the Dask runner sets it to the cores per "
        "worker)."
    )
    max_video_side: int = _why(
        "Longest video side accepted before decoding (default 8192): a bigger one is refused, not "
        "decoded."
    )
    render_aa: Literal["auto", "on", "off"] = _why(
        "Avatar anti-aliasing: auto (only on hardware GL), on or off."
    )
    run_id: str = _why(
        "A name for this run, written into each claim it takes, so a claim left behind names its "
        "run."
    )
    api_lost_s: float | None = _why(
        "Seconds without an answer from the Prefect API's /health before `make serve` gives up."
    )


def _positive_int(raw: str) -> int:
    value = int(raw)
    if value < 1:
        raise ValueError("must be at least 1")
    return value


def _positive_float(raw: str) -> float:
    value = float(raw)
    if not value > 0:
        raise ValueError("must be above 0")
    return value


def _switch(raw: str) -> str:
    mode = raw.strip().lower()
    if mode == "auto":
        return "auto"
    if mode in ("1", "true", "yes", "on"):
        return "on"
    if mode in ("0", "false", "no", "off"):
        return "off"
    raise ValueError("expected auto, on or off")


#: field -> (parse, value when unset)
_READ = {
    "data": (Path, None),  # resolved below: ./data
    "weights": (Path, None),
    "log_dir": (Path, None),
    "cache": (Path, None),
    "smplh_dir": (Path, None),
    "cpu_threads": (_positive_int, None),
    "max_video_side": (_positive_int, 8192),
    "render_aa": (_switch, "auto"),
    "run_id": (str, ""),
    "api_lost_s": (_positive_float, None),
}


def variable(field: str) -> str:
    """The environment variable of a field: ``data`` -> ``ANONYMASK_DATA``."""
    return PREFIX + field.upper()


def environment() -> Environment:
    """The ``ANONYMASK_*`` variables as they are now. An empty value counts as unset."""
    values = {}
    for f in fields(Environment):
        parse, unset = _READ[f.name]
        raw = os.environ.get(variable(f.name), "")
        if raw == "":
            values[f.name] = unset
            continue
        try:
            values[f.name] = parse(raw)
        except ValueError as err:
            raise SettingsError(f"{variable(f.name)}={raw!r}: {err}") from None
    values["data"] = (values["data"] or Path("data")).resolve()
    return Environment(**values)


def describe() -> list[tuple[str, str]]:
    """(variable, reason) for every field: the table in docs/ARCHITECTURE.md (a test keeps them equal)."""
    return [(variable(f.name), f.metadata["why"]) for f in fields(Environment)]
