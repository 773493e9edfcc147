"""A track that starts late is held back in place while its region looks as it did when it was
first found (models/anonymizer/pose/discover.py ``PersonDiscovery._held_back``): the scan finds a
still person only when a grid region happens to fit them, and the landmark model alone may not see
them in the frames before, so backfill's following stops at once and the frames before stayed
unremoved (the 60-s generated clip: a body the scan found at frame 86 on pixels identical since
frame 0, which the audit then found in frames 4-44)."""

import numpy as np

from anonymask.models.anonymizer.pose.discover import _Track
from anonymask.models.anonymizer.pose.people import Detection

BOX = (40, 10, 55, 50)  # where the still person stands (x0, y0, x1, y1)
ARRIVES, FOUND, T = 3, 6, 10  # they step in at frame 3; the detector finds them at frame 6 only


class _FoundOnce:
    """Finds the person (a full mask over BOX) on frame FOUND only."""

    def __init__(self):
        self.calls = 0

    def detect(self, frame):
        self.calls += 1
        if self.calls - 1 != FOUND:
            return []
        x0, y0, x1, y1 = BOX
        kp = np.zeros((33, 2), np.float32)
        kp[:, 0], kp[:, 1] = np.linspace(x0, x1, 33), np.linspace(y0, y1, 33)
        return [Detection(np.array(BOX, np.float32), kp, np.ones(33, np.float32), np.zeros((33, 3), np.float32),
                          np.ones((y1 - y0, x1 - x0), np.float32), BOX, 1.0)]

    def detect_region(self, frame, *a, **k):
        return []


class _Blind:
    """Region tracking that never sees a body (the landmark model on a person it cannot follow)."""

    def track(self, frame, roi, min_score=None):
        return None, None, 0.0


def _frames():
    rng = np.random.default_rng(0)
    bg = rng.integers(0, 150, (60, 100, 3), np.uint8)
    out = []
    for t in range(T):
        f = bg.copy()
        if t >= ARRIVES:
            f[BOX[1] : BOX[3], BOX[0] : BOX[2]] = (0, 200, 90)
        out.append(f)
    return np.stack(out)


def _held_back(discovery, frames, others=(), **changes):
    disc = discovery(_FoundOnce(), scan=False, roi_tracking=False, evidence=False, tiles=False, limbs=False,
                     detect_every=1, t_len=T, **changes)
    for f in frames:
        disc.push(f)
    (tr,) = disc.tracker.tracks
    assert min(tr.frames) == FOUND
    for t, box in others:  # someone else found in frame t (a track of their own)
        o = _Track(len(disc.tracker.tracks))
        o.add(t, Detection(np.array(box, np.float32), np.zeros((33, 2), np.float32), np.zeros(33, np.float32),
                           np.zeros((33, 3), np.float32), np.zeros((0, 0), np.float32), (0, 0, 0, 0), 1.0, "track"))
        disc.tracker.tracks.append(o)
    disc.roi = _Blind()  # backfill follows with the landmark model first; here it sees nothing
    got = [(t, d.source, d.mask.size > 0) for t, d, tid in disc.backfill(lambda a, b: frames[a:b], T) if tid == tr.tid]
    return disc, tr, got


def test_a_still_person_found_late_is_held_back_to_where_their_region_changed(discovery):
    frames = _frames()
    disc, tr, got = _held_back(discovery, frames)
    # painted (a mask) in every frame since they stepped in, not before
    assert got == [(t, "hold", True) for t in range(FOUND - 1, ARRIVES - 1, -1)]
    assert sorted(tr.frames) == list(range(ARRIVES, T))
    assert disc.sources["back_hold"] == FOUND - ARRIVES
    # off: the frames before the first find stay as they were
    _, tr_off, got_off = _held_back(discovery, frames, backfill_hold=False)
    assert got_off == [] and min(tr_off.frames) == FOUND


def test_a_region_that_changed_beyond_the_hold_tolerance_ends_the_hold_back(discovery):
    frames = _frames()
    frames[4, BOX[1] : BOX[3], BOX[0] : BOX[2]] = (0, 200 - 40, 90)  # 40 grey levels: they moved there
    _, _, got = _held_back(discovery, frames)
    assert [t for t, _, _ in got] == [5]
    # a change within hold_tol (a still person sways) does not end it
    frames = _frames()
    frames[4, BOX[1] : BOX[3], BOX[0] : BOX[2]] = (0, 200 - 6, 90)
    _, _, got = _held_back(discovery, frames)
    assert [t for t, _, _ in got] == [5, 4, 3]


def test_someone_in_front_of_the_region_ends_the_hold_back_only_when_too_little_is_in_view(discovery):
    """Pixels inside another person's box are not compared; when less than ``hold_visible`` of the
    region is left in view, nothing says the still person is still there."""
    frames = _frames()
    x0, y0, x1, y1 = BOX
    # frame 4: someone covers the top 80% of the region (and changes its pixels there)
    frames[4, y0 : y0 + 32, x0:x1] = (250, 250, 250)
    _, _, got = _held_back(discovery, frames, others=[(4, (x0 - 2, y0 - 2, x1 + 2, y0 + 32))])
    assert [t for t, _, _ in got] == [5]
    # the same passer-by covering only the top quarter: the rest is in view and unchanged
    frames = _frames()
    frames[4, y0 : y0 + 10, x0:x1] = (250, 250, 250)
    _, _, got = _held_back(discovery, frames, others=[(4, (x0 - 2, y0 - 2, x1 + 2, y0 + 10))])
    assert [t for t, _, _ in got] == [5, 4, 3]
