"""Person boxes per frame from a person-probability map, linked into tracks over time.

Several people per video (NTU's two-person actions): each connected region of the person mask
is a candidate; boxes are linked frame to frame by IoU (greedy, highest first); short-lived
tracks (flicker, small false positives) are dropped.
"""

from __future__ import annotations

import cv2
import numpy as np


def frame_boxes(prob: np.ndarray, threshold: float = 0.5, min_area_frac: float = 0.004) -> np.ndarray:
    """(K,4) x0,y0,x1,y1 boxes of the connected person regions in one (H,W) probability map."""
    h, w = prob.shape
    m = (prob >= threshold).astype(np.uint8)
    m = cv2.morphologyEx(m, cv2.MORPH_CLOSE, np.ones((5, 5), np.uint8))
    n, _, stats, _ = cv2.connectedComponentsWithStats(m, connectivity=8)
    boxes = []
    for i in range(1, n):
        x, y, bw, bh, area = stats[i]
        if area >= min_area_frac * h * w:
            boxes.append([x, y, x + bw, y + bh])
    return np.asarray(boxes, np.float32).reshape(-1, 4)


def iou(a: np.ndarray, b: np.ndarray) -> float:
    x0, y0 = max(a[0], b[0]), max(a[1], b[1])
    x1, y1 = min(a[2], b[2]), min(a[3], b[3])
    inter = max(0.0, x1 - x0) * max(0.0, y1 - y0)
    ua = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return float(inter / ua) if ua > 0 else 0.0


def link_tracks(per_frame: list[np.ndarray], min_iou: float = 0.2, min_length: int = 2) -> np.ndarray:
    """Greedy IoU linking. Returns (N, T, 4) boxes with NaN where a track is absent."""
    t_len = len(per_frame)
    tracks: list[dict[int, np.ndarray]] = []
    last: list[tuple[int, np.ndarray]] = []  # (track index, last box) of tracks alive
    for t, boxes in enumerate(per_frame):
        pairs = sorted(
            ((iou(lb, b), ti, bi) for ti, (_, lb) in enumerate(last) for bi, b in enumerate(boxes)),
            reverse=True,
        )
        used_t, used_b = set(), set()
        new_last = []
        for score, ti, bi in pairs:
            if score < min_iou or ti in used_t or bi in used_b:
                continue
            used_t.add(ti)
            used_b.add(bi)
            k = last[ti][0]
            tracks[k][t] = boxes[bi]
            new_last.append((k, boxes[bi]))
        for bi, b in enumerate(boxes):
            if bi not in used_b:
                tracks.append({t: b})
                new_last.append((len(tracks) - 1, b))
        # keep tracks that disappeared for one frame alive (occlusion) by carrying their box
        for ti, (k, lb) in enumerate(last):
            if ti not in used_t and (t - max(tracks[k]) <= 2):
                new_last.append((k, lb))
        last = new_last
    kept = [tr for tr in tracks if len(tr) >= min_length]
    out = np.full((len(kept), t_len, 4), np.nan, np.float32)
    for i, tr in enumerate(kept):
        for t, b in tr.items():
            out[i, t] = b
    # largest (longest-lived, then biggest) first: track 0 is the main actor
    order = np.argsort([-(np.isfinite(o[:, 0]).sum() * 1e6 + np.nanmean((o[:, 2] - o[:, 0]) * (o[:, 3] - o[:, 1])))
                        for o in out]) if len(out) else []
    return out[list(order)] if len(out) else out
