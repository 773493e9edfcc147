"""Followed backwards, a person who walked in through a border stays on it until they are gone:
a region that moves inwards from there slid onto what stands beside the border
(models/anonymizer/pose/discover.py ``left_entry_border``)."""

import numpy as np
import pytest

from anonymask.models.anonymizer.pose.discover import _Track, entry_sides, left_entry_border

HW = (192, 256)
EDGE = 0.03


def _track(boxes: dict[int, list[float]]) -> _Track:
    from anonymask.models.anonymizer.pose.people import Detection

    tr = _Track(0)
    for t, b in sorted(boxes.items()):
        tr.add(t, Detection(np.array(b, np.float32), np.zeros((33, 2)), np.zeros(33), np.zeros((33, 3)),
                            np.zeros((0, 0), np.float32), (0, 0, 1, 1), 1.0, "track"))
    return tr


def test_the_sides_are_those_the_person_moves_away_from():
    walks_left = _track({t: [200 - 8 * t, 50, 256 - 8 * t, 190] for t in range(10, 16)})
    assert list(entry_sides(walks_left, 10, 5)) == [False, False, True, False]  # came from the right
    walks_right = _track({t: [8 * t, 50, 40 + 8 * t, 190] for t in range(10, 16)})
    assert list(entry_sides(walks_right, 10, 5)) == [True, False, False, False]
    alone = _track({10: [0, 0, 10, 10]})
    assert not entry_sides(alone, 10, 5).any()


def test_leaving_the_entry_border_inwards_ends_the_follow_and_nothing_else_does():
    right = np.array([False, False, True, False])
    at_border = np.array([219, 51, 256, 192.0])
    slid = np.array([158, 50, 248, 153.0])  # the region moved inwards onto the motorcycle beside her
    assert left_entry_border(slid, at_border, right, HW, EDGE)
    assert not left_entry_border(np.array([226, 52, 256, 190.0]), at_border, right, HW, EDGE)  # still on it
    assert not left_entry_border(np.array([252, 51, 255, 192.0]), at_border, right, HW, EDGE)  # within edge
    # someone who walked out through the right border (moving towards it): inwards backwards is
    # where they came from
    assert not left_entry_border(slid, at_border, np.array([True, False, False, False]), HW, EDGE)
    # a later box away from every border: nothing to leave
    assert not left_entry_border(slid, np.array([100, 50, 160, 150.0]), right, HW, EDGE)


@pytest.mark.slow
def test_a_walker_coming_in_is_not_followed_back_onto_the_motorcycle(tmp_path, monkeypatch):
    """The generator's enter-and-leave case, mirrored and dimmed as scripts/footage_variants.py
    does it and brightened as pose4d does: followed backwards from where she is first found, the
    walker's region slides off the border onto the motorcycle (checked by turning the rule off);
    with the rule her backwards follow stays on the border."""
    import anonymask.models.anonymizer.pose.discover as discover
    from anonymask.models.anonymizer.pose.exposure import gain_table, shot_gain
    from anonymask.models.anonymizer.pose.people import get_detector
    from anonymask.models.anonymizer.pose.settings import MediapipePoseSettings
    from anonymask.models.shared.synthetic.hard import generate_hard_cases
    from anonymask.storage.video_io import read_frames, write_mp4

    root = generate_hard_cases(tmp_path / "hard", cases=("enter_leave",))
    f = np.asarray(read_frames(root / "videos" / "hard_enter_leave.mp4"))
    dim = np.clip(np.rint(255.0 * 0.55 * (f[:, :, ::-1].astype(np.float32) / 255.0) ** 1.6), 0, 255).astype(np.uint8)
    write_mp4(tmp_path / "v.mp4", np.ascontiguousarray(dim), 15.0, crf=16, preset="medium", options={"threads": "1"})
    frames = np.asarray(read_frames(tmp_path / "v.mp4"))
    s = MediapipePoseSettings()
    frames = gain_table(shot_gain(frames, s.exposure))[frames]
    w = frames.shape[2]

    def followed_back() -> list[np.ndarray]:
        disc = discover.PersonDiscovery(get_detector("mediapipe"), s.discover, s.scan, s.evidence,
                                        max_gap=s.max_gap, t_len=len(frames), scanner=None)
        for x in frames:
            disc.push(x)
        out = {}
        for _t, d, tid in disc.backfill(lambda a, b: frames[a:b], len(frames)):
            out.setdefault(tid, []).append(d.box.copy())
        # the walker: the track followed back from the right border
        walker = [boxes for boxes in out.values() if boxes[0][2] >= (1 - s.discover.edge) * w]
        assert walker, out
        return walker[0]

    kept = followed_back()
    assert all(b[2] >= (1 - s.discover.edge) * w for b in kept), kept
    monkeypatch.setattr(discover, "left_entry_border", lambda *a: False)
    slid = followed_back()
    assert any(b[2] < (1 - s.discover.edge) * w for b in slid), "the case no longer slides: it tests nothing"
