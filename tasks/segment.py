"""Stage ``segment``: the person mask q, tight, streamed over windows of frames.

q = (person probability from pose4d >= threshold), unflickered over +-``unflicker`` frames, grown
by ``grow`` pixels (the safety margin; ``auto``: 2% of the people's median box height, 2..8 px),
feathered; the lowest ``contact_band`` of each person blob (feet) is grown by ``contact_frac`` of its
height (at most ``contact_max`` px) instead. Pixels in the mask in >= ``static_frac`` of the frames of a block of ``static_window``
(64) frames (someone standing still) get ``static_grow`` more pixels in that block, in each frame
where that person's own mask is (not before they came): the temporal median never sees past a
still person's outline. Avatar silhouettes are not part of the hole
(``avatar_in_hole: true`` restores that): the avatar covers those pixels in the output, so
inpainting them only destroys background; they still belong to their track's reintegration mask. Box filling is a
fallback only: the boxes of frames where a tracked person was bridged but not detected (no mask
there), or every person's box with ``box_fill: true``. One feathered mask per track (the hole
pixels nearest to that person's instance mask or avatar) for reintegration.

A video with cuts is segmented shot by shot (``shots``, from ingest): unflicker and the
still-person blocks never reach across a cut (a mask from the other shot would be a hole with no
avatar on it).

Streamed: windows of ``window`` (64) frames plus ``unflicker`` frames of context are read, and
the outputs are written shard by shard, so memory is one window whatever the video's length; the
result is the same for any window size (blocks are fixed frame ranges).

Metrics: ``person_fraction`` (q's share of the frame), ``replaced_min`` (the smallest share, over
tracks, of a person's instance-mask pixels that their avatar (grown by ``replace_margin``) covers),
and with ground truth ``mask_iou`` (before growing) and ``removed_ratio`` (|q| / |true person|).
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from anonymask.models.anonymizer.pose.verify import REJECTED_TRACK
from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.storage.tracks import TrackWriters, read_spans, read_window
from anonymask.storage.windows import frame_windows, video_shots


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


# declared in config/stages.py (settings, deps, versions)
def run(entry: VideoEntry, cfg: dict[str, Any], w: StageWriter) -> None:
    from anonymask.config.stages import stage_backend
    from anonymask.models.anonymizer.segment.backends import SegmentInputs
    from anonymask.models.anonymizer.segment.masks import build_person_masks, grow, person_mask

    thr, b, sigma = cfg["threshold"], cfg["unflicker"], cfg["feather"]
    avatar_in_hole = cfg["avatar_in_hole"]
    static_px, static_frac = cfg["static_grow"], cfg["static_frac"]
    raw = entry.array("raw")
    t_len, h, wd = raw.shape[:3]
    segmenter = stage_backend("segment", cfg)
    sil_spans = read_spans(entry, "render/track_masks")
    n = int(sil_spans.shape[0])
    has_inst = entry.has_array("pose/instances")
    lut = entry.read("pose/instance_track") if has_inst else None
    boxes = entry.read("pose/boxes") if entry.has_array("pose/boxes") else None

    def stored(name: str, a: int, z: int):
        if not entry.has_array(name):
            return None
        out = entry.read(name, slice(a, z))
        if name == "pose/person_prob" and lut is not None and (lut == REJECTED_TRACK).any():
            out = without_rejected(out, np.asarray(entry.array("pose/instances")[a:z]), lut, boxes, a,
                                   cfg["box_margin"])
        return out

    inputs = SegmentInputs(frames=lambda a, z: np.asarray(raw[a:z]), stored=stored)
    fill = None
    if boxes is not None:
        fill = np.ones(boxes.shape[:2], bool) if cfg["box_fill"] else (
            entry.read("pose/gap") if entry.has_array("pose/gap") else np.zeros(boxes.shape[:2], bool))
    grow_px = margin_pixels(cfg["grow"], boxes, cfg["grow_frac"], cfg["grow_min"], cfg["grow_max"])
    contact = (cfg["contact_band"], cfg["contact_frac"], cfg["contact_max"])
    has_gt = entry.has_array("gt/person_mask")
    inter = union = hole_px = gt_px = 0
    inst_px = np.zeros(n, np.int64)
    inst_cov = np.zeros(n, np.int64)
    win_frames, block, box_margin = cfg["window"], cfg["static_window"], cfg["box_margin"]

    def probs(a0: int, a1: int) -> tuple[np.ndarray, np.ndarray]:
        """(segmentation probability, the same with bridged frames' boxes filled) of frames a0..a1-1."""
        p = np.asarray(segmenter.window_probability(inputs, a0, a1), np.float32)
        if fill is None:
            return p, p
        return p, np.maximum(p, _gap_boxes(p.shape, boxes, fill, a0, box_margin).astype(np.float32))

    def shot_windows():
        """(shot start, its still regions, window in the shot) in order. Shot by shot (ingest's
        cuts): unflicker and the still-person margin never reach across a cut, where a mask of
        the other shot would become a hole with no avatar on it."""
        for s0, s1 in video_shots(entry):
            stills = StillRegions(s1 - s0, block, b, thr, static_frac, static_px, cfg["static_extend"],
                                  cfg["static_reach"])
            for win in frame_windows(s1 - s0, win_frames, context=b):  # context for unflicker
                yield s0, stills, win

    with contextlib.ExitStack() as outs:  # streamed, one shard at a time (written at each close)
        hole_arr = outs.enter_context(w.frames("person_hole", (h, wd), bool, t_len))
        mask_arr = outs.enter_context(w.frames("person_mask", (h, wd), np.uint8, t_len))
        # a track's alpha lives where its owner pixels (avatar or instance mask) are, widened by
        # unflicker's reach: its own frames in the store (storage/tracks.py)
        track_arr = TrackWriters(w, "person_track_alphas", (h, wd), np.uint8,
                                 alpha_spans(entry, sil_spans, lut, t_len, b, win_frames)) if n else None
        for s0, stills, win in shot_windows():
            a0, a1, t0, t1 = (s0 + x for x in (win.start, win.stop, win.core_start, win.core_stop))
            seg_prob, filled = probs(a0, a1)
            sil = read_window(entry, "render/track_masks", a0, a1, spans=sil_spans)  # {j: (n_w, H, W)}
            inst = lut_map(np.asarray(entry.array("pose/instances")[a0:a1]), lut) if has_inst and n else None
            # only the people in this window: on a long video most tracks are elsewhere in time, and
            # a track with no pixels in the window has an all-zero mask here (same result, less memory)
            in_inst = set(np.unique(inst[inst >= 0]).tolist()) if inst is not None else set()
            active = [j for j in range(n) if (j in sil and sil[j].any()) or j in in_inst]
            none = np.zeros((a1 - a0, h, wd), bool)
            owners = [(sil[j].astype(bool) if j in sil else none) | (inst == j) if inst is not None
                      else np.asarray(sil[j], bool) for j in active]
            if inst is not None:
                core = slice(t0 - a0, t1 - a0)
                for j in active:
                    mine = inst[core] == j
                    inst_px[j] += int(mine.sum())
                    inst_cov[j] += int((mine & grow(sil[j][core] if j in sil else none[core],
                                                    cfg["replace_margin"])).sum())
            del sil
            if static_px > 0:
                def read(c0, c1, have=filled, a0=a0, a1=a1, s0=s0):  # c0, c1 in the shot's frames
                    c0, c1 = s0 + c0, s0 + c1  # the window's frames when they cover the block
                    return have[c0 - a0 : c1 - a0] if a0 <= c0 and c1 <= a1 else probs(c0, c1)[1]

                # the people here: each frame's own mask (not the avatars: one held past its track
                # would add the part a frame early, and unflicker another frame without an avatar)
                filled = stills.apply(filled, a0 - s0, read, filled >= thr)
            pm = build_person_masks(filled, owners if active else None, threshold=thr, window=b, grow_pixels=grow_px,
                                    sigma=sigma, silhouettes_in_hole=avatar_in_hole, contact=contact)
            core = slice(t0 - a0, t1 - a0)
            hole_arr.write(pm.hole[core])
            mask_arr.write(_to_u8(pm.alpha[core]))
            if track_arr is not None:
                track_arr.write(t0, t1, {j: _to_u8(pm.track_alpha(k, core)) for k, j in enumerate(active)})
            hole_px += int(pm.hole[core].sum())
            if has_gt:
                gt = entry.read("gt/person_mask", slice(t0, t1)).astype(bool)
                before = person_mask(seg_prob[core], [o[core] for o in owners] if active and avatar_in_hole else None,
                                     thr)
                inter += int((before & gt).sum())
                union += int((before | gt).sum())
                gt_px += int(gt.sum())
    if track_arr is not None:
        track_arr.close()
    w.metric(person_fraction=hole_px / float(max(1, t_len * h * wd)), grow_px=grow_px)
    if has_inst and n:
        cov = [inst_cov[j] / inst_px[j] for j in range(n) if inst_px[j] > 0]
        if cov:
            w.metric(replaced_min=float(min(cov)), replaced_mean=float(np.mean(cov)))
    if has_gt:
        w.metric(mask_iou=inter / union if union else 1.0, removed_ratio=hole_px / gt_px if gt_px else float("nan"))


class StillRegions:
    """Where someone stands still, per block of ``block`` frames: the pixels in the mask in at
    least ``frac`` of the block's frames (and ``context`` frames either side), with the pixels in it
    in at least ``extend`` of them that touch those, within ``reach`` x their height. The temporal median
    never sees past a still person's outline, so these pixels get ``pixels`` more margin in every
    frame of the block.

    Blocks are fixed frame ranges (0..block-1, block..2*block-1, ...) whatever window the stage
    reads, so the result does not depend on the window size; a context frame read for unflicker
    takes the still region of its own block. Memory: one (H,W) map per block in use.
    """

    def __init__(self, t_len: int, block: int, context: int, thr: float, frac: float, pixels: int,
                 extend: float, reach: float):
        self.t_len, self.block, self.context = int(t_len), max(1, int(block)), int(context)
        self.thr, self.frac, self.pixels = float(thr), float(frac), int(pixels)
        self.extend, self.reach = min(float(extend), self.frac), float(reach)
        self._cache: dict[int, np.ndarray | None] = {}

    def span(self, k: int) -> tuple[int, int]:
        """Frames whose masks decide block ``k``'s still region."""
        return max(0, k * self.block - self.context), min(self.t_len, (k + 1) * self.block + self.context)

    def region(self, k: int, read) -> tuple[np.ndarray, int] | None:
        """Block ``k``'s still pixels, grown, as connected parts ((H,W) int32 labels 1..n, n), or
        None: nobody still. ``read(a, b)`` gives prob."""
        if k not in self._cache:
            import cv2

            from anonymask.models.anonymizer.segment.masks import grow

            a, b = self.span(k)
            prob = read(a, b)
            share = (prob >= self.thr).mean(axis=0) if len(prob) > 2 else None
            still = None if share is None else share >= self.frac
            if still is not None and still.any() and self.extend < self.frac:
                # hysteresis: the pixels in the mask in >= ``extend`` of the frames that touch a
                # still core join it (a still person's head or feet that the detector lost for a
                # while), within ``reach`` x the core part's height of it (not clutter beyond)
                n_c, lab, st, _ = cv2.connectedComponentsWithStats(still.view(np.uint8), connectivity=8)
                near = np.zeros_like(still)
                for c in range(1, n_c):
                    near |= grow(lab == c, int(round(self.reach * st[c, cv2.CC_STAT_HEIGHT])))
                n_ext, ext = cv2.connectedComponents(((share >= self.extend) & near).view(np.uint8), connectivity=8)
                cores = np.zeros(n_ext, bool)
                cores[ext[still]] = True
                cores[0] = False
                still = cores[ext]
            self._cache = {j: v for j, v in self._cache.items() if j >= k - 1}  # blocks come in order
            if still is None or not still.any():
                self._cache[k] = None
            else:
                n, labels = cv2.connectedComponents(grow(still, self.pixels).view(np.uint8), connectivity=8)
                self._cache[k] = (labels.astype(np.int32), int(n) - 1)
        return self._cache[k]

    def apply(self, prob: np.ndarray, a0: int, read, present: np.ndarray | None = None) -> np.ndarray:
        """``prob`` of frames a0.. raised to just above the threshold on its block's still region,
        in each frame on the parts of it where someone is in that frame (``present`` (n,H,W) bool:
        the frame's own mask; None: every part in every frame). A part is not added to the frames
        before its person came or after they left (there it would be a hole with no avatar on it:
        the audit's erased finding on bikes.mp4 at a shot's first frame, before a track began)."""
        out = prob
        for k in range(a0 // self.block, (a0 + len(prob) - 1) // self.block + 1):
            reg = self.region(k, read)
            if reg is None:
                continue
            if out is prob:
                out = prob.copy()
            labels, n = reg
            lift = np.float32(self.thr + 1e-3)
            for c in range(max(a0, k * self.block) - a0, min(a0 + len(prob), (k + 1) * self.block) - a0):
                if present is None:
                    here = labels > 0
                else:
                    seen = np.zeros(n + 1, bool)
                    seen[labels[present[c]]] = True
                    seen[0] = False
                    here = seen[labels]
                np.maximum(out[c], here.astype(np.float32) * lift, out=out[c])
        return out


def alpha_spans(entry: VideoEntry, sil_spans: np.ndarray, lut: np.ndarray | None, t_len: int, unflicker: int,
                window: int) -> np.ndarray:
    """Per track, the frames its alpha can be non-zero in: where its avatar (``sil_spans``) or its
    instance mask (``pose/instances``, read a window at a time) is, ``unflicker`` frames wider
    (unflicker unions the owner's mask over that many frames either side)."""
    n = len(sil_spans)
    first = np.where(sil_spans[:, 0] < sil_spans[:, 1], sil_spans[:, 0], t_len).astype(np.int64)
    last = np.where(sil_spans[:, 0] < sil_spans[:, 1], sil_spans[:, 1], 0).astype(np.int64)  # stop
    if lut is not None and entry.has_array("pose/instances"):
        labels = entry.array("pose/instances")
        for win in frame_windows(t_len, window):
            lab = lut_map(np.asarray(labels[win.core]), lut)
            for k in range(lab.shape[0]):
                for j in np.unique(lab[k]):
                    if 0 <= j < n:
                        first[j] = min(first[j], win.core_start + k)
                        last[j] = max(last[j], win.core_start + k + 1)
    out = np.zeros((n, 2), np.int64)
    for j in range(n):
        if first[j] < last[j]:
            out[j] = max(0, first[j] - unflicker), min(t_len, last[j] + unflicker)
    return out


def without_rejected(prob: np.ndarray, labels: np.ndarray, lut: np.ndarray, boxes: np.ndarray | None, t0: int,
                     margin: float) -> np.ndarray:
    """``pose/person_prob`` of frames t0.. with the pixels owned by raw tracks pose4d's verification
    rejected (``instance_track`` REJECTED_TRACK: clutter, not a person) set to 0, except inside the
    boxes (grown by ``margin``) of the people kept in that frame: a person passing in front of the
    clutter may own less probability there than the clutter's track, and stays removed."""
    rej = lut_map(labels, lut) == REJECTED_TRACK
    if not rej.any():
        return prob
    if boxes is not None and len(boxes):
        rej &= ~_gap_boxes(rej.shape, boxes, np.ones(boxes.shape[:2], bool), t0, margin)
    out = prob.copy()
    out[rej] = 0
    return out


def lut_map(labels: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """Raw instance labels (id + 1, 0 = nobody) -> posed track index (-1: nobody or not posed)."""
    table = np.concatenate([[-1], np.asarray(lut, np.int32)]).astype(np.int32)
    return np.take(table, labels, mode="clip")  # ids past the table clip to its last entry; no int64 copy


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
