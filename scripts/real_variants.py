"""Real footage the way users' footage differs, built from the videos that packages ship.

Person discovery was tuned on the `sample` videos. A rule that holds only there is a rule for a
clip; these variants are what it must also hold on (issue 27):

- ``dim_mirrored``: Pose2Sim's Multi cam01 mirrored, darkened (gamma 1.6, x0.55);
- ``compressed_half``: Sports2D's demo at half size, x264 at crf 38;
- ``sensor_noise``: Pose2Sim's Single cam02 with Gaussian noise (sigma 6 grey levels);
- ``edit_cuts``: hard cuts between three sources (Multi cam02, Single cam03, Sports2D), 40 frames each;
- ``lab_loop``: Multi cam04 (a lab with bystanders) played forward and back until past ``--loop-s`` s.

    .venv/bin/python scripts/real_variants.py /tmp/variants
    .venv/bin/anonymask anonymize --dataset folder --source /tmp/variants --store /tmp/variants.zarr

Every output is 30 frames/s with a long side of at most ``--side`` px (one frame size per video).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import cv2
import numpy as np

from anonymask.models.shared.frames import target_size
from anonymask.storage.datasets.sample import SampleDataset
from anonymask.storage.video_io import read_frames, write_mp4


def _videos() -> dict[str, Path]:
    return {vid: path for vid, _, path in SampleDataset()._videos()}


def _fit(frames: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Frames scaled and centre-cropped to (w, h)."""
    w, h = size
    fh, fw = frames.shape[1:3]
    s = max(w / fw, h / fh)
    nw, nh = int(round(fw * s)), int(round(fh * s))
    x0, y0 = (nw - w) // 2, (nh - h) // 2
    return np.stack([cv2.resize(f, (nw, nh), interpolation=cv2.INTER_AREA)[y0 : y0 + h, x0 : x0 + w] for f in frames])


def _scaled(frames: np.ndarray, side: int) -> np.ndarray:
    """Frames with a long side of at most ``side`` px (the size ingest would give them)."""
    h, w = target_size(*frames.shape[1:3], side)
    return _fit(frames, (w, h))


def build(out: Path, side: int, loop_s: float, seed: int) -> list[Path]:
    src = _videos()
    multi = {k: src[f"pose2sim_Demo_MultiPerson__videos__cam0{k}"] for k in (1, 2, 4)}
    single = {k: src[f"pose2sim_Demo_SinglePerson__videos__cam0{k}"] for k in (2, 3)}
    sports = src["sports2d_demo"]
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    made = []

    def save(name: str, frames: np.ndarray, crf: int = 16) -> None:
        made.append(write_mp4(out / f"{name}.mp4", frames, fps=30.0, crf=crf, options={"threads": "1"}))

    f = _scaled(read_frames(multi[1], max_frames=90), side)[:, :, ::-1]
    save("dim_mirrored", np.clip(255.0 * 0.55 * (f / 255.0) ** 1.6, 0, 255).round().astype(np.uint8))
    f = _scaled(read_frames(sports, max_frames=90), side // 2)
    save("compressed_half", f, crf=38)
    f = _scaled(read_frames(single[2], max_frames=90), side).astype(np.float32)
    save("sensor_noise", np.clip(f + rng.normal(0.0, 6.0, f.shape), 0, 255).round().astype(np.uint8))
    first = _scaled(read_frames(multi[2], max_frames=40), side)
    size = (first.shape[2], first.shape[1])
    parts = [first, _fit(read_frames(single[3], max_frames=40), size), _fit(read_frames(sports, start=60, max_frames=40), size)]
    save("edit_cuts", np.concatenate(parts))
    base = _scaled(read_frames(multi[4]), side)
    loop, n = [], int(loop_s * 30) + 1
    while sum(len(x) for x in loop) < n:
        loop.append(base if len(loop) % 2 == 0 else base[::-1])
    save("lab_loop", np.concatenate(loop)[:n])
    return made


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--side", type=int, default=480)
    p.add_argument("--loop-s", type=float, default=10.5)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    for path in build(args.out, args.side, args.loop_s, args.seed):
        print(path)


if __name__ == "__main__":
    main()
