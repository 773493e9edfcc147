"""Anonymization quality of a dataset, stage by stage in-process (the flow's stage code, no Prefect).

    python scripts/anonymization_quality.py --dataset sample --store /tmp/q/real.zarr --out /tmp/q/real \
        --set ingest.max_frames=100
    python -m anonymask.models.shared.synthetic /tmp/q/hard_raw --preset hard
    python scripts/anonymization_quality.py --dataset demo --source /tmp/q/hard_raw --store /tmp/q/hard.zarr --out /tmp/q/hard

Per video, one JSON line on stdout: seconds per stage, the quality metrics the stages record
(tracks, fallback avatars, MPJPE, mask IoU, removed / true area, background PSNR, person_leak,
real_leak, person_fraction, render_fraction), the error of a failed stage, the number of people in
the ground truth (synthetic data), and what the audit's detectors alone say (the ground-truth leak
check is left out there, so the detectors' recall can be compared with it). ``--out`` also gets a
PNG strip per video: original | anonymized | overlay (green: avatar, red: removed area q) at frames
0, T/3, 2T/3, T-1.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

KEYS = ("tracks", "fallback_tracks", "face_tracks", "mpjpe_mm", "mask_iou", "removed_ratio", "background_psnr_db",
        "person_leak", "real_leak", "person_fraction", "render_fraction", "replaced_min", "grow_px",
        "audit_gt_leak", "audit_gt_coincident", "fill_coincident_share", "detections_scan", "detections_search", "detections_hold", "detections_overruled", "scan_calls", "scan_skipped", "scan_unchanged", "fits_failed",
        "audit_not_in_source", "audit_avatar_induced")


def strip(entry, path: Path) -> None:
    import cv2

    t_len = entry.array("raw").shape[0]
    rows = []
    for t in sorted({0, t_len // 3, 2 * t_len // 3, t_len - 1}):
        raw, an = np.asarray(entry.array("raw")[t]), np.asarray(entry.array("anonymized")[t])
        q = np.asarray(entry.array("person_mask")[t]).astype(float) / 255
        ov = an.astype(float) * (1 - 0.5 * q[..., None]) + 0.5 * q[..., None] * np.array([255, 0, 0])
        r = np.asarray(entry.array("render/mask")[t])
        ov[r] = ov[r] * 0.5 + np.array([0, 255, 0]) * 0.5
        rows.append(np.concatenate([raw, an, ov.clip(0, 255).astype(np.uint8)], 1))
    im = np.concatenate(rows, 0)
    s = 2.0 if im.shape[0] < 700 else min(1.0, 1400 / im.shape[0])
    cv2.imwrite(str(path), cv2.resize(im, None, fx=s, fy=s)[..., ::-1])


def main(argv: list[str] | None = None) -> int:
    from anonymask.config.pipeline import parse_overrides, pipeline_config
    from anonymask.config.presets import with_presets
    from anonymask.config.stages import AuditSettings
    from anonymask.models.anonymizer.audit import get_auditor
    from anonymask.storage.datasets import get_adapter
    from anonymask.storage.store import DatasetStore
    from anonymask.tasks.audit import detector_audit
    from anonymask.tasks.common import ORDER, execute_stage

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", required=True)
    p.add_argument("--source", default=None)
    p.add_argument("--store", required=True)
    p.add_argument("--out", default=None)
    p.add_argument("--videos", default="all", help="comma-separated video ids, or all")
    p.add_argument("--set", action="append", default=[], help="stage.key=value overrides")
    p.add_argument("--preset", action="append", default=[], help="a named set of settings, under any --set "
                                                                  "(anonymask config presets)")
    a = p.parse_args(argv)
    adapter = get_adapter(a.dataset, a.source)
    infos = [i for i in adapter.records() if a.videos == "all" or i.video_id in a.videos.split(",")]
    store = DatasetStore.open(a.store) if Path(a.store).exists() else DatasetStore.create(a.store, a.dataset, stages=ORDER)
    store.register_videos(infos)
    cfg = pipeline_config(a.dataset, with_presets(a.preset, parse_overrides(a.set)))
    out = Path(a.out) if a.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    detectors = [get_auditor(n) for n in cfg["audit"]["detectors"]]
    for info in infos:
        t0, times, err = time.time(), {}, None
        try:
            for s in ORDER:
                t1 = time.time()
                execute_stage(a.store, info.video_id, s, cfg)
                times[s] = round(time.time() - t1, 1)
        except Exception as e:  # recorded in the store too; the next video goes on
            err = f"{s}: {type(e).__name__}: {str(e)[:400]}"
        entry = DatasetStore.open(a.store).video(info.video_id)
        m = entry.metrics()
        row = {"video": info.video_id, "seconds": round(time.time() - t0, 1), "stages": times, "error": err,
               "metrics": {k: (round(v, 4) if isinstance(v, float) else v) for k, v in m.items() if k in KEYS}}
        if entry.has_array("gt/person_mask"):
            row["people"] = len(entry.attrs.get("subject_ids") or [])
        if entry.has_array("anonymized"):
            rep = detector_audit(entry, AuditSettings.model_validate(cfg["audit"]), detectors)
            row["detector_findings"] = [[f.kind, [int(x) for x in f.box], len(f.frames)] for f in rep.findings]
            if out:
                strip(entry, out / f"{info.video_id}.png")
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
