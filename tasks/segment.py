"""Stage ``segment``: the person mask q, tight, streamed over windows of frames.

q = (person probability from pose4d >= threshold), unflickered over +-``unflicker`` frames, grown
by ``grow`` pixels (the safety margin; ``auto``: 2% of the people's median box height, 2..8 px),
feathered. Pixels in the mask in >= ``static_frac`` of a window's frames (someone standing still)
get ``static_grow`` more pixels: the temporal median never sees past a still person's outline. Avatar silhouettes are not part of the hole
(``avatar_in_hole: true`` restores that): the avatar covers those pixels in the output, so
inpainting them only destroys background; they still belong to their track's reintegration mask. Box filling is a
fallback only: the boxes of frames where a tracked person was bridged but not detected (no mask
there), or every person's box with ``box_fill: true``. One feathered mask per track (the hole
pixels nearest to that person's instance mask or avatar) for reintegration.

Metrics: ``person_fraction`` (q's share of the frame), ``replaced_min`` (the smallest share, over
tracks, of a person's instance-mask pixels that their avatar (grown by ``replace_margin``) covers),
and with ground truth ``mask_iou`` (before growing) and ``removed_ratio`` (|q| / |true person|).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.tasks.common import stage
from anonymask.tasks.pose4d import WINDOW


def _to_u8(alpha: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(np.asarray(alpha, np.float32) * 255), 0, 255).astype(np.uint8)


def _gap_boxes(shape, boxes: np.ndarray, fill: np.ndarray, t0: int, margin: float) -> np.ndarray:
    """(n,H,W) bool: each person's box (grown by ``margin``) in the frames where ``fill`` (N,T) says so."""
    n, h, w = shape
    out = np.zeros(shape, bool)
    for j in range(boxes.shape[0]):
        for k in range(n):
            t = t0 + k
            b = boxes[j, t]
            if not fill[j, t] or not np.all(np.isfinite(b)):
                continue
            mx, my = margin * (b[2] - b[0]), margin * (b[3] - b[1])
            xa, ya = int(max(0, np.floor(b[0] - mx))), int(max(0, np.floor(b[1] - my)))
            xb, yb = int(min(w, np.ceil(b[2] + mx))), int(min(h, np.ceil(b[3] + my)))
            out[k, ya:yb, xa:xb] = True
    return out


