"""The runnable stages and the one rule every stage follows: skip when done, else compute and record.

Stages are declared in config/stages.py (``declare_stage``: settings, deps, versions, backends);
config/ may not import tasks/, so a declaration names its run function by import path and this
module imports it when the stage is first looked up (:func:`load_stages`). The input hash of a
stage combines the output hashes of the stages it reads, so a changed upstream result (or config)
recomputes exactly the stages downstream of it.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from anonymask.config.stages import (
    STAGE_DECLARATIONS,
    PipelineSettings,
    StageDeclaration,
    StageSettings,
    stage_order,
    stage_settings,
)
from anonymask.storage.hashing import combine_hashes, config_hash
from anonymask.storage.store import DatasetStore, StageWriter, VideoEntry

log = logging.getLogger("anonymask")


class _Order(Sequence[str]):
    """The execution order, read from the declarations each time (config/stages.py
    ``stage_order``), so a stage declared after import is in it."""

    def __getitem__(self, i):
        return stage_order()[i]

    def __iter__(self):
        return iter(stage_order())

    def __len__(self) -> int:
        return len(STAGE_DECLARATIONS)

    def __repr__(self) -> str:
        return repr(stage_order())


#: execution order of the per-video DAG (a stable topological order of the declared deps)
ORDER: Sequence[str] = _Order()


@dataclass(frozen=True)
class StageDef:
    """A declared stage with its functions imported."""

    name: str
    deps: tuple[str, ...]
    #: ``run(entry, settings, writer)``: ``settings`` the stage's typed settings (config/stages.py)
    run: Callable[[VideoEntry, StageSettings, StageWriter], None]
    backend: Callable[[dict[str, Any]], str]
    #: extra inputs outside the store (e.g. the source file's identity) for the input hash
    external: Callable[[VideoEntry], str] | None = None
    #: called under the claim before the input hash (ingest: legacy records, the source's path)
    prepare: Callable[[VideoEntry], None] | None = None


#: the declared stages, imported (kept while their declaration is; a test may patch an entry)
STAGES: dict[str, StageDef] = {}
_IMPORTED_FROM: dict[str, StageDeclaration] = {}


def _function(ref: str | Callable | None) -> Callable | None:
    """``"package.module:function"`` imported, a callable as it is."""
    if ref is None or callable(ref):
        return ref
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def load_stages() -> dict[str, StageDef]:
    """Every declared stage with its functions imported (each declaration imported once)."""
    for name in [n for n in STAGES if n not in STAGE_DECLARATIONS]:
        STAGES.pop(name)
        _IMPORTED_FROM.pop(name, None)
    for name, decl in STAGE_DECLARATIONS.items():
        if _IMPORTED_FROM.get(name) is not decl:
            STAGES[name] = StageDef(name, tuple(decl.deps), _function(decl.run), decl.record_backend,
                                    _function(decl.external), _function(decl.prepare))
            _IMPORTED_FROM[name] = decl
    return STAGES


def input_hash(entry: VideoEntry, sd: StageDef) -> str:
    parts = [f"{d}:{entry.output_hash(d)}" for d in sd.deps]
    if sd.external is not None:
        parts.append(f"external:{sd.external(entry)}")
    return combine_hashes(*parts)


def dependants(name: str) -> list[str]:
    """Every stage that reads ``name``'s outputs, directly or through other stages (DAG order)."""
    stages = load_stages()
    out: set[str] = set()
    frontier = {name}
    while frontier:
        nxt = {s for s, sd in stages.items() if set(sd.deps) & frontier and s not in out}
        out |= nxt
        frontier = nxt
    return [s for s in stage_order() if s in out]


def stage_deps() -> dict[str, tuple[str, ...]]:
    """stage -> the stages it reads (for verifying stores whose records predate ``deps``)."""
    return {name: sd.deps for name, sd in load_stages().items()}


