"""The tracker's identity check by body scale: a detection continues a track only if its body has
the track's size per metre (models/anonymizer/pose/people.py ``body_scale``,
``scale_fits``, models/anonymizer/pose/discover.py ``OnlineTracker.update``)."""

import numpy as np
import pytest

from anonymask.models.anonymizer.pose.discover import OnlineTracker
from anonymask.models.anonymizer.pose.people import Detection, PeopleDetector, body_scale
from anonymask.models.anonymizer.pose.settings import DiscoverSettings

# a standing body's world landmarks (metres, hip-centred, y down as in the image)
_JOINTS = {11: (-0.18, -0.5), 12: (0.18, -0.5), 13: (-0.22, -0.22), 14: (0.22, -0.22), 15: (-0.24, 0.02),
           16: (0.24, 0.02), 23: (-0.1, 0.0), 24: (0.1, 0.0), 25: (-0.11, 0.44), 26: (0.11, 0.44),
           27: (-0.12, 0.86), 28: (0.12, 0.86)}


def _body(scale: float, centre=(320.0, 240.0), angle: float = 0.0, seed: int = 0) -> Detection:
    """A detection whose 2-D landmarks are its world landmarks seen at ``scale`` px per metre,
    the whole body turned by ``angle`` radians in the image plane, with a pixel of landmark noise."""
    rng = np.random.default_rng(seed)
    world = np.zeros((33, 3), np.float32)
    for i, (x, y) in _JOINTS.items():
        world[i, :2] = (x, y)
    world[:, 2] = rng.normal(0, 0.1, 33)
    c, s = np.cos(angle), np.sin(angle)
    world[:, :2] = world[:, :2] @ np.array([[c, s], [-s, c]], np.float32)
    kp = (scale * world[:, :2] + np.asarray(centre, np.float32) + rng.normal(0, 1.0, (33, 2))).astype(np.float32)
    conf = np.zeros(33, np.float32)
    conf[list(_JOINTS)] = 1.0
    pts = kp[list(_JOINTS)]
    box = np.array([*pts.min(axis=0), *pts.max(axis=0)], np.float32)
    return Detection(box, kp, conf, world, np.ones((4, 4), np.float32), (0, 0, 4, 4), 1.0)


def _gate():
    """The gate switched on, its other settings production's."""
    return DiscoverSettings().scale_gate.model_copy(update={"enabled": True})


def _tracker(gate=None) -> OnlineTracker:
    s = DiscoverSettings()
    return OnlineTracker(10, s.match_iou, s.held_iou, s.same_bonus, s.same_tol, s.same, gate or _gate())


@pytest.mark.parametrize("angle", [0.0, np.pi / 2, 0.4])
def test_body_scale_is_pixels_per_metre_whatever_the_pose(angle):
    # standing, lying down, leaning: the box changes, the scale does not
    for scale in (80.0, 200.0):
        assert body_scale(_body(scale, angle=angle), 0.5) == pytest.approx(scale, rel=0.03)


def test_body_scale_needs_a_3d_pose_and_four_seen_landmarks():
    d = _body(100.0)
    d.world = np.zeros((33, 3), np.float32)  # a backend without world landmarks
    assert body_scale(d, 0.5) is None
    d = _body(100.0)
    d.conf[[11, 12, 13, 14, 15, 16, 23, 24, 25]] = 0.2  # three landmarks seen
    assert body_scale(d, 0.5) is None


def test_a_body_of_another_scale_over_a_followed_person_does_not_continue_their_track():
    """A region that slid onto an object draws a body there whose box overlaps the person's: it is
    refused and starts its own track; the person at their own scale continues theirs."""
    tr = _tracker()
    for t in range(5):
        assert tr.update(t, [_body(130.0, (200.0 + 2 * t, 220.0), seed=t)]) == [0]
    other = _body(230.0, (215.0, 215.0), seed=9)  # larger per metre, overlapping the walker's box
    assert tr.update(5, [other]) == [1]
    assert tr.refused_scale == 1
    tr = _tracker()
    for t in range(5):
        tr.update(t, [_body(130.0, (200.0 + 2 * t, 220.0), seed=t)])
    assert tr.update(5, [_body(140.0, (212.0, 220.0), seed=9)]) == [0]  # them, a little closer
    assert tr.refused_scale == 0


def test_off_by_default_and_off_links_by_boxes_alone():
    """Production leaves the gate off (docs/RESULTS.md: on the 60-s clip it doubles the tracks);
    off, the body of another scale over the walker continues his track, as before the gate."""
    assert not DiscoverSettings().scale_gate.enabled
    tr = _tracker(DiscoverSettings().scale_gate)
    for t in range(5):
        tr.update(t, [_body(130.0, (200.0 + 2 * t, 220.0), seed=t)])
    assert tr.update(5, [_body(230.0, (215.0, 215.0), seed=9)]) == [0]
    assert tr.refused_scale == 0


def test_the_scale_may_change_more_the_longer_a_track_went_unseen():
    """Unseen for a while, a person may have walked towards the camera: the bound grows by
    ``per_frame`` each frame (1.3 x 1.03 ** 10 = 1.75 after 10 frames)."""
    g = _gate()
    for gap, expect in ((1, [1]), (10, [0])):
        tr = _tracker()
        for t in range(5):
            tr.update(t, [_body(100.0, (200.0, 220.0), seed=t)])
        ratio = 1.6
        assert (ratio <= g.ratio * (1 + g.per_frame) ** gap) == (expect == [0])
        assert tr.update(4 + gap, [_body(100.0 * ratio, (200.0, 220.0), seed=7)]) == expect


def test_a_real_walker_keeps_their_scale_from_frame_to_frame(pose2sim_frames):
    """On real footage the estimate is steady enough for the gate: the man of Pose2Sim's lab view,
    found by the detector in each frame, stays within the gate's one-frame ratio of his first
    frame, and the gate lets every one of his detections continue his track."""
    frames = pose2sim_frames()
    det = PeopleDetector()
    tr = _tracker()
    scales, ids = [], []
    for t, f in enumerate(frames):
        man = max(det.detect(f), key=lambda d: d.box[0])
        scales.append(body_scale(man, 0.5))
        ids += tr.update(t, [man])
    assert all(s is not None for s in scales)
    assert max(scales) / min(scales) < _gate().ratio
    assert set(ids) == {0} and tr.refused_scale == 0


def test_the_study_script_reports_the_links_the_gate_refuses():
    """scripts/scale_gate_study.py, on recorded sightings: a walker followed for 6 frames, then a
    detection at 1.7x his scale continues the track (as with the gate off) and one at his own scale
    after it; the study reports the first as refused, not the second, and the one-frame spread."""
    import runpy
    from pathlib import Path

    mod = runpy.run_path(str(Path(__file__).resolve().parents[3] / "scripts" / "scale_gate_study.py"))
    frames = {t: _body(130.0, (200.0 + 2 * t, 220.0), seed=t) for t in range(6)}
    for d in frames.values():
        d.source = "track"
    frames[6] = _body(221.0, (212.0, 220.0), seed=6)
    frames[7] = _body(131.0, (214.0, 220.0), seed=7)
    frames[7].source = "scan"
    steps, refused = mod["study"]({0: frames}, _gate(), 0.5)
    assert [(tid, t, src) for tid, t, src, _, _ in refused] == [(0, 6, "frame")]
    assert refused[0][4] == pytest.approx(1.7, rel=0.05)
    assert len(steps) == 5 and max(steps) < 1.05
