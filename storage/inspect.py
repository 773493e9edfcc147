"""Status and integrity reports over a store (what `anonymask status` and `verify` print)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from anonymask.storage.hashing import array_checksum
from anonymask.storage.store import (
    STATUS_DONE,
    STATUS_FAILED,
    STATUS_MISSING,
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
                "stages": cells,
                "metrics": _jsonable(entry.metrics()),
            }
        )
    return {
        "store": store.url,
        "dataset": store.dataset,
        "stages": stages,
        "summary": dict(counts, videos=len(rows)),
        "videos": rows,
    }


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
    header = ["video", "status", *stages]
    lines = [header]
    failures = []
    for row in report["videos"]:
        line = [row["video_id"], row["status"]]
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
    out.append("")
    out.append(
        f"{s['videos']} videos: {s['done']} done, {s['partial']} partial, {s['failed']} failed, "
        f"{s['missing']} not started  ({report['store']}, dataset {report['dataset']})"
    )
    for vid, stage, err in failures:
        reason = err if len(err) <= max_reason else err[: max_reason - 3] + "..."
        out.append(f"  failed: {vid} / {stage}: {reason}")
    return "\n".join(out)


@dataclass
class VerifyResult:
    checked_arrays: int = 0
    damaged: list[str] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.damaged

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checked_arrays": self.checked_arrays,
            "damaged": self.damaged,
            "incomplete": self.incomplete,
        }


def verify_store(store: DatasetStore) -> VerifyResult:
    """Check every complete stage's arrays: present, recorded shape and dtype, same checksum.

    Damage (a complete record whose arrays are missing or differ) is what `verify` fails on;
    incomplete stages (failed, running, never run) are listed but are not damage: a rerun
    recomputes them.
    """
    res = VerifyResult()
    declared = store.stages
    for entry in store.videos():
        recs = entry.records()
        for s in declared:
            if s not in recs:
                res.incomplete.append(f"{entry.video_id}/{s}: not run")
        for stage, rec in recs.items():
            st = rec.get("status")
            if st != STATUS_DONE:
                why = rec.get("error") or st
                res.incomplete.append(f"{entry.video_id}/{stage}: {st} ({why})")
                continue
            for name, desc in (rec.get("outputs") or {}).items():
                where = f"{entry.video_id}/{name} (stage {stage})"
                if not entry.has_array(name):
                    res.damaged.append(f"{where}: array missing")
                    continue
                try:
                    arr = entry.array(name)
                    shape = [int(x) for x in arr.shape]
                    if shape != list(desc.get("shape", [])):
                        res.damaged.append(f"{where}: shape {shape} != recorded {desc.get('shape')}")
                        continue
                    if str(np.dtype(arr.dtype)) != desc.get("dtype"):
                        res.damaged.append(f"{where}: dtype {arr.dtype} != recorded {desc.get('dtype')}")
                        continue
                    res.checked_arrays += 1
                    if array_checksum(arr) != desc.get("checksum"):
                        res.damaged.append(f"{where}: checksum mismatch (data changed or corrupt)")
                except Exception as e:  # a corrupt chunk raises from the codec
                    res.damaged.append(f"{where}: unreadable ({type(e).__name__}: {e})")
    return res
