"""Where a synthetic video's leaked person pixels come from (models/anonymizer/audit/leak_anatomy.py).

    python scripts/leak_anatomy.py STORE [VIDEO ...] [--markdown]

For each video of a store that has ground truth and a finished audit input (``anonymized``):
the audit's person-caused leak (the same chunks as tasks/audit.py, so the share equals the
audit's ``audit_gt_leak``), split into pixels inside the hole (the fill shows the person) and
outside it, the outside ones by distance to the nearest removed or avatar pixel and by the body
part of the nearest avatar joint, and the frames with the most.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from anonymask.models.anonymizer.audit.leak_anatomy import DISTANCE_BINS, LeakAnatomy, distance_bin
from anonymask.models.shared.body.tracks import JOINT_NAMES
from anonymask.storage.store import DatasetStore
from anonymask.tasks.audit import _gt_chunks


def anatomy(entry) -> LeakAnatomy:
    """The anatomy of one video entry's leak (ground truth and the pipeline's outputs needed)."""
    result = LeakAnatomy(JOINT_NAMES)
    hole = entry.array("person_hole")
    joints = entry.array("render/joints2d") if entry.has_array("render/joints2d") else None
    for t0, raw, out, person, bg, avatar, excused in _gt_chunks(entry):
        sl = slice(t0, t0 + len(raw))
        result.add_chunk(t0, raw, out, person, bg, avatar, excused, np.asarray(hole[sl]),
                         None if joints is None else np.asarray(joints[sl]))
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("store")
    ap.add_argument("videos", nargs="*", help="video ids (default: every video with ground truth)")
    ap.add_argument("--markdown", action="store_true", help="one table row per video")
    args = ap.parse_args(argv)
    store = DatasetStore.open(args.store)
    entries = [e for e in store.videos() if not args.videos or e.video_id in args.videos]
    bins = [distance_bin(float(b)) for b in DISTANCE_BINS] + [f">{DISTANCE_BINS[-1]}px"]
    if args.markdown:
        print("| video | leak (share) | audit's | inside the hole | outside | outside by distance ("
              + ", ".join(bins) + ") | nearest part | worst frames |")
        print("|---|---|---|---|---|---|---|---|")
    for e in entries:
        if not (e.has_array("gt/person_mask") and e.has_array("anonymized") and e.has_array("person_hole")):
            print(f"{e.video_id}: skipped (needs ground truth and the pipeline's outputs)", file=sys.stderr)
            continue
        a = anatomy(e)
        audit = e.metrics().get("audit_gt_leak")
        dist = ", ".join(str(a.by_distance.get(b, 0)) for b in bins)
        parts = ", ".join(f"{k} {v}" for k, v in a.by_joint.most_common(3)) or "-"
        worst = ", ".join(f"{t} ({n})" for t, n in a.worst_frames())
        audit_s = "-" if audit is None else f"{100 * audit:.3f}%"
        if args.markdown:
            print(f"| {e.video_id} | {a.leaked} ({100 * a.share:.3f}%) | {audit_s} | {a.in_hole} | {a.outside} | "
                  f"{dist} | {parts} | {worst} |")
        else:
            print(f"{e.video_id}: leaked {a.leaked} of {a.person_px} person px ({100 * a.share:.3f}%; audit "
                  f"{audit_s}); inside the hole {a.in_hole}, outside {a.outside} (by distance {dict(zip(bins, dist.split(', ')))}); "
                  f"nearest part {parts}; worst frames {worst}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
