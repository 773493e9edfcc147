"""Does a YOLO11n-pose person box show a body? (a study for ``pose4d.detector: yolo``'s body check)

Runs YOLO11n-pose (opt-in, AGPL-3.0; the weights of ``models/anonymizer/pose/yolo.py``) on every
``--every``-th frame of each video (frames scaled to ``--max-side`` as ingest does) and writes, per
person box at ``--min-score`` and up: its score, its size, and the confidence of each of the 12 COCO
body keypoints (shoulders, elbows, wrists, hips, knees, ankles). With ``--crops DIR`` it also saves
each box that shows fewer than ``--flag`` body keypoints at ``--conf`` as a PNG, to be looked at.

    .venv/bin/python scripts/clutter_cues/yolo_body_keypoints.py VIDEO [VIDEO ...] --out boxes.json \\
        [--every 4] [--max-side 640] [--crops DIR]

What was found: docs/RESULTS.md ("a box that shows no body").
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

#: COCO keypoints 5-16: shoulders, elbows, wrists, hips, knees, ankles (0-4 are the face's)
BODY = tuple(range(5, 17))


def frames_of(path: str, every: int, max_side: int, max_frames: int):
    """(t, frame) of every ``every``-th of the first ``max_frames`` frames, scaled as ingest scales them."""
    from anonymask.models.shared.frames import resize_video, target_size
    from anonymask.storage.video_io import read_frames

    frames = read_frames(path, 0, max_frames, every)
    frames = resize_video(frames, target_size(frames.shape[1], frames.shape[2], max_side))
    return zip(range(0, max_frames, every), frames)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("videos", nargs="+")
    p.add_argument("--out", required=True)
    p.add_argument("--every", type=int, default=4)
    p.add_argument("--max-side", type=int, default=640)
    p.add_argument("--max-frames", type=int, default=600)
    p.add_argument("--min-score", type=float, default=0.3)
    p.add_argument("--conf", type=float, default=0.5)
    p.add_argument("--flag", type=int, default=2)
    p.add_argument("--crops", default=None)
    a = p.parse_args(argv)
    os.environ.setdefault("YOLO_OFFLINE", "1")
    from anonymask.models.anonymizer.pose.settings import SecondDetectorSettings
    from anonymask.models.anonymizer.pose.yolo import YoloPersons

    yolo = YoloPersons(SecondDetectorSettings(backend="yolo11n-pose", min_score=a.min_score), None)
    rows = []
    for path in a.videos:
        name = Path(path).stem if "Pose2Sim" not in path else "p2s_" + "_".join(Path(path).parts[-3:]).replace(".mp4", "")
        for t, im in frames_of(path, a.every, a.max_side, a.max_frames):
            res = yolo.predict(im, a.max_side)
            if res.boxes is None or not len(res.boxes):
                continue
            for box, score, kp in zip(res.boxes.xyxy.cpu().numpy(), res.boxes.conf.cpu().numpy(),
                                      res.keypoints.data.cpu().numpy()):
                body = [round(float(c), 3) for c in kp[list(BODY), 2]]
                n = sum(c >= a.conf for c in body)
                rows.append({"video": name, "t": t, "box": [round(float(v), 1) for v in box], "score": round(float(score), 3),
                             "frame_hw": list(im.shape[:2]), "body_conf": body, "body_seen": n})
                if a.crops and n < a.flag:
                    import cv2

                    x0, y0, x1, y1 = (int(round(v)) for v in box)
                    Path(a.crops).mkdir(parents=True, exist_ok=True)
                    cv2.imwrite(str(Path(a.crops) / f"{name}_{t:04d}_{score:.2f}_{n}.png"),
                                im[max(y0, 0):y1, max(x0, 0):x1, ::-1])
        seen = [r["body_seen"] for r in rows if r["video"] == name]
        print(name, len(seen), "boxes; body keypoints seen per box:",
              {k: seen.count(k) for k in sorted(set(seen))}, flush=True)
    Path(a.out).write_text(json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
