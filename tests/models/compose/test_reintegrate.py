import math

import cv2
import numpy as np
import pytest

from anonymask.models.anonymizer.compose import crop_tubelet, merge, public_mask, reintegrate, tubelet_boxes
from anonymask.models.anonymizer.inpaint import get_inpainter
from anonymask.models.anonymizer.segment import as_full, feather, grow

T, H, W, S = 6, 96, 112, 48


def soft_ellipse(cx, cy, ax, ay):
    """Anti-aliased ellipse alpha (render-like soft edge), exactly 1 inside."""
    yy, xx = np.mgrid[:H, :W].astype(np.float32)
    d = np.sqrt(((xx - cx) / ax) ** 2 + ((yy - cy) / ay) ** 2)
    return np.clip((1.0 - d) * min(ax, ay) + 0.5, 0.0, 1.0)


def two_person_scene(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, (T, H, W, 3), dtype=np.uint8)  # real video (textured)
    q = np.zeros((2, T, H, W), bool)
    r = np.zeros((2, T, H, W), np.float32)
    for t in range(T):
        for j, (cx, cy) in enumerate([(30 + 2 * t, 40), (54 + 2 * t, 46)]):  # they overlap
            q[j, t, cy - 21:cy + 21, cx - 12:cx + 12] = True
            r[j, t] = soft_ellipse(cx, cy, 10, 19)
    h = rng.integers(0, 256, (T, H, W, 3), dtype=np.uint8)  # avatar render of both people
    return x, q, r, h


def pipeline(x_dot, q, r, h, refine=lambda c: c):
    """merge -> tubelets -> crops -> (refine) -> reintegrate, as the anonymize flow runs it."""
    r_union = np.maximum(r[0], r[1])
    x_ddot = merge(x_dot, h, r_union)
    alphas = [feather(grow(q[j], 2) | (r[j] > 0), sigma=1.5) for j in range(2)]
    boxes = [tubelet_boxes(a > 0, margin=0.05, sigma=1.0) for a in alphas]
    crops = [refine(crop_tubelet(x_ddot, b, S)) for b in boxes]
    return reintegrate(x_dot, crops, boxes, alphas), alphas, boxes


def test_reintegrate_with_zero_alpha_returns_x_dot():
    x, q, r, h = two_person_scene()
    boxes = [tubelet_boxes(q[j]) for j in range(2)]
    crops = [crop_tubelet(h, b, S) for b in boxes]
    zeros = [np.zeros((T, H, W), np.float32)] * 2
    assert np.array_equal(reintegrate(x, crops, boxes, zeros), x)


def test_reintegrate_full_alpha_shows_the_crop_exactly():
    rng = np.random.default_rng(1)
    x_dot = rng.integers(0, 256, (T, H, W, 3), dtype=np.uint8)
    content = rng.integers(0, 256, (T, H, W, 3), dtype=np.uint8)
    box = np.tile(np.array([[10.0, 8.0, 10.0 + S, 8.0 + S]]), (T, 1))  # side = S: unit scale
    crop = crop_tubelet(content, box, S)
    alpha = np.zeros((T, H, W), bool)
    alpha[:, 12:50, 14:54] = True
    out = reintegrate(x_dot, [crop], [box], [alpha])
    assert np.array_equal(out[alpha], content[alpha])
    assert np.array_equal(out[~alpha], x_dot[~alpha])
    with pytest.raises(ValueError):
        reintegrate(x_dot, [crop], [box], [alpha, alpha])


