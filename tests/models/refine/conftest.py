"""Tiny random refinement weights, built once per test session in the real layout (no network)."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import numpy as np  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(scope="session")
def tiny_weights(tmp_path_factory):
    from anonymask.models.anonymizer.refine.tiny import build_tiny_refiner_weights

    return build_tiny_refiner_weights(tmp_path_factory.mktemp("weights"), seed=0)


def make_crop(num_frames: int, size: int = 64, seed: int = 0):
    """A smooth moving pattern and three per-frame-varying condition videos, all uint8."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size] / size
    frames, depth, pose, face = [], [], [], []
    for t in range(num_frames):
        phase = t / max(num_frames, 1)
        img = np.stack([np.sin(6 * xx + 3 * phase), np.cos(5 * yy - 2 * phase), np.sin(4 * (xx + yy))], -1)
        frames.append((127.5 + 120 * img + rng.normal(0, 3, img.shape)).clip(0, 255))
        blob = 255 * np.exp(-((xx - 0.3 - 0.4 * phase) ** 2 + (yy - 0.5) ** 2) * 8)
        depth.append(np.repeat(blob[..., None], 3, axis=-1))
        p = np.zeros((size, size, 3))
        p[int(size * (0.2 + 0.5 * phase)) : int(size * (0.3 + 0.5 * phase)), size // 4 : size // 2] = (255, 0, 0)
        pose.append(p)
        f = np.zeros((size, size, 3))
        f[size // 8 : size // 4, int(size * (0.1 + 0.6 * phase)) : int(size * (0.2 + 0.6 * phase))] = 255
        face.append(f)
    as_u8 = lambda a: np.asarray(a).astype(np.uint8)  # noqa: E731
    conditions = {"depth": as_u8(depth), "pose": as_u8(pose), "face": as_u8(face)}
    return as_u8(frames), conditions


@pytest.fixture(scope="session")
def crop_maker():
    return make_crop
