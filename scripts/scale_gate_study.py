"""How steady is a person's body scale, and which links would the scale gate refuse? pose4d's
discovery on stored videos with the gate off, every track's sightings recorded.

For each video of the stores (or those named), runs the pose4d stage's discovery (production
settings with the gate off, ``pose4d.discover.scale_gate.enabled`` False; nothing written) and prints:

- the spread of the body scale (models/anonymizer/pose/people.py ``body_scale``) from one frame to
  the next along followed tracks (ratio either way: median, 90th and 99th percentile, largest);
- every link (a detection of the frame, a tile, a crop, the scan or a search that continued a
  track) whose scale the gate, switched on with its settings, would refuse against the track's scale
  (``scale_fits``), with the track, the frame and the source; ``--sheets DIR`` also saves, per
  refused link, the frame before and the frame of the link with the track's box and landmarks
  drawn (to look at who was linked to whom).

Used for the scale gate's settings and table (docs/RESULTS.md, "A body of another scale does not
continue a track").

    python scripts/scale_gate_study.py STORE [STORE ...] [--videos a,b] [--sheets DIR]
"""

from __future__ import annotations

import argparse
from collections import deque
from pathlib import Path

import numpy as np


def sightings(entry, dataset: str) -> dict[int, dict[int, object]]:
    """Per raw track, its detections by frame (followed back and held frames left out), gate off."""
    import anonymask.models.anonymizer.pose.discover as discover
    from anonymask.config.pipeline import pipeline_config
    from anonymask.config.stages import stage_backend
    from anonymask.core.errors import NoPersonError
    from anonymask.tasks.pose4d import study_inputs

    rec: dict[int, dict[int, object]] = {}
    push = discover.PersonDiscovery.push

    def recorded(self, frame):
        t = self.t
        out = push(self, frame)
        for tr in self.tracker.tracks:
            d = tr.frames.get(t)
            if d is not None and d.source != "hold":
                rec.setdefault(tr.tid, {})[t] = d
        return out

    discover.PersonDiscovery.push = recorded
    try:
        cfg = pipeline_config(dataset, {"pose4d": {"discover": {"scale_gate": {"enabled": False}}}})["pose4d"]
        stage_backend("pose4d", cfg).estimate(study_inputs(entry, cfg["window"]))
    except NoPersonError as e:  # nothing posed: the sightings recorded (if any) still count
        print(f"{entry.video_id}: {e}")
    finally:
        discover.PersonDiscovery.push = push
    return rec


def study(rec, gate, min_conf: float):
    """(one-frame ratios along followed tracks, [(track, frame, source, frames unseen, ratio)] refused)."""
    from anonymask.models.anonymizer.pose.people import body_scale, median_scale, scale_fits

    steps, refused = [], []
    for tid, frames in rec.items():
        recent: deque = deque(maxlen=gate.sightings)
        last_t, last_s = None, None
        for t in sorted(frames):
            d = frames[t]
            s = body_scale(d, min_conf)
            if last_t is not None and d.source == "track" and t == last_t + 1 and s and last_s:
                steps.append(max(s / last_s, last_s / s))
            if last_t is not None and d.source != "track":
                ref = median_scale(recent, min_conf)
                if not scale_fits(ref, s, t - last_t, gate):
                    refused.append((tid, t, d.source, t - last_t, max(s / ref, ref / s)))
            recent.append(d)
            last_t, last_s = t, s
    return steps, refused


def sheet(entry, frames, tid: int, t: int, out: Path) -> None:
    import cv2

    raw = entry.array("raw")
    before = max(k for k in frames if k < t)
    tiles = []
    for k in (before, t):
        f = np.ascontiguousarray(np.asarray(raw[k])[..., ::-1])
        d = frames[k]
        b = np.round(d.box).astype(int)
        cv2.rectangle(f, (int(b[0]), int(b[1])), (int(b[2]), int(b[3])), (0, 255, 0), 2)
        for i in range(11, 33):
            if d.conf[i] >= 0.5:
                cv2.circle(f, (int(round(d.kp2d[i, 0])), int(round(d.kp2d[i, 1]))), 3, (0, 0, 255), -1)
        cv2.putText(f, f"track {tid} t{k} {d.source}", (5, 20), cv2.FONT_HERSHEY_SIMPLEX, 0.6, (255, 255, 0), 2)
        tiles.append(f)
    cv2.imwrite(str(out), np.concatenate(tiles, 1))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("stores", nargs="+")
    p.add_argument("--videos", default="", help="comma-separated video ids (default: all)")
    p.add_argument("--sheets", default="", help="folder for one PNG per refused link")
    a = p.parse_args(argv)

    from anonymask.models.anonymizer.pose.settings import DiscoverSettings
    from anonymask.storage.store import DatasetStore

    gate = DiscoverSettings().scale_gate.model_copy(update={"enabled": True})
    min_conf = DiscoverSettings().same.min_conf
    all_steps, links = [], 0
    for url in a.stores:
        store = DatasetStore.open(url)
        names = [v for v in a.videos.split(",") if v] or [e.video_id for e in store.videos()]
        for vid in names:
            entry = store.video(vid)
            rec = sightings(entry, store.dataset)
            steps, refused = study(rec, gate, min_conf)
            all_steps += steps
            links += sum(1 for fr in rec.values() for k, t in enumerate(sorted(fr)) if k and fr[t].source != "track")
            for tid, t, source, unseen, ratio in refused:
                print(f"{vid}: track {tid} frame {t} ({source}, unseen {unseen}): scale ratio {ratio:.2f} - refused")
                if a.sheets:
                    Path(a.sheets).mkdir(parents=True, exist_ok=True)
                    sheet(entry, rec[tid], tid, t, Path(a.sheets) / f"{vid}_track{tid}_t{t}.png")
    r = np.asarray(all_steps)
    if r.size:
        print(f"one-frame scale ratio along followed tracks ({r.size} steps): median {np.median(r):.3f}, "
              f"90th {np.percentile(r, 90):.3f}, 99th {np.percentile(r, 99):.3f}, largest {r.max():.2f}")
    print(f"links (a track continued by a detection not of its own region): {links}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
