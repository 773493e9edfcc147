"""Stage ``tubelets``: per person, temporally smooth square boxes around (avatar | person mask)
and the fixed-size crops of x_ddot -> ``tubelets/<j>/{box,rgb}`` over the tubelet's own frames.

A tubelet covers the frames where its person has pixels (avatar or reintegration alpha), widened
by ``context`` frames either side (its box held there: temporal context for a refiner at the
person's first and last frames), not the whole video: ``tubelets_spans`` ((N, 2), [start, stop)
per track; (0, 0) for a track with no pixel) says where, and every ``tubelets/<j>/*`` array holds
frames start..stop-1. So tubelets, conditions and refine cost the frames people are in, not
(tracks x video length), which on a long video whose people come and go grew with the square of
its length (the 5-minute scaling video: 134 tracks, conditions 16 -> 2.8 frames/s; BENCHMARKS
run 6). Reintegration reads a tubelet only where its person's alpha is, always inside the span.

Two passes, both bounded: pass 1 takes one track at a time and gathers its tight box per frame
(four numbers a frame) over its stored frames, smooths its boxes over the video (as a
whole-video tubelet's) and keeps the span's;
pass 2 crops ``merged`` window by window for at most ``open_writers`` tubelets at a time (in
order of their first frame, each group reading ``merged`` only over its own frames), each
writer holding a small shard buffer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from anonymask.config.stages import TubeletSettings
from anonymask.models.anonymizer.compose.tubelets import tubelet_span
from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.storage.tracks import TRACK_SHARD_BYTES, has_tracks, read_spans, read_window, spans_name
from anonymask.storage.tracks import track_count as count_tracks

#: the tubelets' spans: (N, 2) [start, stop) per track, (0, 0) where the track has no tubelet
TUBELET_SPANS = spans_name("tubelets")


def track_alphas(entry: VideoEntry, frames: slice, tracks=None, sil: dict[int, np.ndarray] | None = None,
                 spans: dict[str, np.ndarray] | None = None) -> dict[int, np.ndarray]:
    """Reintegration alpha per track, uint8 0..255 (read with ``alpha_scale=255``): its feathered
    person mask, and 255 on its avatar (an avatar with a different body shape may reach outside
    the real person's mask), for ``frames`` (a window). ``tracks``: only these. Only the tracks
    with a pixel in those frames are returned: on a long video most tracks are elsewhere in time,
    and only the tracks alive in the window are read at all (storage/tracks.py). ``sil``: the
    window's avatar silhouettes (``read_window`` of ``render/track_masks``) when the caller has
    read them already; ``spans``: the spans of ``render/track_masks`` and
    ``person_track_alphas`` when the caller has read them (``alpha_spans``). uint8, as stored: a
    window of float alphas for every alive track was most of reintegrate's memory."""
    a, b = frames.start, frames.stop
    spans = spans if spans is not None else alpha_spans(entry)
    if sil is None:
        sil = read_window(entry, "render/track_masks", a, b, tracks, spans=spans["render/track_masks"])
    alphas = read_window(entry, "person_track_alphas", a, b, tracks, spans=spans["person_track_alphas"]) \
        if "person_track_alphas" in spans else None
    out: dict[int, np.ndarray] = {}
    for j in sorted(set(sil) | set(alphas or ())):
        s, al = sil.get(j), (alphas or {}).get(j)
        if not ((s is not None and s.any()) or (al is not None and al.any())):
            continue
        f = np.asarray(al, np.uint8) if al is not None else np.zeros((b - a, *s.shape[1:]), np.uint8)
        out[j] = np.where(np.asarray(s, bool), np.uint8(255), f) if s is not None else f
    return out


def alpha_spans(entry: VideoEntry) -> dict[str, np.ndarray]:
    """The spans of the per-track arrays :func:`track_alphas` reads (``person_track_alphas`` only
    where segment wrote it)."""
    out = {"render/track_masks": read_spans(entry, "render/track_masks")}
    if has_tracks(entry, "person_track_alphas"):
        out["person_track_alphas"] = read_spans(entry, "person_track_alphas")
    return out


def track_count(entry: VideoEntry) -> int:
    return count_tracks(entry, "render/track_masks")


def stored_span(spans: dict[str, np.ndarray], j: int) -> tuple[int, int]:
    """[start, stop) of the frames where track ``j`` may have a pixel (its arrays' spans joined)."""
    parts = [(int(s[j][0]), int(s[j][1])) for s in spans.values() if j < len(s) and s[j][0] < s[j][1]]
    if not parts:
        return 0, 0
    return min(p[0] for p in parts), max(p[1] for p in parts)


def track_extents(entry: VideoEntry, j: int, spans: dict[str, np.ndarray], window: int
                  ) -> tuple[int, np.ndarray, np.ndarray] | None:
    """(first frame, tight boxes (L,4), present (L,)) of track ``j`` over its stored frames, read
    ``window`` frames at a time (one track: memory does not depend on how many are alive); None
    when it has no pixel."""
    from anonymask.models.anonymizer.compose.tubelets import mask_extents

    a, b = stored_span(spans, j)
    if a >= b:
        return None
    ext = np.full((b - a, 4), np.nan)
    present = np.zeros(b - a, bool)
    for c0 in range(a, b, window):
        c1 = min(c0 + window, b)
        al = track_alphas(entry, slice(c0, c1), tracks={j}, spans=spans).get(j)
        if al is not None:
            ext[c0 - a : c1 - a], present[c0 - a : c1 - a] = mask_extents(al > 0)
    return (a, ext, present) if present.any() else None


# declared in config/stages.py (settings, deps, versions)
def run(entry: VideoEntry, cfg: TubeletSettings, w: StageWriter) -> None:
    from anonymask.models.anonymizer.compose.tubelets import boxes_from_extents

    size = cfg.size
    win_frames = cfg.window
    merged = entry.array("merged")
    t_len, h, wd = (int(x) for x in merged.shape[:3])
    n = track_count(entry)
    if "tubelets" in entry.group:  # a previous run's tubelets (maybe more people) must not linger
        del entry.group["tubelets"]
    spans = alpha_spans(entry)
    tub_spans = np.zeros((n, 2), np.int64)
    boxes: dict[int, np.ndarray] = {}  # float64, as cropped (the store keeps float32): a few numbers a frame
    for j in range(n):
        got = track_extents(entry, j, spans, win_frames)
        if got is None:
            continue
        first, ext, present = got
        s, e = tubelet_span(first, present, cfg.context, t_len)
        # smoothed over the whole video (four numbers a frame, one track at a time), then cut to
        # the span: the same boxes there as a whole-video tubelet's, whatever ``context``
        ext_v = np.full((t_len, 4), np.nan)
        pres_v = np.zeros(t_len, bool)
        ext_v[first : first + len(ext)] = ext
        pres_v[first : first + len(present)] = present
        boxes[j] = boxes_from_extents(ext_v, pres_v, (h, wd), margin=cfg.margin, sigma=cfg.smooth)[s:e]
        w.write(f"tubelets/{j}/box", boxes[j].astype(np.float32), frame_chunked=False)
        tub_spans[j] = (s, e)
    w.write(TUBELET_SPANS, tub_spans, frame_chunked=False)
    people = sorted((j for j in range(n) if tub_spans[j, 0] < tub_spans[j, 1]), key=lambda j: tub_spans[j, 0])
    batch = cfg.open_writers
    for first in range(0, len(people), batch):
        crop_group(entry, w, merged, people[first : first + batch], tub_spans, boxes, size, win_frames)
    w.metric(tubelets=len(people), tubelet_size=size, tubelet_frames=int((tub_spans[:, 1] - tub_spans[:, 0]).sum()))


def crop_group(entry: VideoEntry, w: StageWriter, merged, group: list[int], spans: np.ndarray,
               boxes: dict[int, np.ndarray], size: int, window: int) -> None:
    """Crop the tubelets ``group`` from ``merged``, window by window over their frames only; a
    tubelet's writer opens at its first frame and closes after its last."""
    from anonymask.models.anonymizer.compose.tubelets import crop_tubelet

    a = int(min(spans[j, 0] for j in group))
    b = int(max(spans[j, 1] for j in group))
    writers: dict[int, Any] = {}
    for c0 in range(a, b, window):
        c1 = min(c0 + window, b)
        here = [j for j in group if spans[j, 0] < c1 and c0 < spans[j, 1]]
        if not here:
            continue
        block = np.asarray(merged[c0:c1])
        for j in here:
            s, e = (int(x) for x in spans[j])
            lo, hi = max(c0, s), min(c1, e)
            if j not in writers:
                writers[j] = entry.frame_writer(f"tubelets/{j}/rgb", (size, size, 3), np.uint8, frames=e - s,
                                                shard_bytes=TRACK_SHARD_BYTES)
            writers[j].write(crop_tubelet(block[lo - c0 : hi - c0], boxes[j][lo - s : hi - s], size))
            if e <= c1:
                w.add_output(f"tubelets/{j}/rgb", writers.pop(j).close())
    if writers:
        raise ValueError(f"tubelets {sorted(writers)} not cropped to their end")


def tubelet_ids(entry: VideoEntry) -> list[int]:
    if "tubelets" not in entry.group:
        return []
    return sorted(int(k) for k in entry.group["tubelets"].group_keys())


def tubelet_spans(entry: VideoEntry) -> np.ndarray:
    """(N, 2) [start, stop) of every track's tubelet ((0, 0): none)."""
    return read_spans(entry, "tubelets")
