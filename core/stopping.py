"""Stop a run on SIGTERM or Ctrl-C within seconds, the way kill -9 would, but tidily.

Why this exists: a flow call runs each video's stages in worker threads (or Dask processes) while
the main thread waits. Prefect turns SIGTERM into an exception in the main thread and marks the run
crashed, but the worker threads carry on with their video, so ``timeout``, SLURM and Kubernetes saw
the process still running 50 s after SIGTERM. The store is built to survive kill -9 (arrays first,
the stage record last; anything without a record is recomputed on resume), so abandoning the stage
in flight is safe. What we add:

1. the first SIGTERM/SIGINT prints one line and unwinds the main thread (Prefect's engine then marks
   the flow run crashed, so it is never left "Running");
2. whatever happens, ``GRACE_S`` seconds later, or at once on a second signal, every child process
   (the temporary Prefect server, Dask workers) is stopped and the process exits 128 + signal.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

GRACE_S: float = 6.0
"""Seconds the main thread gets to record the crashed state before the process exits regardless.
Why 6: marking a state is one local HTTP call (well under a second idle); the whole stop must stay
inside the 10 s that job schedulers give between SIGTERM and SIGKILL."""

_stopping: dict[str, int] = {}
_lock = threading.Lock()


def stop_children(timeout: float = 2.0) -> None:
    """Terminate, then kill, every descendant process (deepest first)."""
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil comes with the pinned stack
        return
    try:
        kids = psutil.Process().children(recursive=True)
    except psutil.Error:
        return
    for p in reversed(kids):
        try:
            p.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(kids, timeout=timeout)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass


def finish(signum: int) -> None:
    """The end of a stop: children gone, then this process, with the shell's 128+N status."""
    stop_children()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(128 + signum)


def _importing(frame) -> bool:
    """Whether ``frame`` (or a caller) is inside an ``import`` statement.

    Why: an exception raised while a C extension is being imported can abort the interpreter
    (torch's import calls back into Python from C++; a KeyboardInterrupt there ended a Ctrl-C'd run
    with SIGABRT instead of exit 130). So the stop waits for the import to finish."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _redeliver_after_import(signum: int, ours: bool = True) -> None:
    """Send ``signum`` to the main thread again once it has left the import it is in (``ours``:
    the redelivered signal is marked so that ``_handler`` does not count it as a second one)."""
    main = threading.main_thread().ident

    def wait_then_signal() -> None:
        while _importing(sys._current_frames().get(main)):
            threading.Event().wait(0.05)
        if ours:
            with _lock:
                _stopping["redelivered"] = True
        signal.pthread_kill(main, signum)

    threading.Thread(target=wait_then_signal, daemon=True, name="anonymask-stop").start()


def _handler(signum: int, frame) -> None:
    with _lock:
        ours = _stopping.pop("redelivered", False)
        first = "signal" not in _stopping
        _stopping.setdefault("signal", signum)
    if not first and not ours:
        finish(_stopping["signal"])
    if first:
        name = signal.Signals(signum).name
        print(f"anonymask: stopping on {name}: finished stages are kept, the stages in flight are "
              f"abandoned (rerun the same command to resume)", file=sys.stderr, flush=True)
        timer = threading.Timer(GRACE_S, finish, args=(signum,))
        timer.daemon = True
        timer.start()
    if _importing(frame):
        _redeliver_after_import(signum)
        return
    raise KeyboardInterrupt  # unwinds the main thread through Prefect's crash handling


def import_safe(handler: Callable[[int, Any], Any]) -> Callable[[int, Any], Any]:
    """``handler``, but a signal that lands inside an import is handled once the import is over.

    Why: a Prefect flow run replaces the SIGTERM handler with its own, which raises at once; one
    SIGTERM during torch's import (a stage's first call) aborted ``anonymize`` with SIGABRT. The
    flows package wraps Prefect's handler with this (see ``anonymask.flows``)."""
    if getattr(handler, "import_safe", False):
        return handler

    def wrapped(signum: int, frame) -> Any:
        if _importing(frame):
            _redeliver_after_import(signum, ours=False)
            return None
        return handler(signum, frame)

    wrapped.import_safe = True  # type: ignore[attr-defined]
    wrapped.__wrapped__ = handler  # type: ignore[attr-defined]
    return wrapped


def _only_interrupts(exc: BaseException | None) -> bool:
    """Whether ``exc`` is a KeyboardInterrupt/CancelledError, or a group of nothing else."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_only_interrupts(e) for e in exc.exceptions)
    return isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError))


class _QuietStopShutdown(logging.Filter):
    """Drops asyncio's "unhandled exception during asyncio.run() shutdown" report of our own stop.

    Why: the KeyboardInterrupt that ``_handler`` raises lands in whatever the main thread is running.
    When that is a child task of an event loop (Prefect's runner connecting to its API at start-up),
    asyncio.run stops, cancels the parent task, and the parent ends with that interrupt wrapped in
    an exception group, which asyncio logs as a page of traceback although nothing went wrong
    (``make serve`` stopped during start-up printed one). Only records whose exception is nothing but
    interrupts, and only once a stop was requested, are dropped; every other error still shows."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (requested() is not None and exc is not None and _only_interrupts(exc))


_QUIET = _QuietStopShutdown()


def requested() -> int | None:
    """The signal that asked this process to stop, if any."""
    return _stopping.get("signal")


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Around a command: SIGTERM and SIGINT stop it (see the module docstring)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, _handler) for s in (signal.SIGTERM, signal.SIGINT)}
    logging.getLogger("asyncio").addFilter(_QUIET)
    try:
        yield
    except KeyboardInterrupt:
        finish(requested() or signal.SIGINT)
    finally:
        if requested() is not None:
            finish(requested())
        for s, h in old.items():
            signal.signal(s, h)
        logging.getLogger("asyncio").removeFilter(_QUIET)
