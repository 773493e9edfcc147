"""mediapipe backend on a real video with people (sports2d's demo clip, shipped in its wheel)."""

import importlib.util
import time
from pathlib import Path

import numpy as np
import pytest

from anonymask.models.pose.estimate import estimate_mediapipe
from anonymask.models.pose.fit import FitConfig


def _demo_video() -> Path:
    spec = importlib.util.find_spec("Sports2D")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("sports2d is not installed (its demo.mp4 is the real test video)")
    path = Path(list(spec.submodule_search_locations)[0]) / "Demo" / "demo.mp4"
    if not path.is_file():
        pytest.skip(f"{path} missing from the sports2d package")
    return path


def test_mediapipe_backend_on_real_video(body):
    import cv2

    from anonymask.models.segment.backends import get_segmenter
    from anonymask.storage.video_io import read_frames

    # frames 95-110: one person walking across the lawn (the other, backlit on the box, is not
    # segmented by either mediapipe model)
    full = read_frames(_demo_video(), start=95, step=5, max_frames=4)
    assert full.shape[0] == 4
    h, w = full.shape[1:3]
    size = (480, int(round(h * 480 / w / 2)) * 2)  # ~480 wide, even height
    frames = np.stack([cv2.resize(f, size, interpolation=cv2.INTER_AREA) for f in full])
    start = time.perf_counter()
    # the pose model's mask: the default selfie model finds no full-body person this small (max prob < 0.6)
    prob = get_segmenter("mediapipe", model="pose").segment(frames)
    res = estimate_mediapipe(frames, prob, body.rest_joints(), fit=FitConfig(iterations=60), source="demo.mp4")
    seconds = time.perf_counter() - start
    assert len(res.tracks) >= 1
    main = res.tracks[0]
    assert main.valid.sum() >= 2
    joints = body.pose_track(main).joints[main.valid]
    depth = joints[:, 0, 2]
    print(f"mediapipe on demo.mp4 {frames.shape}: {len(res.tracks)} track(s), pelvis depth {depth.round(2)} m, "
          f"camera fx {res.camera.fx:.0f}, {seconds:.1f} s, {res.diagnostics}")
    assert np.all((depth > 1.0) & (depth < 30.0))
    # the fitted pelvis projects inside the person's box, with the box's margin
    uv = res.camera.project(joints[:, 0])
    box = res.boxes[0][main.valid]
    pad = 0.25 * (box[:, 3] - box[:, 1])
    assert np.all((uv[:, 0] > box[:, 0] - pad) & (uv[:, 0] < box[:, 2] + pad))
    assert np.all((uv[:, 1] > box[:, 1] - pad) & (uv[:, 1] < box[:, 3] + pad))
