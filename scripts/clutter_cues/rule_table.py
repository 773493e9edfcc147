"""The per-track table of the clutter-cue study and the candidate rules RA and RB, with the tracks
present per frame left when the tracks a rule rejects are dropped.

A rejected track's pixels would be treated as background, so a rule must not reject a person: the
table shows, per raw track, whether it is a person (the generator's ground truth, or by eye) beside
every cue, and the summary lines count the person tracks each rule would newly reject.

    .venv/bin/python scripts/clutter_cues/rule_table.py WORK [--min-life N] CLIP ... > table.md

Reads WORK/cues_CLIP.json (cues.py) and WORK/stillness.json (stillness.py). Labels: generated
clips: ``gt_person_share`` (share of a track's frames whose box matches a real person's); Pose2Sim:
by eye (BY_EYE below, every other Pose2Sim track is a person).
Rules:
  static : static_share >= 0.95 (own-box pixels within floor + 1 grey level and < 2% of pixels off
           by > 25, in >= 95% of samples)
  pos    : any MediaPipe hand or any HOG window on the box, or a MediaPipe full-range face in >= 2
           samples
  RA = reject iff life >= N and static;  RB = RA and not pos
Columns: bg_med, seg_iou (``iou_med``) and seg_mean (``seg_med``) are medians over the samples
(``agg``); HOG n, hands n, face n count samples with a hit; "rej(old)" is the existing
verification pass's rejection (track_evidence.py ``--verdicts``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

# Pose2Sim tracks have no ground truth: they were labelled by eye from the crop sheets
# (crops.py, WORK/crops_<clip>.png, 6 crops over each track's life). Person share 0.0 = clutter;
# every Pose2Sim track not listed is a person (share 1.0).
BY_EYE = {("p2s_multi_cam02_x3", 3): 0.0, ("p2s_multi_cam02_x3", 4): 0.0, ("p2s_single_cam01_x3", 2): 0.0}
NAMES = {("p2s_multi_cam02_x3", 3): "no (anatomical skeleton model)",
         ("p2s_multi_cam02_x3", 4): "no (same skeleton model)",
         ("p2s_single_cam01_x3", 2): "no (blue mat, tape rolls)",
         ("p2s_multi_cam01_x3", 2): "yes (still bystander, mask)",
         ("p2s_single_cam01_x3", 1): "yes (still bystander, mask)",
         ("p2s_multi_cam02_x3", 1): "yes (bystander, mask)"}


def agg(tr: dict) -> dict:
    """Per-track aggregates of cues.py samples (grey levels 0-255; shares 0-1)."""
    s = tr["samples"]

    def a(k):
        return np.array([x[k] for x in s if k in x and x[k] == x[k]], float)

    return {
        "bg_med": float(np.median(a("bgdiff"))), "fg_max": float(np.max(a("bgfg"))),
        "iou_med": float(np.median(a("segc1_iou"))), "seg_med": float(np.median(a("segc1"))),
        "hog": float(np.mean(a("hog") > 0)),
        "face": float(np.mean([(x["fd1c"] > 0) or (x["fd1"] > 0) for x in s])),
        "hands": float(np.mean(a("hands") > 0)),
    }


def table(work: Path, clips: list[str], min_life: int = 250) -> str:
    still = json.loads((work / "stillness.json").read_text())
    out = ["| clip | track | life | frames | person? (share) | old verdict | static_share | own_dev (floor) | bg_med "
           "| seg_iou | seg_mean | HOG n | hands n | face n | samples | RA | RB |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    summ = []
    for c in clips:
        d = json.loads((work / f"cues_{c}.json").read_text())
        T = d["frames"]
        fl = still[c]["floor"]
        tot = {"all": 0, "old": 0, "RA": 0, "RB": 0}
        lost: dict[str, list[str]] = {"RA": [], "RB": []}
        rejc = {"RA": 0, "RB": 0}
        for tr in d["tracks"]:
            s = tr["samples"]
            if not s:
                continue
            life = tr["last"] - tr["first"] + 1
            g = agg(tr)
            st = still[c]["tracks"][str(tr["raw_id"])]
            nh = sum(x["hands"] > 0 for x in s)
            ng = sum(x["hog"] > 0 for x in s)
            nf = sum((x["fd1c"] > 0) or (x["fd1"] > 0) for x in s)
            static = st["static_share"] >= 0.95
            pos = nh > 0 or ng > 0 or nf >= 2
            rej = {"RA": life >= min_life and static, "RB": life >= min_life and static and not pos}
            old = tr["verdict"] and not tr["verdict"]["keep"]
            sh = tr["gt_person_share"]
            if sh is None:
                sh = BY_EYE.get((c, tr["raw_id"]), 1.0)
            lab = NAMES.get((c, tr["raw_id"]), "yes (by eye)" if tr["gt_person_share"] is None else f"{sh:.2f}")
            tot["all"] += tr["frames"]
            tot["old"] += 0 if old else tr["frames"]
            for r in rej:
                tot[r] += 0 if (old or rej[r]) else tr["frames"]
                if rej[r] and not old and sh > 0:
                    lost[r].append(f"{tr['raw_id']} (share {sh:.2f}, {tr['frames']} frames)")
                if rej[r] and not old and sh == 0:
                    rejc[r] += 1

            def verdict(r, old=old, rej=rej):
                return "rej(old)" if old else ("**reject**" if rej[r] else "keep")

            out.append(
                f"| {c} | {tr['raw_id']} | {life} | {tr['frames']} | {lab} | {tr['verdict']['reason']} | "
                f"{st['static_share']:.2f} | {st['own_dev_med']:.2f} ({fl:.0f}) | {g['bg_med']:.2f} | "
                f"{g['iou_med']:.2f} | {g['seg_med']:.2f} | {ng} | {nh} | {nf} | {len(s)} | {verdict('RA')} | "
                f"{verdict('RB')} |")
        summ.append(
            f"{c} (min life {min_life}): tracks/frame all {tot['all'] / T:.2f}, old pass {tot['old'] / T:.2f}, "
            f"old+RA {tot['RA'] / T:.2f}, old+RB {tot['RB'] / T:.2f}; clutter tracks newly rejected RA {rejc['RA']} "
            f"RB {rejc['RB']}; person tracks newly rejected RA {lost['RA']} RB {lost['RB']}")
    return "\n".join(out) + "\n\n" + "\n".join(summ)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="The clutter-cue study's per-track table and its candidate rules RA, RB.")
    p.add_argument("work", type=Path, help="folder with cues_<clip>.json and stillness.json")
    p.add_argument("clips", nargs="+", help="clip names (scripts/clutter_cues/clips.tsv)")
    p.add_argument("--min-life", type=int, default=250, help="a rule judges only tracks this long (frames)")
    args = p.parse_args(argv)
    print(table(args.work, args.clips, args.min_life))
    return 0


if __name__ == "__main__":
    sys.exit(main())
