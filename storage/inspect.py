"""Status and integrity reports over a store (what `anonymask status` and `verify` print)."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from anonymask.storage.hashing import array_checksum
from anonymask.storage.store import (
    STATUS_DONE,
    STATUS_FAILED,
    STATUS_MISSING,
    STATUS_STALE,
    DatasetStore,
    overall_status,
)


def status_report(store: DatasetStore) -> dict[str, Any]:
    """Videos x stages: done / failed (with reason) / running / missing, plus metrics.

    Stage columns are the store's declared pipeline stages followed by any other stage that has a
    record, so nothing recorded is hidden.
    """
    videos = []
    stages = list(store.stages)
    for entry in store.videos():
        recs = entry.records()
        for s in recs:
            if s not in stages:
                stages.append(s)
        videos.append((entry, recs))
    rows = []
    counts = {"done": 0, "failed": 0, "partial": 0, "missing": 0}
    for entry, recs in videos:
        cells = {}
        for s in stages:
            r = recs.get(s)
            if r is None:
                cells[s] = {"status": STATUS_MISSING}
            else:
                cells[s] = {
                    "status": r.get("status"),
                    "error": r.get("error"),
                    "seconds": r.get("seconds"),
                    "backend": r.get("backend"),
                    "finished_at": r.get("finished_at"),
                    "stale_reason": r.get("stale_reason"),
                }
        overall = overall_status([c["status"] for c in cells.values()])
        counts[overall] += 1
        info = entry.info
        rows.append(
            {
                "video_id": entry.video_id,
                "label": info.label,
                "label_name": info.label_name,
                "split": info.split,
                "status": overall,
                "frames": entry.attrs.get("frames"),
                # where the source lies now (a moved corpus is known by its bytes: nothing recomputes)
                "source": info.path,
                # a user's ingest.max_frames cut the video: how many frames it has, how many kept
                "frame_cap": entry.attrs.get("frame_cap"),
                "source_frames": entry.attrs.get("source_frames"),
                "bad_frames": (entry.attrs.get("decode") or {}).get("bad_frames"),
                "stages": cells,
                "metrics": _jsonable(entry.metrics()),
                # the audit's distance from the other verdict, failed audits included
                "audit_margin": _audit_margin(recs.get("audit")),
            }
        )
    return {
        "store": store.url,
        "dataset": store.dataset,
        "stages": stages,
        "summary": dict(counts, videos=len(rows)),
        "videos": rows,
    }


def _audit_margin(rec: dict[str, Any] | None) -> dict[str, Any] | None:
    """{"value": smallest headroom (limit / observed, > 1 passes), "check": its name, "checks": all}
    from the audit record, done or failed; None before the audit ran (or before it recorded margins)."""
    m = (rec or {}).get("metrics") or {}
    if "audit_margin" not in m:
        return None
    return {"value": m["audit_margin"], "check": m.get("audit_margin_check"), "checks": m.get("audit_margins", {})}


def format_margin(margin: dict[str, Any] | None) -> str:
    if not margin:
        return "-"
    v = float(margin["value"])
    return f"none seen ({margin['check']})" if v >= 1000 else f"{v:.2f}x {margin['check']}"


#: pose4d's diagnostics shown beside the number of people: (metric, label)
PEOPLE_DETAILS = (("unconfirmed_tracks", "box"), ("face_tracks", "face"), ("linked_tracks", "linked"),
                  ("begun_on_someone", "found twice"), ("verify_rejected", "not people"),
                  ("second_dropped", "stretches nobody in"), ("second_parts", "yielded to someone"),
                  ("detections_overruled", "overruled at a border"))


def format_people(metrics: dict[str, Any]) -> str:
    """How many people pose4d replaced, and how: ``3 (1 box, 1 face)``; ``-`` before pose4d ran."""
    n = metrics.get("tracks")
    if n is None:
        return "-"
    extra = [f"{int(metrics[k])} {label}" for k, label in PEOPLE_DETAILS if metrics.get(k)]
    if float(metrics.get("exposure_gain") or 1.0) > 1.0:
        extra.append(f"dim: seen x{float(metrics['exposure_gain']):.1f}")
    if metrics.get("avatars_per_frame") is not None:
        extra.append(f"{float(metrics['avatars_per_frame']):.1f} a frame")
    return f"{int(n)}" + (f" ({', '.join(extra)})" if extra else "")


def _jsonable(d: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        if isinstance(v, (np.floating, np.integer)):
            v = v.item()
        if isinstance(v, float) and not np.isfinite(v):
            v = None if np.isnan(v) else (1e308 if v > 0 else -1e308)
        out[k] = v
    return out


def format_status_table(report: dict[str, Any], max_reason: int = 60) -> str:
    """Plain-text table: one row per video, one column per stage."""
    stages = report["stages"]
    header = ["video", "status", "audit margin", "people", *stages]
    lines = [header]
    failures = []
    for row in report["videos"]:
        line = [row["video_id"], row["status"], format_margin(row.get("audit_margin")),
                format_people(row.get("metrics") or {})]
        for s in stages:
            c = row["stages"][s]
            st = c["status"]
            if st == STATUS_FAILED:
                failures.append((row["video_id"], s, c.get("error") or ""))
                line.append("FAILED")
            elif st == STATUS_DONE:
                line.append("done")
            else:
                line.append(st or "?")
        lines.append(line)
    widths = [max(len(str(r[i])) for r in lines) for i in range(len(header))]
    out = ["  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip() for r in lines]
    s = report["summary"]
    if any(format_people(row.get("metrics") or {}) != "-" for row in report["videos"]):
        out.append("people: avatars pose4d made (box: seen too briefly to pose, a neutral avatar in their box; "
                   "face: face-anchored; linked: raw tracks joined into one person; found twice: tracks that "
                   "began on someone already followed, linked to nobody before them; not people: tracks the "
                   "verification pass dropped; stretches nobody in: parts of tracks the second detector "
                   "(pose4d.verify.second_detector, opt-in) saw no person in for long, dropped; yielded to someone: tracks "
                   "the second detector saw only inside another track's person box for a while, whose avatars are "
                   "not drawn there (one person, one avatar); overruled at a border: "
                   "frames where a whole-body detector's box replaced a followed box that slid off someone "
                   "entering or leaving (pose4d.detector yolo or rcnn); dim: a dim shot the person models saw brightened, by this gain; "
                   "a frame: avatars an average frame shows, more than the people in view means avatars on "
                   "clutter)")
    if any(row.get("audit_margin") for row in report["videos"]):
        out.append("audit margin: the tightest check's limit / observed value (above 1x passes; "
                   "0.5x: twice over the limit)")
    out.append("")
    out.append(
        f"{s['videos']} videos: {s['done']} done, {s['partial']} partial, {s['failed']} failed, "
        f"{s['missing']} not started  ({report['store']}, dataset {report['dataset']})"
    )
    folders: dict[str, int] = {}
    for row in report["videos"]:
        if row.get("source"):
            d = os.path.dirname(str(row["source"]))
            folders[d] = folders.get(d, 0) + 1
    for d, n in folders.items():
        out.append(f"  source: {d} ({n} video{'s' if n != 1 else ''})")
    for vid, stage, err in failures:
        reason = err if len(err) <= max_reason else err[: max_reason - 3] + "..."
        out.append(f"  failed: {vid} / {stage}: {reason}")
    for row in report["videos"]:
        if row.get("frame_cap"):
            of = f" of {row['source_frames']}" if row.get("source_frames") else ""
            out.append(f"  capped: {row['video_id']}: {row['frames']}{of} frames kept "
                       f"(ingest.max_frames={row['frame_cap']})")
    for row in report["videos"]:  # edited footage: processed shot by shot (models/shared/shots.py)
        m = row.get("metrics") or {}
        shots, moving = int(m.get("shots") or 1), int(m.get("moving_shots") or 0)
        if shots > 1 or moving:
            camera = f", {moving} with a moving camera (inpainted from its aligned frames)" if moving else ""
            out.append(f"  shots: {row['video_id']}: {shots}{camera}")
    return "\n".join(out)


@dataclass
class Problem:
    """One thing verify found: where (video, stage, array) and why; ``damaged`` or ``incomplete``."""

    kind: str
    video_id: str | None
    stage: str | None
    what: str
    reason: str
    #: what repair must do: "group" (recreate the video's group: its records are lost),
    #: "manifest" (add the video's row), "info" (restore its info), "record" (the stage's record
    #: is gone or malformed), "arrays" (a complete stage's arrays are damaged), "" (nothing)
    code: str = ""

    def line(self) -> str:
        where = self.what
        if self.stage and self.kind == "damaged" and "(stage" not in where:
            where += f" (stage {self.stage})"
        return f"{where}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "video_id": self.video_id, "stage": self.stage, "what": self.what,
                "reason": self.reason, "code": self.code}


@dataclass
class VerifyResult:
    checked_arrays: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def damaged(self) -> list[str]:
        return [p.line() for p in self.problems if p.kind == "damaged"]

    @property
    def incomplete(self) -> list[str]:
        return [p.line() for p in self.problems if p.kind == "incomplete"]

    @property
    def ok(self) -> bool:
        return not any(p.kind == "damaged" for p in self.problems)

    def add(self, kind: str, video_id: str | None, stage: str | None, what: str, reason: str,
            code: str = "") -> None:
        self.problems.append(Problem(kind, video_id, stage, what, reason, code))

    def damaged_videos(self) -> dict[str, list[Problem]]:
        out: dict[str, list[Problem]] = {}
        for p in self.problems:
            if p.kind == "damaged" and p.video_id is not None:
                out.setdefault(p.video_id, []).append(p)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checked_arrays": self.checked_arrays,
            "damaged": self.damaged,
            "incomplete": self.incomplete,
            "problems": [p.to_dict() for p in self.problems],
        }


def check_outputs(entry, rec: dict[str, Any], checksums: bool = True) -> tuple[list[tuple[str, str]], int]:
    """Problems of one complete record's arrays as ``[(array name, reason)]`` and arrays checked.

    Each recorded array must exist, have the recorded shape and dtype, be readable and (with
    ``checksums``) match its recorded checksum. Reads in blocks of frames: bounded memory.
    """
    out: list[tuple[str, str]] = []
    checked = 0
    outputs = rec.get("outputs")
    if not isinstance(outputs, dict):
        return [("", "record lists no outputs (malformed record)")], 0
    for name, desc in outputs.items():
        try:
            if not entry.has_array(name):
                out.append((name, "array missing" + _missing_detail(entry, name)))
                continue
            arr = entry.array(name)
            shape = [int(x) for x in arr.shape]
            if shape != list(desc.get("shape", [])):
                out.append((name, f"shape {shape} != recorded {desc.get('shape')}"))
                continue
            if str(np.dtype(arr.dtype)) != desc.get("dtype"):
                out.append((name, f"dtype {arr.dtype} != recorded {desc.get('dtype')}"))
                continue
            checked += 1
            if checksums and array_checksum(arr) != desc.get("checksum"):
                out.append((name, "checksum mismatch (data changed, corrupt, or a chunk file deleted)"))
        except Exception as e:  # a corrupt chunk or metadata file raises from the codec / parser
            out.append((name, f"unreadable ({type(e).__name__}: {_short(e)})"))
    return out, checked


def _short(e: Exception, n: int = 160) -> str:
    text = str(e).replace("\n", " ")
    return text if len(text) <= n else text[: n - 3] + "..."


def _missing_detail(entry, name: str) -> str:
    """For a local store: is the array's folder there without its metadata?"""
    from anonymask.storage.claims import local_store_path

    root = local_store_path(entry.store.url)
    if root is None:
        return ""
    d = root / "videos" / entry.video_id / name
    if d.is_dir() and not (d / "zarr.json").exists():
        return " (its metadata file zarr.json is gone; the chunks are still there)"
    return ""


