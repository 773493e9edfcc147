"""The second detector's confirmations (models/anonymizer/pose/second_detector.py): which stretches of a
track are dropped, how a track is split around them, and the samples the real YOLO11n-pose confirms
on real footage."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from anonymask.models.anonymizer.pose.discover import new_track
from anonymask.models.anonymizer.pose.second_detector import (
    OWN,
    PART,
    UNSEEN,
    claim_boxes,
    claims,
    confirms,
    crop_verdict,
    needs_crop,
    part_spans,
    sample_confirmations,
    split_runs,
    split_unconfirmed,
    unconfirmed_spans,
)
from anonymask.models.anonymizer.pose.settings import SecondDetectorSettings
from anonymask.models.anonymizer.pose.yolo import YoloPersons

ON = SecondDetectorSettings(backend="yolo11n-pose")


def test_a_long_unconfirmed_run_is_dropped_a_short_one_kept():
    # a phantom from frame 12 that a person walks into at frame 700 (samples every 10th frame)
    samples = [(t, t >= 700) for t in range(20, 1500, 10)]
    assert unconfirmed_spans(samples, 12, 1499, 125) == [(12, 690)]  # reaches back to the track's first frame
    # a person missed for 4 s in the middle: kept; for 10 s: dropped, between the samples that missed
    short = [(t, not (300 <= t < 400)) for t in range(0, 1000, 5)]
    assert unconfirmed_spans(short, 0, 999, 125) == []
    long = [(t, not (300 <= t < 550)) for t in range(0, 1000, 5)]
    assert unconfirmed_spans(long, 0, 999, 125) == [(300, 545)]
    # a track never confirmed, over its whole life; and one confirmed throughout
    assert unconfirmed_spans([(t, False) for t in range(5, 300, 5)], 3, 301, 125) == [(3, 301)]
    assert unconfirmed_spans([(t, True) for t in range(5, 300, 5)], 3, 301, 125) == []


def test_runs_cut_a_track_in_frame_order():
    assert split_runs([0, 1, 2, 5, 6, 9], [(2, 6)]) == [([0, 1], False), ([2, 5, 6], True), ([9], False)]
    assert split_runs([0, 1], []) == [([0, 1], False)]


def _track(tid, frames):
    tr = new_track(tid)
    for t in frames:
        tr.frames[t] = SimpleNamespace(box=np.array([10.0, 10.0, 50.0, 120.0]), source="track")
    return tr


def test_a_split_keeps_the_first_run_and_gives_later_runs_new_ids():
    tracks = [_track(0, range(0, 300)), _track(1, range(0, 300))]
    # track 0: confirmed, then 150 frames of nobody, then confirmed again; track 1: always confirmed
    samples = {0: [(t, not (100 <= t < 250)) for t in range(0, 300, 5)], 1: [(t, True) for t in range(0, 300, 5)]}
    moved = []
    dropped, frames = split_unconfirmed(tracks, new_track, samples, 125, lambda t, a, b: moved.append((t, a, b)))
    assert [tr.tid for tr in tracks] == [0, 1, 2, 3]
    assert sorted(tracks[0].frames) == list(range(0, 100))  # the first run keeps the id
    # the samples moved with their frames: keyed by the ids after the split
    assert [t for t, _ in samples[0]] == list(range(0, 100, 5)) and [t for t, _ in samples[3]] == list(range(250, 300, 5))
    assert sorted(tracks[2].frames) == list(range(100, 246))  # the dropped run: 100 .. the last miss (245)
    assert sorted(tracks[3].frames) == list(range(246, 300))  # the person again: a raw track of its own
    assert dropped == {2} and frames == 146
    assert len(tracks[1].frames) == 300  # untouched
    # every moved frame's pixels follow it to its new id, and no other frame is touched
    assert moved == [(t, 0, 2) for t in range(100, 246)] + [(t, 0, 3) for t in range(246, 300)]


def test_a_track_dropped_from_its_start_loses_its_own_id():
    tracks = [_track(0, range(0, 400))]
    samples = {0: [(t, t >= 200) for t in range(0, 400, 5)]}
    dropped, _ = split_unconfirmed(tracks, new_track, samples, 125, None)
    # dropped up to its last miss (frame 195): the frames after it may already show the person
    assert dropped == {0} and sorted(tracks[1].frames) == list(range(196, 400))


def test_a_box_is_confirmed_by_overlap_or_as_part_of_a_body():
    person = np.array([[100.0, 50.0, 200.0, 350.0, 0.9]])
    assert confirms([105, 55, 195, 340], person, ON)
    assert confirms([110, 55, 190, 200], person, ON)  # the upper body inside the whole body's box
    assert not confirms([300, 50, 400, 350], person, ON)  # elsewhere
    assert not confirms([140, 150, 160, 170], person, ON)  # a speck inside it is not the body
    weak = person.copy()
    weak[0, 4] = 0.1
    assert not confirms([105, 55, 195, 340], weak, ON)
    assert needs_crop([0, 0, 10, 40], (360, 640), ON) and not needs_crop([0, 0, 60, 200], (360, 640), ON)


@pytest.fixture(scope="module")
def yolo():
    return YoloPersons(ON, None)


def test_samples_confirm_a_person_and_split_off_clutter(yolo, pose2sim_frames):
    fr = pose2sim_frames("Demo_MultiPerson/videos/cam01.mp4", start=0, n=2)
    person_box = yolo.frame(fr[0])[0, :4]
    h, w = fr.shape[1:3]
    clutter_box = np.array([w * 0.02, h * 0.02, w * 0.12, h * 0.12])  # the wall in a corner
    if confirms(clutter_box, yolo.frame(fr[0]), ON):
        pytest.skip("someone stands in the corner of this frame")
    video = np.concatenate([fr] * 10)  # 20 frames
    tracks = [_track(0, range(20)), _track(1, range(20))]
    for t in range(20):
        tracks[0].frames[t].box, tracks[1].frames[t].box = person_box, clutter_box
    cfg = ON.model_copy(update={"every": 4, "min_run_frames": 10})
    samples = sample_confirmations(tracks, lambda a, b: video[a:b], 20, cfg, yolo)
    assert [t for t, _ in samples[0]] == [0, 4, 8, 12, 16]
    assert all(ok for _, ok in samples[0]) and not any(ok for _, ok in samples[1])
    dropped, frames = split_unconfirmed(tracks, new_track, samples, cfg.min_run_frames, None)
    assert dropped == {1} and frames == 20 and len(tracks) == 2


def test_the_pass_is_off_by_default():
    assert SecondDetectorSettings().backend == "none"


def test_estimate_people_splits_a_phantom_that_took_over_a_person(yolo, pose2sim_frames, body):
    """The pass inside pose4d's discovery (estimate.py ``second_detector``): on real frames a track on
    a wall corner all its life is dropped; a track that sat on the corner, then moved onto a real
    person, keeps the person's frames under a new raw id, and their pixels are relabelled."""
    from test_verify import _FakeDiscovery  # noqa: E402  (the tests' hand-made discovery)

    from anonymask.models.anonymizer.pose.estimate import estimate_people
    from anonymask.models.anonymizer.pose.people import Detection
    from anonymask.models.anonymizer.pose.settings import MediapipePoseSettings
    from anonymask.models.anonymizer.pose.verify import REJECTED_TRACK

    fr = pose2sim_frames("Demo_MultiPerson/videos/cam01.mp4", start=0, n=1)[0]
    people = yolo.frame(fr)
    h, w = fr.shape[:2]
    corner = np.array([w * 0.02, h * 0.02, w * 0.12, h * 0.12], np.float32)
    if confirms(corner, people, ON):
        pytest.skip("someone stands in the corner of this frame")
    person = people[0, :4].astype(np.float32)
    t_len = 40
    video = np.repeat(fr[None], t_len, axis=0)

    def det(box, source):
        kp = np.tile(((box[:2] + box[2:]) / 2)[None], (33, 1)).astype(np.float32)
        return Detection(np.asarray(box, np.float32), kp, np.full(33, 0.9, np.float32), np.zeros((33, 3), np.float32),
                         np.zeros((0, 0), np.float32), (0, 0, 0, 0), 0.9, source)

    on_person, on_corner, taken_over = new_track(0), new_track(1), new_track(2)
    for t in range(t_len):
        on_person.frames[t] = det(person, "track")
        on_corner.frames[t] = det(corner, "hold")
        taken_over.frames[t] = det(corner if t < 24 else person, "hold" if t < 24 else "track")
    tree = MediapipePoseSettings().model_dump()
    tree["confirm"]["min_visible_frames"], tree["faces"]["enabled"], tree["link"]["gap"] = 1, False, 0
    tree["discover"]["backfill"] = False  # the hand-made tracks start where they start
    tree["verify"]["second_detector"].update(backend="yolo11n-pose", every=4, min_run_frames=12)
    moved = []
    res = estimate_people([(0, video)], (t_len, h, w), body.rest_joints(), MediapipePoseSettings.model_validate(tree),
                          detector=None, camera=None, source="cam01.mp4", write_window=None,
                          read_frames=lambda a, b: video[a:b], paint_frame=None,
                          relabel_frame=lambda t, a, b: moved.append((t, a, b)),
                          discovery=_FakeDiscovery([on_person, on_corner, taken_over]))
    lut = res.instance_track.tolist()
    assert lut[1] == REJECTED_TRACK and lut[2] == REJECTED_TRACK  # the corner; the taken-over track's corner part
    assert lut[0] >= 0 and lut[3] >= 0 and lut[0] != lut[3]  # the person, and the person it moved onto
    assert moved == [(t, 2, 3) for t in range(21, t_len)]  # after its last miss (frame 20) the new raw id
    assert res.diagnostics["second_dropped"] == 2.0 and res.diagnostics["second_dropped_frames"] == 40 + 21