def test_uint8_alphas_with_an_explicit_scale_are_read_as_0_to_255():
    """A window of a stored 0..255 alpha may hold only faint values (<= 1, the feather's tail):
    with ``alpha_scale=255`` they stay faint; guessed from the block they would be read as 0/1 and
    paste the crop fully over the real pixels."""
    rng = np.random.default_rng(2)
    x_dot = rng.integers(0, 256, (T, H, W, 3), dtype=np.uint8)
    content = rng.integers(0, 256, (T, H, W, 3), dtype=np.uint8)
    box = np.tile(np.array([[10.0, 8.0, 10.0 + S, 8.0 + S]]), (T, 1))
    crop = crop_tubelet(content, box, S)
    faint = np.zeros((T, H, W), np.uint8)
    faint[:, 12:50, 14:54] = 1  # 1/255
    out = reintegrate(x_dot, [crop], [box], [faint], alpha_scale=255)
    diff = np.abs(out.astype(int) - x_dot.astype(int))[:, 12:50, 14:54]
    assert 0 < diff.max() <= 1
    guessed = reintegrate(x_dot, [crop], [box], [faint])
    assert np.array_equal(guessed[:, 12:50, 14:54], content[:, 12:50, 14:54])
    full = (faint * 255).astype(bool)
    assert not public_mask([full], alphas=[faint], boxes=[box], crop_size=S, alpha_scale=255).any()
    assert public_mask([full], alphas=[faint], boxes=[box], crop_size=S).any()


def test_alpha_outside_the_box_is_ignored():
    rng = np.random.default_rng(2)
    x_dot = rng.integers(0, 256, (T, H, W, 3), dtype=np.uint8)
    box = np.tile(np.array([[10.0, 8.0, 34.0, 32.0]]), (T, 1))
    crop = np.zeros((T, S, S, 3), np.uint8)
    alpha = np.ones((T, H, W), np.float32)
    out = reintegrate(x_dot, [crop], [box], [alpha])
    assert np.array_equal(out[:, 40:], x_dot[:, 40:])
    assert np.all(out[:, 10:30, 12:32] == 0)


@pytest.mark.parametrize("refine", [lambda c: c, lambda c: 255 - c], ids=["render", "pointwise-refine"])
def test_public_pixels_never_depend_on_real_pixels(refine):
    """Privacy invariant 1 at pixel level: change every real pixel, public pixels stay bit-identical."""
    x, q, r, h = two_person_scene()
    person = q[0] | q[1]
    x_dot = get_inpainter("temporal_median").inpaint(x, grow(person, 2))
    out, alphas, boxes = pipeline(x_dot, q, r, h, refine)
    public = public_mask([r[0], r[1]], alphas, boxes, S, margin=0)

    rng = np.random.default_rng(7)
    other = x_dot ^ rng.integers(1, 256, x_dot.shape, dtype=np.uint8)  # every real value changes
    out2, _, _ = pipeline(other, q, r, h, refine)

    synthetic = as_full(r[0]) | as_full(r[1])
    assert not (public & ~synthetic).any()
    # the set is tight: it holds every avatar pixel farther than the resampling footprint
    # (ceil(k) + 1 pixels per axis, k = box side / S) from a non-avatar pixel
    reach = math.ceil(max(float((b[:, 2] - b[:, 0]).max()) for b in boxes) / S) + 1
    square = np.ones((2 * reach + 1, 2 * reach + 1), np.uint8)
    core = np.stack([cv2.erode(f.view(np.uint8), square) for f in synthetic]).view(bool)
    assert core.sum() > 0.3 * synthetic.sum()
    assert not (core & ~public).any()
    assert np.array_equal(out[public], out2[public])
    # the test has teeth: the naive mask (r == 1) contains pixels that do change with real pixels
    assert (out != out2).any(-1)[synthetic & ~public].any()
    # the default safety margin only removes pixels
    assert not (public_mask([r[0], r[1]], alphas, boxes, S) & ~public).any()


def test_public_mask_without_reintegration_is_the_full_render_mask():
    _, _, r, _ = two_person_scene()
    public = public_mask(np.maximum(r[0], r[1]), margin=0)
    assert np.array_equal(public, (r[0] >= 1) | (r[1] >= 1))
    with pytest.raises(ValueError):
        public_mask(r[0], alphas=[r[0]])
