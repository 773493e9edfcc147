"""Why was a person not found again? pose4d's discovery on one stored video, with what its scan did there.

Runs the pose4d stage's discovery (production settings, nothing written) on a video of a store and
prints, for every scan, the frame, the boxes of the people already known, how many grid regions
have their centre on the ground-truth person (``gt/person_mask``; without it, nothing is "on the
person") and how many of those the known boxes skip; and for every look of the scan or of a
search whose region centre lies on the person, what it came to (empty, known, turned down,
found). Used for the diagnosis of a followed track that slid onto an object (docs/RESULTS.md,
"Why seed 2's s01_a01_r01 fails").

    python scripts/discovery_trace.py STORE VIDEO [--first 0] [--last -1]
"""

from __future__ import annotations

import argparse

import numpy as np


def person_box(mask: np.ndarray) -> tuple[int, int, int, int] | None:
    """(x0, y0, x1, y1) around a frame's person pixels, None where there are none."""
    ys, xs = np.nonzero(mask)
    return (int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max())) if len(xs) else None


def on(box: tuple[int, int, int, int] | None, x: float, y: float) -> bool:
    return box is not None and box[0] <= x <= box[2] and box[1] <= y <= box[3]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("store")
    p.add_argument("video")
    p.add_argument("--first", type=int, default=0, help="first frame to print")
    p.add_argument("--last", type=int, default=-1, help="last frame to print (-1: the end)")
    a = p.parse_args(argv)

    import anonymask.models.anonymizer.pose.discover as discover
    import anonymask.models.anonymizer.pose.scan as scan
    from anonymask.config.pipeline import pipeline_config
    from anonymask.config.stages import stage_backend
    from anonymask.storage.store import DatasetStore
    from anonymask.tasks.pose4d import study_inputs

    store = DatasetStore.open(a.store)
    entry = store.video(a.video)
    t_len, h, w = (int(x) for x in entry.array("raw").shape[:3])
    gt = entry.array("gt/person_mask") if entry.has_array("gt/person_mask") else None
    last = t_len - 1 if a.last < 0 else a.last
    now = {"t": 0, "box": None}

    def shown(t: int) -> bool:
        return a.first <= t <= last

    push = discover.PersonDiscovery.push

    def traced_push(self, frame):
        now["t"] = self.t
        now["box"] = person_box(np.asarray(gt[self.t]) > 0) if gt is not None else None
        return push(self, frame)

    run_scan, look = scan.PoseScanner.scan, scan.PoseScanner._look

    def traced_scan(self, frame, known=(), full=False):
        t, box = now["t"], now["box"]
        cells = [c for c in self.grid(h, w, self.scans) if on(box, c[0], c[1])]
        skipped = sum(any(scan._inside((c[0], c[1]), d.box) for d in known) for c in cells)
        found = run_scan(self, frame, known, full)
        if shown(t):
            print(f"frame {t}: scan {self.scans} (whole grid: {full}); person at {box}; known "
                  f"{[d.box.round().astype(int).tolist() for d in known]}; regions on the person {len(cells)}, "
                  f"skipped inside a known box {skipped}; found {[d.box.round().astype(int).tolist() for d in found]}")
        return found

    def traced_look(self, frame, roi, taken, min_combined, min_aspect):
        d, result = look(self, frame, roi, taken, min_combined, min_aspect)
        if shown(now["t"]) and on(now["box"], roi[0], roi[1]):
            got = d.box.round().astype(int).tolist() if d is not None else None
            print(f"  frame {now['t']}: look at centre ({roi[0]:.0f}, {roi[1]:.0f}), side {roi[2]:.0f}: "
                  f"{result.value}{'' if got is None else f' {got}'}")
        return d, result

    discover.PersonDiscovery.push = traced_push
    scan.PoseScanner.scan, scan.PoseScanner._look = traced_scan, traced_look
    cfg = pipeline_config(store.dataset, {})["pose4d"]
    stage_backend("pose4d", cfg).estimate(study_inputs(entry, cfg["window"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
