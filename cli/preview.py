"""`anonymask preview STORE`: one HTML page per store, original vs anonymized per video.

Per video: a strip of frames (original, anonymized, mask overlay: green = public/synthetic r,
red = person mask q), stage times and quality metrics. Images are written next to the page as
JPEG files so the page opens from disk in any browser.

A video the audit failed shows the frames it named first, with each finding's box drawn in
yellow on the anonymized frame and the overlay: what a reviewer must look at. A store of a whole
dataset has tens of thousands of videos, so the page shows at most ``limit`` of them (failed ones
first) unless ``videos`` names them.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from anonymask.storage.inspect import status_report
from anonymask.storage.store import DatasetStore, VideoEntry

METRIC_NAMES = ("mpjpe_mm", "mask_iou", "background_psnr_db", "person_leak", "tracks", "person_fraction",
                "render_fraction", "audit_frames", "audit_findings")


def _frame_indices(n: int, k: int) -> list[int]:
    if n <= 0:
        return []
    return sorted({int(round(x)) for x in np.linspace(0, n - 1, min(k, n))})


def _overlay(frame: np.ndarray, public: np.ndarray | None, person: np.ndarray | None) -> np.ndarray:
    out = frame.astype(np.float32)
    if person is not None:
        m = person.astype(np.float32)
        if m.max() > 1:
            m = m / 255.0
        out = out * (1 - 0.5 * m[..., None]) + np.array([255, 0, 0], np.float32) * 0.5 * m[..., None]
    if public is not None:
        m = public.astype(bool)
        out[m] = out[m] * 0.5 + np.array([0, 255, 0], np.float32) * 0.5
    return np.clip(out, 0, 255).astype(np.uint8)


def _save_jpeg(path: Path, rgb: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(path), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 88])


#: colour of an audit finding's box (RGB)
FINDING_COLOUR = (255, 220, 0)
#: colour of a candidate the audit let go because the source frame does not show it (RGB)
EXCUSED_COLOUR = (0, 200, 255)


def audit_findings(entry: VideoEntry) -> list[dict[str, Any]]:
    """The audit's findings of a video (kind, frames, box in the first of them, ...), from its
    stage record: a failed audit keeps them there; empty when it passed or did not run."""
    rec = entry.record("audit") or {}
    return [f for f in (rec.get("metrics") or {}).get("audit_report") or [] if isinstance(f, dict)]


def audit_excused(entry: VideoEntry) -> list[dict[str, Any]]:
    """The candidates the audit let go because the same detector does not find them on the source
    frame (``audit.source_check``), as findings of one frame each, to look at: a passed audit
    keeps them in its record too."""
    rec = entry.record("audit") or {}
    out = []
    for d in (rec.get("metrics") or {}).get("audit_source_excused") or []:
        if isinstance(d, dict) and "frame" in d:
            out.append({"kind": f"{d.get('kind', '')}: not on the source", "frames": [int(d["frame"])],
                        "box": d.get("box"), "score": d.get("score")})
    return out


def _shown_frames(n: int, k: int, findings: list[dict[str, Any]]) -> list[int]:
    """``k`` frames of ``n``: the first frame of each finding (its box is recorded there), then
    more of their frames spread over each finding's span, then evenly spaced ones."""
    picked: list[int] = []
    named = []
    for f in findings:
        frames = sorted({int(t) for t in f.get("frames") or [] if 0 <= int(t) < n})
        named.append([frames[i] for i in _frame_indices(len(frames), k)])
    for depth in range(max((len(x) for x in named), default=0)):
        for frames in named:
            if depth < len(frames) and frames[depth] not in picked and len(picked) < k:
                picked.append(frames[depth])
    for t in _frame_indices(n, k):
        if len(picked) >= k:
            break
        if t not in picked:
            picked.append(t)
    return sorted(picked)


