"""The scan does not repeat a look on unchanged pixels that saw nobody, and always repeats one that
found someone (a person lost later must be found there again)."""

import numpy as np
import pytest


def _scanner(**kw):
    from anonymask.models.anonymizer.pose.scan import PersonEvidence, PoseScanner
    from anonymask.models.anonymizer.pose.settings import EvidenceSettings, SamePersonSettings, ScanSettings

    return PoseScanner(None, ScanSettings(rotate=1, **kw), PersonEvidence(EvidenceSettings()), SamePersonSettings())


def _at_phase0(sc, frame, known=()):
    """One scan of ``frame`` on the first grid phase (scans of a small blank frame take the grid
    round to it; another frame size shares nothing with this one). Returns (found, calls made)."""
    from anonymask.models.anonymizer.pose.scan import GRID_PHASES

    blank = np.full((64, 64, 3), 127, np.uint8)
    while sc.scans % GRID_PHASES:
        sc.scan(blank)
    before = sc.calls
    found = sc.scan(frame, list(known))
    return found, sc.calls - before


@pytest.fixture(scope="module")
def still():
    return np.random.default_rng(0).integers(0, 255, (120, 160, 3), np.uint8)


def test_a_still_empty_region_is_looked_at_once_per_phase_until_it_changes(still):
    sc = _scanner(sides=(0.7,))
    _, first = _at_phase0(sc, still)
    assert first > 0
    noisy = (still.astype(int) + np.random.default_rng(1).integers(-6, 7, still.shape)).clip(0, 255).astype(np.uint8)
    _, again = _at_phase0(sc, noisy)  # sensor noise is no change
    assert again == 0 and sc.unchanged_skipped > 0
    moved = noisy.copy()
    moved[10:60, 10:60] = 255 - moved[10:60, 10:60]
    _, after_change = _at_phase0(sc, moved)
    assert 0 < after_change < first  # only the regions over the change are looked at again
    every = _scanner(sides=(0.7,), skip_unchanged=False)
    _, a = _at_phase0(every, still)
    _, b = _at_phase0(every, noisy)
    assert a == b == first and every.unchanged_skipped == 0


def test_a_look_that_found_someone_is_repeated_also_after_they_were_known(pose2sim_frames):
    """Pose2Sim's masked bystander (the face-keyed detector never finds her, only the scan does):
    found on the first scan, found again on the next scan of that grid on the same pixels, not
    reported while she is known, and found again once she is not (her track lost)."""
    f = pose2sim_frames()[0]
    sc = _scanner()

    def bystander(found):
        return [d for d in found if d.box[0] > 0.6 * f.shape[1] and d.box[3] < 0.55 * f.shape[0]]

    first, calls0 = _at_phase0(sc, f)
    assert bystander(first)
    again, calls1 = _at_phase0(sc, f)
    assert bystander(again)
    assert calls1 < 0.8 * calls0 and sc.unchanged_skipped > 0  # the empty regions were not looked at again
    # known, with her box shrunk to a point: no region is skipped for lying inside it, so the
    # regions that see her stop at "someone already found" (which depends on who is known)
    from anonymask.models.anonymizer.pose.people import Detection

    d = bystander(again)[0]
    cx, cy = float(d.box[0] + d.box[2]) / 2, float(d.box[1] + d.box[3]) / 2
    point = Detection(np.array([cx, cy, cx + 1, cy + 1], np.float32), d.kp2d, d.conf, d.world, d.mask, d.region,
                      d.score, d.source)
    known, _ = _at_phase0(sc, f, known=[point])
    assert not bystander(known)
    back, _ = _at_phase0(sc, f)
    assert bystander(back)
