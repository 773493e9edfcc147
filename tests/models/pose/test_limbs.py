"""Limbs drawn into a person's mask (models/anonymizer/pose/discover.py ``add_limbs``): a leg the landmark
model places but sees poorly (behind an object) is removed with its person."""

import numpy as np

from anonymask.models.anonymizer.pose.discover import add_limbs, paint
from anonymask.models.anonymizer.pose.people import Detection
from anonymask.models.anonymizer.pose.settings import DiscoverSettings


def _person(back_leg_conf: float, far: bool = False) -> Detection:
    """A 100-px tall person whose segmentation covers the body and the front leg (x 40..60); the
    back leg (right hip 24 -> knee 26 -> ankle 28 -> heel 30 / foot 32) goes out to x 85."""
    kp = np.zeros((33, 2), np.float32)
    kp[[11, 12]] = [(45, 30), (55, 30)]  # shoulders
    kp[[13, 14, 15, 16]] = [(42, 45), (58, 45), (42, 60), (58, 60)]  # elbows, wrists
    kp[[23, 24]] = [(46, 70), (54, 70)]  # hips
    kp[[25, 27, 29, 31]] = [(46, 90), (46, 110), (44, 114), (50, 114)]  # front leg
    kp[[26, 28, 30, 32]] = [(70, 90), (85, 110), (83, 114), (89, 114)]  # back leg, outside the mask
    if far:
        kp[[26, 28, 30, 32]] += (300, 0)  # placed nowhere near the person
    conf = np.full(33, 0.95, np.float32)
    conf[[26, 28, 30, 32]] = back_leg_conf
    region = (38, 10, 62, 118)
    mask = np.ones((region[3] - region[1], region[2] - region[0]), np.float32)
    return Detection(np.array([40, 12, 60, 116], np.float32), kp, conf, np.zeros((33, 3), np.float32), mask, region,
                     0.9)


def _painted(d: Detection, limb_conf: float, shape: tuple[int, int] | None = None) -> np.ndarray:
    add_limbs(d, DiscoverSettings(limb_conf=limb_conf), shape)
    labels, best = np.zeros((140, 500), np.uint16), np.zeros((140, 500), np.float32)
    paint(labels, best, d, 0)
    return labels > 0


def test_a_poorly_seen_leg_outside_the_segmentation_is_drawn_into_the_mask():
    back_shin = (100, 80)  # (y, x) between the back knee and ankle, outside the segmentation
    assert not _painted(_person(0.3), limb_conf=0.5, shape=(140, 500))[back_shin]  # before: shown
    assert not _painted(_person(0.3), limb_conf=0.1)[back_shin]  # no frame shape: stays in the region
    m = _painted(_person(0.3), limb_conf=0.1, shape=(140, 500))
    assert m[back_shin] and m[112, 86]  # the shin and the foot
    assert not m[60, 120]  # nothing else


def test_a_leg_placed_far_from_the_person_is_not_drawn():
    m = _painted(_person(0.3, far=True), limb_conf=0.1, shape=(140, 500))
    assert not m[:, 100:].any()


def test_the_default_visibility_leaves_the_old_mask_where_every_landmark_is_seen():
    a = _painted(_person(0.95), limb_conf=0.5, shape=(140, 500))
    b = _painted(_person(0.95), limb_conf=0.1, shape=(140, 500))
    assert np.array_equal(a, b) and a[100, 80]


def test_a_hand_held_out_beyond_the_segmentation_is_drawn_into_the_mask():
    """The right hand reaches out of the segmentation (wrist at x 58, fingers at x 72-76): the lines
    from the wrist to its pinky, index and thumb landmarks take it into the mask."""
    d = _person(0.95)
    d.kp2d[[16, 18, 20, 22]] = [(58, 60), (74, 57), (76, 61), (72, 66)]
    m = _painted(d, limb_conf=0.1, shape=(140, 500))
    assert m[61, 70] and m[64, 68]  # between the wrist and the index finger, and the thumb
    assert not m[61, 90]  # not past the fingers
