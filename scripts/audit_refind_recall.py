"""How often the audit's ``refind`` rule would excuse a real face or body (docs/RESULTS.md, search ``refind``).

    .venv/bin/python scripts/audit_refind_recall.py STORE [STORE ...] [--kind face] [--every 8] [--scores 0.7,0.3,0.2]
    .venv/bin/python scripts/audit_refind_recall.py STORE [STORE ...] --kind body --scores 0.3,0.0,-0.3
    .venv/bin/python scripts/audit_refind_recall.py STORE [STORE ...] --auditor yolo --scores 0.5,0.25 --every 25

Real faces (bodies): every face BlazeFace finds, and the selfie segmentation confirms (every body
HOG finds and the pose landmark model confirms; with ``--auditor yolo`` every body the opt-in YOLO
auditor finds), on the original frames (``raw``) of each video
of the stores (every ``--every``-th frame). Against each, a flat avatar-coloured region is drawn
from each side (left, right, top, bottom), touching its box or covering 10, 25 or 40% of its
central part. On that composite the audit's test runs as in production (the detector at its
threshold, outside the grown avatar >= ``min_outside``, confirmed on the frame with the avatar
taken out); each candidate is then looked for again on that frame at each ``--scores`` value (the
face detector's score, HOG's SVM margin). Printed per overlap: candidates, and how many are found
again at each score; then the misses (store, video, frame, overlap, side, box).
"""

from __future__ import annotations

import argparse

import cv2
import numpy as np

#: shares of the face box's central part the drawn avatar covers (0: touching the box)
OVERLAPS = (0.0, 0.1, 0.25, 0.4)
SIDES = ("left", "right", "top", "bottom")
#: the flat colour the avatar is drawn in (a skin tone: the colour that competes with a face most)
AVATAR_RGB = (178, 140, 112)


def avatar_beside(box: np.ndarray, side: str, overlap: float, hw: tuple[int, int]) -> np.ndarray:
    """(H,W) bool: a region reaching from outside ``box`` into its central half by ``overlap``."""
    x0, y0, x1, y1 = (float(v) for v in box)
    w, h = x1 - x0, y1 - y0
    reach = 0.25 + 0.5 * overlap if overlap > 0 else 0.0  # the central part starts a quarter in
    if side == "left":
        xa, xb, ya, yb = x0 - 1.5 * w, x0 + reach * w, y0 - 0.5 * h, y1 + 1.5 * h
    elif side == "right":
        xa, xb, ya, yb = x1 - reach * w, x1 + 1.5 * w, y0 - 0.5 * h, y1 + 1.5 * h
    elif side == "top":
        xa, xb, ya, yb = x0 - 0.5 * w, x1 + 0.5 * w, y0 - 1.5 * h, y0 + reach * h
    else:
        xa, xb, ya, yb = x0 - 0.5 * w, x1 + 0.5 * w, y1 - reach * h, y1 + 1.5 * h
    out = np.zeros(hw, bool)
    out[max(0, int(ya)) : max(0, int(yb)), max(0, int(xa)) : max(0, int(xb))] = True
    return out


def main(argv: list[str] | None = None) -> int:
    from anonymask.config.stages import AuditSettings
    from anonymask.models.anonymizer.audit.detectors import FaceAuditor, get_auditor, outside_share
    from anonymask.models.shared.geometry import box_iou
    from anonymask.storage.store import DatasetStore

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("stores", nargs="+")
    p.add_argument("--every", type=int, default=8)
    p.add_argument("--scores", default="0.7,0.3,0.2")
    p.add_argument("--kind", choices=("face", "body"), default="face", help="face: BlazeFace; body: HOG")
    p.add_argument("--auditor", choices=("face", "hog", "yolo"), default=None, help="instead of --kind")
    args = p.parse_args(argv)
    cfg = AuditSettings()
    name = args.auditor or {"face": "face", "body": "hog"}[args.kind]
    # the detector as the audit runs it, and the same one at each score a candidate is looked for again at
    at_score = {"face": lambda s: FaceAuditor(min_score=s), "hog": lambda s: get_auditor("hog", hit_threshold=s),
                "yolo": lambda s: get_auditor("yolo", min_score=s)}
    detector = FaceAuditor() if name == "face" else get_auditor(name)
    again_at = {float(s): at_score[name](float(s)) for s in args.scores.split(",")}
    confirmed = getattr(detector, "confirmed", lambda *a: True)  # YOLO: its score is the confirmation
    grow = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (7, 7))  # the audit's avatar_grow of 3 px
    counts = {f: {"candidates": 0, **{s: 0 for s in again_at}} for f in OVERLAPS}
    misses = []
    for url in args.stores:
        for entry in DatasetStore.open(url).videos():
            if not entry.has_array("inpainted"):
                continue
            raw, background = entry.array("raw"), entry.array("inpainted")
            for t in range(0, raw.shape[0], args.every):
                frame, bg = np.asarray(raw[t]), np.asarray(background[t])
                found = [b for k, b, s in detector.detect(frame) if confirmed(frame, k, b, s)]
                for box in found:
                    for overlap in OVERLAPS:
                        for side in SIDES:
                            avatar = avatar_beside(box, side, overlap, frame.shape[:2])
                            comp = frame.copy()
                            comp[avatar] = AVATAR_RGB
                            grown = cv2.dilate(avatar.astype(np.uint8), grow).astype(bool)
                            blank = comp.copy()
                            blank[grown] = bg[grown]
                            hit = [b for k, b, s in detector.detect(comp) if box_iou(b, box) > cfg.refind_iou
                                   and outside_share(b, grown.astype(np.float32)) >= cfg.min_outside
                                   and confirmed(blank, k, b, s)]
                            if not hit:
                                continue
                            counts[overlap]["candidates"] += 1
                            for score, det in again_at.items():
                                if any(box_iou(hit[0], b) > cfg.refind_iou for _, b, _ in det.detect(blank)):
                                    counts[overlap][score] += 1
                                elif score == min(again_at):
                                    misses.append((url, entry.video_id, t, overlap, side,
                                                   [round(float(v)) for v in box]))
            print(f"{entry.video_id}: {counts}", flush=True)
    print("overlap | candidates | " + " | ".join(f"found again at {s}" for s in again_at))
    for overlap, c in counts.items():
        print(f"{overlap} | {c['candidates']} | " + " | ".join(str(c[s]) for s in again_at))
    print("missed at the lowest score:", misses)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