def test_one_person_box_is_one_person():
    """Two tracks on one body (the whole body, and a body the landmark model drew on her legs) match
    one person box; the box goes to the better match and the other track is a part of that person.
    Two people side by side each keep their own box."""
    her = np.array([[100.0, 50.0, 160.0, 350.0, 0.9]])
    whole, legs = [102, 52, 158, 345], [105, 200, 158, 345]
    assert claim_boxes([legs, whole], her, ON) == [PART, OWN]  # in either order
    assert claim_boxes([whole, legs], her, ON) == [OWN, PART]
    two = np.array([[100.0, 50.0, 160.0, 350.0, 0.9], [150.0, 60.0, 215.0, 350.0, 0.8]])
    assert claim_boxes([whole, [152, 62, 214, 348]], two, ON) == [OWN, OWN]  # crossing, both seen
    # a track whose best box is taken still gets a free one it matches less well
    wide = np.array([[100.0, 50.0, 160.0, 350.0, 0.9], [95.0, 40.0, 170.0, 360.0, 0.6]])
    assert claim_boxes([whole, [101, 51, 160, 348]], wide, ON) == [OWN, OWN]
    assert claim_boxes([[400, 50, 450, 200]], her, ON) == [UNSEEN]
    assert claim_boxes([], her, ON) == [] and claim_boxes([whole], np.zeros((0, 5)), ON) == [UNSEEN]


