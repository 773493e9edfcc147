"""Stage ``inpaint``: remove every person (the grown mask q) -> ``inpainted`` (x_dot), streamed over
windows of frames. Records ``background_psnr_db`` on the ground-truth person pixels vs the clean
background.

Memory is one window of ``window`` (64) frames plus ``context`` (16) either side, and (temporal
median) a sample of ``sample_frames`` (96) frames spread over the video, whatever its length;
``inpainted`` is written shard by shard. A video of at most ``window + 2 * context`` frames is one
window (the median over the whole video); see models/inpaint/backends.py for longer ones.
A video with cuts is inpainted shot by shot (``shots``, from ingest): a hole is never filled
from another scene. A backend that needs a still camera (the temporal median) is replaced, in a
shot whose view moves (models/shots.py ``camera_drift`` above ``camera_drift``, measured on 8
frames spread over the shot, the people's pixels left out), by ``moving_camera`` (default ``aligned_median``:
each frame filled from its neighbours aligned onto it, models/inpaint/aligned.py): a median over a
moving view is a smear of other places. Metric ``moving_shots``."""

from __future__ import annotations

from typing import Any

import numpy as np

from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.storage.windows import video_shots
from anonymask.tasks.common import stage


@stage("inpaint", deps=("ingest", "segment"))
def run(entry: VideoEntry, cfg: dict[str, Any], w: StageWriter) -> None:
    from anonymask.models.inpaint.backends import get_inpainter, inpaint_stream
    from anonymask.models.shots import camera_drift
    from anonymask.models.stage_settings import stage_backend

    raw, hole = entry.array("raw"), entry.array("person_hole")
    t_len = raw.shape[0]
    has_gt = entry.has_array("gt/background")
    bg = entry.read("gt/background") if has_gt else None
    se = [0.0, 0]

    def read(a, b):
        return np.asarray(raw[a:b]), np.asarray(hole[a:b])

    def write(t0, frames):
        out.write(frames)  # windows arrive in order
        if has_gt:
            m = entry.read("gt/person_mask", slice(t0, t0 + len(frames))).astype(bool)
            d = frames[m].astype(np.float64) - np.broadcast_to(bg, frames.shape)[m]
            se[0] += float((d**2).sum())
            se[1] += d.size

    backend = stage_backend("inpaint", cfg)
    check = getattr(backend, "still_camera", False) and cfg["moving_camera"] != "same"
    moving = 0
    with w.frames("inpainted", raw.shape[1:], np.uint8, t_len) as out:
        for a, b in video_shots(entry):
            use = backend
            if check:
                idx = np.unique(np.linspace(a, b - 1, min(8, b - a)).round().astype(int))
                # frame by frame: a zarr fancy-index read of the same frames was 10x slower
                if camera_drift(np.stack([raw[int(t)] for t in idx]),
                                np.stack([hole[int(t)] for t in idx])) > cfg["camera_drift"]:
                    use, moving = get_inpainter(cfg["moving_camera"]), moving + 1
            inpaint_stream(use, lambda x, y, a=a: read(a + x, a + y), b - a,
                           lambda t0, frames, a=a: write(a + t0, frames), cfg["window"], context=cfg["context"],
                           sample_frames=cfg["sample_frames"])
    w.metric(moving_shots=moving)
    if has_gt and se[1]:
        mse = se[0] / se[1]
        w.metric(background_psnr_db=float("inf") if mse == 0 else 10 * np.log10(255.0**2 / mse))
