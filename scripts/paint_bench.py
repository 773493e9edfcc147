"""Time pose4d's later paints (people followed back, face regions) into a real sharded store array:
frame by frame (the stage before 2026-11-26) against block by block (``tasks/pose4d.py``
``_BlockPainter``), and check that both give the same arrays.

    python scripts/paint_bench.py [--frames 300] [--size 480x640] [--every 1]

Every ``--every``-th frame gets one person's region painted, as the face pass does for a face
seen throughout a video.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import numpy as np


def main() -> None:
    from anonymask.models.anonymizer.pose.discover import paint
    from anonymask.models.anonymizer.pose.people import Detection
    from anonymask.storage.store import DatasetStore, VideoInfo
    from anonymask.tasks.pose4d import _BlockPainter

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--size", default="480x640", help="HxW")
    ap.add_argument("--every", type=int, default=1)
    args = ap.parse_args()
    h, w = (int(v) for v in args.size.split("x"))
    t_len = args.frames
    rng = np.random.default_rng(0)
    lab0 = (rng.random((t_len, h, w)) < 0.1).astype(np.uint16)
    p0 = (lab0 * 255).astype(np.uint8)
    y0, x0, y1, x1 = h // 4, w // 4, 3 * h // 4, w // 2
    mask = rng.random((y1 - y0, x1 - x0)).astype(np.float32)
    z = np.zeros((33, 2), np.float32)
    det = Detection(np.array([x0, y0, x1, y1], np.float32), z, np.zeros(33, np.float32), np.zeros((33, 3), np.float32),
                    mask, (x0, y0, x1, y1), 1.0, "face")
    out = {}
    results = {}
    with tempfile.TemporaryDirectory() as d:
        store = DatasetStore.create(f"{d}/s.zarr", "demo", stages=["pose4d"])
        store.register_videos([VideoInfo("v")])
        entry = store.video("v")
        for mode in ("frame", "block"):
            labels = entry.create_array(f"{mode}/instances", (t_len, h, w), np.uint16)
            prob = entry.create_array(f"{mode}/person_prob", (t_len, h, w), np.uint8)
            labels[:], prob[:] = lab0, p0
            t0 = time.perf_counter()
            if mode == "frame":
                for t in range(0, t_len, args.every):
                    lab, p = np.asarray(labels[t]), np.asarray(prob[t]).astype(np.float32) / 255.0
                    paint(lab, p, det, 1)
                    labels[t] = lab
                    prob[t] = np.clip(np.rint(p * 255), 0, 255).astype(np.uint8)
            else:
                painter = _BlockPainter(labels, prob)
                for t in range(0, t_len, args.every):
                    painter.paint(t, det, 1)
                painter.flush()
            out[mode] = round(time.perf_counter() - t0, 2)
            results[mode] = (np.asarray(labels[:]), np.asarray(prob[:]))
    same = all(np.array_equal(a, b) for a, b in zip(results["frame"], results["block"]))
    print(json.dumps({"frames": t_len, "size": [h, w], "painted": len(range(0, t_len, args.every)),
                      "seconds_frame_by_frame": out["frame"], "seconds_block_by_block": out["block"],
                      "same_arrays": same}))


if __name__ == "__main__":
    main()
