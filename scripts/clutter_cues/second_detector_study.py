"""Does an independent whole-body detector confirm the tracks that are people, and not clutter? (a study)

Runs pose4d's second-detector sampling (models/anonymizer/pose/second_detector.py
``sample_confirmations``, YOLO11n-pose, the settings of ``pose4d.verify.second_detector``) over the
raw discovery tracks that ``scripts/track_evidence.py`` wrote, every track whatever its life, and
prints per track the share of its samples the detector confirms, beside the generator's person
share where the clip has ground truth; with ``--min-run`` also the frames the pass would drop.

    .venv/bin/python scripts/clutter_cues/second_detector_study.py WORK/CLIP.json [...] --out study.json \\
        [--set every=5 min_run_frames=125]

What was found: docs/RESULTS.md ("a second detector").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from track_evidence import read_video  # noqa: E402


def tracks_of(evidence: dict) -> list:
    """The evidence file's raw tracks as the sampling reads them (``tid``, ``frames`` {t: box})."""
    out = []
    for tr in evidence["tracks"]:
        frames = {int(r[0]): SimpleNamespace(box=np.asarray(r[1:5], np.float32)) for r in tr["boxes"]}
        out.append(SimpleNamespace(tid=int(tr["raw_id"]), frames=frames))
    return out


def study(path: str, settings, detector, min_run: int) -> dict:
    from anonymask.models.anonymizer.pose.second_detector import sample_confirmations, unconfirmed_spans

    d = json.loads(Path(path).read_text())
    tracks = tracks_of(d)
    frames = np.stack(list(read_video(d["video"], d["start"], d["start"] + d["frames"], d["max_side"] or None)))
    samples = sample_confirmations(tracks, lambda a, b: frames[a:b], len(frames),
                                   settings.model_copy(update={"min_run_frames": 1}), detector)
    rows = []
    for tr, ev in zip(tracks, d["tracks"]):
        got = samples.get(tr.tid, [])
        ts = sorted(tr.frames)
        spans = unconfirmed_spans(got, ts[0], ts[-1], min_run) if got else []
        dropped = sum(1 for t in ts if any(a <= t <= b for a, b in spans))
        rows.append({"raw_id": tr.tid, "first": ts[0], "last": ts[-1], "frames": len(ts),
                     "gt_person_share": ev.get("gt_person_share"), "samples": len(got),
                     "confirmed": float(np.mean([ok for _, ok in got])) if got else None, "dropped": dropped,
                     "confirmations": got})
    kept = sum(r["frames"] - r["dropped"] for r in rows)
    return {"clip": Path(path).stem, "video": d["video"], "frames": d["frames"], "tracks": rows,
            "tracks_per_frame": sum(r["frames"] for r in rows) / max(1, d["frames"]),
            "tracks_per_frame_after": kept / max(1, d["frames"])}


def main(argv: list[str] | None = None) -> int:
    from anonymask.config.pipeline import parse_overrides
    from anonymask.models.anonymizer.pose.settings import SecondDetectorSettings
    from anonymask.models.anonymizer.pose.yolo import YoloPersons

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("evidence", nargs="+")
    p.add_argument("--out", required=True)
    p.add_argument("--set", nargs="*", default=[], help="pose4d.verify.second_detector fields, key=value")
    args = p.parse_args(argv)
    cfg = SecondDetectorSettings.model_validate({"backend": "yolo11n-pose", **parse_overrides(args.set)})
    det = YoloPersons(cfg, None)
    out = []
    for path in args.evidence:
        r = study(path, cfg, det, cfg.min_run_frames)
        out.append(r)
        for tr in r["tracks"]:
            gt = tr["gt_person_share"]
            print(f"{r['clip']}\t{tr['raw_id']}\t{tr['first']}-{tr['last']}\t{'' if gt is None else round(gt, 2)}\t"
                  f"{tr['samples']}\t{'' if tr['confirmed'] is None else round(tr['confirmed'], 2)}\t{tr['dropped']}",
                  flush=True)
        print(f"{r['clip']}\ttracks a frame {r['tracks_per_frame']:.2f} -> {r['tracks_per_frame_after']:.2f}", flush=True)
        Path(args.out).write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
