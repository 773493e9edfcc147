"""Stage ``conditions``: ControlNet inputs per tubelet, computed exactly from the render (depth,
OpenPose skeleton, face points) -> ``tubelets/<j>/cond_{depth,pose,face}``."""

from __future__ import annotations

from typing import Any

import numpy as np

from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.tasks.common import stage
from anonymask.tasks.tubelets import tubelet_ids


@stage("conditions", deps=("tubelets", "render"))
def run(entry: VideoEntry, cfg: dict[str, Any], w: StageWriter) -> None:
    from anonymask.models.compose.tubelets import crop_tubelet, points_to_crop
    from anonymask.models.refine.conditions import (
        depth_condition,
        face_condition,
        openpose_condition,
        smplh_to_openpose18,
    )

    if cfg.get("backend", "render") != "render":
        raise ValueError("conditions backend: only 'render' (exact, from the avatar render) is available offline")
    depth = entry.read("render/depth")
    joints2d = entry.read("render/joints2d")
    face5 = entry.read("render/face5_2d")
    face = entry.read("render/face_2d")
    for j in tubelet_ids(entry):
        boxes = entry.read(f"tubelets/{j}/box")
        size = int(entry.array(f"tubelets/{j}/rgb").shape[1])
        d = crop_tubelet(depth, boxes, size, border="constant", value=0.0, interpolation="nearest")
        w.write(f"tubelets/{j}/cond_depth", depth_condition(d))
        op, vis = smplh_to_openpose18(points_to_crop(joints2d[:, j], boxes, size),
                                      face5=points_to_crop(face5[:, j], boxes, size))
        w.write(f"tubelets/{j}/cond_pose", openpose_condition(op, size, visibility=vis))
        fp = points_to_crop(face[:, j], boxes, size)
        w.write(f"tubelets/{j}/cond_face", face_condition(fp, size, visibility=np.isfinite(fp[..., 0])))
