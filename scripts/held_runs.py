"""How many raw-track frames a hold expiry would drop, and how many of them are a real person's.

    python scripts/held_runs.py EVIDENCE.json [GT.npz] [--gt-period N]

EVIDENCE.json: ``scripts/track_evidence.py``'s output (per-frame boxes with their source). A held
run is a track's consecutive ``hold`` frames. For an expiry of N frames, every held frame past N
in its run is dropped; with the generator's ground truth, a dropped frame whose box matches a
real person's (IoU >= 0.3, the boxes track_evidence.py uses) counts as a person frame lost.
Measured, not a pipeline setting (docs/RESULTS.md, 2026-11-27).
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from anonymask.models.shared.geometry import box_iou

EXPIRIES = (25, 50, 75, 100, 150, 200, 300)


def gt_boxes(path: str, ev: dict) -> np.ndarray:
    """(T, P, 4) person boxes of the generator's ground truth in the frames discovery saw."""
    g = np.load(path)
    j2, valid = g["joints2d"][:, :, :22], g["valid"]
    lo, hi = j2.min(axis=2), j2.max(axis=2)
    pad = 0.1 * (hi[..., 1:2] - lo[..., 1:2])
    boxes = np.concatenate([lo - pad, hi + pad], -1)
    boxes[~valid.T] = np.nan
    return boxes * (ev["shape"][1] / ev["source_shape"][1])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("evidence")
    p.add_argument("gt", nargs="?", default=None)
    p.add_argument("--gt-period", type=int, default=None, help="frames of the clip a looped video repeats")
    args = p.parse_args(argv)
    ev = json.loads(open(args.evidence).read())
    gt = gt_boxes(args.gt, ev) if args.gt else None
    t_len = ev["frames"]
    present = np.zeros(t_len)
    dropped = {n: np.zeros(t_len) for n in EXPIRIES}
    person_lost = dict.fromkeys(EXPIRIES, 0)
    for tr in ev["tracks"]:
        run = 0
        for t, x0, y0, x1, y1, source, *_ in tr["boxes"]:
            present[t] += 1
            run = run + 1 if source == "hold" else 0
            if run <= EXPIRIES[0]:
                continue
            person = False
            if gt is not None:
                tt = (ev["start"] + t) % args.gt_period if args.gt_period else ev["start"] + t
                box = np.array([x0, y0, x1, y1])
                person = any(np.isfinite(g[0]) and box_iou(g, box) >= 0.3 for g in gt[tt])
            for n in EXPIRIES:
                if run > n:
                    dropped[n][t] += 1
                    person_lost[n] += person
    print(f"{ev['video']}: {t_len} frames, {present.mean():.2f} track frames per frame")
    for n in EXPIRIES:
        lost = f", {person_lost[n]} of them a person's" if gt is not None else ""
        print(f"  expiry {n:4d}: {(present - dropped[n]).mean():.2f} per frame, {int(dropped[n].sum())} dropped{lost}")


if __name__ == "__main__":
    main()
