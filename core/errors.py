"""Exceptions users see. Each names the thing at fault and the reason, so a log line is enough."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any


class AnonymaskError(Exception):
    """Base class for every error the project raises on purpose."""


class SettingsError(AnonymaskError, ValueError):
    """Settings that cannot describe a run: one line naming each bad setting."""


class InvalidVideoError(AnonymaskError):
    """A video file cannot be used: missing, empty, truncated, not a video, no frames, ..."""

    def __init__(self, path, reason: str):
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class DatasetError(AnonymaskError):
    """A dataset tree does not follow its naming convention or lacks a split file."""


class StoreError(AnonymaskError):
    """A Zarr store is missing, of the wrong kind, or damaged."""


class InputsChangedError(AnonymaskError):
    """A stage's inputs changed while it ran: its result is not recorded as done."""


class VideoBusyError(AnonymaskError):
    """Another process holds this video's claim (it is being processed right now)."""


class VideoTimeoutError(AnonymaskError):
    """A video used up its time budget (runner setting video_timeout_s) with stages left."""


class MissingWeightsError(AnonymaskError):
    """A weight-backed model was asked for, but its files are not in ANONYMASK_WEIGHTS."""

    def __init__(self, model: str, missing: list[str], hint: str = ""):
        self.model = model
        self.missing = list(missing)
        text = f"{model}: weight file(s) not found: {', '.join(self.missing)}"
        text += " (set ANONYMASK_WEIGHTS to the folder that holds them"
        text += f"; {hint})" if hint else ")"
        super().__init__(text)


class NoPersonError(AnonymaskError):
    """No person was found in a video: never pass it through silently."""


class AuditError(AnonymaskError):
    """The self-audit found a real face or body outside avatar pixels: the video is not published."""


class UnposablePersonError(AnonymaskError):
    """A person is visible but cannot be posed, so no avatar can replace them: the video fails."""


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices``, or nothing."""
    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def settings_problems(problems: list[dict[str, Any]], known: Iterable[str]) -> str:
    """The one formatter of a pydantic ``ValidationError`` (pass ``err.errors()``): one short
    clause per problem, ``unknown setting 'x' (did you mean 'y'?)`` or ``setting 'x': <why> (got v)``."""
    known = list(known)
    out = []
    for e in problems:
        key = ".".join(str(p) for p in e.get("loc", ()))
        msg = str(e.get("msg", "invalid")).removeprefix("Value error, ")
        if e.get("type") == "extra_forbidden":
            out.append(f"unknown setting {key!r}{did_you_mean(key, known)}")
        elif not key:
            out.append(msg)
        else:
            out.append(f"setting {key!r}: {msg} (got {e.get('input')!r})")
    return "; ".join(out)
