"""scripts/clutter_cues/second_look.py (a study, docs/RESULTS.md "a second look"): the regions it
looks at, and on real footage a person is seen from most looks and an empty wall from none."""

import runpy
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "clutter_cues" / "second_look.py"


def _mod():
    return runpy.run_path(str(SCRIPT))  # its functions, without running main()


def test_the_looks_are_the_region_moved_scaled_and_turned():
    looks = _mod()["looks"]((100.0, 200.0, 50.0, 0.1))
    assert len(looks) == 12
    sides = sorted({round(r[2], 6) for r in looks})
    assert sides == [50.0, 65.0]
    centred = [r for r in looks if (r[0], r[1]) == (100.0, 200.0)]
    assert len(centred) == 4 and {round(r[3], 4) for r in centred} == {0.1, round(0.1 + np.radians(12), 4)}
    shifts = sorted(round(abs(r[0] - 100.0) + abs(r[1] - 200.0), 6) for r in looks if (r[0], r[1]) != (100.0, 200.0))
    assert shifts == [4.0] * 8  # 8% of the region's side, at either scale


def test_a_held_frame_is_looked_at_with_the_last_landmark_region_and_a_box_without_one_is_squared():
    sample_regions = _mod()["sample_regions"]
    track = {"boxes": [[0, 10, 20, 30, 60, "scan", [20.0, 40.0, 90.0, 0.0]],
                       [1, 10, 20, 30, 60, "hold", None],
                       [2, 10, 20, 30, 60, "hold", None]]}
    got = sample_regions(track, 3)
    assert [t for t, _, _ in got] == [0, 1, 2]
    assert all(own and roi == (20.0, 40.0, 90.0, 0.0) for _, roi, own in got)
    box_only = {"boxes": [[5, 10, 20, 30, 60, "frame"]]}  # an evidence file from before the region was written
    (t, roi, own), = sample_regions(box_only, 4)
    assert (t, own) == (5, False) and roi == (20.0, 40.0, 50.0, 0.0)  # centre, 1.25 x the longer side


def test_on_real_footage_a_person_is_seen_from_most_looks_and_a_bare_wall_from_none(pose2sim_frames):
    from anonymask.models.anonymizer.pose.people import get_detector
    from anonymask.models.anonymizer.pose.roi import RoiLandmarker, roi_from_landmarks

    mod = _mod()
    frame = pose2sim_frames("Demo_SinglePerson/videos/cam01.mp4", n=1)[0]
    people = get_detector("mediapipe").detect(frame)
    assert people
    lm = RoiLandmarker(min_flag=0.0)
    for d in people:
        roi = roi_from_landmarks(np.asarray(d.kp2d, np.float64), np.asarray(d.conf, np.float64), 0.5)
        assert roi is not None
        assert mod["seen_share"](frame, roi, lm, 0.5) >= 0.75
    h, w = frame.shape[:2]
    # the wardrobe's doors on the right, clear of every person found
    wall = (0.72 * w, 0.31 * h, 0.19 * h, 0.0)
    x0, x1 = wall[0] - wall[2] / 2, wall[0] + wall[2] / 2
    assert all(d.box[2] < x0 or d.box[0] > x1 for d in people)
    assert mod["seen_share"](frame, wall, lm, 0.5) <= 0.25
