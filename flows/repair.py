"""``anonymask verify --repair``: make a damaged store whole again by recomputing, not by guessing.

From verify's findings: store-level groups whose metadata vanished are recreated (their children
are intact); each damaged video is prepared under its claim (``tasks.common.repair_video``: lost
groups recreated from the manifest, damaged stages and everything downstream marked stale); then
the anonymize flow runs on exactly those videos with the configuration their records carry, so
the repaired results equal what a clean run gives.
"""

from __future__ import annotations

from typing import Any

from anonymask.storage.hashing import canonical_json
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


def repair_store(store_url: str, res: VerifyResult, log_dir: str | None = None,
                 run: bool = True) -> dict[str, Any]:
    """Repair what ``res`` (verify's result) found; returns what was marked and the run summary."""
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
    store = DatasetStore.open(store_url)
    groups: dict[str, tuple[dict[str, Any], list[str]]] = {}
    for vid in damaged:
        cfg = video_config(store, vid)
        groups.setdefault(canonical_json(cfg), (cfg, []))[1].append(vid)
    summaries = [_run(store, cfg, vids, log_dir) for cfg, vids in groups.values()]
    out["summary"] = _merge(summaries)
    return out


def _run(store: DatasetStore, cfg: dict[str, Any], video_ids: list[str], log_dir: str | None) -> dict[str, Any]:
    from anonymask.flows.anonymize import anonymize

    state = anonymize(dataset=store.dataset, source=store.attrs.get("source") or None, store=store.url,
                      overrides=cfg, video_ids=video_ids, log_dir=log_dir, return_state=True)
    res = state.result(raise_on_failure=False)
    if isinstance(res, dict) and "videos" in res:
        return res
    err = f"{type(res).__name__}: {res}" if isinstance(res, BaseException) else (state.message or state.name)
    return {"videos": len(video_ids), "done": 0, "skipped": 0, "failed": len(video_ids), "frames": 0,
            "seconds": 0.0, "frames_per_s": 0.0, "repaired": [], "waited": [],
            "failures": [{"video": v, "stage": "", "error": f"repair run could not start: {err}"} for v in video_ids]}


def _merge(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    if len(summaries) == 1:
        return summaries[0]
    m: dict[str, Any] = {k: sum(s.get(k, 0) for s in summaries)
                         for k in ("videos", "done", "skipped", "failed", "frames", "seconds")}
    m["frames_per_s"] = m["frames"] / m["seconds"] if m["seconds"] else 0.0
    for k in ("failures", "repaired", "waited"):
        m[k] = [x for s in summaries for x in s.get(k, [])]
    m["log"] = ", ".join(s["log"] for s in summaries if s.get("log"))
    return m

