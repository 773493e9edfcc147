"""Would the face landmark model's presence flag make a good second opinion for the audit's face check?

The audit's face check (models/anonymizer/audit/detectors.py ``FaceAuditor``) counts a BlazeFace
box outside the avatars as a real face. On the demo with +-1 noise it counts a coffee cup. This
script measures, on footage where every face is real (the stores' ``raw`` frames), what MediaPipe's
face landmark model (``face_landmark.tflite``, shipped in the mediapipe wheel) says about each box
the audit's detector finds: its face flag on a crop 1.5x the box. Then, for the larger faces, how
the flag holds when the face is partly covered, blurred, noisy, dim or compressed, and when small
faces are upscaled past the size gate. A second opinion that the audit may trust must keep every
real face under all of these (the audit is the last check before a video is published).

    python scripts/face_flag_study.py STORE [STORE ...] --out study.json [--every 4] [--min-px 40]
    python scripts/face_flag_study.py STORE --array anonymized --videos VID   # candidates in an output

The summary counts boxes per video and size; labels (real face or not) come from looking at the
crops (``--crops DIR`` writes one PNG per box of at least ``--min-px``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path

import cv2
import numpy as np

#: the face landmark model's input side, px
FACE_INPUT = 192
#: MediaPipe's face mesh crops 1.5x the detector's box
CROP_SCALE = 1.5
DEGRADATIONS = ("none", "cover_left30", "cover_right30", "cover_top30", "cover_bottom30", "blur2", "noise12",
                "dim035", "jpeg20")


class FaceFlag:
    """The face landmark model's presence flag (sigmoid of its second output) on a box."""

    def __init__(self):
        from ai_edge_litert.interpreter import Interpreter

        from anonymask.models.anonymizer.pose.roi import mediapipe_models_dir

        path = os.path.join(mediapipe_models_dir(), "face_landmark", "face_landmark.tflite")
        self.it = Interpreter(model_path=path, num_threads=2)
        self.it.allocate_tensors()
        self.inp = self.it.get_input_details()[0]["index"]
        self.out = [d["index"] for d in self.it.get_output_details() if int(np.prod(d["shape"])) == 1][0]

    def __call__(self, frame: np.ndarray, box) -> float:
        cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
        k = FACE_INPUT / (CROP_SCALE * max(box[2] - box[0], box[3] - box[1], 4.0))
        m = np.float32([[k, 0, FACE_INPUT / 2 - cx * k], [0, k, FACE_INPUT / 2 - cy * k]])
        crop = cv2.warpAffine(frame, m, (FACE_INPUT, FACE_INPUT), borderMode=cv2.BORDER_CONSTANT)
        self.it.set_tensor(self.inp, (crop.astype(np.float32) / 255.0)[None])
        self.it.invoke()
        return 1.0 / (1.0 + math.exp(-float(np.ravel(self.it.get_tensor(self.out))[0])))


def degrade(frame: np.ndarray, box, kind: str, rng: np.random.Generator) -> np.ndarray:
    """The frame with the face in ``box`` degraded as ``kind`` (:data:`DEGRADATIONS`)."""
    x0, y0, x1, y1 = (int(round(float(v))) for v in box)
    bw, bh = x1 - x0, y1 - y0
    g = frame.copy()
    if kind.startswith("cover_"):  # 30% of the box greyed, as a grown avatar edge would hide it
        side = kind[6:-2]
        sl = {"left": np.s_[y0:y1, x0:x0 + int(0.3 * bw)], "right": np.s_[y0:y1, x1 - int(0.3 * bw):x1],
              "top": np.s_[y0:y0 + int(0.3 * bh), x0:x1], "bottom": np.s_[y1 - int(0.3 * bh):y1, x0:x1]}[side]
        g[sl] = 127
    elif kind == "blur2":
        g = cv2.GaussianBlur(g, (0, 0), 2.0)
    elif kind == "noise12":
        g = np.clip(g + rng.normal(0, 12, g.shape), 0, 255).astype(np.uint8)
    elif kind == "dim035":
        g = (g * 0.35).astype(np.uint8)
    elif kind == "jpeg20":
        g = cv2.imdecode(cv2.imencode(".jpg", g[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, 20])[1], 1)[..., ::-1]
    return g


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("stores", nargs="+")
    p.add_argument("--array", default="raw")
    p.add_argument("--videos", nargs="*")
    p.add_argument("--every", type=int, default=4)
    p.add_argument("--min-px", type=float, default=40.0)
    p.add_argument("--upscale", type=int, nargs="*", default=[2, 3], help="also on frames upscaled by these")
    p.add_argument("--crops", type=Path)
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)

    from anonymask.models.anonymizer.audit.detectors import FaceAuditor
    from anonymask.storage.store import DatasetStore

    faces, flag, rng = FaceAuditor(), FaceFlag(), np.random.default_rng(0)
    boxes, upscaled = [], []
    if a.crops:
        a.crops.mkdir(parents=True, exist_ok=True)
    for url in a.stores:
        for e in DatasetStore.open(url).videos():
            if (a.videos and e.video_id not in a.videos) or not e.has_array(a.array):
                continue
            arr = e.array(a.array)
            for t in range(0, arr.shape[0], a.every):
                frame = np.asarray(arr[t])
                for _, box, score in faces.detect(frame):
                    h = float(box[3] - box[1])
                    row = {"video": e.video_id, "t": t, "box": [round(float(v)) for v in box], "px": round(h),
                           "score": round(score, 3), "flag": round(flag(frame, box), 3)}
                    boxes.append(row)
                    if h >= a.min_px:
                        row["degraded"] = {kind: round(flag(degrade(frame, box, kind, rng), box), 3)
                                           for kind in DEGRADATIONS}
                        if a.crops:
                            x0, y0, x1, y1 = row["box"]
                            pad = int(h)
                            crop = frame[max(0, y0 - pad):y1 + pad, max(0, x0 - pad):x1 + pad]
                            cv2.imwrite(str(a.crops / f"{e.video_id}_{t}_{x0}_{y0}.png"), crop[..., ::-1])
                for s in a.upscale if a.array == "raw" else ():
                    big = cv2.resize(frame, None, fx=s, fy=s, interpolation=cv2.INTER_CUBIC)
                    for _, box, _ in faces.detect(big):
                        if float(box[3] - box[1]) >= a.min_px:
                            upscaled.append({"video": e.video_id, "t": t, "scale": s, "px": round(float(box[3] - box[1])),
                                             "box": [round(float(v) / s) for v in box], "flag": round(flag(big, box), 3)})
    large = [b for b in boxes if b["px"] >= a.min_px]
    kept = [b for b in large if b["flag"] >= 0.5]  # what a degradation does to the boxes the flag keeps
    summary = {
        "boxes": len(boxes), "large": len(large), "large_flag_ge_half": sum(b["flag"] >= 0.5 for b in large),
        "small_flag_ge_half": sum(b["flag"] >= 0.5 for b in boxes if b["px"] < a.min_px),
        # of the large boxes the flag keeps as they are, the share it still keeps when degraded
        "degraded_share_ge_half": {k: round(float(np.mean([b["degraded"][k] >= 0.5 for b in kept])), 3) if kept else None
                                   for k in DEGRADATIONS},
        "upscaled": len(upscaled), "upscaled_flag_ge_half": sum(u["flag"] >= 0.5 for u in upscaled),
    }
    a.out.write_text(json.dumps({"summary": summary, "boxes": boxes, "upscaled": upscaled}, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
