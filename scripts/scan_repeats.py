"""Which looks of the landmark-model scan repeat an earlier look on unchanged pixels, and what they find.

    .venv/bin/python scripts/scan_repeats.py VIDEO OUT.json

Runs person discovery (production settings, frames scaled to 640 px as ingest does) with the scan
as it was before ``pose4d.scan.skip_unchanged``: every look is made. A look at a region is counted
as a repeat when the same grid phase looked at that region before and found no one there (any
outcome but a hit), and the region's pixels have not changed since (the scan's own change test).
Writes the counts (looks, repeats, the landmark-model calls each made), every hit (frame, box,
made at a repeat?) and every raw track's boxes (docs/RESULTS.md, 2026-11-26 15:10 update).
Compare the hits' boxes with the generator's ground truth to tell people from clutter.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from track_evidence import read_video  # noqa: E402

from anonymask.models.anonymizer.pose import scan as S  # noqa: E402


class RepeatLog:
    """The scan of ``PoseScanner`` (every look made), counting the looks that repeat an earlier one."""

    def __init__(self):
        self.looks = self.repeats = self.calls = self.repeat_calls = 0
        self.hits: list[list] = []  # [frame, box, at a repeat?]
        self.nobody: dict[tuple, np.ndarray] = {}  # (phase, (cx, cy, side), frame size) -> pixels at that look
        self.t = 0

    def scan(self, sc: S.PoseScanner, frame: np.ndarray, known=(), full: bool = False):
        phase = sc.scans % S.GRID_PHASES
        cells = sc.cells(frame, full)
        small = S._small_grey(frame)
        sc.last_evidence = []
        known, found = list(known), []
        for cell in cells:
            if any(S._inside(cell[:2], d.box) for d in known + found):
                continue
            key = (phase, cell, frame.shape[:2])
            pixels = S._cell_pixels(small, cell)
            before = self.nobody.get(key)
            repeat = before is not None and not S._pixels_changed(pixels, before, sc.change_tol, sc.change_min)
            c0 = sc.calls
            d = sc._candidate(frame, (*cell, 0.0), known + found, sc.scan_combined, sc.min_aspect)
            self.looks += 1
            self.calls += sc.calls - c0
            self.repeats += repeat
            self.repeat_calls += (sc.calls - c0) * repeat
            if d is None:
                if not repeat:
                    self.nobody[key] = pixels
                continue
            self.nobody.pop(key, None)
            self.hits.append([self.t, [float(v) for v in d.box], bool(repeat)])
            part = next((k for k, o in enumerate(found) if S.mask_overlap(o, [d]) > 0.6), None)
            if part is not None:
                found[part] = d
            else:
                found.append(d)
        return found


def main(argv: list[str]) -> int:
    import av

    from anonymask.models.anonymizer.pose.discover import PersonDiscovery
    from anonymask.models.anonymizer.pose.people import get_detector
    from anonymask.models.anonymizer.pose.settings import MediapipePoseSettings

    video, out = argv
    log = RepeatLog()
    S.PoseScanner.scan = lambda sc, frame, known=(), full=False: log.scan(sc, frame, known, full)
    pose = MediapipePoseSettings()
    with av.open(video) as c:
        total = c.streams.video[0].frames or None
    disc = PersonDiscovery(get_detector("mediapipe"), pose.discover, pose.scan, pose.evidence, max_gap=pose.max_gap,
                           t_len=total, scanner=None)
    n = 0
    for frame in read_video(video, 0, None, 640):
        log.t = disc.t
        disc.push(frame)
        n += 1
    tracks = [{"id": tr.tid, "boxes": [[t, *(float(v) for v in tr.frames[t].box), tr.frames[t].source]
                                       for t in sorted(tr.frames)]} for tr in disc.tracker.tracks]
    res = {"video": video, "frames": n, "scans": disc.scanner.scans, "looks": log.looks, "repeats": log.repeats,
           "calls": log.calls, "repeat_calls": log.repeat_calls, "hits": log.hits, "sources": disc.sources,
           "tracks": tracks}
    Path(out).write_text(json.dumps(res))
    print(json.dumps({k: v for k, v in res.items() if k not in ("hits", "tracks")}),
          "hits", len(log.hits), "at repeats", sum(h[2] for h in log.hits))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
