"""`anonymask preview STORE`: one HTML page per store, original vs anonymized per video.

Per video: a strip of frames (original, anonymized, mask overlay: green = public/synthetic r,
red = person mask q), stage times and quality metrics. Images are written next to the page as
JPEG files so the page opens from disk in any browser.
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


def _strip(entry: VideoEntry, out_dir: Path, frames_per_video: int) -> list[dict[str, str]]:
    """Write the per-frame images of one video; returns rows of relative image paths."""
    if not entry.has_array("raw"):
        return []
    raw = entry.array("raw")
    idx = _frame_indices(raw.shape[0], frames_per_video)
    rows = []
    for t in idx:
        row = {"t": str(t)}
        orig = np.asarray(raw[t])
        _save_jpeg(out_dir / f"{entry.video_id}_{t:05d}_orig.jpg", orig)
        row["orig"] = f"{entry.video_id}_{t:05d}_orig.jpg"
        if entry.has_array("anonymized"):
            anon = np.asarray(entry.array("anonymized")[t])
            _save_jpeg(out_dir / f"{entry.video_id}_{t:05d}_anon.jpg", anon)
            row["anon"] = f"{entry.video_id}_{t:05d}_anon.jpg"
            public = np.asarray(entry.array("public_mask")[t]) if entry.has_array("public_mask") else None
            person = np.asarray(entry.array("person_mask")[t]) if entry.has_array("person_mask") else None
            _save_jpeg(out_dir / f"{entry.video_id}_{t:05d}_mask.jpg", _overlay(anon, public, person))
            row["mask"] = f"{entry.video_id}_{t:05d}_mask.jpg"
        rows.append(row)
    return rows


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}"
    return html.escape(str(v))


def write_preview(store: DatasetStore, out_dir: str | Path, frames_per_video: int = 4) -> Path:
    """Write ``out_dir/index.html`` (+ images) for every video of the store; returns the page path."""
    out_dir = Path(out_dir)
    img_dir = out_dir / "img"
    img_dir.mkdir(parents=True, exist_ok=True)
    report = status_report(store)
    s = report["summary"]
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
        "red = person mask q).</p>",
    ]
    for row in report["videos"]:
        entry = store.video(row["video_id"])
        vid = html.escape(row["video_id"])
        cls = "failed" if row["status"] == "failed" else ""
        parts.append(f"<div class='video' id='video-{vid}'><h2>{vid} <span class='{cls}'>{row['status']}</span>"
                     f" &mdash; {html.escape(str(row.get('label_name') or row.get('label')))}</h2>")
        for fr in _strip(entry, img_dir, frames_per_video):
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
