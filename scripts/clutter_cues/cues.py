"""Pose-independent cues that might tell a track of a real person from a track on clutter.

Person discovery keeps tracks on clutter (a motorcycle, a shelf, an anatomical skeleton model) that
the landmark model keeps seeing (issue 27 item 3). This measures, per raw discovery track, what
off-the-shelf detectors and pixel statistics say about its box, sampled sparsely over its life, so a
rule can be judged on people and clutter alike (results: docs/RESULTS.md, "cues that tell a person
from clutter").

    .venv/bin/python scripts/clutter_cues/cues.py WORK/CLIP.json --out WORK/cues_CLIP.json [--gt GT.npz]

CLIP.json is ``scripts/track_evidence.py --verdicts`` output (it holds each track's per-frame
``boxes``). Frames are decoded and scaled as ingest scales them (640 long side), as discovery saw
them. Per sampled (track, frame), every ``--every``-th frame of the track's boxes, at most
``--max-samples`` spread evenly, it records:

- seg0 / seg1: mean MediaPipe selfie-segmentation probability inside the box, the model run on the
  whole frame (model_selection 0: general 256x256, 1: landscape 256x144);
- segc0 / segc1: the same, the model run on a crop around the box (box grown 30%, padded square,
  resized to 256 px); segc1_iou: IoU with the box of the model-1 crop mask's blob (p > 0.5, the
  connected part with most pixels in the box);
- fd0c / fd1c: face detection (0 short range, 1 full range) on the crop; score of the best face whose
  centre lies in the box's upper 60%; fd1: full-range face detection on the whole frame, same test;
- hog: best OpenCV HOG people-detector weight among windows (crop rescaled so the box is 160 px high)
  that overlap the box (IoU >= 0.3), -inf if none;
- haar_fb / haar_ub / haar_ff / haar_pf: Haar cascade hits (fullbody / upperbody / frontal face alt2 /
  profile face) on the crop rescaled the same way, a hit counts when its centre is in the box;
- hands: MediaPipe hands (palm detector + landmarks) found with their centre in the box;
- skin: share of box pixels in a YCrCb skin range (Cr 135-180, Cb 85-135);
- bgdiff / bgfg: mean |grey - background median| in the box, and the share of its pixels off by
  > 25 (median over 40 frames spread over the video);
- gt (with ``--gt``): whether a real person's box matches (IoU >= 0.3) that frame.

It also writes ``times_ms``: the median milliseconds per call of each model (the cost of a cue).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from track_evidence import read_video  # noqa: E402

TIMES: dict[str, list[float]] = defaultdict(list)


def timed(name, fn, *a, **k):
    t0 = time.perf_counter()
    r = fn(*a, **k)
    TIMES[name].append((time.perf_counter() - t0) * 1000)
    return r


def iou(a, b):
    x0, y0 = max(a[0], b[0]), max(a[1], b[1])
    x1, y1 = min(a[2], b[2]), min(a[3], b[3])
    i = max(0, x1 - x0) * max(0, y1 - y0)
    u = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - i
    return i / u if u > 0 else 0.0


def crop_square(frame, box, grow=0.3):
    """A square crop around the box grown by ``grow`` (zero padded); returns crop and its origin/scale."""
    h, w = frame.shape[:2]
    x0, y0, x1, y1 = box
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    s = max(x1 - x0, y1 - y0) * (1 + grow)
    s = max(s, 16)
    X0, Y0 = int(round(cx - s / 2)), int(round(cy - s / 2))
    S = int(round(s))
    out = np.zeros((S, S, 3), np.uint8)
    sx0, sy0, sx1, sy1 = max(0, X0), max(0, Y0), min(w, X0 + S), min(h, Y0 + S)
    if sx1 > sx0 and sy1 > sy0:
        out[sy0 - Y0 : sy1 - Y0, sx0 - X0 : sx1 - X0] = frame[sy0:sy1, sx0:sx1]
    return out, (X0, Y0)


def box_mask_mean(prob, box, origin=(0, 0), scale=1.0):
    x0, y0, x1, y1 = box
    ox, oy = origin
    a = [int(round((x0 - ox) * scale)), int(round((y0 - oy) * scale)), int(round((x1 - ox) * scale)),
         int(round((y1 - oy) * scale))]
    H, W = prob.shape[:2]
    a = [max(0, min(W, a[0])), max(0, min(H, a[1])), max(0, min(W, a[2])), max(0, min(H, a[3]))]
    if a[2] <= a[0] or a[3] <= a[1]:
        return float("nan")
    return float(prob[a[1] : a[3], a[0] : a[2]].mean())


def faces_in_box(res, box, W, H, origin=(0, 0), scale=1.0):
    """Best face score whose centre (in frame px) lies in the box's upper 60%."""
    best = 0.0
    if not res.detections:
        return best
    x0, y0, x1, y1 = box
    for d in res.detections:
        bb = d.location_data.relative_bounding_box
        cx = (bb.xmin + bb.width / 2) * W / scale + origin[0]
        cy = (bb.ymin + bb.height / 2) * H / scale + origin[1]
        if x0 <= cx <= x1 and y0 <= cy <= y0 + 0.6 * (y1 - y0):
            best = max(best, float(d.score[0]))
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dump", help="scripts/track_evidence.py output of one clip (with per-frame boxes)")
    p.add_argument("--out", required=True)
    p.add_argument("--every", type=int, default=10, help="sample every k-th frame of a track's life")
    p.add_argument("--max-samples", type=int, default=40, help="per track (spread evenly)")
    p.add_argument("--gt", default=None, help="the generator's ground truth npz of this video")
    p.add_argument("--gt-period", type=int, default=None, help="frames of the clip a looped video repeats")
    p.add_argument("--no-haar", action="store_true", help="skip the Haar cascades (slowest, never decisive)")
    args = p.parse_args()
    import mediapipe as mp

    d = json.load(open(args.dump))
    video = d["video"]
    T = d["frames"]
    # which (track, frame) to sample
    want: dict[int, list[tuple[int, list[float]]]] = defaultdict(list)
    for k, tr in enumerate(d["tracks"]):
        bx = tr["boxes"]
        idx = list(range(0, len(bx), args.every))
        if len(idx) > args.max_samples:
            idx = [idx[int(i)] for i in np.linspace(0, len(idx) - 1, args.max_samples)]
        for i in idx:
            t, *b, _src = bx[i][:6]
            want[t].append((k, b))
    bg_ts = set(np.linspace(0, T - 1, min(T, 40)).astype(int).tolist())
    # gt boxes (frames discovery saw)
    gt_boxes = None
    if args.gt:
        g = np.load(args.gt)
        j2, valid = g["joints2d"][:, :, :22], g["valid"]
        lo, hi = j2.min(axis=2), j2.max(axis=2)
        pad = 0.1 * (hi[..., 1:2] - lo[..., 1:2])
        gt_boxes = np.concatenate([lo - pad, hi + pad], -1)
        gt_boxes[~valid.T] = np.nan
        gt_boxes *= d["shape"][1] / d["source_shape"][1]

    seg0 = mp.solutions.selfie_segmentation.SelfieSegmentation(model_selection=0)
    seg1 = mp.solutions.selfie_segmentation.SelfieSegmentation(model_selection=1)
    fd0 = mp.solutions.face_detection.FaceDetection(model_selection=0, min_detection_confidence=0.5)
    fd1 = mp.solutions.face_detection.FaceDetection(model_selection=1, min_detection_confidence=0.5)
    hands = mp.solutions.hands.Hands(static_image_mode=True, max_num_hands=4, min_detection_confidence=0.5)
    hog = cv2.HOGDescriptor()
    hog.setSVMDetector(cv2.HOGDescriptor_getDefaultPeopleDetector())
    hc = {n: cv2.CascadeClassifier(cv2.data.haarcascades + f)
          for n, f in [("haar_fb", "haarcascade_fullbody.xml"), ("haar_ub", "haarcascade_upperbody.xml"),
                       ("haar_ff", "haarcascade_frontalface_alt2.xml"), ("haar_pf", "haarcascade_profileface.xml")]}

    bg_frames = []
    keep = {}
    for t, fr in enumerate(read_video(video, d["start"], d["start"] + T, d["max_side"] or None)):
        if t in bg_ts:
            bg_frames.append(cv2.cvtColor(fr, cv2.COLOR_RGB2GRAY))
        if t in want:
            keep[t] = fr
    bg = np.median(np.stack(bg_frames), axis=0).astype(np.float32)
    samples = defaultdict(list)
    for t in sorted(want):
        fr = keep[t]
        H, W = fr.shape[:2]
        grey = cv2.cvtColor(fr, cv2.COLOR_RGB2GRAY).astype(np.float32)
        m0 = timed("seg0_full", seg0.process, fr).segmentation_mask
        m1 = timed("seg1_full", seg1.process, fr).segmentation_mask
        f1 = timed("fd1_full", fd1.process, fr)
        ycc = cv2.cvtColor(fr, cv2.COLOR_RGB2YCrCb)
        skin = ((ycc[..., 1] >= 135) & (ycc[..., 1] <= 180) & (ycc[..., 2] >= 85) & (ycc[..., 2] <= 135)).astype(
            np.float32)
        for k, b in want[t]:
            r = {"t": t}
            if gt_boxes is not None:
                tt = (d["start"] + t) % args.gt_period if args.gt_period else d["start"] + t
                r["gt"] = int(any(np.isfinite(g[0]) and iou(g, b) >= 0.3 for g in gt_boxes[tt]))
            r["seg0"] = box_mask_mean(m0, b)
            r["seg1"] = box_mask_mean(m1, b)
            r["fd1"] = faces_in_box(f1, b, W, H)
            r["skin"] = box_mask_mean(skin, b)
            r["bgdiff"] = box_mask_mean(np.abs(grey - bg), b)
            r["bgfg"] = box_mask_mean((np.abs(grey - bg) > 25).astype(np.float32), b)
            crop, org = crop_square(fr, b)
            S = crop.shape[0]
            c256 = cv2.resize(crop, (256, 256), interpolation=cv2.INTER_LINEAR)
            sc = 256 / S
            r["segc0"] = box_mask_mean(timed("seg0_crop", seg0.process, c256).segmentation_mask, b, org, sc)
            mc1 = timed("seg1_crop", seg1.process, c256).segmentation_mask
            r["segc1"] = box_mask_mean(mc1, b, org, sc)
            r["segc1_hi"] = box_mask_mean((mc1 > 0.5).astype(np.float32), b, org, sc)
            r["segc1_unc"] = box_mask_mean(((mc1 > 0.2) & (mc1 < 0.8)).astype(np.float32), b, org, sc)
            # IoU of the mask's blob (p>0.5, the connected part touching the box centre region) with the box
            bi = [int(round((b[0] - org[0]) * sc)), int(round((b[1] - org[1]) * sc)), int(round((b[2] - org[0]) * sc)),
                  int(round((b[3] - org[1]) * sc))]
            n_, lab = cv2.connectedComponents((mc1 > 0.5).astype(np.uint8))
            inbox = lab[max(0, bi[1]):max(0, bi[3]), max(0, bi[0]):max(0, bi[2])]
            ids, cnt = np.unique(inbox[inbox > 0], return_counts=True)
            if len(ids):
                ys, xs = np.nonzero(lab == ids[np.argmax(cnt)])
                r["segc1_iou"] = iou([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1], bi)
            else:
                r["segc1_iou"] = 0.0
            r["fd0c"] = faces_in_box(timed("fd0_crop", fd0.process, c256), b, 256, 256, org, sc)
            r["fd1c"] = faces_in_box(timed("fd1_crop", fd1.process, c256), b, 256, 256, org, sc)
            hr = timed("hands_crop", hands.process, c256)
            nh = 0
            for lm in hr.multi_hand_landmarks or []:
                xs = np.array([q.x for q in lm.landmark]) * 256 / sc + org[0]
                ys = np.array([q.y for q in lm.landmark]) * 256 / sc + org[1]
                if b[0] <= xs.mean() <= b[2] and b[1] <= ys.mean() <= b[3]:
                    nh += 1
            r["hands"] = nh
            # HOG / Haar on the crop scaled so the box is 160 px high
            bh = max(b[3] - b[1], 1)
            hs = 160 / bh
            cs = cv2.resize(crop, (max(1, int(S * hs)), max(1, int(S * hs))))
            gcs = cv2.cvtColor(cs, cv2.COLOR_RGB2GRAY)
            bb = [(b[0] - org[0]) * hs, (b[1] - org[1]) * hs, (b[2] - org[0]) * hs, (b[3] - org[1]) * hs]
            best = -np.inf
            if min(gcs.shape) >= 128:
                rects, wts = timed("hog_crop", hog.detectMultiScale, gcs, winStride=(8, 8), padding=(8, 8),
                                   scale=1.05)
                for (x, y, w_, h_), wt in zip(rects, np.ravel(wts) if len(rects) else []):
                    if iou([x, y, x + w_, y + h_], bb) >= 0.3:
                        best = max(best, float(wt))
            r["hog"] = best
            for n, c in ({} if args.no_haar else hc).items():
                rr = timed(n, c.detectMultiScale, gcs, scaleFactor=1.1, minNeighbors=3)
                r[n] = int(sum(1 for (x, y, w_, h_) in rr if bb[0] <= x + w_ / 2 <= bb[2] and bb[1] <= y + h_ / 2 <= bb[3]))
            samples[k].append(r)
    out = {"video": video, "frames": T, "every": args.every,
           "times_ms": {k: [float(np.median(v)), len(v)] for k, v in TIMES.items()}, "tracks": []}
    for k, tr in enumerate(d["tracks"]):
        out["tracks"].append({"raw_id": tr["raw_id"], "first": tr["first"], "last": tr["last"], "frames": tr["frames"],
                              "held": tr["held"], "gt_person_share": tr.get("gt_person_share"),
                              "verdict": tr.get("verdict"), "samples": samples.get(k, [])})
    json.dump(out, open(args.out, "w"), indent=0)
    print(json.dumps(out["times_ms"]))


if __name__ == "__main__":
    main()
