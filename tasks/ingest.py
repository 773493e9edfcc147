"""Stage ``ingest``: decode the source video into ``raw`` (resized so its long side <= max_side).

For datasets with ground truth (the synthetic demo data) it also copies the ground truth into
``gt/*`` so every later metric reads it from the store.
"""

from __future__ import annotations

import os
from typing import Any

import cv2
import numpy as np

from anonymask.errors import InvalidVideoError
from anonymask.storage.hashing import file_checksum
from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.storage.video_io import probe, read_frames
from anonymask.tasks.common import stage


def target_size(h: int, w: int, max_side: int | None) -> tuple[int, int]:
    """(h, w) scaled so the long side is <= max_side, both even (codecs and 2x2 pooling like that)."""
    s = 1.0 if not max_side or max(h, w) <= max_side else max_side / max(h, w)
    return max(2, int(round(h * s / 2)) * 2), max(2, int(round(w * s / 2)) * 2)


def resize_video(frames: np.ndarray, hw: tuple[int, int], nearest: bool = False) -> np.ndarray:
    if frames.shape[1:3] == hw:
        return frames
    interp = cv2.INTER_NEAREST if nearest else cv2.INTER_AREA
    out = [cv2.resize(f, (hw[1], hw[0]), interpolation=interp) for f in frames]
    return np.stack(out).astype(frames.dtype, copy=False)


def source_identity(entry: VideoEntry) -> str:
    """Path, size and mtime of the source: a replaced file re-ingests (and all downstream)."""
    path = entry.info.path
    try:
        st = os.stat(path)
    except (OSError, TypeError):
        return f"{path}:missing"
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


@stage("ingest", deps=(), backend=lambda c: "pyav", external=source_identity)
def run(entry: VideoEntry, cfg: dict[str, Any], w: StageWriter) -> None:
    info = entry.info
    if not info.path:
        raise InvalidVideoError(entry.video_id, "the manifest has no source path for this video")
    meta = probe(info.path, exact=False, allow_odd=True)
    frames = read_frames(info.path, max_frames=cfg.get("max_frames"), allow_odd=True)
    if frames.shape[0] == 0:
        raise InvalidVideoError(info.path, "no frames decoded")
    hw = target_size(frames.shape[1], frames.shape[2], cfg.get("max_side"))
    frames = resize_video(frames, hw)
    w.write("raw", frames)
    entry.update_attrs(
        source=str(info.path),
        source_checksum=file_checksum(info.path),
        fps=float(meta.fps),
        frames=int(frames.shape[0]),
        height=int(hw[0]),
        width=int(hw[1]),
        source_size=[int(meta.height), int(meta.width)],
    )
    gt = (info.extra or {}).get("gt")
    if gt:
        from anonymask.tasks.gt import ingest_ground_truth

        ingest_ground_truth(entry, gt, w, frames.shape[0], (meta.height, meta.width), hw)
    w.metric(frames=int(frames.shape[0]), fps=float(meta.fps))
