"""Stage ``segment``: the person mask q, tight, streamed over windows of frames.

q = (person probability from pose4d >= threshold), unflickered over +-``unflicker`` frames, grown
by ``grow`` pixels (the safety margin; ``auto``: ``segment.grow_frac`` of the people's median box height, models/anonymizer/segment/margins.py),
feathered; the lowest ``contact_band`` of each person blob (feet) is grown by ``contact_frac`` of its
height (at most ``contact_max`` px) instead; a disc of ``hand_frac`` of a person's box height goes around each avatar's
wrists (models/anonymizer/segment/hands.py). Pixels in the mask in >= ``static_frac`` of the frames of a block of ``static_window``
(64) frames (someone standing still) get ``static_grow`` more pixels in that block, in each frame
where that person's own mask is (not before they came): the temporal median never sees past a
still person's outline. Next to each person, the pixels connected to their mask that differ from
the shot's background where nobody is (a limb the segmentation cut) join their mask first
(``foreground``, models/anonymizer/segment/foreground.py; blocks of ``static_window`` frames, frames a
moving camera or changing light leave undescribed are skipped). Last, a margin pixel whose colour is
the one its place has when nobody is near (``trim_scene``, within ``trim_tol`` grey levels;
models/anonymizer/segment/scene_trim.py) leaves the hole: the person is not there. Avatar silhouettes are not part of the hole
(``avatar_in_hole: true`` restores that): the avatar covers those pixels in the output, so
inpainting them only destroys background; they still belong to their track's reintegration mask. Box filling is a
fallback only: the boxes of frames where a tracked person was bridged but not detected (no mask
there), every frame's box of a person drawn as a neutral avatar in their box (``fallback_box_fill``:
no fitted body says where they are not), or every person's box with ``box_fill: true``. One feathered mask per track (the hole
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

import numpy as np

from anonymask.config.stages import SegmentSettings
from anonymask.models.anonymizer.pose.records import Kind
from anonymask.models.anonymizer.pose.verify import REJECTED_TRACK
from anonymask.models.anonymizer.segment.boxes import median_boxes, window_box_masks
from anonymask.models.anonymizer.segment.margins import grow_pixels
from anonymask.models.anonymizer.segment.still import StillRegions
from anonymask.models.anonymizer.segment.tracks import lut_map, without_rejected
from anonymask.models.shared.body.tracks import JOINT_NAMES
from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.storage.tracks import TrackWriters, read_spans, read_window
from anonymask.storage.windows import frame_windows, video_shots

#: the rendered joints (``render/joints2d``, the body model's layout) the hands' discs are centred on
WRISTS: tuple[int, ...] = (JOINT_NAMES.index("left_wrist"), JOINT_NAMES.index("right_wrist"))


def _to_u8(alpha: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(np.asarray(alpha, np.float32) * 255), 0, 255).astype(np.uint8)


# declared in config/stages.py (settings, deps, versions)
def run(entry: VideoEntry, cfg: SegmentSettings, w: StageWriter) -> None:
    from anonymask.config.stages import stage_backend
    from anonymask.models.anonymizer.segment.backends import SegmentInputs
    from anonymask.models.anonymizer.segment.foreground import (
        Background,
        block_backgrounds,
        block_of,
        frame_heights,
        sample_frames,
        touching_foreground,
    )
    from anonymask.models.anonymizer.segment.hands import hand_discs
    from anonymask.models.anonymizer.segment.masks import build_person_masks, grow, person_mask
    from anonymask.models.anonymizer.segment.scene_trim import scene_pixels

    thr, b, sigma = cfg.threshold, cfg.unflicker, cfg.feather
    avatar_in_hole = cfg.avatar_in_hole
    static_px, static_frac = cfg.static_grow, cfg.static_frac
    raw = entry.array("raw")
    t_len, h, wd = raw.shape[:3]
    segmenter = stage_backend("segment", cfg)
    sil_spans = read_spans(entry, "render/track_masks")
    n = int(sil_spans.shape[0])
    has_inst = entry.has_array("pose/instances")
    lut = entry.read("pose/instance_track") if has_inst else None
    boxes = entry.read("pose/boxes") if entry.has_array("pose/boxes") else None
    # a track verification dropped: its pixels stay removed only inside the kept people's boxes
    # (over frames); both decided once for the video, not per window
    rejected = lut is not None and bool((lut == REJECTED_TRACK).any())
    kept_boxes = median_boxes(boxes, cfg.rejected_box_frames) if rejected and boxes is not None else boxes
    # each avatar's rendered joints: the hands' margin is centred on its wrists
    hands = entry.array("render/joints2d") if cfg.hand_frac > 0 and entry.has_array("render/joints2d") else None

    def stored(name: str, a: int, z: int):
        if not entry.has_array(name):
            return None
        out = entry.read(name, slice(a, z))
        if name == "pose/person_prob" and rejected:
            out = without_rejected(out, np.asarray(entry.array("pose/instances")[a:z]), lut, kept_boxes, a,
                                   cfg.box_margin, REJECTED_TRACK)
        return out

    inputs = SegmentInputs(frames=lambda a, z: np.asarray(raw[a:z]), stored=stored)
    fill = None
    if boxes is not None:
        fill = np.ones(boxes.shape[:2], bool) if cfg.box_fill else (
            entry.read("pose/gap") if entry.has_array("pose/gap") else np.zeros(boxes.shape[:2], bool))
        if cfg.fallback_box_fill and entry.has_array("pose/kinds"):
            fill = fill.copy()
            fill[np.asarray(entry.read("pose/kinds"))[: len(fill)] == Kind.FALLBACK_BOX] = True
    grow_px = grow_pixels(cfg, boxes)  # segment.grow, "auto" resolved from the people's size
    contact = (cfg.contact_band, cfg.contact_frac, cfg.contact_max)
    has_gt = entry.has_array("gt/person_mask")
    inter = union = hole_px = gt_px = 0
    inst_px = np.zeros(n, np.int64)
    inst_cov = np.zeros(n, np.int64)
    win_frames, block, box_margin = cfg.window, cfg.static_window, cfg.box_margin

    def probs(a0: int, a1: int) -> tuple[np.ndarray, np.ndarray]:
        """(segmentation probability, the same with bridged frames' boxes filled) of frames a0..a1-1."""
        p = np.asarray(segmenter.window_probability(inputs, a0, a1), np.float32)
        if fill is None:
            return p, p
        return p, np.maximum(p, window_box_masks(p.shape, boxes, a0, box_margin, fill).astype(np.float32))

    def hand_margin(a0: int, a1: int) -> np.ndarray | None:
        """The hands' discs of frames a0..a1-1 (a margin itself: added to the hole after the
        safety margin, not grown again), where a person has a box; None when there are none."""
        if hands is None or boxes is None:
            return None
        joints = np.asarray(hands[a0:a1])
        heights = (boxes[:, a0:a1, 3] - boxes[:, a0:a1, 1]).T[:, : joints.shape[1]]
        discs = hand_discs((a1 - a0, h, wd), joints, WRISTS, heights, np.isfinite(heights), cfg.hand_frac)
        return discs if discs.any() else None

    # the blocks in use (windows go forward), each [with a person's margin clear, with their reach
    # clear (only with trim_scene)]
    backgrounds: dict[tuple[int, int], list[Background]] = {}

    def background(t: int, s0: int, s1: int, clear_reach: bool = False) -> Background:
        """The background of frame t's block (fixed ranges of ``static_window`` frames of its shot);
        ``clear_reach``: from the frames where nobody is within reach of a pixel (scene_trim.py)."""
        c0, c1 = block_of(t, (s0, s1), block)
        if (c0, c1) not in backgrounds:
            while len(backgrounds) >= 2:
                backgrounds.pop(next(iter(backgrounds)))
            idx = sample_frames(c0, c1)
            frames = np.stack([np.asarray(raw[int(i)]) for i in idx])  # frame by frame: a fancy index is slow
            people = probs(c0, c1)[1][idx - c0] >= thr
            if entry.has_array("render/mask"):
                people |= np.asarray(entry.array("render/mask")[c0:c1])[idx - c0].astype(bool)
            heights = frame_heights(boxes, c0, c1)[idx - c0]
            backgrounds[(c0, c1)] = block_backgrounds(frames, people, heights, grow_px, cfg.foreground_reach,
                                                      (False, True) if cfg.trim_scene else (False,))
        return backgrounds[(c0, c1)][1 if clear_reach else 0]

    def foreground(a0: int, a1: int, s0: int, s1: int, frames: np.ndarray, person: np.ndarray) -> np.ndarray:
        """The pixels next to the people (``person``: their masks before the margin) of frames
        a0..a1-1 that move with them (float32 0/1): models/anonymizer/segment/foreground.py."""
        return touching_foreground(frames, person, frame_heights(boxes, a0, a1),
                                   [background(t, s0, s1) for t in range(a0, a1)], tol=cfg.foreground_tol,
                                   reach=cfg.foreground_reach,
                                   max_scene_change=cfg.foreground_max_scene_change).astype(np.float32)

    def scene(a0: int, a1: int, s0: int, s1: int, frames: np.ndarray, person: np.ndarray) -> np.ndarray:
        """The pixels near the people (``person``: their masks with the foreground pass's) of frames
        a0..a1-1 that show the place as it is with nobody near: models/anonymizer/segment/scene_trim.py."""
        return scene_pixels(frames, person, frame_heights(boxes, a0, a1),
                            [background(t, s0, s1, clear_reach=True) for t in range(a0, a1)], tol=cfg.trim_tol,
                            reach=cfg.foreground_reach, scene_tol=cfg.foreground_tol,
                            max_scene_change=cfg.foreground_max_scene_change)

    def shot_windows():
        """(shot start, its still regions, window in the shot) in order. Shot by shot (ingest's
        cuts): unflicker and the still-person margin never reach across a cut, where a mask of
        the other shot would become a hole with no avatar on it."""
        for s0, s1 in video_shots(entry):
            stills = StillRegions(s1 - s0, block, b, thr, static_frac, static_px, cfg.static_extend,
                                  cfg.static_reach)
            for win in frame_windows(s1 - s0, win_frames, context=b):  # context for unflicker
                yield s0, s1, stills, win

    with contextlib.ExitStack() as outs:  # streamed, one shard at a time (written at each close)
        hole_arr = outs.enter_context(w.frames("person_hole", (h, wd), bool, t_len))
        mask_arr = outs.enter_context(w.frames("person_mask", (h, wd), np.uint8, t_len))
        # a track's alpha lives where its owner pixels (avatar or instance mask) are, widened by
        # unflicker's reach: its own frames in the store (storage/tracks.py)
        track_arr = TrackWriters(w, "person_track_alphas", (h, wd), np.uint8,
                                 alpha_spans(entry, sil_spans, lut, t_len, b, win_frames)) if n else None
        for s0, s1, stills, win in shot_windows():
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
                                                    cfg.replace_margin)).sum())
            del sil
            if static_px > 0:
                def read(c0, c1, have=filled, a0=a0, a1=a1, s0=s0):  # c0, c1 in the shot's frames
                    c0, c1 = s0 + c0, s0 + c1  # the window's frames when they cover the block
                    return have[c0 - a0 : c1 - a0] if a0 <= c0 and c1 <= a1 else probs(c0, c1)[1]

                # the people here: each frame's own mask (not the avatars: one held past its track
                # would add the part a frame early, and unflicker another frame without an avatar)
                filled = stills.apply(filled, a0 - s0, read, filled >= thr)
            # the window's frames, read once for both passes that compare them with the scene
            frames = inputs.frames(a0, a1) if boxes is not None and (cfg.foreground or cfg.trim_scene) else None
            if cfg.foreground and boxes is not None:
                person = person_mask(filled, owners if active else None, thr)
                filled = np.maximum(filled, foreground(a0, a1, s0, s1, frames, person))
            shows_scene = (scene(a0, a1, s0, s1, frames, person_mask(filled, owners if active else None, thr))
                           if cfg.trim_scene and boxes is not None else None)
            pm = build_person_masks(filled, owners if active else None, threshold=thr, window=b, grow_pixels=grow_px,
                                    sigma=sigma, silhouettes_in_hole=avatar_in_hole, contact=contact,
                                    extra=hand_margin(a0, a1), scene=shows_scene)
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
