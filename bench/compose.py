"""Throughput of the offline (CPU, no weights) anonymization stages on a synthetic two-person clip.

``bench_offline_stages`` returns frames/s per stage (and seconds), so `anonymask bench` can record
them; tests never assert timings.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np


def _scene(t: int, h: int, w: int, seed: int = 0):
    """Textured static background, two people walking (rectangles of noise), ellipse avatars."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:h, :w].astype(np.float32)
    bg = np.stack([120 + 60 * np.sin(xx / 17) * np.cos(yy / 23), 100 + 50 * np.cos((xx + yy) / 31), 90 + xx / w * 80], -1)
    video = np.repeat(np.clip(bg, 0, 255).astype(np.uint8)[None], t, 0)
    q = np.zeros((2, t, h, w), bool)
    r = np.zeros((2, t, h, w), np.float32)
    pw, ph = w // 10, h // 3
    for i in range(t):
        for j in range(2):
            cx = int(w * (0.25 + 0.5 * j) + (w / 8) * np.sin(i / 20 + j))
            cy = int(h * 0.55)
            q[j, i, cy - ph:cy + ph, cx - pw:cx + pw] = True
            d = np.sqrt(((xx - cx) / (0.8 * pw)) ** 2 + ((yy - cy) / (0.9 * ph)) ** 2)
            r[j, i] = np.clip((1 - d) * 0.8 * pw + 0.5, 0, 1)
    noise = rng.integers(0, 256, video.shape, dtype=np.uint8)
    person = q.any(0)
    video[person] = noise[person]
    h_render = rng.integers(0, 256, video.shape, dtype=np.uint8)
    return video, q, r, h_render


def bench_offline_stages(
    T: int = 64, H: int = 480, W: int = 640, crop_size: int = 256, opencv_inpaint: bool = True
) -> dict[str, Any]:
    """frames/s of unflicker, grow, feather, inpaint, merge, tubelets, crop, reintegrate, public_mask."""
    from anonymask.models.anonymizer.compose.merge import merge
    from anonymask.models.anonymizer.compose.reintegrate import public_mask, reintegrate
    from anonymask.models.anonymizer.compose.tubelets import crop_tubelet, tubelet_boxes
    from anonymask.models.anonymizer.inpaint.backends import get_inpainter
    from anonymask.models.anonymizer.segment.masks import feather, grow, unflicker

    video, q, r, h_render = _scene(T, H, W)
    results: dict[str, Any] = {"frames": T, "height": H, "width": W, "crop_size": crop_size, "people": 2}
    stages: dict[str, dict[str, float]] = {}

    def timed(name: str, fn, frames: int = T):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        sec, cpu = time.perf_counter() - t0, time.process_time() - c0
        # CPU seconds as well: on a shared machine wall time also counts other processes' turns
        stages[name] = {
            "seconds": round(sec, 4),
            "cpu_seconds": round(cpu, 4),
            "fps": round(frames / sec, 1) if sec > 0 else float("inf"),
        }
        return out

    person = q.any(0)
    m = timed("unflicker", lambda: unflicker(person, 2))
    m = timed("grow", lambda: grow(m, 5))
    q_alpha = timed("feather", lambda: feather(m, 2.0))
    x_dot = timed("inpaint_temporal_median", lambda: get_inpainter("temporal_median").inpaint(video, q_alpha))
    if opencv_inpaint:
        n = min(T, 8)
        timed("inpaint_opencv", lambda: get_inpainter("opencv").inpaint(video[:n], q_alpha[:n]), frames=n)
    r_union = np.maximum(r[0], r[1])
    x_ddot = timed("merge", lambda: merge(x_dot, h_render, r_union))
    alphas = [feather(grow(q[j], 5) | (r[j] > 0), 2.0) for j in range(2)]
    boxes = timed("tubelets", lambda: [tubelet_boxes(a > 0) for a in alphas])
    crops = timed("crop", lambda: [crop_tubelet(x_ddot, b, crop_size) for b in boxes])
    timed("reintegrate", lambda: reintegrate(x_dot, crops, boxes, alphas))
    timed("public_mask", lambda: public_mask([r[0], r[1]], alphas, boxes, crop_size))
    results["stages"] = stages
    return results


if __name__ == "__main__":  # pragma: no cover
    import json

    print(json.dumps(bench_offline_stages(), indent=2))
