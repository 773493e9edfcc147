"""The run's log file: everything, tracebacks included; consoles and the Prefect UI get one line.

``with run_log("anonymize-demo") as path:`` adds a file handler (level INFO, full tracebacks) to
the root logger, so Prefect's flow/task loggers and ``anonymask`` all reach it, and, for the
duration of the block, makes every other handler (the console, Prefect's API handler that feeds
the UI) print records without their traceback. ``traceback_logger()`` writes only to the file.

The folder is ``$ANONYMASK_LOG_DIR`` or ``$ANONYMASK_DATA/logs``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import logging
import os
from collections.abc import Iterator
from pathlib import Path

_TB_MARK = "\nTraceback (most recent call last):"
TRACEBACK_LOGGER = "anonymask.tracebacks"


def log_dir() -> Path:
    from anonymask.core.environment import environment

    env = environment().log_dir
    if env is not None:
        return env
    from anonymask.core.paths import data_root

    return data_root() / "logs"


class _DropDuplicates(logging.Filter):
    """Prefect logs a failed task twice ("failed with state" and "Finished in state"): keep one."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Task run failed with state")


_DROP = _DropDuplicates()


class OneLineFormatter(logging.Formatter):
    """Wraps a handler's formatter: the same text without the traceback or stack."""

    def __init__(self, inner: logging.Formatter | None):
        super().__init__()
        self.inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        saved = record.exc_info, record.exc_text, record.stack_info
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        try:
            text = self.inner.format(record)
        finally:
            record.exc_info, record.exc_text, record.stack_info = saved
        cut = text.find(_TB_MARK)
        return text if cut < 0 else text[:cut] + " (traceback in the run's log file)"

    def __getattr__(self, name):  # Prefect's console handler asks its formatter for extras
        return getattr(self.inner, name)


def _other_handlers() -> list[logging.Handler]:
    names = ["", "prefect", "prefect.flow_runs", "prefect.task_runs", "prefect.extra", "anonymask"]
    seen: list[logging.Handler] = []
    for n in names:
        for h in logging.getLogger(n).handlers:
            if h not in seen:
                seen.append(h)
    return seen


def traceback_logger() -> logging.Logger:
    """A logger whose records reach only run log files (never a console or the UI)."""
    lg = logging.getLogger(TRACEBACK_LOGGER)
    lg.propagate = False
    lg.setLevel(logging.INFO)
    return lg


@contextlib.contextmanager
def run_log(name: str, folder: Path | None = None) -> Iterator[Path]:
    folder = Path(folder) if folder else log_dir()
    folder.mkdir(parents=True, exist_ok=True)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = folder / f"{name}-{stamp}-{os.getpid()}.log"
    fh = logging.FileHandler(path, encoding="utf-8")
    fh.setLevel(logging.INFO)
    fh.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger()
    wrapped = []
    for h in _other_handlers():
        if isinstance(h, logging.FileHandler) or isinstance(h.formatter, OneLineFormatter):
            continue
        wrapped.append((h, h.formatter))
        h.setFormatter(OneLineFormatter(h.formatter))
        h.addFilter(_DROP)
    ours = logging.getLogger("anonymask")
    old_level = ours.level
    if ours.getEffectiveLevel() > logging.INFO:
        ours.setLevel(logging.INFO)
    root.addHandler(fh)
    tb = traceback_logger()
    tb.addHandler(fh)
    try:
        yield path
    finally:
        tb.removeHandler(fh)
        root.removeHandler(fh)
        ours.setLevel(old_level)
        for h, f in wrapped:
            h.setFormatter(f)
            h.removeFilter(_DROP)
        fh.close()