@stage("segment", deps=("ingest", "pose4d", "render"))
def run(entry: VideoEntry, cfg: dict[str, Any], w: StageWriter) -> None:
    from anonymask.models.segment.backends import SegmentInputs
    from anonymask.models.segment.masks import build_person_masks, grow, person_mask
    from anonymask.models.stage_settings import stage_backend

    thr, b, sigma = cfg["threshold"], cfg["unflicker"], cfg["feather"]
    avatar_in_hole = cfg["avatar_in_hole"]
    static_px, static_frac = cfg["static_grow"], cfg["static_frac"]
    raw = entry.array("raw")
    segmenter = stage_backend("segment", cfg)
    inputs = SegmentInputs(frames=lambda a, z: np.asarray(raw[a:z]),
                           stored=lambda name, a, z: entry.read(name, slice(a, z)) if entry.has_array(name) else None)
    t_len, h, wd = raw.shape[:3]
    sil_all = entry.array("render/track_masks")
    n = int(sil_all.shape[1])
    has_inst = entry.has_array("pose/instances")
    lut = entry.read("pose/instance_track") if has_inst else None
    boxes = entry.read("pose/boxes") if entry.has_array("pose/boxes") else None
    fill = None
    if boxes is not None:
        fill = np.ones(boxes.shape[:2], bool) if cfg["box_fill"] else (
            entry.read("pose/gap") if entry.has_array("pose/gap") else np.zeros(boxes.shape[:2], bool))
    grow_px = margin_pixels(cfg["grow"], boxes, cfg["grow_frac"], cfg["grow_min"], cfg["grow_max"])
    has_gt = entry.has_array("gt/person_mask")
    hole_arr = entry.create_array("person_hole", (t_len, h, wd), bool)
    mask_arr = entry.create_array("person_mask", (t_len, h, wd), np.uint8)
    track_arr = entry.create_array("person_track_alphas", (t_len, n, h, wd), np.uint8) if n else None
    inter = union = hole_px = gt_px = 0
    inst_px = np.zeros(n, np.int64)
    inst_cov = np.zeros(n, np.int64)
    for t0 in range(0, t_len, WINDOW):
        t1 = min(t_len, t0 + WINDOW)
        a0, a1 = max(0, t0 - b), min(t_len, t1 + b)  # context for unflicker
        prob = np.asarray(segmenter.window_probability(inputs, a0, a1), np.float32)
        sil = np.asarray(sil_all[a0:a1]).astype(bool)  # (n_w, N, H, W)
        owners = [sil[:, j] for j in range(n)]
        if has_inst and n:
            inst = lut_map(np.asarray(entry.array("pose/instances")[a0:a1]), lut)
            owners = [o | (inst == j) for j, o in enumerate(owners)]
            core = slice(t0 - a0, t1 - a0)
            for j in range(n):
                mine = inst[core] == j
                inst_px[j] += int(mine.sum())
                inst_cov[j] += int((mine & grow(sil[core, j], cfg["replace_margin"])).sum())
        seg_prob = prob
        if fill is not None:
            gb = _gap_boxes(prob.shape, boxes, fill, a0, cfg["box_margin"])
            prob = np.maximum(prob, gb.astype(np.float32))
        if static_px > 0 and len(prob) > 2:
            # where someone stands still the background model never sees past their outline: the
            # pixels in the mask in most frames of the window get a wider margin, in every frame
            still = (prob >= thr).mean(axis=0) >= static_frac
            if still.any():
                prob = np.maximum(prob, grow(still, static_px).astype(np.float32)[None] * (thr + 1e-3))
        pm = build_person_masks(prob, owners if n else None, threshold=thr, window=b, grow_pixels=grow_px,
                                sigma=sigma, silhouettes_in_hole=avatar_in_hole)
        core = slice(t0 - a0, t1 - a0)
        hole_arr[t0:t1] = pm.hole[core]
        mask_arr[t0:t1] = _to_u8(pm.alpha[core])
        if track_arr is not None:
            track_arr[t0:t1] = np.stack([_to_u8(a[core]) for a in pm.track_alphas], axis=1)
        hole_px += int(pm.hole[core].sum())
        if has_gt:
            gt = entry.read("gt/person_mask", slice(t0, t1)).astype(bool)
            before = person_mask(seg_prob[core], [o[core] for o in owners] if n and avatar_in_hole else None, thr)
            inter += int((before & gt).sum())
            union += int((before | gt).sum())
            gt_px += int(gt.sum())
    w.add_written("person_hole")
    w.add_written("person_mask")
    if track_arr is not None:
        w.add_written("person_track_alphas")
    w.metric(person_fraction=hole_px / float(max(1, t_len * h * wd)), grow_px=grow_px)
    if has_inst and n:
        cov = [inst_cov[j] / inst_px[j] for j in range(n) if inst_px[j] > 0]
        if cov:
            w.metric(replaced_min=float(min(cov)), replaced_mean=float(np.mean(cov)))
    if has_gt:
        w.metric(mask_iou=inter / union if union else 1.0, removed_ratio=hole_px / gt_px if gt_px else float("nan"))


def lut_map(labels: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """Raw instance labels (id + 1, 0 = nobody) -> posed track index (-1: nobody or not posed)."""
    table = np.concatenate([[-1], np.asarray(lut, np.int32)]).astype(np.int32)
    return table[np.minimum(labels.astype(np.int64), len(table) - 1)]


def margin_pixels(grow, boxes: np.ndarray | None, frac: float, lo: int, hi: int) -> int:
    """The safety margin in pixels: a number, or ``"auto"``: ``frac`` x the median height of the
    people's boxes, clipped to [lo, hi] (a fixed margin is a lot of background around a small
    person and little around a large one)."""
    if grow != "auto":
        return int(grow)
    if boxes is None or not np.isfinite(boxes).any():
        return int(lo)
    heights = (boxes[..., 3] - boxes[..., 1])[np.isfinite(boxes[..., 3])]
    return int(np.clip(round(frac * float(np.median(heights))), lo, hi)) if heights.size else int(lo)
