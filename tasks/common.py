"""Stage registry and the one rule every stage follows: skip when done, else compute and record.

A stage module (tasks/<stage>.py) registers ``run(entry, cfg, writer)`` with :func:`stage`. The
input hash of a stage combines the output hashes of the stages it reads, so a changed upstream
result (or config) recomputes exactly the stages downstream of it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from anonymask.storage.hashing import combine_hashes, config_hash
from anonymask.storage.store import DatasetStore, StageWriter, VideoEntry

log = logging.getLogger("anonymask")

#: execution order of the per-video DAG (a topological order of the deps below)
ORDER = [
    "ingest",
    "pose4d",
    "motion",
    "render",
    "segment",
    "inpaint",
    "merge",
    "tubelets",
    "conditions",
    "refine",
    "reintegrate",
    "audit",
]


@dataclass(frozen=True)
class StageDef:
    name: str
    deps: tuple[str, ...]
    run: Callable[[VideoEntry, dict[str, Any], StageWriter], None]
    backend: Callable[[dict[str, Any]], str]
    #: extra inputs outside the store (e.g. the source file's identity) for the input hash
    external: Callable[[VideoEntry], str] | None = None


STAGES: dict[str, StageDef] = {}


def stage(
    name: str,
    deps: tuple[str, ...] = (),
    backend: Callable[[dict[str, Any]], str] | None = None,
    external: Callable[[VideoEntry], str] | None = None,
):
    """Register a stage's compute-and-write function."""

    def deco(fn):
        be = backend or (lambda c: str(c.get("backend", "default")))
        STAGES[name] = StageDef(name, tuple(deps), fn, be, external)
        return fn

    return deco


def load_stages() -> dict[str, StageDef]:
    """Import every stage module (they register themselves)."""
    import importlib

    for name in ORDER:
        importlib.import_module(f"anonymask.tasks.{name}")
    return STAGES


def input_hash(entry: VideoEntry, sd: StageDef) -> str:
    parts = [f"{d}:{entry.output_hash(d)}" for d in sd.deps]
    if sd.external is not None:
        parts.append(f"external:{sd.external(entry)}")
    return combine_hashes(*parts)


def execute_stage(store_url: str, video_id: str, name: str, config: dict[str, Any]) -> dict[str, Any]:
    """Run one stage of one video unless its complete record matches config and inputs.

    Returns {"stage", "status": "done"|"skipped", "seconds"}; raises on failure after the stage's
    failed record has been written.
    """
    stages = load_stages()
    sd = stages[name]
    cfg = dict(config.get(name, {}))
    entry = DatasetStore.open(store_url).video(video_id)
    ihash = input_hash(entry, sd)
    chash = config_hash(cfg)
    if entry.is_done(name, config_hash=chash, input_hash=ihash):
        return {"stage": name, "status": "skipped", "seconds": 0.0}
    t0 = time.perf_counter()
    with entry.stage(name, backend=sd.backend(cfg), config=cfg, input_hash=ihash) as writer:
        sd.run(entry, cfg, writer)
    return {"stage": name, "status": "done", "seconds": round(time.perf_counter() - t0, 3)}
