"""The hands' margin (models/anonymizer/segment/hands.py ``hand_discs``) and its setting."""

from __future__ import annotations

import math

import numpy as np
import pytest

from anonymask.config.stages import SettingsError, validate_stage
from anonymask.models.anonymizer.segment.hands import hand_discs
from anonymask.tasks.segment import WRISTS


def _joints(n: int = 1, people: int = 1, wrists=((30.0, 40.0), (80.0, 60.0))) -> np.ndarray:
    j = np.full((n, people, 52, 2), np.nan, np.float32)
    for w, xy in zip(WRISTS, wrists):
        j[:, :, w] = xy
    return j


def test_a_disc_of_a_hands_length_goes_around_each_wrist():
    heights = np.array([[100.0]])  # r = ceil(0.1 * 100) = 10
    d = hand_discs((1, 120, 140), _joints(), WRISTS, heights, np.ones((1, 1), bool), 0.1)[0]
    assert d[40, 30] and d[40, 30 + 10] and not d[40, 30 + 11]
    assert d[60, 80] and d[60 - 10, 80] and not d[60 - 11, 80]
    assert d.sum() == pytest.approx(2 * math.pi * 10**2, rel=0.1)
    # the radius follows the person's size, rounded up (a margin never rounds down)
    d = hand_discs((1, 120, 140), _joints(), WRISTS, np.array([[41.0]]), np.ones((1, 1), bool), 0.1)[0]
    assert d[40, 30 + 5] and not d[40, 30 + 6]


def test_no_disc_where_the_person_is_absent_or_unknown():
    shape = (3, 120, 140)
    joints = _joints(3, 2)
    joints[1, 0] = np.nan  # no avatar joints in frame 1
    heights = np.array([[100.0, np.nan], [100.0, 100.0], [100.0, 100.0]])
    present = np.array([[True, True], [True, False], [False, False]])
    d = hand_discs(shape, joints, WRISTS, heights, present, 0.1)
    assert d[0].any()  # person 0 (person 1's height is unknown)
    assert not d[1].any()  # person 0 has no joints, person 1 is not there
    assert not d[2].any()
    assert not hand_discs(shape, joints, WRISTS, heights, np.ones((3, 2), bool), 0.0).any()  # off


def test_a_wrist_outside_the_frame_still_reaches_in():
    j = _joints(wrists=((-5.0, 40.0), (500.0, 60.0)))
    d = hand_discs((1, 120, 140), j, WRISTS, np.array([[100.0]]), np.ones((1, 1), bool), 0.1)[0]
    assert d[40, 0] and d[40, 4] and not d[40, 6]  # 5 px beyond the left edge, radius 10
    assert not d[:, 100:].any()  # far outside: nothing


def test_the_setting_is_validated():
    assert validate_stage("segment", {})["hand_frac"] == 0.1
    assert validate_stage("segment", {"hand_frac": 0})["hand_frac"] == 0
    with pytest.raises(SettingsError):
        validate_stage("segment", {"hand_frac": -0.1})