def _inputs_check(store_url: str, video_id: str, sd: StageDef, ihash: str):
    """A callable: None while the stage's inputs are those it started from, else the reason."""

    def check() -> str | None:
        try:
            fresh = DatasetStore.open(store_url).video(video_id)
            now = input_hash(fresh, sd)
        except Exception as e:  # an input record vanished or turned incomplete
            return f"an input is no longer complete ({type(e).__name__}: {e})"
        if now != ihash:
            what = "the source file" if sd.external is not None and not sd.deps else "an upstream result"
            return f"{what} changed (input hash {ihash} -> {now})"
        return None

    return check


def stage_settings_of(name: str, config: PipelineSettings | dict[str, Any]) -> StageSettings:
    """One stage's typed settings: taken from typed pipeline settings as they are; from a dict of
    stage sections (a test, an older caller) validated here."""
    if isinstance(config, PipelineSettings):
        return config[name]
    return stage_settings(name, config.get(name))


def execute_stage(
    store_url: str, video_id: str, name: str, config: PipelineSettings | dict[str, Any], verify_done: bool = True
) -> dict[str, Any]:
    """Run one stage of one video unless its complete record matches config and inputs.

    ``config``: the typed :class:`PipelineSettings` (validated once, at the edge, and passed down;
    the stage's run function gets its typed section) or a dict of stage sections (validated here).

    Holds the video's claim (re-entrant: the flow already holds it) so no other process writes
    the video meanwhile. A complete, current record is checked before it is trusted
    (``verify_done``: arrays present, recorded shape/dtype and checksums); damaged arrays mark
    the stage and every stage downstream of it stale, and the stage is recomputed. A stage whose
    inputs changed while it ran is recorded failed, never done.

    Returns {"stage", "status": "done"|"skipped", "seconds", "repaired"?}; raises on failure
    after the stage's failed record has been written.
    """
    from anonymask.config.stages import hashed_settings
    from anonymask.storage.claims import claim_video

    stages = load_stages()
    sd = stages[name]
    settings = stage_settings_of(name, config)  # typed settings are used as they are, never validated again
    cfg = settings.to_dict()  # the validated dict: the hash and the record
    with claim_video(store_url, video_id):
        entry = DatasetStore.open(store_url).video(video_id)
        if sd.prepare is not None:
            sd.prepare(entry)
        ihash = input_hash(entry, sd)
        chash = config_hash(hashed_settings(name, cfg))
        repaired = None
        if entry.is_done(name, config_hash=chash, input_hash=ihash):
            if not verify_done:
                return {"stage": name, "status": "skipped", "seconds": 0.0}
            from anonymask.storage.inspect import check_outputs

            problems, _ = check_outputs(entry, entry.record(name))
            if not problems:
                return {"stage": name, "status": "skipped", "seconds": 0.0}
            repaired = "; ".join(f"{n}: {r}" for n, r in problems)
            marked = entry.mark_stale([name, *dependants(name)], f"damaged: {repaired}")
            log.warning("%s/%s: damaged (%s); recomputing %s", video_id, name, repaired, ", ".join(marked))
            entry = DatasetStore.open(store_url).video(video_id)
        t0 = time.perf_counter()
        with entry.stage(name, backend=sd.backend(cfg), config=cfg, settings_hash=chash, input_hash=ihash, deps=sd.deps,
                         inputs_unchanged=_inputs_check(store_url, video_id, sd, ihash)) as writer:
            sd.run(entry, settings, writer)
    out = {"stage": name, "status": "done", "seconds": round(time.perf_counter() - t0, 3)}
    if repaired:
        out["repaired"] = repaired
    return out