def test_a_part_yields_only_where_it_lasts():
    # a part from frame 500 to 700 (samples every 5th frame), and single flips that are not
    samples = [(t, PART if 500 <= t <= 700 or t in (100, 300) else OWN) for t in range(0, 1000, 5)]
    assert part_spans(samples, 0, 999, 3) == [(500, 700)]
    # two flips in a row are not enough for 3; a part all its life reaches its first and last frame
    assert part_spans([(0, OWN), (5, PART), (10, PART), (15, OWN)], 0, 19, 3) == []
    assert part_spans([(t, PART) for t in range(5, 100, 5)], 2, 101, 3) == [(2, 101)]
    # a missed sample neither ends a part run nor counts towards it: clutter the detector boxes with
    # someone now and then, and misses between, never has a box of its own
    assert part_spans([(0, PART), (5, PART), (10, UNSEEN), (15, PART)], 0, 19, 3) == [(0, 19)]
    assert part_spans([(0, OWN), (5, PART), (10, UNSEEN), (15, UNSEEN), (20, PART), (25, OWN)], 0, 29, 3) == []
    mixed = [(0, OWN)] + [(t, PART if t % 20 == 0 else UNSEEN) for t in range(5, 200, 5)] + [(200, OWN)]
    assert part_spans(mixed, 0, 204, 3) == [(5, 195)]
    assert unconfirmed_spans([(0, PART), (5, OWN)], 0, 9, 1) == []  # a part is a person seen


