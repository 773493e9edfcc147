"""Stage ``inpaint``: remove every person (the grown mask q) -> ``inpainted`` (x_dot), streamed over
windows of frames. Records ``background_psnr_db`` on the ground-truth person pixels vs the clean
background."""

from __future__ import annotations

from typing import Any

import numpy as np

from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.tasks.common import stage
from anonymask.tasks.pose4d import WINDOW


@stage("inpaint", deps=("ingest", "segment"))
def run(entry: VideoEntry, cfg: dict[str, Any], w: StageWriter) -> None:
    from anonymask.models.inpaint.backends import inpaint_stream
    from anonymask.models.stage_settings import stage_backend

    raw, hole = entry.array("raw"), entry.array("person_hole")
    t_len = raw.shape[0]
    out = entry.create_array("inpainted", raw.shape, np.uint8)
    has_gt = entry.has_array("gt/background")
    bg = entry.read("gt/background") if has_gt else None
    se = [0.0, 0]

    def read(a, b):
        return np.asarray(raw[a:b]), np.asarray(hole[a:b])

    def write(t0, frames):
        out[t0 : t0 + len(frames)] = frames
        if has_gt:
            m = entry.read("gt/person_mask", slice(t0, t0 + len(frames))).astype(bool)
            d = frames[m].astype(np.float64) - np.broadcast_to(bg, frames.shape)[m]
            se[0] += float((d**2).sum())
            se[1] += d.size

    inpaint_stream(stage_backend("inpaint", cfg), read, t_len, write, WINDOW)
    w.add_written("inpainted")
    if has_gt and se[1]:
        mse = se[0] / se[1]
        w.metric(background_psnr_db=float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse))
