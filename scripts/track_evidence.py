"""Per-track evidence of person discovery on one video, as JSON: which raw tracks are people.

    .venv/bin/python scripts/track_evidence.py VIDEO.mp4 --out ev.json [--max-frames N] [--start S]

Frames are scaled as the ingest stage scales them (``--max-side``, the pipeline's default 640),
so discovery sees what pose4d sees. Runs ``PersonDiscovery`` (models/anonymizer/pose/discover.py) with the production settings of the pose4d
backend (``--set KEY=VALUE`` overrides them as ``pose4d.KEY`` would, dotted: ``discover.hold_motion=0``) over the frames, then writes per raw track the typed evidence the verification pass reads
(models/anonymizer/pose/verify.py ``TrackEvidence``, built by the same code as in production) plus cues for
exploration that production does not compute:

- ``detector_hits``: frames in which the full-frame multi-person detector (run every
  ``detect_every`` frames) returned a detection on the track (box IoU >= 0.5 with the track's box
  that frame), whether or not discovery kept it (it drops detections of people already followed);
- ``detector_calls``: full-frame detector calls during the track's life;
- ``pixel_change``: median over the track's life of the mean absolute grey-level change inside
  its box between samples ``--pixel-every`` frames apart (clutter does not change at all).
- ``boxes``: the track's box in every frame it has one, ``[t, x0, y0, x1, y1, source]`` (pixels of
  the scaled frames; ``source`` is how discovery got it: track, hold, scan, crop, ...), for the
  per-track cues of ``scripts/clutter_cues/``; each row ends with the region the landmark model
  would be run on from that frame's landmarks (``[cx, cy, side, rotation]``, models/anonymizer/pose/roi.py
  ``roi_from_landmarks``; null where the torso was not placed).

With ``--gt`` (the synthetic generator's ``gt/<video>.npz``; ``--gt-period`` for a looped clip)
each track gets ``gt_person_share``: the share of its frames whose box matches a real person's
(box IoU >= 0.3 with the box of that person's projected body joints, grown by 10%).

``--verdicts`` adds what ``verify_tracks`` decides with the ``verify`` settings, after measuring the
scene-match cue (``scene_share``, ``scene_hits``: models/anonymizer/pose/scene_match.py) on the
frames read again, as pose4d's verify pass does (discovery here has no backfill pass).

    .venv/bin/python scripts/track_evidence.py --present STORE VIDEO_ID

prints the tracks present per frame of a pose4d output (the mean over frames of the avatars
shown: the posed tracks' valid frames) and the stage's verification diagnostics.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np


class SequentialReader:
    """``read_frames(a, b)`` over the video for passes that read ascending windows: one decode."""

    def __init__(self, args, stop, table):
        self.args, self.stop, self.table = args, stop, table
        self._it, self._t = None, 0

    def __call__(self, a: int, b: int) -> np.ndarray:
        if self._it is None or a < self._t:
            self._it, self._t = iter(read_video(self.args.video, self.args.start, self.stop, self.args.max_side or None)), 0
        out = []
        for frame in self._it:
            self._t += 1
            if self._t - 1 >= a:
                out.append(frame if self.table is None else self.table[frame])
            if self._t >= b:
                break
        return np.stack(out) if out else np.zeros((0, 1, 1, 3), np.uint8)


class RecordingDetector:
    """A person detector that remembers the boxes of its full-frame calls (frame index -> boxes)."""

    def __init__(self, inner):
        self.inner = inner
        self.calls: dict[int, list[np.ndarray]] = {}
        self.t = 0

    def detect(self, frame):
        dets = self.inner.detect(frame)
        self.calls[self.t] = [d.box.copy() for d in dets]
        return dets

    def __getattr__(self, name):
        return getattr(self.inner, name)


def read_video(path: str, start: int, stop: int | None, max_side: int | None):
    import av

    from anonymask.models.shared.frames import resize_video, target_size

    with av.open(path) as c:
        for k, fr in enumerate(c.decode(video=0)):
            if k < start:
                continue
            if stop is not None and k >= stop:
                break
            img = fr.to_ndarray(format="rgb24")
            hw = target_size(img.shape[0], img.shape[1], max_side)
            yield img if hw == img.shape[:2] else resize_video(img[None], hw)[0]


def _landmark_roi(d, min_conf: float):
    """The region the landmark model would be run on from this detection's own landmarks
    ([cx, cy, side, rotation rad]; None where its torso was not placed)."""
    from anonymask.models.anonymizer.pose.roi import roi_from_landmarks

    roi = roi_from_landmarks(np.asarray(d.kp2d, np.float64), np.asarray(d.conf, np.float64), min_conf)
    return None if roi is None else [round(float(v), 3) for v in roi]


def tracks_present(store: str, video: str) -> dict:
    from anonymask.models.shared.body.tracks_io import read_tracks
    from anonymask.storage.store import DatasetStore
    from anonymask.tasks.pose4d import avatars_per_frame

    entry = DatasetStore.open(store).video(video)
    tracks, _ = read_tracks(entry, "pose")
    t_len = int(entry.array("raw").shape[0])
    m = entry.metrics()
    return {"video": video, "frames": t_len, "tracks": len(tracks),
            "tracks_per_frame": avatars_per_frame(tracks, t_len),
            **{k: m[k] for k in ("verify_rejected", "verify_rejected_frames") if k in m}}


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "--present":
        print(json.dumps(tracks_present(argv[1], argv[2])))
        return 0
    from anonymask.models.anonymizer.pose.discover import PersonDiscovery
    from anonymask.models.anonymizer.pose.exposure import gain_table, shot_gain
    from anonymask.models.anonymizer.pose.people import get_detector
    from anonymask.models.anonymizer.pose.settings import MediapipePoseSettings
    from anonymask.models.anonymizer.pose.verify import track_evidence, verify_tracks, with_scene
    from anonymask.models.shared.geometry import box_iou

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("video")
    p.add_argument("--out", required=True)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--max-frames", type=int, default=None)
    p.add_argument("--pixel-every", type=int, default=8)
    p.add_argument("--max-side", type=int, default=640, help="ingest.max_side (0: full size)")
    p.add_argument("--verdicts", action="store_true")
    p.add_argument("--gt", default=None, help="the generator's ground truth npz of this video")
    p.add_argument("--gt-period", type=int, default=None, help="frames of the clip a looped video repeats")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE")
    args = p.parse_args(argv)

    tree = MediapipePoseSettings().model_dump()
    for kv in args.set:  # dotted keys of the pose4d tree, e.g. discover.hold_motion=0
        k, v = kv.split("=", 1)
        *path, leaf = k.split(".")
        node = tree
        for part in path:
            node = node[part]
        node[leaf] = json.loads(v)
    pose = MediapipePoseSettings.model_validate(tree)
    import av

    with av.open(args.video) as c:
        s = c.streams.video[0]
        total = s.frames or None
    stop = None if args.max_frames is None else args.start + args.max_frames
    t_len = (min(total, stop) if total and stop else (stop or total)) - args.start if (total or stop) else None
    det = RecordingDetector(get_detector("mediapipe"))
    disc = PersonDiscovery(det, pose.discover, pose.scan, pose.evidence, max_gap=pose.max_gap, t_len=t_len,
                           scanner=None)
    # the shot's gain for the models, as pose4d sets it (models/anonymizer/pose/exposure.py): from
    # frames spread over the clip, read in a first pass
    n_all = t_len or sum(1 for _ in read_video(args.video, args.start, stop, args.max_side or None))
    want = set(np.unique(np.linspace(0, n_all - 1, min(pose.exposure.sample_frames, n_all)).round().astype(int)))
    picked = [f for k, f in enumerate(read_video(args.video, args.start, stop, args.max_side or None)) if k in want]
    gain = shot_gain(np.stack(picked), pose.exposure)
    table = gain_table(gain)
    print(f"[evidence] exposure gain {gain:.2f}", file=sys.stderr, flush=True)
    samples: dict[int, list[tuple[int, np.ndarray]]] = {}  # track -> [(t, grey box crop 32x64)]
    n = 0
    shape = None
    src_hw = None
    for frame in read_video(args.video, args.start, stop, args.max_side or None):
        det.t = disc.t
        disc.push(frame if table is None else table[frame])
        shape = frame.shape[:2]
        if src_hw is None:
            with av.open(args.video) as c:
                src_hw = (c.streams.video[0].height, c.streams.video[0].width)
        if n % args.pixel_every == 0:
            grey = frame.mean(axis=-1).astype(np.float32)
            for tr in disc.tracker.tracks:
                d = tr.frames.get(n)
                if d is None:
                    continue
                x0, y0, x1, y1 = (int(round(v)) for v in d.box)
                x0, y0 = max(0, x0), max(0, y0)
                x1, y1 = min(shape[1], max(x1, x0 + 1)), min(shape[0], max(y1, y0 + 1))
                import cv2

                samples.setdefault(tr.tid, []).append((n, cv2.resize(grey[y0:y1, x0:x1], (32, 64))))
        n += 1
        if n % 100 == 0:
            print(f"[evidence] {n} frames, {len(disc.tracker.tracks)} tracks", file=sys.stderr, flush=True)
    t_len = n
    settings = pose.verify
    evidence = [track_evidence(tr, shape, t_len, settings) for tr in disc.tracker.tracks]
    if args.verdicts:  # the scene-match cue reads the frames again, in order, as pose4d's verify pass does
        evidence = with_scene(evidence, disc.track_boxes(t_len), SequentialReader(args, stop, table), settings)
    verdicts = verify_tracks(evidence, settings) if args.verdicts else None
    gt_boxes = None
    if args.gt:
        g = np.load(args.gt)
        j2, valid = g["joints2d"][:, :, :22], g["valid"]  # (T,P,22,2), (P,T)
        lo, hi = j2.min(axis=2), j2.max(axis=2)
        pad = 0.1 * (hi[..., 1:2] - lo[..., 1:2])
        gt_boxes = np.concatenate([lo - pad, hi + pad], -1)  # (T,P,4)
        gt_boxes[~valid.T] = np.nan
        gt_boxes *= shape[1] / src_hw[1]  # source pixels -> the frames discovery saw
    rows = []
    for k, (tr, ev) in enumerate(zip(disc.tracker.tracks, evidence)):
        ts = sorted(tr.frames)
        calls = [t for t in det.calls if ts[0] <= t <= ts[-1]]
        hits = [t for t in calls if t in tr.frames and any(box_iou(b, tr.frames[t].box) >= 0.5 for b in det.calls[t])]
        smp = samples.get(tr.tid, [])
        change = [float(np.abs(b - a).mean()) for (_, a), (_, b) in zip(smp[:-1], smp[1:])]
        row = dict(dataclasses.asdict(ev), detector_calls=len(calls), detector_hits=len(hits),
                   detector_hit_frames=hits[:50],
                   pixel_change=float(np.median(change)) if change else None,
                   pixel_change_max=float(np.max(change)) if change else None,
                   box_first=[float(v) for v in tr.frames[ts[0]].box],
                   boxes=[[int(t)] + [round(float(v), 1) for v in tr.frames[t].box] + [str(tr.frames[t].source)]
                       + [_landmark_roi(tr.frames[t], pose.verify.landmark_conf)] for t in ts])
        if gt_boxes is not None:
            on = 0
            for t in ts:
                tt = (args.start + t) % args.gt_period if args.gt_period else args.start + t
                on += any(np.isfinite(b[0]) and box_iou(b, tr.frames[t].box) >= 0.3 for b in gt_boxes[tt])
            row["gt_person_share"] = on / len(ts)
        if verdicts is not None:
            row["verdict"] = dataclasses.asdict(verdicts[k])
        rows.append(row)
    out = {"video": args.video, "start": args.start, "frames": t_len, "shape": list(shape), "source_shape": list(src_hw),
           "max_side": args.max_side, "options": pose.model_dump(), "exposure_gain": gain,
           "sources": disc.sources, "tracks": rows,
           "tracks_per_frame": float(sum(r["frames"] for r in rows) / max(1, t_len))}
    Path(args.out).write_text(json.dumps(out, indent=1, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))
    print(json.dumps({"video": args.video, "frames": t_len, "tracks": len(rows),
                      "tracks_per_frame": out["tracks_per_frame"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
