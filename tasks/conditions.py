"""Stage ``conditions``: ControlNet inputs per tubelet, computed exactly from the render (depth,
OpenPose skeleton, face points) -> ``tubelets/<j>/cond_{depth,pose,face}``.

Tubelet by tubelet over its own frames (``tubelets_spans``), window by window; the depth image's
normalisation range is the whole tubelet's (gathered in a first pass), so a long video gives the
same images as one processed whole.
"""

from __future__ import annotations

import contextlib

import numpy as np

from anonymask.config.stages import ConditionSettings
from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.storage.tracks import TRACK_SHARD_BYTES
from anonymask.tasks.tubelets import tubelet_ids, tubelet_spans


# declared in config/stages.py (settings, deps, versions)
def run(entry: VideoEntry, cfg: ConditionSettings, w: StageWriter) -> None:
    from anonymask.config.stages import stage_backend
    from anonymask.models.anonymizer.compose.tubelets import crop_tubelet, points_to_crop
    from anonymask.models.anonymizer.refine.conditions import (
        depth_condition,
        face_condition,
        inverse_depth_range,
        openpose_condition,
        smplh_to_openpose18,
    )

    stage_backend("conditions", cfg)  # the one backend, ``render``: what follows
    depth = entry.array("render/depth")
    joints2d, face5, face = (entry.array(f"render/{k}") for k in ("joints2d", "face5_2d", "face_2d"))
    spans = tubelet_spans(entry)

    def depth_crop(a, b, bx, size):
        return crop_tubelet(np.asarray(depth[a:b]), bx, size, border="constant", value=0.0, interpolation="nearest")

    for j in tubelet_ids(entry):
        s, e = (int(x) for x in spans[j])
        boxes = entry.read(f"tubelets/{j}/box")
        size = int(entry.array(f"tubelets/{j}/rgb").shape[1])
        windows = [(a, min(a + cfg.window, e)) for a in range(s, e, cfg.window)]
        ranges = [r for r in (inverse_depth_range(depth_crop(a, b, boxes[a - s : b - s], size)) for a, b in windows)
                  if r]
        inv_range = (min(r[0] for r in ranges), max(r[1] for r in ranges)) if ranges else None
        with contextlib.ExitStack() as stack:
            out_d, out_p, out_f = (stack.enter_context(w.frames(f"tubelets/{j}/cond_{k}", (size, size, 3), np.uint8,
                                                                  e - s, shard_bytes=TRACK_SHARD_BYTES))
                                   for k in ("depth", "pose", "face"))
            for a, b in windows:
                bx = boxes[a - s : b - s]
                out_d.write(depth_condition(depth_crop(a, b, bx, size), inv_range=inv_range))
                op, vis = smplh_to_openpose18(points_to_crop(np.asarray(joints2d[a:b, j]), bx, size),
                                              face5=points_to_crop(np.asarray(face5[a:b, j]), bx, size))
                out_p.write(openpose_condition(op, size, visibility=vis))
                fp = points_to_crop(np.asarray(face[a:b, j]), bx, size)
                out_f.write(face_condition(fp, size, visibility=np.isfinite(fp[..., 0])))
