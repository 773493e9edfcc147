"""Render-loop benchmark: pose, rebuild meshes, colour + depth, per-body masks, per frame."""

from __future__ import annotations

import time

import numpy as np

from anonymask.models.shared.body.appearance import AppearanceBank
from anonymask.models.shared.body.model import get_body_model, relaxed_hand_pose
from anonymask.models.shared.body.tracks import Camera, upright_orient
from anonymask.models.shared.render.renderer import MeshSpec, get_renderer


def _walk_pose(t: np.ndarray) -> np.ndarray:
    """(T, 63) body pose of a simple walk cycle (hips, knees, shoulders swing)."""
    pose = np.zeros((t.shape[0], 21, 3), np.float32)
    ph = 2.0 * np.pi * t / 30.0
    pose[:, 0, 0] = -0.4 * np.sin(ph)  # left hip
    pose[:, 1, 0] = 0.4 * np.sin(ph)  # right hip
    pose[:, 3, 0] = 0.5 * np.clip(np.sin(ph + 1.2), 0, None)  # left knee
    pose[:, 4, 0] = 0.5 * np.clip(-np.sin(ph + 1.2), 0, None)  # right knee
    pose[:, 15, 2] = -1.2  # left shoulder down
    pose[:, 16, 2] = 1.2
    pose[:, 15, 0] = 0.3 * np.sin(ph)
    pose[:, 16, 0] = -0.3 * np.sin(ph)
    return pose.reshape(t.shape[0], 63)


def bench_render(width: int = 640, height: int = 480, bodies: int = 1, frames: int = 60,
                 warmup: int = 3) -> dict:
    """Frames per second of the full per-frame loop for `bodies` people at width x height."""
    model = get_body_model("neutral")
    bank = AppearanceBank(max(bodies, 1))
    cam = Camera.from_fov(width, height, 55.0)
    renderer = get_renderer(width, height)
    lh, rh = relaxed_hand_pose("left")[None], relaxed_hand_pose("right")[None]
    betas = np.zeros(10, np.float32)
    transl = [model.transl_for(betas, [0.5 * (i - (bodies - 1) / 2), 0.1, 3.5 + 0.7 * i]) for i in range(bodies)]
    total = frames + warmup
    poses = _walk_pose(np.arange(total))
    t_pose = t_render = 0.0
    for f in range(total):
        if f == warmup:
            t_pose = t_render = 0.0
        t0 = time.perf_counter()
        specs = []
        for i in range(bodies):
            out = model.forward(betas, upright_orient(0.3 * i)[None], poses[f:f + 1], lh, rh, transl[i][None])
            specs.append(MeshSpec(out.vertices[0], model.faces, bank.avatar(i).vertex_colors))
        t1 = time.perf_counter()
        res = renderer.render(specs, cam)
        t2 = time.perf_counter()
        assert res.masks.shape[0] == bodies
        t_pose += t1 - t0
        t_render += t2 - t1
    per = (t_pose + t_render) / frames
    return {"fps": 1.0 / per, "ms_per_frame": 1000 * per, "pose_ms": 1000 * t_pose / frames,
            "render_ms": 1000 * t_render / frames, "width": width, "height": height, "bodies": bodies,
            "frames": frames}


if __name__ == "__main__":  # python -m anonymask.bench.render
    import json

    for n in (1, 2):
        print(json.dumps(bench_render(bodies=n)))
