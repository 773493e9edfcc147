"""Helpers to build dataset trees that follow the real naming conventions (empty files suffice)."""

from __future__ import annotations

from pathlib import Path

import pytest


def touch(path: Path, data: bytes = b"") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.fixture
def make_files(tmp_path):
    """``make_files("a/b.avi", "c.mp4")`` -> created paths under tmp_path."""

    def make(*names: str, root: Path | None = None) -> list[Path]:
        base = root or tmp_path
        return [touch(base / n) for n in names]

    return make
