"""Dump the pose4d stage's outputs on the real `sample` videos, and compare two dumps array by array.

Why: a refactor of person discovery must not change what it finds. Run ``dump`` with the old code
and with the new (e.g. two git worktrees), then ``compare``:

    .venv/bin/python scripts/pose_outputs.py dump /tmp/pose-old --frames 60
    .venv/bin/python scripts/pose_outputs.py dump /tmp/pose-new --frames 60
    .venv/bin/python scripts/pose_outputs.py compare /tmp/pose-old /tmp/pose-new

``dump`` runs the ``mediapipe`` backend with its default settings on each video's first
``--frames`` frames, scaled to a long side of at most ``--side`` px, and writes every output
(instance labels, person probability, boxes, gaps, kinds, raw id -> track, every track array) to
``<dir>/<video>.npz``; ``compare`` prints IDENTICAL or the arrays that differ per video.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np


def _outputs(fr: np.ndarray) -> dict[str, np.ndarray]:
    """Every pose4d output on these frames, as named arrays."""
    from anonymask.core.registry import get_backend
    from anonymask.models.anonymizer.pose.backends import PoseInputs
    from anonymask.models.anonymizer.pose.discover import paint

    t_len, h, w = fr.shape[:3]
    labels = np.zeros((t_len, h, w), np.uint16)
    prob = np.zeros((t_len, h, w), np.float32)

    def write(t0, lab, p):
        labels[t0 : t0 + len(lab)] = lab
        prob[t0 : t0 + len(p)] = p

    def paint_frame(t, d, tid):
        paint(labels[t], prob[t], d, tid)

    def relabel_frame(t, old, new):
        labels[t][labels[t] == old + 1] = new + 1

    io = PoseInputs("video", "video", (t_len, h, w), lambda: ((a, fr[a : a + 16]) for a in range(0, t_len, 16)),
                    lambda a, b: fr[a:b], instance_outputs=lambda: (write, paint_frame, relabel_frame))
    res = get_backend("pose4d", "mediapipe").create({}).estimate(io)
    arrays = {k.replace("/", "_"): v for k, v in res.arrays.items()}
    for i, tr in enumerate(res.tracks):
        arrays.update({f"track{i}_{k}": v for k, v in tr.to_arrays().items()})
        arrays[f"track{i}_start"] = np.array(tr.start)
    return dict(labels=labels, prob=prob, **arrays)


def dump(out: Path, frames: int, side: int, only: list[str]) -> None:
    from anonymask.models.shared.frames import resize_video, target_size
    from anonymask.storage.datasets.sample import SampleDataset
    from anonymask.storage.video_io import read_frames

    out.mkdir(parents=True, exist_ok=True)
    for vid, _, path in SampleDataset()._videos():
        if only and vid not in only:
            continue
        fr = read_frames(path, max_frames=frames)
        fr = resize_video(fr, target_size(*fr.shape[1:3], side))
        t0 = time.time()
        arrays = _outputs(fr)
        np.savez_compressed(out / f"{vid}.npz", **arrays)
        print(f"{vid} {fr.shape} {time.time() - t0:.1f}s", flush=True)


def compare(a: Path, b: Path) -> int:
    bad = 0
    for f in sorted(a.glob("*.npz")):
        g = b / f.name
        if not g.exists():
            print(f"{f.stem} missing in {b}")
            bad += 1
            continue
        x, y = np.load(f), np.load(g)
        diff = [k for k in sorted(set(x.files) | set(y.files))
                if k not in x.files or k not in y.files or x[k].shape != y[k].shape
                or not np.array_equal(x[k], y[k], equal_nan=x[k].dtype.kind == "f")]
        print(f"{f.stem} " + ("IDENTICAL" if not diff else "DIFF " + " ".join(diff[:12])))
        bad += bool(diff)
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    d = sub.add_parser("dump")
    d.add_argument("out", type=Path)
    d.add_argument("videos", nargs="*", help="sample video ids (default: all)")
    d.add_argument("--frames", type=int, default=60)
    d.add_argument("--side", type=int, default=480)
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = p.parse_args(argv)
    if args.what == "dump":
        dump(args.out, args.frames, args.side, args.videos)
        return 0
    return compare(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
