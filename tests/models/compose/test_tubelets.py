import numpy as np
import pytest

from anonymask.core.errors import NoPersonError
from anonymask.models.anonymizer.compose import crop_tubelet, mask_extents, paste_tubelet, tubelet_boxes
from anonymask.models.anonymizer.metrics import psnr


def jittery_person(t=40, h=120, w=160, seed=0):
    """A walking, growing rectangle with segmentation jitter and a few frames missing."""
    rng = np.random.default_rng(seed)
    m = np.zeros((t, h, w), bool)
    for i in range(t):
        cx = int(30 + 2.5 * i + rng.integers(-3, 4))
        cy = int(60 + rng.integers(-3, 4))
        half_w = int(10 + i // 4 + rng.integers(0, 3))
        half_h = int(22 + i // 4 + rng.integers(0, 3))
        m[i, max(0, cy - half_h):cy + half_h, max(0, cx - half_w):cx + half_w] = True
    m[17:20] = False  # person missed in three frames
    return m


def test_boxes_are_square_contain_the_mask_and_stay_inside():
    m = jittery_person()
    boxes = tubelet_boxes(m, margin=0.1, sigma=3.0)
    assert boxes.shape == (m.shape[0], 4)
    side_x = boxes[:, 2] - boxes[:, 0]
    side_y = boxes[:, 3] - boxes[:, 1]
    assert np.allclose(side_x, side_y)
    ext, present = mask_extents(m)
    eps = 1e-9
    assert np.all(boxes[present, 0] <= ext[present, 0] + eps) and np.all(boxes[present, 1] <= ext[present, 1] + eps)
    assert np.all(boxes[present, 2] >= ext[present, 2] - eps) and np.all(boxes[present, 3] >= ext[present, 3] - eps)
    h, w = m.shape[1:]
    assert np.all(boxes[:, :2] >= -eps) and np.all(boxes[:, 2] <= w + eps) and np.all(boxes[:, 3] <= h + eps)


def test_boxes_are_smoother_than_tight_boxes():
    m = jittery_person()
    boxes = tubelet_boxes(m, sigma=3.0, keep_inside=False)
    ext, present = mask_extents(m)
    raw_c = 0.5 * (ext[present, 0] + ext[present, 2])
    box_c = 0.5 * (boxes[:, 0] + boxes[:, 2])
    # bounded frame-to-frame change, and far less jitter (second differences) than the raw boxes
    assert np.abs(np.diff(box_c)).max() < 4.0
    assert np.abs(np.diff(box_c, 2)).mean() < 0.1 * np.abs(np.diff(raw_c, 2)).mean()
    side = boxes[:, 2] - boxes[:, 0]
    assert np.abs(np.diff(side)).max() < 2.0


def test_missing_frames_are_interpolated():
    m = np.zeros((9, 50, 80), bool)
    m[0, 20:30, 5:15] = True
    m[8, 20:30, 45:55] = True
    boxes = tubelet_boxes(m, sigma=0, margin=0.0, min_size=0)
    cx = 0.5 * (boxes[:, 0] + boxes[:, 2])
    assert np.allclose(cx, np.linspace(10, 50, 9))
    assert np.allclose(boxes[:, 2] - boxes[:, 0], 10)


def test_constant_size_and_empty_mask():
    m = jittery_person()
    boxes = tubelet_boxes(m, constant_size=True)
    side = boxes[:, 2] - boxes[:, 0]
    assert np.allclose(side, side[0])
    with pytest.raises(NoPersonError):
        tubelet_boxes(np.zeros((3, 10, 10), bool))


def test_crop_is_exact_at_unit_scale_and_pads_outside():
    rng = np.random.default_rng(0)
    video = rng.integers(0, 256, (2, 30, 40, 3), dtype=np.uint8)
    boxes = np.array([[5, 6, 21, 22], [-4, -4, 12, 12]], float)
    crop = crop_tubelet(video, boxes, 16)
    assert crop.shape == (2, 16, 16, 3) and crop.dtype == np.uint8
    assert np.array_equal(crop[0], video[0, 6:22, 5:21])
    assert np.array_equal(crop[1, 4:, 4:], video[1, 0:12, 0:12])
    assert np.array_equal(crop[1, 0, 4:], video[1, 0, 0:12])  # replicated top row
    const = crop_tubelet(video, boxes, 16, border="constant", value=7)
    assert np.all(const[1, :4] == 7)
    alpha = crop_tubelet(np.ones((2, 30, 40), bool), boxes, 16)
    assert alpha.dtype == np.float32 and alpha.shape == (2, 16, 16)
    many = crop_tubelet(rng.random((2, 30, 40, 6)).astype(np.float32), boxes, 16)
    assert many.shape == (2, 16, 16, 6)


def test_paste_inverts_crop_inside_the_box():
    yy, xx = np.mgrid[:60, :80].astype(np.float32)
    img = np.stack([128 + 100 * np.sin(xx / 6), 128 + 100 * np.cos(yy / 7), xx + yy], -1)
    video = np.clip(img, 0, 255).astype(np.uint8)[None].repeat(2, 0)
    boxes = np.array([[10.3, 5.7, 50.3, 45.7], [30.0, 20.0, 70.0, 60.0]])
    crops = crop_tubelet(video, boxes, 96)  # upsampled 2.4x: paste(crop) ~ identity
    back, valid = paste_tubelet(crops, boxes, (60, 80))
    assert back.dtype == np.float32 and valid.dtype == bool
    inside = np.zeros((2, 60, 80), bool)
    inside[0, 7:45, 12:50] = True
    inside[1, 21:59, 31:69] = True
    assert valid[inside].all()
    assert not valid[0, :, :9].any() and not valid[0, 48:].any()
    assert psnr(back, video.astype(np.float32), valid) > 35
