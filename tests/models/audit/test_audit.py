"""The self-audit on real frames: people left visible are found; people under avatars are not."""

import numpy as np

from anonymask.models.audit import audit_frames, available_auditors, get_auditor


def test_registry():
    assert {"face", "hog"} <= set(available_auditors())


def test_real_people_fail_the_audit_and_avatar_pixels_pass_it(pose2sim_frames):
    fr = pose2sim_frames(n=4)
    auditors = [get_auditor("face"), get_auditor("hog")]
    none = np.zeros(fr.shape[:3], bool)
    rep = audit_frames(((t, f, none[t]) for t, f in enumerate(fr)), auditors)
    assert not rep.passed and any(f.kind == "body" for f in rep.findings)
    assert "frames 0,1,2,3" in rep.summary() or "frames" in rep.summary()
    # the same frames where every pixel is an avatar: whatever is detected is on avatars
    allsyn = np.ones(fr.shape[:3], bool)
    rep2 = audit_frames(((t, f, allsyn[t]) for t, f in enumerate(fr)), auditors)
    assert rep2.passed and rep2.on_avatars == rep2.detections > 0


def test_a_single_frame_detection_is_not_a_finding(pose2sim_frames):
    fr = pose2sim_frames(n=4)
    none = np.zeros(fr.shape[1:3], bool)
    rep = audit_frames([(0, fr[0], none)] + [(t, np.zeros_like(fr[0]), none) for t in (1, 2, 3)], [get_auditor("hog")],
                       min_frames={"body": 2})
    assert rep.passed and rep.detections > 0
