"""``anonymask verify --repair``: make a damaged store whole again by recomputing, not by guessing.

From verify's findings: store-level groups whose metadata vanished are recreated (their children
are intact); each damaged video is prepared under its claim (``tasks.common.repair_video``: lost
groups recreated from the manifest, damaged stages and everything downstream marked stale); then
exactly those videos are run again, in this process and under their claims, with the
configuration their records carry, so the repaired results equal what a clean run gives.
(``anonymize`` repairs the same way on its own when it meets a damaged stage.)
"""

from __future__ import annotations

from typing import Any

from anonymask.storage.inspect import VerifyResult
from anonymask.storage.store import DatasetStore


def _repair_root(store_url: str, res: VerifyResult) -> list[str]:
    """Recreate a deleted ``videos/`` or ``manifest`` group (children untouched)."""
    import zarr

    done = []
    lost = {p.what.rstrip("/") for p in res.problems if p.video_id is None and p.kind == "damaged"}
    root = zarr.open_group(store_url, mode="r+")
    if "videos" in lost:
        root.require_group("videos")
        done.append("videos group recreated")
    if "manifest" in lost:
        root.require_group("manifest").attrs["videos"] = []
        store = DatasetStore.open(store_url)
        store.register_videos([e.info for e in store.videos()])
        done.append("manifest rebuilt from the video groups")
    return done


def video_config(store: DatasetStore, video_id: str) -> dict[str, Any]:
    """The configuration a video was computed with: its records' configs over the store's."""
    cfg = dict(store.attrs.get("config") or {})
    if store.has_video(video_id):
        for stage, rec in store.video(video_id).records().items():
            if isinstance(rec, dict) and isinstance(rec.get("config"), dict) and stage in cfg:
                cfg[stage] = rec["config"]
    return cfg


def repair_store(store_url: str, res: VerifyResult, run: bool = True) -> dict[str, Any]:
    """Repair what ``res`` (verify's result) found; returns what was marked and the run summary.

    A store that cannot be written (read-only, permission denied, full) is one StoreError line
    naming it, before anything is marked or when it happens on the way."""
    from anonymask.core.errors import StoreError
    from anonymask.storage.faults import fault_line
    from anonymask.storage.preflight import check_store_target

    check_store_target(store_url)
    try:
        return _repair_store(store_url, res, run)
    except OSError as e:
        line = fault_line(e, store_url, "the repair")
        if line is None:
            raise
        raise StoreError(line) from None


def _repair_store(store_url: str, res: VerifyResult, run: bool) -> dict[str, Any]:
    import time

    from anonymask.tasks.common import repair_video

    out: dict[str, Any] = {"root": _repair_root(store_url, res), "marked": {}, "summary": None}
    if out["root"]:  # children reachable again: look once more
        from anonymask.storage.inspect import verify_store
        from anonymask.tasks.common import stage_deps

        res = verify_store(DatasetStore.open(store_url), deps=stage_deps())
    damaged = res.damaged_videos()
    for vid, problems in damaged.items():
        out["marked"][vid] = repair_video(store_url, vid, problems)
    if not damaged or not run:
        return out
    t0 = time.perf_counter()
    rows = [_rerun(store_url, vid) for vid in damaged]
    wall = time.perf_counter() - t0
    failed = [r for r in rows if r["error"]]
    out["summary"] = {
        "videos": len(rows), "done": len(rows) - len(failed), "skipped": 0, "failed": len(failed),
        "frames": sum(r["frames"] for r in rows if not r["error"]), "seconds": round(wall, 2),
        "frames_per_s": sum(r["frames"] for r in rows) / wall if wall > 0 else 0.0,
        "failures": [{"video": r["video"], "stage": r["stage"], "error": r["error"]} for r in failed],
        "repaired": [], "waited": [],
    }
    return out


def _rerun(store_url: str, video_id: str) -> dict[str, Any]:
    """Every stage of one video again (stale and missing ones recompute, sound ones are skipped)."""
    import logging

    from anonymask.tasks.common import ORDER, run_video
    from anonymask.tasks.prefect_tasks import failure_message

    store = DatasetStore.open(store_url)
    cfg = video_config(store, video_id)
    done: list[str] = []
    try:
        run_video(store_url, video_id, cfg, wait=True, on_stage=lambda i, name, r: done.append(name))
    except Exception as e:
        stage = ORDER[len(done)] if len(done) < len(ORDER) else ""
        logging.getLogger("anonymask").error("repair of %s failed", video_id, exc_info=True)
        return {"video": video_id, "stage": stage, "error": failure_message(stage, e, store_url).partition(": ")[2],
                "frames": 0}
    frames = int(DatasetStore.open(store_url).video(video_id).attrs.get("frames") or 0)
    return {"video": video_id, "stage": "", "error": "", "frames": frames}
