"""The audit's detections that only the made-up fill excused, to look at one by one.

The audit counts the pixels the inpainting made up (inpaint's ``fill_made_up``) as drawn, like
avatar pixels (``audit.made_up_fill``). This replays the audit's detectors on the frames it
samples and lists each detection that lies outside the avatar pixels but not outside the drawn
ones: the detections that rule excused (``audit_on_fill``). With ``--out`` each one is also saved
as a crop sheet, raw | anonymized | made-up pixels in blue, the box in yellow, so someone can check
that no real person is in it.

    python scripts/audit_on_fill.py STORE [--videos VID ...] [--out DIR]

Prints one JSON line per video: its detections (frame, kind, box, score, shares outside the
avatars and outside the drawn pixels).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import cv2
import numpy as np

from anonymask.config.pipeline import pipeline_config
from anonymask.models.anonymizer.audit import audit_frames, get_auditor
from anonymask.storage.store import DatasetStore
from anonymask.tasks.audit import _sampled

#: the crop sheet: rows this tall, px
SHEET_ROW_PX = 300


def excused(entry, cfg: dict) -> list[dict]:
    """The detections on made-up fill in ``entry``'s audited frames (audit settings ``cfg``)."""
    options = cfg.get("detector_options", {})
    auditors = [get_auditor(name, **options.get(name, {})) for name in cfg["detectors"]]
    items = ((it.t, it.frame, it.avatar, it.made_up) for it in _sampled(entry, int(cfg["every"]), True, False))
    return excused_detections(items, auditors, float(cfg["min_outside"]))


def excused_detections(items, auditors, min_outside: float) -> list[dict]:
    """Of (t, frame, avatar mask, made-up mask or None) items, each detection outside the avatar
    pixels (grown as the audit grows them) but not outside the avatar and made-up pixels: the
    audit's own ``fill_excused`` list."""
    rep = audit_frames(((t, f, av, None, made) for t, f, av, made in items), auditors, min_outside=min_outside)
    return rep.fill_excused


def sheet(entry, found: list[dict], path: Path) -> None:
    """One row per detection: raw | anonymized | made-up pixels (blue), the box (yellow)."""
    rows = []
    for d in found:
        t = d["frame"]
        raw, anon = np.asarray(entry.array("raw")[t]), np.asarray(entry.array("anonymized")[t])
        made = np.asarray(entry.array("fill_made_up")[t]).astype(bool)
        shown = anon.copy()
        shown[made] = (shown[made] * 0.5 + np.array([0, 0, 255]) * 0.5).astype(np.uint8)
        x0, y0, x1, y1 = (int(round(v)) for v in d["box"])
        pad = max(x1 - x0, y1 - y0)
        h, w = raw.shape[:2]
        X0, Y0, X1, Y1 = max(0, x0 - pad), max(0, y0 - pad), min(w, x1 + pad), min(h, y1 + pad)
        parts = [im[Y0:Y1, X0:X1].copy() for im in (raw, anon, shown)]
        for p in parts:
            cv2.rectangle(p, (x0 - X0, y0 - Y0), (x1 - X0, y1 - Y0), (255, 255, 0), 1)
        row = np.concatenate(parts, 1)
        s = SHEET_ROW_PX / row.shape[0]
        rows.append(cv2.resize(row, None, fx=s, fy=s, interpolation=cv2.INTER_NEAREST))
    if rows:
        width = max(r.shape[1] for r in rows)
        img = np.concatenate([np.pad(r, ((0, 0), (0, width - r.shape[1]), (0, 0))) for r in rows])
        path.parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(path), img[..., ::-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("store")
    p.add_argument("--videos", nargs="*", help="video ids (default: every video with a made-up map)")
    p.add_argument("--out", type=Path, help="folder for one crop sheet per video with detections")
    a = p.parse_args(argv)
    store = DatasetStore.open(a.store)
    defaults = pipeline_config(store.dataset)["audit"]
    for vid in a.videos or store.video_ids():
        entry = store.video(vid)
        cfg = {**defaults, **((entry.record("audit") or {}).get("config") or {})}  # the settings it ran with
        if not entry.has_array("fill_made_up") or not entry.has_array("anonymized"):
            print(json.dumps({"video": vid, "error": "no fill_made_up or anonymized array (run inpaint onward)"}))
            continue
        found = excused(entry, cfg)
        if a.out and found:
            sheet(entry, found, a.out / f"{vid}.png")
        print(json.dumps({"video": vid, "on_fill": found}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
