"""Small helpers shared by the dataset adapters: option checks, bad-name reports, safe ids."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from anonymask.core.errors import DatasetError

_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def check_options(dataset: str, options: dict[str, Any], allowed: Iterable[str]) -> None:
    """Unknown options are almost always typos: say so instead of ignoring them."""
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise DatasetError(
            f"{dataset}: unknown option(s) {', '.join(unknown)}; known: {', '.join(sorted(allowed)) or 'none'}"
        )


def report_bad(dataset: str, root: Path, bad: list[tuple[Path, str]], *, strict: bool, expected: str) -> None:
    """Raise (strict) or warn about files that do not follow the dataset's naming convention."""
    if not bad:
        return
    shown = "; ".join(f"{p}: {why}" for p, why in bad[:5])
    more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
    msg = f"{dataset}: {len(bad)} file(s) under {root} do not match {expected}: {shown}{more}"
    if strict:
        raise DatasetError(msg + " (pass strict=False to skip them)")
    warnings.warn(msg + "; skipped", stacklevel=3)


def read_name_list(path: str | Path, dataset: str) -> set[str]:
    """Names from a text file, one per line (blank lines and '#' comments ignored; extensions dropped)."""
    p = Path(path)
    if not p.is_file():
        raise DatasetError(f"{dataset}: list file {p} does not exist")
    names = set()
    for line in p.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.add(Path(line).name.split(".")[0])
    return names


def safe_id(text: str) -> str:
    """A store-safe video id: path separators and odd characters become '_' / '__'."""
    text = text.replace("\\", "/").strip("/")
    parts = [_UNSAFE.sub("_", p) for p in text.split("/") if p]
    out = "__".join(parts).strip(".").lstrip("_")  # zarr reserves names starting with "__"
    return out or "video"


def unique_ids(keys: list[str], fallback: list[str]) -> list[str]:
    """``keys`` made unique: duplicates use their ``fallback`` form, then a numeric suffix."""
    counts: dict[str, int] = {}
    for k in keys:
        counts[k] = counts.get(k, 0) + 1
    out, seen = [], set()
    for k, fb in zip(keys, fallback):
        cand = k if counts[k] == 1 else fb
        base, n = cand, 2
        while cand in seen:
            cand, n = f"{base}-{n}", n + 1
        seen.add(cand)
        out.append(cand)
    return out
