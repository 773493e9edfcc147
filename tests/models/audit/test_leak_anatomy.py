"""Where leaked person pixels come from (models/anonymizer/audit/leak_anatomy.py)."""

from __future__ import annotations

import numpy as np
import pytest

from anonymask.models.anonymizer.audit.ground_truth import gt_leak
from anonymask.models.anonymizer.audit.leak_anatomy import LeakAnatomy, distance_bin, joint_group
from anonymask.models.shared.body.tracks import JOINT_NAMES


def _chunk():
    """One 20x20 frame: a 10x10 person (grey 200 on black); the hole holds its columns 5-9, the
    fill shows the person on 10 of those pixels (4 of them a fill the person did not cause); the
    avatar covers columns 10-11; columns 12-14 are shown as they were."""
    raw = np.zeros((1, 20, 20, 3), np.uint8)
    raw[0, 5:15, 5:15] = 200
    person = np.zeros((1, 20, 20), bool)
    person[0, 5:15, 5:15] = True
    hole = np.zeros_like(person)
    hole[0, :, 5:10] = True
    avatar = np.zeros_like(person)
    avatar[0, 5:15, 10:12] = True
    out = raw.copy()
    out[hole] = 0
    out[0, 5:15, 5] = 200  # the fill reproduces the person on one column of the hole
    excused = np.zeros_like(person)
    excused[0, 5:9, 5] = True
    bg = np.zeros((20, 20, 3), np.uint8)
    joints = np.full((1, 1, 52, 2), np.nan, np.float32)
    joints[0, 0, JOINT_NAMES.index("right_wrist")] = (14, 10)
    joints[0, 0, JOINT_NAMES.index("head")] = (10, -10)
    return raw, out, person, bg, avatar, excused, hole, joints


def test_the_leak_is_split_into_fill_and_unremoved_pixels_by_distance_and_part():
    raw, out, person, bg, avatar, excused, hole, joints = _chunk()
    a = LeakAnatomy(JOINT_NAMES)
    a.add_chunk(7, raw, out, person, bg, avatar, excused, hole, joints)
    assert a.person_px == 100
    assert a.in_hole == 6  # 10 shown by the fill, 4 of them excused
    assert a.outside == 30  # columns 12, 13, 14
    assert dict(a.by_distance) == {"1px": 10, "2px": 10, "3px": 10}
    assert a.by_joint["hand"] == 30
    assert a.per_frame == {7: 36} and a.worst_frames() == [(7, 36)]
    # the same share as the audit's own ground-truth check on the same chunk
    share, _, _ = gt_leak([(7, raw, out, person, bg, avatar, excused)], max_leak=1.0)
    assert a.share == pytest.approx(share) == pytest.approx(0.36)


def test_nothing_leaks_when_the_hole_and_avatar_cover_the_person():
    raw, out, person, bg, avatar, excused, hole, joints = _chunk()
    hole[:] = person & ~avatar
    out[hole] = 0
    a = LeakAnatomy(JOINT_NAMES)
    a.add_chunk(0, raw, out, person, bg, avatar, None, hole, None)
    assert a.leaked == 0 and a.person_px == 100 and not a.by_distance


def test_labels():
    assert [distance_bin(d) for d in (0.5, 1, 1.5, 3, 4, 8, 9)] == ["1px", "1px", "2px", "3px", "4-8px", "4-8px",
                                                                  ">8px"]
    assert [joint_group(n) for n in ("left_wrist", "right_thumb2", "left_ankle", "right_knee", "neck", "spine3")] == [
        "hand", "hand", "foot", "leg", "head", "torso"]
