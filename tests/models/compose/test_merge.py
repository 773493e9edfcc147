import numpy as np
import pytest

from anonymask.models.anonymizer.compose import merge


def videos(t=4, h=10, w=12, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 256, (t, h, w, 3), dtype=np.uint8), rng.integers(0, 256, (t, h, w, 3), dtype=np.uint8))


@pytest.mark.parametrize("dtype", [bool, np.uint8, np.float32])
def test_merge_with_empty_mask_returns_x_dot(dtype):
    x_dot, h = videos()
    r = np.zeros(x_dot.shape[:3], dtype)
    out = merge(x_dot, h, r)
    assert out.dtype == np.uint8 and np.array_equal(out, x_dot)


@pytest.mark.parametrize("full", [True, np.uint8(255), np.uint8(1), np.float32(1.0)])
def test_merge_with_full_mask_returns_render_exactly(full):
    x_dot, h = videos()
    r = np.zeros(x_dot.shape[:3], np.asarray(full).dtype)
    r[:, 2:6, 3:9] = full
    if r.dtype == np.uint8 and full == 255:
        r[0, 0, 0] = 128  # a soft uint8 pixel: the mask is read as 0..255
    out = merge(x_dot, h, r)
    inside = np.zeros(r.shape, bool)
    inside[:, 2:6, 3:9] = True
    assert np.array_equal(out[inside], h[inside])
    untouched = ~inside
    untouched[0, 0, 0] = r[0, 0, 0] == 0
    assert np.array_equal(out[untouched], x_dot[untouched])


def test_merge_soft_alpha_blends():
    x_dot, h = videos()
    r = np.full(x_dot.shape[:3], 0.25, np.float32)
    out = merge(x_dot, h, r)
    expected = np.rint(0.75 * x_dot.astype(np.float64) + 0.25 * h).astype(np.uint8)
    assert np.abs(out.astype(int) - expected).max() <= 1


def test_merge_per_track_layers_in_order():
    x_dot, h1 = videos(seed=1)
    _, h2 = videos(seed=2)
    r1 = np.zeros(x_dot.shape[:3], bool)
    r2 = np.zeros(x_dot.shape[:3], bool)
    r1[:, :, :6] = True
    r2[:, :, 4:] = True
    out = merge(x_dot, [h1, h2], [r1, r2])
    assert np.array_equal(out[:, :, :4], h1[:, :, :4])
    assert np.array_equal(out[:, :, 4:], h2[:, :, 4:])  # later track on top
    with pytest.raises(ValueError):
        merge(x_dot, [h1, h2], [r1])
