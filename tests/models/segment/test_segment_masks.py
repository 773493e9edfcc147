import numpy as np
import pytest

from anonymask.models.anonymizer.segment import (
    as_alpha,
    as_full,
    assign_to_tracks,
    feather,
    get_segmenter,
    grow,
    person_mask,
    unflicker,
)


def square_masks(t=9, h=40, w=50, size=10):
    m = np.zeros((t, h, w), bool)
    for i in range(t):
        m[i, 10:10 + size, 5 + 2 * i:5 + 2 * i + size] = True
    return m


def test_as_alpha_reads_every_mask_kind():
    m = square_masks()
    a = as_alpha(m)
    assert a.dtype == np.float32 and set(np.unique(a)) == {0.0, 1.0}
    assert np.array_equal(as_alpha(m.astype(np.uint8)), a)
    assert np.array_equal(as_alpha(m.astype(np.uint8) * 255), a)
    half = a * 0.5
    assert np.array_equal(as_alpha(half), half)
    assert not as_full(half).any() and np.array_equal(as_full(m.astype(np.uint8) * 255), m)


def test_person_mask_is_union_of_segmentation_and_silhouettes():
    prob = np.zeros((3, 20, 20), np.float32)
    prob[:, 2:6, 2:6] = 0.9
    prob[:, 10:12, 10:12] = 0.3
    sil_a = np.zeros((3, 20, 20), bool)
    sil_a[:, 15:18, 15:18] = True
    sil_b = np.zeros((3, 20, 20), bool)
    sil_b[1, 0, 0] = True
    out = person_mask(prob, [sil_a, sil_b], threshold=0.5)
    expected = (prob >= 0.5) | sil_a | sil_b
    assert np.array_equal(out, expected)
    assert not out[:, 10:12, 10:12].any()
    assert np.array_equal(person_mask(prob, None, 0.25), prob >= 0.25)


def test_unflicker_any_closes_single_frame_hole_and_never_removes():
    m = square_masks()
    holed = m.copy()
    holed[4] = False  # the person vanishes for one frame
    out = unflicker(holed, window=1)
    assert out[4][m[4]].all()
    assert (out >= holed).all()  # union never drops a person pixel
    # the window is +-1: frame 4 only gains pixels from frames 3 and 5
    assert np.array_equal(out[4], holed[3] | holed[5])


def test_unflicker_majority_removes_single_frame_blip_and_fills_hole():
    m = np.zeros((7, 8, 8), bool)
    m[:, 2:5, 2:5] = True
    noisy = m.copy()
    noisy[3, 6, 6] = True  # one-frame false positive
    noisy[2, 3, 3] = False  # one-frame hole
    out = unflicker(noisy, window=1, mode="majority")
    assert np.array_equal(out, m)
    with pytest.raises(ValueError):
        unflicker(m, 1, mode="median")


def test_grow_is_disk_dilation():
    m = np.zeros((2, 31, 31), bool)
    m[0, 15, 15] = True
    g = grow(m, 5)
    yy, xx = np.mgrid[:31, :31]
    d = np.hypot(yy - 15, xx - 15)
    assert g[0][d <= 4.5].all() and not g[0][d > 5.6].any()
    assert not g[1].any()
    assert np.array_equal(grow(m, 0), m)


def test_feather_core_is_one_and_edge_is_soft_outside():
    m = np.zeros((1, 60, 60), bool)
    m[0, 20:40, 20:40] = True
    a = feather(m, sigma=2.0)
    assert a.dtype == np.float32
    assert np.all(a[m] == 1.0)
    assert a.min() >= 0 and a.max() <= 1
    row = a[0, 30]
    outside = row[40:]
    assert 0.9 < outside[0] < 1.0  # just outside: soft but close to 1 (continuous with the core)
    assert np.all(np.diff(outside) <= 1e-6)  # falls off monotonically
    assert outside[-1] == 0.0  # reaches 0 far away
    assert np.count_nonzero((row > 0) & (row < 1)) >= 8


