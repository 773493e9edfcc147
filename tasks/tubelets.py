"""Stage ``tubelets``: per person, temporally smooth square boxes around (avatar | person mask)
and the fixed-size crops of x_ddot -> ``tubelets/<j>/{box,rgb}``.

Two passes over windows of frames, so memory does not grow with the video: pass 1 gathers each
person's tight box per frame (four numbers a frame), the boxes are smoothed over the whole video
at once, pass 2 crops ``merged`` window by window. A tubelet spans the whole video (its box is
held before and after its person), so pass 2 writes at most ``open_writers`` tubelets per pass
over ``merged``, each through a small shard buffer: memory does not grow with the number of
tracks either, which a long video with people coming and going accumulates.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.storage.tracks import TRACK_SHARD_BYTES, has_tracks, read_window
from anonymask.storage.tracks import track_count as count_tracks
from anonymask.storage.windows import frame_windows
from anonymask.tasks.common import stage


def track_alphas(entry: VideoEntry, frames: slice, tracks=None, sil: dict[int, np.ndarray] | None = None
                 ) -> dict[int, np.ndarray]:
    """Reintegration alpha per track, uint8 0..255 (read with ``alpha_scale=255``): its feathered
    person mask, and 255 on its avatar (an avatar with a different body shape may reach outside
    the real person's mask), for ``frames`` (a window). ``tracks``: only these. Only the tracks
    with a pixel in those frames are returned: on a long video most tracks are elsewhere in time,
    and only the tracks alive in the window are read at all (storage/tracks.py). ``sil``: the
    window's avatar silhouettes (``read_window`` of ``render/track_masks``) when the caller has
    read them already. uint8, as stored: a window of float alphas for every alive track was most
    of reintegrate's memory."""
    a, b = frames.start, frames.stop
    if sil is None:
        sil = read_window(entry, "render/track_masks", a, b, tracks)
    alphas = read_window(entry, "person_track_alphas", a, b, tracks) \
        if has_tracks(entry, "person_track_alphas") else None
    out: dict[int, np.ndarray] = {}
    for j in sorted(set(sil) | set(alphas or ())):
        s, al = sil.get(j), (alphas or {}).get(j)
        if not ((s is not None and s.any()) or (al is not None and al.any())):
            continue
        f = np.asarray(al, np.uint8) if al is not None else np.zeros((b - a, *s.shape[1:]), np.uint8)
        out[j] = np.where(np.asarray(s, bool), np.uint8(255), f) if s is not None else f
    return out


def track_count(entry: VideoEntry) -> int:
    return count_tracks(entry, "render/track_masks")


@stage("tubelets", deps=("merge", "render", "segment"), backend=lambda c: "smooth-square")
def run(entry: VideoEntry, cfg: dict[str, Any], w: StageWriter) -> None:
    from anonymask.models.compose.tubelets import boxes_from_extents, crop_tubelet, mask_extents

    size = cfg["size"]
    win_frames = cfg["window"]
    merged = entry.array("merged")
    t_len, h, wd = (int(x) for x in merged.shape[:3])
    n = track_count(entry)
    if "tubelets" in entry.group:  # a previous run's tubelets (maybe more people) must not linger
        del entry.group["tubelets"]
    windows = frame_windows(t_len, win_frames)
    ext = np.full((n, t_len, 4), np.nan)
    present = np.zeros((n, t_len), bool)
    for win in windows:
        for j, a in track_alphas(entry, win.core).items():
            ext[j, win.core], present[j, win.core] = mask_extents(a > 0)
    people = [j for j in range(n) if present[j].any()]
    boxes = {j: boxes_from_extents(ext[j], present[j], (h, wd), margin=cfg["margin"],
                                   sigma=cfg["smooth"]) for j in people}
    for j in people:
        w.write(f"tubelets/{j}/box", boxes[j].astype(np.float32), frame_chunked=False)
    batch = cfg["open_writers"]
    for first in range(0, len(people), batch):
        group = people[first : first + batch]
        with contextlib.ExitStack() as stack:
            crops = [stack.enter_context(w.frames(f"tubelets/{j}/rgb", (size, size, 3), np.uint8, t_len,
                                                  shard_bytes=TRACK_SHARD_BYTES)) for j in group]
            for win in windows:
                block = np.asarray(merged[win.core])
                for j, out in zip(group, crops):
                    out.write(crop_tubelet(block, boxes[j][win.core], size))
    w.metric(tubelets=n, tubelet_size=size)


def tubelet_ids(entry: VideoEntry) -> list[int]:
    if "tubelets" not in entry.group:
        return []
    return sorted(int(k) for k in entry.group["tubelets"].group_keys())