def _video_dirs(store: DatasetStore) -> set[str]:
    """Folders under videos/ on a local store, with or without group metadata."""
    from anonymask.storage.claims import local_store_path

    root = local_store_path(store.url)
    if root is None or not (root / "videos").is_dir():
        return set()
    return {p.name for p in (root / "videos").iterdir() if p.is_dir()}


def verify_store(store: DatasetStore, deps: dict[str, tuple[str, ...]] | None = None,
                 video_ids: list[str] | None = None) -> VerifyResult:
    """Check every video group, stage record and complete stage's arrays.

    Damage (what ``verify`` fails on, each with the video id): a registered video whose group or
    group metadata is missing or unreadable, a group missing from the manifest, records that are
    malformed, a stage record that is gone while a stage that read it is done, and a complete
    record whose arrays are missing, reshaped, unreadable or differ from their checksum.
    Incomplete stages (failed, stale, never run) are listed but are not damage: a rerun
    recomputes them. ``deps`` (stage -> stages it reads) is used for records written before
    records named their deps.
    """
    res = VerifyResult()
    declared = store.stages
    deps = deps or {}
    root_groups = set(store.group.group_keys())
    for name in ("manifest", "videos"):
        if name not in root_groups:
            res.add("damaged", None, None, f"{name}/", "group missing (metadata deleted?)")
    if "videos" not in root_groups:
        return res
    rows = {r.get("video_id"): r for r in store.manifest_rows() if isinstance(r, dict)}
    with warnings.catch_warnings():  # a folder without metadata is reported below, not warned about
        warnings.simplefilter("ignore")
        groups = set(store.group["videos"].group_keys())
    ids = sorted(set(rows) | groups | _video_dirs(store))
    if video_ids is not None:
        ids = [v for v in ids if v in set(video_ids)]
    for vid in ids:
        if vid not in groups:
            if vid in _video_dirs(store):
                res.add("damaged", vid, None, f"{vid}",
                        f"video group metadata missing (videos/{vid}/zarr.json): its stage records are lost",
                        "group")
            else:
                res.add("damaged", vid, None, f"{vid}", "video group missing (registered in the manifest)", "group")
            continue
        if vid not in rows:
            res.add("damaged", vid, None, f"{vid}", "video not in the manifest", "manifest")
        try:
            entry = store.video(vid)
            attrs = entry.attrs
        except Exception as e:
            res.add("damaged", vid, None, f"{vid}", f"video group unreadable ({type(e).__name__}: {_short(e)})",
                    "group")
            continue
        recs = attrs.get("stages")
        if not isinstance(recs, dict):
            res.add("damaged", vid, None, f"{vid}", "stage records missing from the video's metadata", "group")
            continue
        if "info" not in attrs:
            res.add("damaged", vid, None, f"{vid}", "video info missing from its metadata", "info")
        _verify_records(res, entry, recs, declared, deps)
    return res