def test_assign_to_tracks_splits_by_nearest_silhouette():
    t, h, w = 2, 20, 40
    sil = np.zeros((2, t, h, w), bool)
    sil[0, :, 8:12, 5:9] = True
    sil[1, :, 8:12, 30:34] = True
    mask = sil.any(0).copy()
    mask[:, 5, 3] = True  # hair of person 0
    mask[:, 5, 36] = True  # hair of person 1
    mask[1, 0, 20] = True  # far blob (equidistant-ish) with a distance cap -> nobody
    out = assign_to_tracks(mask, sil, max_distance=8)
    assert out[0, :, 5, 3].all() and not out[1, :, 5, 3].any()
    assert out[1, :, 5, 36].all() and not out[0, :, 5, 36].any()
    assert not out[:, 1, 0, 20].any()
    assert not ((out[0] | out[1]) & ~mask).any()
    assert np.array_equal(out[0] & sil[0], sil[0])
    assert not (out[0] & out[1]).any()


def test_gt_segmenter_passes_masks_through():
    frames = np.zeros((3, 10, 12, 3), np.uint8)
    m = np.zeros((3, 10, 12), np.uint8)
    m[:, 2:4, 3:5] = 255
    prob = get_segmenter("gt", masks=m).segment(frames)
    assert prob.dtype == np.float32 and np.array_equal(prob > 0.5, m > 0)
    with pytest.raises(ValueError):
        get_segmenter("gt", masks=m[:, :5]).segment(frames)
    with pytest.raises(ValueError):
        get_segmenter("nope")


def test_feather_equals_full_frame_blur_of_grown_mask():
    """Blurring only the mask's region must give the same alpha as blurring whole frames."""
    import math

    import cv2

    m = np.zeros((3, 40, 50), bool)
    m[0, 15:25, 20:30] = True  # in the middle
    m[1, 0:12, 0:9] = True  # touching two frame edges
    m[1, 30:40, 45:50] = True
    sigma = 1.7
    a = feather(m, sigma)
    grown = grow(m, math.ceil(3 * sigma))
    for t in range(3):
        ref = cv2.GaussianBlur(grown[t].astype(np.float32), (0, 0), sigmaX=sigma, sigmaY=sigma)
        ref = np.clip(ref, 0, 1)
        ref[m[t]] = 1.0
        assert np.allclose(a[t], ref, atol=1e-6), t


def test_unflicker_any_matches_a_temporal_max_filter():
    from scipy.ndimage import maximum_filter1d

    rng = np.random.default_rng(5)
    m = rng.random((11, 6, 7)) < 0.1
    for b in (1, 2, 4):
        ref = maximum_filter1d(m.view(np.uint8), size=2 * b + 1, axis=0, mode="nearest").astype(bool)
        assert np.array_equal(unflicker(m, b), ref), b


def test_build_person_masks_chain_and_track_split():
    from anonymask.models.anonymizer.segment import build_person_masks

    t, h, w = 7, 40, 80
    sil = np.zeros((2, t, h, w), bool)
    sil[0, :, 10:30, 10:20] = True
    sil[1, :, 10:30, 55:65] = True
    prob = np.zeros((t, h, w), np.float32)
    prob[:, 8:12, 12:18] = 0.9  # hair above person 0, found by segmentation only
    prob[3] = 0.0  # segmentation flickers off for one frame
    pm = build_person_masks(prob, sil, window=1, grow_pixels=2, sigma=1.0)
    assert pm.hole.dtype == bool and pm.alpha.dtype == np.float32
    assert pm.hole[3, 8, 14]  # unflicker kept the hair in the flickering frame
    assert np.all(pm.alpha[pm.hole] == 1.0) and (pm.alpha > 0).sum() > pm.hole.sum()
    assert len(pm.track_alphas) == 2
    a0, a1 = pm.track_alphas
    np.testing.assert_array_equal(pm.track_alpha(0, slice(2, 5)), a0[2:5])  # per frame: a slice is the same
    assert a0[3, 8, 14] == 1.0 and a1[3, 8, 14] == 0.0  # the hair goes to the nearest track
    covered = (a0 >= 1) | (a1 >= 1)
    assert np.array_equal(covered, pm.hole)  # every hole pixel belongs to a track here
    assert build_person_masks(prob).track_alphas == []