def run_video(
    store_url: str,
    video_id: str,
    config: PipelineSettings | dict[str, Any],
    *,
    wait: bool | float = False,
    verify_done: bool = True,
    run_stage: Callable[..., dict[str, Any]] | None = None,
    on_stage: Callable[[int, str, dict[str, Any]], None] | None = None,
    time_budget_s: float | None = None,
) -> list[dict[str, Any]]:
    """Every stage of one video in DAG order, holding the video's claim throughout.

    ``wait``: what to do when another process holds the claim (see ``claim_video``): by default
    raise :class:`~anonymask.core.errors.VideoBusyError` at once. ``run_stage`` replaces
    :func:`execute_stage` (the flow passes its Prefect task); ``on_stage(i, name, result)`` is
    called after each stage. ``time_budget_s``: the video fails with
    :class:`~anonymask.core.errors.VideoTimeoutError` when a stage ends past this many seconds and
    stages remain (what finished is kept; a rerun with a larger budget resumes). A running stage
    is never interrupted: stopping native code from another thread corrupts the process.
    """
    from anonymask.core.errors import VideoTimeoutError
    from anonymask.storage.claims import claim_video

    run_stage = run_stage or execute_stage
    config = PipelineSettings.of(config)  # validated once per video when it came as a dict (a flow parameter)
    order = stage_order()
    results = []
    with claim_video(store_url, video_id, wait=wait):
        t0 = time.perf_counter()
        for i, name in enumerate(order):
            res = run_stage(store_url, video_id, name, config, verify_done)
            results.append(res)
            if on_stage is not None:
                on_stage(i, name, res)
            spent = time.perf_counter() - t0
            if time_budget_s and spent > time_budget_s and i + 1 < len(order):
                raise VideoTimeoutError(
                    f"{video_id}: time budget of {time_budget_s:g} s spent after stage {name} ({spent:.1f} s); "
                    f"{order[i + 1]} and later not started (finished stages are kept)"
                )
    return results


def repair_video(store_url: str, video_id: str, problems: list[Any]) -> list[str]:
    """Prepare one damaged video for recomputation (holding its claim); returns what was marked.

    ``problems``: verify's :class:`~anonymask.storage.inspect.Problem` list for this video. A lost
    or unreadable video group is recreated from the manifest (its records are gone, so every
    stage recomputes); a damaged stage and every stage downstream of it are marked stale; a
    stage whose record vanished while its readers are done gets its readers marked stale.
    """
    from anonymask.storage.claims import claim_video
    from anonymask.storage.store import VideoInfo

    marked: list[str] = []
    codes = {p.code for p in problems}
    with claim_video(store_url, video_id, wait=True):
        store = DatasetStore.open(store_url)
        rows = {r.get("video_id"): r for r in store.manifest_rows()}
        if "group" in codes:
            if store.has_video(video_id):
                info = rows.get(video_id) or store.video(video_id).attrs.get("info") or {"video_id": video_id}
            else:
                info = rows.get(video_id) or {"video_id": video_id}
            store.group["videos"].create_group(
                video_id, overwrite=True, attributes={"info": VideoInfo.from_dict(info).to_dict(), "stages": {}}
            )
            marked.append("group recreated (every stage recomputes)")
            store = DatasetStore.open(store_url)
        if "info" in codes and "group" not in codes:
            info = rows.get(video_id) or {"video_id": video_id}
            store.video(video_id).update_attrs(info=VideoInfo.from_dict(info).to_dict())
            marked.append("info restored from the manifest")
        if "manifest" in codes or "group" in codes and video_id not in rows:
            store.register_videos([store.video(video_id).info])
            marked.append("manifest row added")
        for p in problems:
            if p.stage is None or p.code not in ("record", "arrays"):
                continue
            entry = DatasetStore.open(store_url).video(video_id)
            recs = entry.records()
            if p.code == "arrays" or isinstance(recs.get(p.stage), dict):
                targets = [p.stage, *dependants(p.stage)]
            else:  # the record itself is gone or malformed: the stage reruns, and its readers too
                targets = dependants(p.stage)
                if p.stage in recs:
                    recs.pop(p.stage)
                    entry.group.attrs["stages"] = recs
                    entry = DatasetStore.open(store_url).video(video_id)
            marked += [f"{s} stale" for s in entry.mark_stale(targets, f"damaged: {p.what}: {p.reason}")]
    return marked
