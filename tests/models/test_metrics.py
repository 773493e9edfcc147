import math

import numpy as np
import pytest

from anonymask.models.anonymizer.metrics import mask_iou, mpjpe_mm, person_leak, psnr


def scene(t=6, h=32, w=40, seed=0):
    rng = np.random.default_rng(seed)
    bg = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    video = np.repeat(bg[None], t, 0)
    mask = np.zeros((t, h, w), bool)
    for i in range(t):
        mask[i, 8:20, 4 + 3 * i:14 + 3 * i] = True
    person = rng.integers(0, 256, (t, h, w, 3), dtype=np.uint8)
    video[mask] = person[mask]
    return video, bg, mask


def test_mask_iou_values():
    a = np.zeros((2, 4, 4), bool)
    b = np.zeros((2, 4, 4), bool)
    assert mask_iou(a, b) == 1.0
    a[0, :2] = True  # 8 pixels
    b[0, 1:3] = True  # 8 pixels, 4 shared
    assert mask_iou(a, b) == pytest.approx(4 / 12)
    assert mask_iou(a, a.astype(np.float32) * 0.5) == 1.0
    with pytest.raises(ValueError):
        mask_iou(a, b[:, :2])


def test_psnr_whole_and_masked():
    a = np.full((2, 4, 4, 3), 100, np.uint8)
    b = a.copy()
    assert psnr(a, b) == math.inf
    b[0, 0, 0] = 110  # one pixel, 3 channels off by 10
    mse = 3 * 100 / a.size
    assert psnr(a, b) == pytest.approx(10 * math.log10(255**2 / mse))
    m = np.zeros((2, 4, 4), bool)
    m[0, 0, 0] = True
    assert psnr(a, b, m) == pytest.approx(10 * math.log10(255**2 / 100))
    assert psnr(a, b, ~m) == math.inf
    assert math.isnan(psnr(a, b, np.zeros_like(m)))


def test_mpjpe_absolute_and_root_aligned():
    rng = np.random.default_rng(1)
    gt = rng.normal(size=(5, 4, 3))
    pred = gt + np.array([0.1, 0.0, 0.0])  # everything shifted by 10 cm
    assert mpjpe_mm(pred, gt) == pytest.approx(100.0)
    assert mpjpe_mm(pred, gt, root=0) == pytest.approx(0.0, abs=1e-9)
    pred2 = gt.copy()
    pred2[:, 2] += [0.0, 0.03, 0.04]  # one joint off by 5 cm
    assert mpjpe_mm(pred2, gt) == pytest.approx(50.0 / 4)
    valid = np.zeros((5, 4), bool)
    valid[:, 2] = True
    assert mpjpe_mm(pred2, gt, valid=valid) == pytest.approx(50.0)


def test_person_leak_identity_is_one_background_is_zero():
    video, bg, mask = scene()
    assert person_leak(video, video, mask, bg) == 1.0
    removed = np.where(mask[..., None], bg[None], video)
    assert person_leak(video, removed, mask, bg) == 0.0
    # an avatar of a flat colour leaks only where the person happened to have that colour
    avatar = np.where(mask[..., None], np.uint8(128), video)
    leak = person_leak(video, avatar, mask, bg)
    assert 0.0 <= leak < 0.05
    # half of the person left visible -> about half leaks
    half = removed.copy()
    half[:, :14] = video[:, :14]
    assert person_leak(video, half, mask, bg) == pytest.approx(0.5, abs=0.1)


def test_person_leak_ignores_pixels_that_look_like_background():
    video, bg, mask = scene()
    same = video.copy()
    same[mask] = np.broadcast_to(bg[None], video.shape)[mask]  # "person" indistinguishable from bg
    assert math.isnan(person_leak(same, same, mask, bg))