def test_estimate_people_draws_one_avatar_on_one_person(yolo, pose2sim_frames, body):
    """The yield inside pose4d (estimate.py ``yield_parts``): on a real frame, a track on a person's
    whole body and a track on their legs both match the one person box the detector gives; the legs'
    avatar is not drawn, its box (its pixels) stays, and the person's own avatar is drawn throughout."""
    from test_verify import _FakeDiscovery  # noqa: E402  (the tests' hand-made discovery)

    from anonymask.models.anonymizer.pose.estimate import estimate_people
    from anonymask.models.anonymizer.pose.people import Detection
    from anonymask.models.anonymizer.pose.settings import MediapipePoseSettings

    fr = pose2sim_frames("Demo_MultiPerson/videos/cam01.mp4", start=0, n=1)[0]
    people = yolo.frame(fr)
    h, w = fr.shape[:2]
    whole = people[0, :4].astype(np.float32)
    legs = whole.copy()
    legs[1] = (whole[1] + whole[3]) / 2  # the lower half: 0.5 of the box, inside it
    if claim_boxes([whole, legs], people, ON) != [OWN, PART]:
        pytest.skip("the detector boxes this person's legs on their own")
    t_len = 30
    video = np.repeat(fr[None], t_len, axis=0)

    def det(box):
        kp = np.tile(((box[:2] + box[2:]) / 2)[None], (33, 1)).astype(np.float32)
        return Detection(np.asarray(box, np.float32), kp, np.full(33, 0.9, np.float32), np.zeros((33, 3), np.float32),
                         np.zeros((0, 0), np.float32), (0, 0, 0, 0), 0.9, "track")

    on_body, on_legs = new_track(0), new_track(1)
    for t in range(t_len):
        on_body.frames[t], on_legs.frames[t] = det(whole), det(legs)
    tree = MediapipePoseSettings().model_dump()
    tree["confirm"]["min_visible_frames"], tree["faces"]["enabled"], tree["link"]["gap"] = 1, False, 0
    tree["discover"]["backfill"] = False
    tree["verify"]["second_detector"].update(backend="yolo11n-pose", every=4, min_run_frames=12, part_min_samples=3)

    def run(settings_tree):
        return estimate_people([(0, video)], (t_len, h, w), body.rest_joints(),
                               MediapipePoseSettings.model_validate(settings_tree), detector=None, camera=None,
                               source="cam01.mp4", write_window=None, read_frames=lambda a, b: video[a:b],
                               paint_frame=None, relabel_frame=None,
                               discovery=_FakeDiscovery([on_body, on_legs]))

    res = run(tree)
    by_raw = {raw: int(k) for raw, k in enumerate(res.instance_track.tolist())}
    body_track, legs_track = res.tracks[by_raw[0]], res.tracks[by_raw[1]]
    assert body_track.valid.all()  # the person's own avatar, every frame
    assert not legs_track.valid.any()  # the part's: never drawn
    assert np.isfinite(res.boxes[by_raw[1]]).all()  # its pixels stay removed (its box is there)
    assert res.diagnostics["second_parts"] == 1.0 and res.diagnostics["second_part_frames"] == t_len
    # where the part is too brief to count (more samples than it has), both are drawn
    tree["verify"]["second_detector"]["part_min_samples"] = 9
    res = run(tree)
    assert all(tr.valid.all() for tr in res.tracks) and res.diagnostics["second_parts"] == 0.0


def test_a_crop_box_on_someone_the_full_frame_boxed_is_no_person_of_its_own():
    """A small track no full-frame box matches is looked at in a crop. Where every crop box that
    matches it lies on a person box another track took (zoomed, clutter boxed with the shins of the
    man beside it), the track is a part of him; a crop box clear of the taken boxes is its own."""
    him = np.array([[300.0, 40.0, 380.0, 300.0, 0.9]])
    small = [250, 220, 290, 300]  # a small track on the wheel beside his shins
    verdicts, taken = claims([[302, 42, 378, 298], small], him, ON)
    assert verdicts == [OWN, UNSEEN] and taken.tolist() == [[300.0, 40.0, 380.0, 300.0]]
    wheel_and_shins = np.array([[248.0, 218.0, 330.0, 302.0, 0.3]])  # 36% of it on his box
    assert crop_verdict(small, wheel_and_shins, taken, ON) == PART
    clear = np.array([[249.0, 219.0, 291.0, 301.0, 0.6]])  # a far person standing clear of him
    assert crop_verdict(small, clear, taken, ON) == OWN
    assert crop_verdict(small, np.concatenate([wheel_and_shins, clear]), taken, ON) == OWN
    assert crop_verdict(small, wheel_and_shins, np.zeros((0, 4)), ON) == OWN  # nobody taken: his own
    assert crop_verdict(small, np.zeros((0, 5)), taken, ON) == UNSEEN
    # the setting decides: a crop box must lie this much on a taken box
    loose = ON.model_copy(update={"crop_taken_share": 0.5})
    assert crop_verdict(small, wheel_and_shins, taken, loose) == OWN
