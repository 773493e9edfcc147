"""scripts/verify_evidence.py's ground-truth share: which sampled boxes of a track show a person."""

import runpy
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "verify_evidence.py"


def test_person_share_counts_the_sampled_boxes_that_hold_a_person():
    mod = runpy.run_path(str(SCRIPT))  # its functions, without running main()
    gt = np.zeros((20, 40, 60), bool)
    gt[:10, 10:30, 5:15] = True  # a person at the left for the first 10 frames
    on_person = [[t, 4.0, 8.0, 16.0, 32.0] for t in range(20)]  # a box around where they stood
    assert mod["person_share"](on_person, gt) == 0.5  # frames 0 and 5 of 0, 5, 10, 15
    elsewhere = [[t, 40.0, 0.0, 60.0, 40.0] for t in range(20)]
    assert mod["person_share"](elsewhere, gt) == 0.0
    assert np.isnan(mod["person_share"]([], gt))
    # a box mostly background: under PERSON_COVER of person pixels is not a person
    wide = [[0, 0.0, 0.0, 60.0, 40.0]]
    assert gt[0].mean() < mod["PERSON_COVER"] and mod["person_share"](wide, gt) == 0.0
