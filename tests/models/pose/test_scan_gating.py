"""The scan after its first pass looks where the picture changed, and still everywhere in time."""

import numpy as np
import pytest


@pytest.fixture(scope="module")
def still():
    rng = np.random.default_rng(0)
    return rng.integers(0, 255, (240, 320, 3), np.uint8)


def _scanner(rotate: int):
    from anonymask.models.anonymizer.pose.scan import PoseScanner
    from anonymask.models.anonymizer.pose.settings import SamePersonSettings, ScanSettings

    return PoseScanner(None, ScanSettings(rotate=rotate), None, SamePersonSettings())


def test_changed_cells_are_those_over_the_pixels_that_changed(still):
    from anonymask.models.anonymizer.pose.scan import _changed_cells, _small_grey

    sc = _scanner(2)
    cells = sc.grid(*still.shape[:2])
    noisy = (still.astype(int) + np.random.default_rng(1).integers(-8, 9, still.shape)).clip(0, 255).astype(np.uint8)
    assert not any(_changed_cells(_small_grey(noisy), _small_grey(still), cells, 12.0, 0.002))  # sensor noise
    moved = still.copy()
    moved[100:140, 200:230] = 255 - moved[100:140, 200:230]  # someone came into this box
    got = _changed_cells(_small_grey(moved), _small_grey(still), cells, 12.0, 0.002)
    for (cx, cy, side), c in zip(cells, got):
        overlap = (min(cx + side / 2, 230) - max(cx - side / 2, 200) > 4) and (min(cy + side / 2, 140) - max(cy - side / 2, 100) > 4)
        apart = (cx + side / 2 < 196 or cx - side / 2 > 234 or cy + side / 2 < 96 or cy - side / 2 > 144)
        assert c if overlap else (not c if apart else True), (cx, cy, side)
    assert any(got) and not all(got)


def test_a_still_scene_is_looked_at_everywhere_within_phases_x_rotate_scans(still):
    from anonymask.models.anonymizer.pose.scan import GRID_PHASES

    sc, every = _scanner(2), _scanner(1)
    h, w = still.shape[:2]
    first = sc.cells(still)
    assert first == every.cells(still)  # the first scan looks at the whole grid
    seen = {(0, c) for c in first}
    sizes = []
    for k in range(1, GRID_PHASES * 2 + 1):
        cells = sc.cells(still)
        sizes.append(len(cells) / len(sc.grid(h, w, k)))
        seen |= {(k % GRID_PHASES, c) for c in cells}
    want = {(p, c) for p in range(GRID_PHASES) for c in sc.grid(h, w, p)}
    assert want <= seen
    assert max(sizes) <= 0.55 and sc.skipped > 0  # about half of each later grid is skipped


def test_a_change_or_a_full_scan_brings_the_regions_back(still):
    sc = _scanner(4)
    h, w = still.shape[:2]
    sc.cells(still)
    assert len(sc.cells(still)) < len(sc.grid(h, w, 1))
    moved = still.copy()
    moved[100:140, 200:230] = 0
    cells = sc.cells(moved)
    over = [c for c in sc.grid(h, w, 2) if abs(c[0] - 215) < c[2] / 2 - 6 and abs(c[1] - 120) < c[2] / 2 - 6]
    assert over and all(c in cells for c in over)
    assert sc.cells(moved, full=True) == sc.grid(h, w, 3)


def test_the_stability_check_stops_once_too_few_shifted_regions_can_keep_the_flag(still):
    """Three of the four shifted regions must keep the flag: after two without it the answer is no,
    and the last looks are not made (the same verdict as looking at all four, fewer calls)."""
    from anonymask.models.anonymizer.pose.people import Detection
    from anonymask.models.anonymizer.pose.scan import STABLE_MIN_KEPT, STABLE_SHIFTS

    sc = _scanner(1)
    d = Detection(np.array([100, 60, 140, 180], np.float32), np.zeros((33, 2), np.float32), np.ones(33, np.float32),
                  np.zeros((33, 3), np.float32), np.zeros((0, 0), np.float32), (0, 0, 0, 0), 0.9, "scan")
    roi = (160.0, 120.0, 140.0, 0.0)
    flags = [sc.roi.track(still, (roi[0] + dx * sc.anchor_shift * roi[2], roi[1] + dy * sc.anchor_shift * roi[2],
                                  roi[2], 0.0), min_score=0.0)[2] for dx, dy in STABLE_SHIFTS]
    assert sum(f >= sc.first_flag for f in flags) < STABLE_MIN_KEPT  # noise: the model sees no body
    calls = sc.calls
    assert sc._stable(still, roi, d) is False
    assert sc.calls - calls == len(STABLE_SHIFTS) - STABLE_MIN_KEPT + 1  # two looks, not four
