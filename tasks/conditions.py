"""Stage ``conditions``: ControlNet inputs per tubelet, computed exactly from the render (depth,
OpenPose skeleton, face points) -> ``tubelets/<j>/cond_{depth,pose,face}``.

Window by window; the depth image's normalisation range is the whole tubelet's (gathered in a
first pass), so a long video gives the same images as one processed whole.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.storage.tracks import TRACK_SHARD_BYTES
from anonymask.storage.windows import frame_windows
from anonymask.tasks.common import stage
from anonymask.tasks.tubelets import tubelet_ids


@stage("conditions", deps=("tubelets", "render"))
def run(entry: VideoEntry, cfg: dict[str, Any], w: StageWriter) -> None:
    from anonymask.models.compose.tubelets import crop_tubelet, points_to_crop
    from anonymask.models.refine.conditions import (
        depth_condition,
        face_condition,
        inverse_depth_range,
        openpose_condition,
        smplh_to_openpose18,
    )
    from anonymask.models.stage_settings import stage_backend

    stage_backend("conditions", cfg)  # the one backend, ``render``: what follows
    depth = entry.array("render/depth")
    joints2d, face5, face = (entry.array(f"render/{k}") for k in ("joints2d", "face5_2d", "face_2d"))
    windows = frame_windows(int(depth.shape[0]), cfg["window"])

    def depth_crop(boxes, size, win):
        return crop_tubelet(np.asarray(depth[win.core]), boxes[win.core], size, border="constant", value=0.0,
                            interpolation="nearest")

    for j in tubelet_ids(entry):
        boxes = entry.read(f"tubelets/{j}/box")
        t_len = boxes.shape[0]
        size = int(entry.array(f"tubelets/{j}/rgb").shape[1])
        ranges = [r for r in (inverse_depth_range(depth_crop(boxes, size, win)) for win in windows) if r]
        inv_range = (min(r[0] for r in ranges), max(r[1] for r in ranges)) if ranges else None
        with contextlib.ExitStack() as stack:
            out_d, out_p, out_f = (stack.enter_context(w.frames(f"tubelets/{j}/cond_{k}", (size, size, 3), np.uint8,
                                                                  t_len, shard_bytes=TRACK_SHARD_BYTES))
                                   for k in ("depth", "pose", "face"))
            for win in windows:
                b = boxes[win.core]
                out_d.write(depth_condition(depth_crop(boxes, size, win), inv_range=inv_range))
                op, vis = smplh_to_openpose18(points_to_crop(np.asarray(joints2d[win.core])[:, j], b, size),
                                              face5=points_to_crop(np.asarray(face5[win.core])[:, j], b, size))
                out_p.write(openpose_condition(op, size, visibility=vis))
                fp = points_to_crop(np.asarray(face[win.core])[:, j], b, size)
                out_f.write(face_condition(fp, size, visibility=np.isfinite(fp[..., 0])))