def _verify_records(res: VerifyResult, entry, recs: dict, declared: list[str], deps: dict) -> None:
    vid = entry.video_id
    readers: dict[str, list[str]] = {}
    for stage, rec in recs.items():
        if not isinstance(rec, dict) or "status" not in rec:
            res.add("damaged", vid, stage, f"{vid}/{stage}", "stage record malformed", "record")
            continue
        if rec.get("status") == STATUS_DONE:
            for d in rec.get("deps") or deps.get(stage, ()):
                readers.setdefault(d, []).append(stage)
    for s in declared:
        if s in recs:
            continue
        if readers.get(s):
            res.add("damaged", vid, s, f"{vid}/{s}",
                    f"stage record missing, but {', '.join(readers[s])} (which read it) are done", "record")
        else:
            res.add("incomplete", vid, s, f"{vid}/{s}", "not run")
    for stage, rec in recs.items():
        if not isinstance(rec, dict) or "status" not in rec:
            continue
        st = rec.get("status")
        if st != STATUS_DONE:
            why = rec.get("stale_reason") if st == STATUS_STALE else rec.get("error")
            res.add("incomplete", vid, stage, f"{vid}/{stage}", f"{st} ({why or st})")
            continue
        problems, checked = check_outputs(entry, rec)
        res.checked_arrays += checked
        for name, reason in problems:
            res.add("damaged", vid, stage, f"{vid}/{name} (stage {stage})" if name else f"{vid}/{stage}", reason,
                    "arrays")
