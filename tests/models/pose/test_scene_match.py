"""The scene-match cue of the verification pass (models/anonymizer/pose/scene_match.py): a track whose
box shows the same pixels as that place with nobody found on it is clutter; a person who came in,
even one who then stands still, and a person who stands there the whole shot are kept.

Frames here are a textured scene with sensor noise (a new draw every frame), the people textures
of their own; tracks are discovery's records (``_Track`` of ``Detection``), verified by the entry
point pose4d calls (``verify_discovery``)."""

import dataclasses

import numpy as np
import pytest

from anonymask.models.anonymizer.pose.discover import PersonDiscovery, _Track
from anonymask.models.anonymizer.pose.people import Detection
from anonymask.models.anonymizer.pose.scene_match import scene_plan
from anonymask.models.anonymizer.pose.settings import SceneMatchSettings, VerifySettings
from anonymask.models.anonymizer.pose.verify import Reason, TrackEvidence, verify_discovery, verify_tracks

HW = (120, 160)
T = 80
CLUTTER = (100, 30, 130, 90)  # found at frame 30 on the unchanged scene
WALK_IN = (20, 30, 50, 90)  # a person who comes in at frame 30 and stands still from then on
STAYS = (60, 40, 84, 100)  # a person who stands still the whole shot


def _frames(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    scene = rng.integers(40, 200, (*HW, 3)).astype(np.float32)
    scene = (scene + np.roll(scene, 1, 0) + np.roll(scene, 1, 1)) / 3  # some texture, not white noise
    walker = rng.integers(0, 255, (60, 30, 3)).astype(np.float32)
    stays = rng.integers(0, 255, (60, 24, 3)).astype(np.float32)
    out = np.empty((T, *HW, 3), np.uint8)
    for t in range(T):
        f = scene.copy()
        if t >= 30:
            f[30:90, 20:50] = walker
        f[40:100, 60:84] = stays
        out[t] = np.clip(f + rng.normal(0, 1.5, f.shape), 0, 255).astype(np.uint8)
    return out


def _det(box) -> Detection:
    return Detection(np.asarray(box, np.float32), np.zeros((33, 2), np.float32), np.full(33, 0.9, np.float32),
                     np.zeros((33, 3), np.float32), np.zeros((0, 0), np.float32), (0, 0, 0, 0), 0.9, "track")


def _tracks() -> list[_Track]:
    tracks = [_Track(0), _Track(1), _Track(2)]
    for t in range(T):
        tracks[2].frames[t] = _det(STAYS)
        if t >= 30:
            tracks[0].frames[t] = _det(CLUTTER)
            tracks[1].frames[t] = _det(WALK_IN)
    return tracks


class _Discovery:
    def __init__(self, tracks):
        self.tracker = type("Tracker", (), {"tracks": tracks, "refused_scale": 0})()

    track_boxes = PersonDiscovery.track_boxes  # the real one: it reads tracker.tracks only


def _read(frames):
    return lambda a, b: frames[a:b]


def _settings(**scene) -> VerifySettings:
    # a 80-frame clip: judged from 40 frames (the other rules would keep everything: all "seen"); the
    # cue is opt-in
    return VerifySettings(min_life_frames=40, scene=SceneMatchSettings(**{"enabled": True, **scene}))


def _verify(frames, settings):
    tracks = _tracks()
    raw_boxes = _Discovery(tracks).track_boxes(T)
    return verify_discovery(tracks, HW, T, settings, raw_boxes, _read(frames) if frames is not None else None)


def test_clutter_on_the_unchanged_scene_is_rejected_and_both_people_are_kept():
    rejected, frames, scene = _verify(_frames(), _settings())
    assert rejected == {0} and frames == T - 30 and scene == 1


def test_each_track_reads_as_it_should():
    from anonymask.models.anonymizer.pose.verify import track_evidence, with_scene

    settings = _settings()
    tracks = _tracks()
    evidence = [track_evidence(tr, HW, T, settings) for tr in tracks]
    evidence = with_scene(evidence, _Discovery(tracks).track_boxes(T), _read(_frames()), settings)
    share = {ev.raw_id: (ev.scene_share, ev.scene_hits) for ev in evidence}
    assert share[0] == (1.0, 5)  # every sample of the clutter matches frames 0-29
    assert share[1] == (0.0, 0)  # where the walker stands, frames 0-29 show the scene, not them
    assert share[2] == (0.0, 0)  # no frame shows that place without them: no reference, no verdict
    assert [v.reason for v in verify_tracks(evidence, settings)] == [Reason.SCENE, Reason.SEEN, Reason.SEEN]


def test_without_frames_or_switched_off_nothing_changes():
    assert _verify(None, _settings()) == (set(), 0, 0)
    assert _verify(_frames(), _settings(enabled=False)) == (set(), 0, 0)
    # a threshold below the sensor noise: no sample matches any more
    assert _verify(_frames(), _settings(max_diff=0.5)) == (set(), 0, 0)


def test_a_reference_frame_is_free_of_every_track_the_sample_s_own_included():
    boxes = [np.full((T, 4), np.nan, np.float32) for _ in range(2)]
    boxes[0][40:] = CLUTTER
    boxes[1][:12] = (95, 25, 125, 85)  # someone over the clutter's place in frames 0-11
    plan = scene_plan(boxes, [0], SceneMatchSettings(every=10, ref_stride=2, refs=50))[0]
    assert [t for t, _ in plan.samples] == [40, 50, 60, 70]
    for refs in plan.refs:
        assert refs == list(range(12, 40, 2))  # not under the other track, not in its own life
    # a box touched by less than free_cover of another's is still free
    boxes[1][:12] = (128, 25, 140, 85)  # 2 of 30 px of width: 6.7%
    plan = scene_plan(boxes, [0], SceneMatchSettings(every=10, ref_stride=2, refs=50))[0]
    assert plan.refs[0][0] == 0


def test_the_rule_needs_enough_samples_and_a_large_enough_share():
    ev = TrackEvidence(raw_id=3, first=0, last=299, frames=300, followed=300, held=0, fresh=1, detector=1, refound=0,
                       motion=0.3, jitter=0.01, conf=0.8, bone_cv=0.05, height_frac=0.4, aspect=2.0)
    s = VerifySettings(scene=SceneMatchSettings(enabled=True))
    verdict = lambda **kw: verify_tracks([dataclasses.replace(ev, **kw)], s)[0]  # noqa: E731
    assert verdict(scene_share=1.0, scene_hits=30).reason == Reason.SCENE
    assert verdict(scene_share=1.0, scene_hits=s.scene.min_samples - 1).keep
    assert verdict(scene_share=s.scene.min_share - 0.01, scene_hits=27).keep  # partly a person: kept
    assert verdict().keep  # not measured (NaN)
    for off in (VerifySettings(scene=SceneMatchSettings(enabled=False)), VerifySettings()):  # off by default
        assert verify_tracks([dataclasses.replace(ev, scene_share=1.0, scene_hits=30)], off)[0].keep


@pytest.mark.slow
def test_real_footage_the_ceiling_camera_goes_and_the_person_stays():
    """Pose2Sim's Demo_Batch Trial_1 cam03 (a lab, 100 frames): the landmark model finds a body on a
    camera mounted at the ceiling from frame 64 on; the man walking on the treadmill is kept. (Discovery
    without its backfill pass, as scripts/track_evidence.py runs it: in pose4d the camera's track is
    held back to frame 0 over its unchanged pixels, and the cue then has no free frame.)"""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    import Pose2Sim

    video = Path(Pose2Sim.__file__).parent / "Demo_Batch" / "Trial_1" / "videos" / "cam03.mp4"
    out = Path(pytest.importorskip("tempfile").mkdtemp()) / "ev.json"
    subprocess.run([sys.executable, str(root / "scripts" / "track_evidence.py"), str(video), "--out", str(out),
                    "--verdicts", "--set", "verify.scene.enabled=true"], check=True, capture_output=True)
    rows = json.loads(out.read_text())["tracks"]
    reasons = {r["raw_id"]: r["verdict"]["reason"] for r in rows}
    person = max(rows, key=lambda r: r["frames"])
    assert reasons[person["raw_id"]] != "scene"
    assert any(r["verdict"]["reason"] == "scene" and r["box_first"][1] < 60 for r in rows), reasons


def test_the_cover_share_is_the_share_of_the_box_and_nan_covers_nothing():
    from anonymask.models.shared.geometry import box_cover_share

    box = np.array([0.0, 0.0, 10.0, 10.0])
    others = np.array([[5.0, 0.0, 20.0, 10.0], [20.0, 20.0, 30.0, 30.0], [np.nan] * 4, [-5.0, -5.0, 15.0, 15.0]])
    np.testing.assert_allclose(box_cover_share(box, others), [0.5, 0.0, 0.0, 1.0])
