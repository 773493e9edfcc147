"""Does the landmark model see a body again from crops around the one that found it? (a study)

A person is a body from any reasonable crop: the landmark model was trained on regions shifted,
scaled and turned around people. A body it drew on clutter may hold only for the crop that
found it. This measures, per raw discovery track, how many of a dozen perturbed regions around
its own landmarks (or its box) still give the presence flag, and so whether that tells people
from clutter, before any pass is built on it.

    .venv/bin/python scripts/clutter_cues/second_look.py WORK/CLIP.json [...] --out looks.json [--samples 12]

CLIP.json is ``scripts/track_evidence.py`` output (per-frame ``boxes`` ending with the landmark
region). Per track, ``--samples`` frames spread over its life; at each, the region the track's
landmarks give (the last one before, where the frame was held; the box squared and grown 25% where
there is none), then the looks: scales 1 and 1.3 of that region, each centred, shifted by 8% of
the region's side left, right, up and down, and turned 12 degrees (12 looks). A look "sees a body" when the
presence flag is at least ``--min-flag`` (discovery's ``follow_min_flag``). ``steady`` is the mean
over samples of the share of looks that see one. What was found: docs/RESULTS.md ("a second look").
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from track_evidence import read_video  # noqa: E402

SHIFT, SCALE, TURN_DEG, GROW = 0.08, 1.3, 12.0, 1.25


def looks(roi) -> list[tuple[float, float, float, float]]:
    """The 12 perturbed regions (cx, cy, side, rotation) around ``roi``."""
    cx, cy, side, rot = roi
    out = []
    for s in (1.0, SCALE):
        for dx, dy in ((0, 0), (SHIFT, 0), (-SHIFT, 0), (0, SHIFT), (0, -SHIFT)):
            out.append((cx + dx * side, cy + dy * side, side * s, rot))
        out.append((cx, cy, side * s, rot + math.radians(TURN_DEG)))
    return out


def sample_regions(track: dict, samples: int) -> list[tuple[int, tuple[float, float, float, float], bool]]:
    """(frame, region, from landmarks?) at ``samples`` frames spread over the track's life."""
    bx = track["boxes"]
    out = []
    for i in np.unique(np.linspace(0, len(bx) - 1, samples).round().astype(int)):
        roi = next((b[6] for b in reversed(bx[: i + 1]) if len(b) > 6 and b[6] is not None), None)
        if roi is None:
            x0, y0, x1, y1 = bx[i][1:5]
            roi, own = ((x0 + x1) / 2, (y0 + y1) / 2, max(x1 - x0, y1 - y0) * GROW, 0.0), False
        else:
            own = True
        out.append((int(bx[i][0]), tuple(roi), own))
    return out


def seen_share(frame: np.ndarray, roi, landmarker, min_flag: float) -> float:
    """Share of the :func:`looks` around ``roi`` in which the landmark model sees a body."""
    flags = [landmarker.track(frame, r, 0.0)[2] for r in looks(roi)]
    return float(np.mean(np.asarray(flags) >= min_flag))


def study(path: str, samples: int, min_flag: float, landmarker) -> dict:
    d = json.loads(Path(path).read_text())
    want: dict[int, list] = {}
    for tr in d["tracks"]:
        for t, roi, own in sample_regions(tr, samples):
            want.setdefault(t, []).append((tr["raw_id"], roi, own))
    per: dict[int, list] = {}
    stop = d["start"] + d["frames"]
    for t, frame in enumerate(read_video(d["video"], d["start"], stop, d["max_side"] or None)):
        for rid, roi, own in want.get(t, []):
            per.setdefault(rid, []).append({"t": t, "own_landmarks": own,
                                            "seen": seen_share(frame, roi, landmarker, min_flag)})
    tracks = []
    for tr in d["tracks"]:
        s = per.get(tr["raw_id"], [])
        tracks.append({"raw_id": tr["raw_id"], "first": tr["first"], "last": tr["last"],
                       "gt_person_share": tr.get("gt_person_share"), "verdict": (tr.get("verdict") or {}).get("reason"),
                       "steady": float(np.mean([x["seen"] for x in s])) if s else None, "samples": s})
    return {"clip": Path(path).stem, "video": d["video"], "tracks": tracks}


def main(argv: list[str] | None = None) -> int:
    from anonymask.models.anonymizer.pose.roi import RoiLandmarker

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("evidence", nargs="+")
    p.add_argument("--out", required=True)
    p.add_argument("--samples", type=int, default=12)
    p.add_argument("--min-flag", type=float, default=0.5)
    args = p.parse_args(argv)
    lm = RoiLandmarker(min_flag=0.0)
    out = []
    for path in args.evidence:
        r = study(path, args.samples, args.min_flag, lm)
        out.append(r)
        for tr in r["tracks"]:
            gt = tr["gt_person_share"]
            print(f"{r['clip']}\t{tr['raw_id']}\t{tr['first']}-{tr['last']}\t"
                  f"{'' if gt is None else round(gt, 2)}\t{tr['verdict']}\t"
                  f"{'' if tr['steady'] is None else round(tr['steady'], 2)}", flush=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