def _draw_findings(rgb: np.ndarray, t: int, findings: list[dict[str, Any]],
                   excused: list[dict[str, Any]] = ()) -> np.ndarray:
    """The box of each finding (yellow) and excused candidate (cyan) whose first frame is ``t``
    (the box is recorded there), labelled."""
    out = rgb
    for f, colour in [(f, FINDING_COLOUR) for f in findings] + [(f, EXCUSED_COLOUR) for f in excused]:
        frames = f.get("frames") or []
        box = f.get("box")
        if not frames or int(min(frames)) != t or not box or len(box) != 4:
            continue
        if out is rgb:
            out = rgb.copy()
        x0, y0, x1, y1 = (int(round(float(v))) for v in box)
        cv2.rectangle(out, (x0, y0), (x1, y1), colour, max(2, rgb.shape[0] // 240))
        cv2.putText(out, str(f.get("kind", "")), (x0 + 2, max(12, y0 - 4)), cv2.FONT_HERSHEY_SIMPLEX,
                    max(0.4, rgb.shape[0] / 960), colour, 1, cv2.LINE_AA)
    return out


def _strip(entry: VideoEntry, out_dir: Path, frames_per_video: int,
           findings: list[dict[str, Any]] = (), excused: list[dict[str, Any]] = ()) -> list[dict[str, str]]:
    """Write the per-frame images of one video (the audit's findings' frames first, then its
    excused candidates'); returns rows of relative image paths."""
    if not entry.has_array("raw"):
        return []
    raw = entry.array("raw")
    idx = _shown_frames(raw.shape[0], frames_per_video, list(findings) + list(excused))
    rows = []
    for t in idx:
        row = {"t": str(t)}
        orig = np.asarray(raw[t])
        _save_jpeg(out_dir / f"{entry.video_id}_{t:05d}_orig.jpg", orig)
        row["orig"] = f"{entry.video_id}_{t:05d}_orig.jpg"
        if entry.has_array("anonymized"):
            anon = np.asarray(entry.array("anonymized")[t])
            _save_jpeg(out_dir / f"{entry.video_id}_{t:05d}_anon.jpg", _draw_findings(anon, t, findings, excused))
            row["anon"] = f"{entry.video_id}_{t:05d}_anon.jpg"
            public = np.asarray(entry.array("public_mask")[t]) if entry.has_array("public_mask") else None
            person = np.asarray(entry.array("person_mask")[t]) if entry.has_array("person_mask") else None
            _save_jpeg(out_dir / f"{entry.video_id}_{t:05d}_mask.jpg",
                       _draw_findings(_overlay(anon, public, person), t, findings, excused))
            row["mask"] = f"{entry.video_id}_{t:05d}_mask.jpg"
        rows.append(row)
    return rows


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}"
    return html.escape(str(v))


#: videos shown when none are named (a page of a whole dataset would be tens of thousands of strips)
DEFAULT_LIMIT = 50


def chosen_rows(rows: list[dict[str, Any]], videos: list[str] | None, limit: int | None) -> list[dict[str, Any]]:
    """The status rows to show: the ``videos`` named (in that order; an unknown id is a
    ``KeyError`` naming it), else failed videos first, then the others in store order, at most
    ``limit`` (None: all)."""
    if videos:
        by_id = {r["video_id"]: r for r in rows}
        missing = [v for v in videos if v not in by_id]
        if missing:
            raise KeyError(f"not in the store: {', '.join(missing)}")
        return [by_id[v] for v in dict.fromkeys(videos)]
    ordered = [r for r in rows if r["status"] == "failed"] + [r for r in rows if r["status"] != "failed"]
    return ordered if limit is None else ordered[: max(0, int(limit))]


def write_preview(store: DatasetStore, out_dir: str | Path, frames_per_video: int = 4,
                  videos: list[str] | None = None, limit: int | None = DEFAULT_LIMIT) -> Path:
    """Write ``out_dir/index.html`` (+ images) for the chosen videos (:func:`chosen_rows`);
    returns the page path."""
    out_dir = Path(out_dir)
    img_dir = out_dir / "img"
    img_dir.mkdir(parents=True, exist_ok=True)
    report = status_report(store)
    s = report["summary"]
    rows = chosen_rows(report["videos"], videos, limit)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>anonymask preview: {html.escape(store.dataset)}</title>",
        "<style>body{font-family:sans-serif;margin:20px;background:#fafafa}"
        "img{max-width:300px;margin:2px;border:1px solid #ccc}"
        "table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ddd;padding:3px 8px;font-size:13px}"
        ".failed{color:#b00;font-weight:bold}.video{background:white;padding:10px;margin:12px 0;"
        "border:1px solid #ddd}</style></head><body>",
        f"<h1>anonymask preview: {html.escape(store.dataset)}</h1>",
        f"<p id='summary'>{s['videos']} videos: {s['done']} done, {s['partial']} partial, "
        f"{s['failed']} failed, {s['missing']} not started. Store: <code>{html.escape(store.url)}</code></p>",
        "<p>Columns: original | anonymized | mask overlay (green = synthetic pixels r, public; "
        "red = person mask q; yellow = what the audit found; cyan = what it let go as not on the source frame).</p>",
    ]
    if len(rows) < len(report["videos"]):
        parts.append(f"<p id='shown'>Showing {len(rows)} of {len(report['videos'])} videos (failed first); "
                     "choose with <code>--videos ID,...</code> or <code>--limit N</code>.</p>")
    for row in rows:
        entry = store.video(row["video_id"])
        vid = html.escape(row["video_id"])
        cls = "failed" if row["status"] == "failed" else ""
        label = row.get("label_name") if row.get("label_name") is not None else row.get("label")
        label = f" &mdash; {html.escape(str(label))}" if label is not None else ""
        parts.append(f"<div class='video' id='video-{vid}'><h2>{vid} <span class='{cls}'>{row['status']}</span>"
                     f"{label}</h2>")
        findings = audit_findings(entry)
        err = (row["stages"].get("audit") or {}).get("error") if findings else None
        if err:
            parts.append(f"<p class='failed audit'>{html.escape(err)}</p>")
        excused = audit_excused(entry)
        if excused:
            parts.append(f"<p class='excused'>{len(excused)} audit candidate(s) let go: the same detector does not "
                         "find them on the source frame (cyan boxes; <code>audit.source_check</code>)</p>")
        for fr in _strip(entry, img_dir, frames_per_video, findings, excused):
            imgs = "".join(f"<img src='img/{fr[k]}' alt='{k} frame {fr['t']}'>" for k in ("orig", "anon", "mask") if k in fr)
            parts.append(f"<div>frame {fr['t']}<br>{imgs}</div>")
        metrics = row.get("metrics") or {}
        shown = {k: metrics[k] for k in METRIC_NAMES if k in metrics}
        if shown:
            parts.append("<table><tr>" + "".join(f"<th>{k}</th>" for k in shown) + "</tr><tr>"
                         + "".join(f"<td>{_fmt(v)}</td>" for v in shown.values()) + "</tr></table>")
        cells = row["stages"]
        parts.append("<table><tr><th>stage</th><th>status</th><th>seconds</th><th>backend</th><th>error</th></tr>")
        for st, c in cells.items():
            err = html.escape(c.get("error") or "")
            parts.append(f"<tr><td>{st}</td><td class='{'failed' if c['status'] == 'failed' else ''}'>{c['status']}</td>"
                         f"<td>{_fmt(c.get('seconds') or '')}</td><td>{html.escape(str(c.get('backend') or ''))}</td>"
                         f"<td>{err}</td></tr>")
        parts.append("</table></div>")
    parts.append("</body></html>")
    page = out_dir / "index.html"
    page.write_text("\n".join(parts))
    return page
