"""``python -m anonymask.models.shared.synthetic ROOT [--preset demo|synthetic|tiny] [--seed N]``."""

from __future__ import annotations

import argparse
import sys
import time

from anonymask.models.shared.synthetic.generator import PRESETS, generate_demo


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m anonymask.models.shared.synthetic", description=__doc__)
    p.add_argument("root", help="output folder (dataset.json, videos/, gt/)")
    p.add_argument("--preset", default="demo", choices=sorted(PRESETS) + ["hard"],
                   help="hard: the hard cases of models/shared/synthetic/hard.py (static bystander, close-up, ...)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--frames", type=int, default=None, help="override the preset's frames per video")
    args = p.parse_args(argv)
    overrides = {"frames": args.frames} if args.frames else {}
    t0 = time.perf_counter()

    def progress(i: int, n: int, video_id: str) -> None:
        print(f"[{i}/{n}] {video_id}  {time.perf_counter() - t0:.1f}s", flush=True)

    if args.preset == "hard":
        from anonymask.models.shared.synthetic.hard import generate_hard_cases

        root = generate_hard_cases(args.root, seed=args.seed, progress=progress, **overrides)
    else:
        root = generate_demo(args.root, preset=args.preset, seed=args.seed, progress=progress, **overrides)
    print(f"generated {args.preset} dataset at {root} in {time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
