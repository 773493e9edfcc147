"""Replace, never erase: a person removed without an avatar fails the audit, with the frames."""

import numpy as np

from anonymask.models.anonymizer.audit import AuditReport
from anonymask.models.anonymizer.audit.erased import scan_erased
from anonymask.storage.store import DatasetStore


def _chunks(hole, avatar, size=3):
    for t0 in range(0, len(hole), size):
        yield t0, hole[t0 : t0 + size], avatar[t0 : t0 + size]


def test_a_hole_without_an_avatar_is_an_erased_person_in_those_frames(tiny_anonymized):
    """Real masks of the tiny anonymized set: as made, every hole region carries its avatar; with
    the avatar taken away in frames 2 and 5 the person there is erased, named by frame and place."""
    e = DatasetStore.open(tiny_anonymized, "r").video(DatasetStore.open(tiny_anonymized, "r").video_ids()[0])
    hole, avatar = e.read("person_hole").astype(bool), e.read("render/mask").astype(bool)
    assert hole.any() and avatar.any()
    scan = scan_erased(_chunks(hole, avatar))
    assert scan.finding(0.5) is None
    cut = avatar.copy()
    cut[[2, 5]] = False
    scan = scan_erased(_chunks(hole, cut))
    f = scan.finding(0.5)
    assert f is not None and f.kind == "erased" and f.frames == [2, 5]
    ys, xs = np.nonzero(hole[2])
    assert f.box[0] <= xs.min() and f.box[2] >= xs.max() and f.box[1] <= ys.min() and f.box[3] >= ys.max()
    text = AuditReport(findings=[f]).summary()
    assert "person erased" in text and "frames 2,5" in text
    assert f"x={f.box[0]:.0f}..{f.box[2]:.0f}, y={f.box[1]:.0f}..{f.box[3]:.0f}" in text


def test_a_sliver_without_an_avatar_is_not_a_person():
    """A small uncovered region (someone entering behind a tree, a mask fringe) is measured, not failed."""
    hole = np.zeros((4, 60, 80), bool)
    avatar = np.zeros_like(hole)
    hole[:, 10:50, 10:30] = True  # the person, with an avatar on it
    avatar[:, 12:48, 12:28] = True
    hole[1, 10:18, 60:66] = True  # a sliver of someone else, no avatar: 48 px of 800
    scan = scan_erased(_chunks(hole, avatar))
    assert scan.finding(0.5) is None
    assert 0.05 < scan.largest() < 0.1
    assert scan.finding(0.05).frames == [1]
