"""Own-box stillness per raw discovery track: does anything move inside the track's own box?

Clutter does not move; a person, even one who stands still, breathes and shifts. No model runs:
for each sampled frame s of a track (every ``--every``-th of its boxes, at most ``--max-samples``
spread evenly) the grey pixels of its box b_s at s are compared with the median of the same region
b_s over all the track's sampled frames. A sample is static when the mean |grey - median| is at most
the video's noise floor + ``--margin`` grey levels and fewer than ``--fg-share`` of its pixels differ
by more than ``--fg-level``. ``static_share`` is the share of a track's samples that are static.

The noise floor is the median over 40 frames spread over the video of the frame-wide median
|grey - the median of those 40 frames| (0 on the generated clips, 1.0 on Pose2Sim's). Of every cue
of the study this is the only one that separated real still people from real still clutter on
held-out footage, by 0.4-0.6 grey levels above the floor (docs/RESULTS.md, "cues that tell a person
from clutter"): it depends on the video having sensor noise.

    .venv/bin/python scripts/clutter_cues/stillness.py WORK/CLIP.json [...] --out WORK/stillness.json

CLIP.json is ``scripts/track_evidence.py`` output (with per-frame ``boxes``); results are keyed by
its file name without ``.json``, and an existing ``--out`` is updated (clips not given stay).
Grey levels are 0-255 of frames scaled as ingest scales them (640 long side).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from track_evidence import read_video  # noqa: E402


def stillness(d: dict, every: int = 10, max_samples: int = 60, margin: float = 1.0, fg_level: float = 25.0,
              fg_share: float = 0.02) -> dict:
    """``{"floor": float, "tracks": {raw_id: {...}}}`` for one track_evidence.py dump ``d``."""
    T = d["frames"]
    samp = {}
    for k, tr in enumerate(d["tracks"]):
        idx = list(range(0, len(tr["boxes"]), every))
        if len(idx) > max_samples:
            idx = [idx[int(i)] for i in np.linspace(0, len(idx) - 1, max_samples)]
        samp[k] = [tr["boxes"][i] for i in idx]
    need = {b[0] for v in samp.values() for b in v}
    fl_ts = set(np.linspace(0, T - 1, min(T, 40)).astype(int).tolist())
    grey, fl = {}, []
    for t, f in enumerate(read_video(d["video"], d["start"], d["start"] + T, d["max_side"] or None)):
        if t in need or t in fl_ts:
            g = cv2.cvtColor(f, cv2.COLOR_RGB2GRAY)
            if t in need:
                grey[t] = g
            if t in fl_ts:
                fl.append(g.astype(np.float32))
    flm = np.median(np.stack(fl), 0)
    floor = float(np.median([np.median(np.abs(x - flm)) for x in fl]))
    rows = {}
    for k, tr in enumerate(d["tracks"]):
        S = samp[k]
        ts = [b[0] for b in S]
        dev, fg = [], []
        for b in S:
            H, W = grey[b[0]].shape
            x0, y0, x1, y1 = (int(round(v)) for v in b[1:5])
            x0, y0, x1, y1 = max(0, x0), max(0, y0), min(W, max(x1, x0 + 2)), min(H, max(y1, y0 + 2))
            med = np.median(np.stack([grey[t][y0:y1, x0:x1] for t in ts]).astype(np.float32), 0)
            dd = np.abs(grey[b[0]][y0:y1, x0:x1].astype(np.float32) - med)
            dev.append(float(dd.mean()))
            fg.append(float((dd > fg_level).mean()))
        dev, fg = np.array(dev), np.array(fg)
        static = (dev <= floor + margin) & (fg < fg_share)
        rows[str(tr["raw_id"])] = {
            "own_dev_med": float(np.median(dev)), "own_fg_p80": float(np.percentile(fg, 80)),
            "static_share": float(static.mean()), "n": len(S),
            "per_sample": [[int(t), round(float(a), 3), round(float(b), 4)] for t, a, b in zip(ts, dev, fg)]}
    return {"floor": floor, "tracks": rows}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dumps", nargs="+", help="scripts/track_evidence.py outputs (with per-frame boxes)")
    p.add_argument("--out", required=True, help="JSON, keyed by clip (updated if it exists)")
    p.add_argument("--every", type=int, default=10, help="sample every k-th of a track's boxes")
    p.add_argument("--max-samples", type=int, default=60, help="per track (spread evenly)")
    p.add_argument("--margin", type=float, default=1.0, help="grey levels above the noise floor")
    p.add_argument("--fg-level", type=float, default=25.0, help="a pixel this far off the median moved")
    p.add_argument("--fg-share", type=float, default=0.02, help="a static sample has fewer moved pixels")
    args = p.parse_args(argv)
    out = Path(args.out)
    res = json.loads(out.read_text()) if out.exists() else {}
    for path in args.dumps:
        key = Path(path).name.removesuffix(".json")
        res[key] = stillness(json.loads(Path(path).read_text()), args.every, args.max_samples, args.margin,
                             args.fg_level, args.fg_share)
        print(key, "floor", res[key]["floor"], flush=True)
        out.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
