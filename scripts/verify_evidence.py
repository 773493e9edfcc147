"""The verification pass's evidence per raw track, as pose4d computes it (backfill included), as JSON.

    .venv/bin/python scripts/verify_evidence.py STORE VIDEO_ID --out ev.json [--set KEY=VALUE ...]

Runs the ``pose4d`` stage's backend on the frames the store already holds (``raw``, from ingest)
with the dataset's pipeline settings (``--set`` overrides them as ``pose4d.KEY`` would, e.g.
``verify.scene.enabled=true``), writes nothing to the store, and records what the verify pass
(models/anonymizer/pose/verify.py) saw: every ``TrackEvidence`` field, the scene-match cue's
samples and how many of them had a free reference frame (models/anonymizer/pose/scene_match.py),
the track's boxes, the pass's verdict and, where the store holds the generator's ground truth
(``gt/person_mask``), ``person_share``: the share of the track's frames (every 5th) whose box is at
least 15% person pixels. Unlike scripts/track_evidence.py (discovery alone, on a video file), the
tracks here are the ones the pass judges in production.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

import numpy as np

#: a sampled box shows a person when at least this share of its pixels are ground-truth person pixels
PERSON_COVER = 0.15
#: every this many frames of a track's boxes are compared with the ground truth
PERSON_EVERY = 5


def person_share(boxes: list[list[float]], gt) -> float:
    """Share of the sampled frames of ``boxes`` ([t, x0, y0, x1, y1] rows) whose box is at least
    :data:`PERSON_COVER` ground-truth person pixels (``gt``: a (T, H, W) bool array); NaN: no box."""
    hits = []
    for t, x0, y0, x1, y1 in boxes[::PERSON_EVERY]:
        x0, y0, x1, y1 = (int(round(v)) for v in (x0, y0, x1, y1))
        sub = np.asarray(gt[int(t), max(0, y0):max(0, y1), max(0, x0):max(0, x1)])
        hits.append(bool(sub.size) and float(sub.mean()) >= PERSON_COVER)
    return float(np.mean(hits)) if hits else float("nan")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("store")
    p.add_argument("video")
    p.add_argument("--out", required=True)
    p.add_argument("--dataset", default="demo", help="whose pipeline defaults to use")
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE")
    args = p.parse_args(argv)

    import anonymask.models.anonymizer.pose.verify as verify
    from anonymask.config.pipeline import parse_overrides, pipeline_config
    from anonymask.config.stages import stage_backend
    from anonymask.models.anonymizer.pose.scene_match import scene_plan
    from anonymask.storage.store import DatasetStore
    from anonymask.tasks.pose4d import study_inputs

    cfg = pipeline_config(args.dataset, parse_overrides([f"pose4d.{kv}" for kv in args.set]))["pose4d"]
    entry = DatasetStore.open(args.store).video(args.video)
    raw = entry.array("raw")
    t_len, h, w = (int(x) for x in raw.shape[:3])

    rows: list[dict] = []
    measured = verify.with_scene

    def recording(evidence, raw_boxes, read_frames, settings):
        out = measured(evidence, raw_boxes, read_frames, settings)
        plans = {pl.raw_id: pl for pl in scene_plan(raw_boxes, [ev.raw_id for ev in evidence], settings.scene)}
        for ev in out:
            pl = plans[ev.raw_id]
            box = raw_boxes[ev.raw_id]
            rows.append(dict(dataclasses.asdict(ev), scene_samples=len(pl.samples),
                             scene_with_reference=sum(1 for refs in pl.refs if refs),
                             boxes=[[t] + [round(float(v), 1) for v in box[t]] for t in np.flatnonzero(np.isfinite(box[:, 0]))]))
        return out

    verify.with_scene = recording
    res = stage_backend("pose4d", cfg).estimate(study_inputs(entry, cfg["window"]))
    settings = verify.VerifySettings.model_validate(cfg["verify"])
    fields = set(verify.TrackEvidence.__dataclass_fields__)
    verdicts = verify.verify_tracks([verify.TrackEvidence(**{k: v for k, v in r.items() if k in fields}) for r in rows],
                                    settings)
    gt = entry.array("gt/person_mask") if entry.has_array("gt/person_mask") else None
    for r, v in zip(rows, verdicts):
        r["keep"], r["reason"] = v.keep, str(v.reason)
        if gt is not None:
            r["person_share"] = person_share(r["boxes"], gt)
    with open(args.out, "w") as f:
        json.dump({"store": args.store, "video": args.video, "frames": t_len, "metrics": res.metrics, "tracks": rows},
                  f, indent=1, default=float)
    for r in rows:
        print(f"raw {r['raw_id']:3d} frames {r['first']}-{r['last']} held {r['held']} refound {r['refound']} "
              f"{r['reason']} person {r.get('person_share', float('nan')):.2f} scene {r['scene_hits']}/"
              f"{r['scene_samples']} (with a free frame {r['scene_with_reference']})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
