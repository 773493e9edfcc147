"""A walker lost by the pose models is followed by what keeps moving next to them (models/anonymizer/pose/follow.py)."""

import numpy as np
import pytest

from anonymask.models.anonymizer.pose.follow import follow_held, follow_moving
from anonymask.models.anonymizer.pose.settings import BridgeSettings

H, W, T = 120, 320, 40


def settings(**changed) -> BridgeSettings:
    """The bridge's settings with the motion test's values these cases were written for."""
    return BridgeSettings(**{"follow_motion": 25.0, "held_reach": 0.25, "held_still_share": 0.05, **changed})


def background(shift: float = 0.0) -> np.ndarray:
    """A textured real photo (scikit-image's coffee), shifted sideways by ``shift`` px (a pan)."""
    import cv2
    from skimage import data

    img = cv2.resize(data.coffee(), (W + 80, H + 20), interpolation=cv2.INTER_AREA)
    m = np.float32([[1, 0, -40 - shift], [0, 1, -10]])
    return cv2.warpAffine(img, m, (W, H), borderMode=cv2.BORDER_REFLECT)


def legs(t: int, x0: float = 40.0, speed: float = 8.0, swing: float = 6.0) -> tuple[int, int, int, int]:
    """Two dark legs, 40 px wide together, 70 px tall, walking right at ``speed`` px a frame, one
    swinging ``swing`` px ahead of the other."""
    x = int(round(x0 + speed * t))
    s = int(swing * np.sin(t))
    return x, x + 16 + s, x + 24 - s, x + 40


def clip(pan: float = 0.0, speed: float = 8.0, size: int = 1, swing: float = 6.0) -> np.ndarray:
    frames = []
    for t in range(T):
        f = background(pan * t).copy()
        a, b, c, d = legs(t, speed=speed, swing=swing)
        f[40:110, max(0, a):max(0, b)] = (20, 20, 30)
        f[40:110, max(0, c):max(0, d)] = (30, 20, 20)
        if size > 1:  # something bigger than a person moving next to them (a van)
            f[:, max(0, a - 100):max(0, d + 100)] = (200, 40, 40)
        frames.append(f)
    return np.stack(frames)


def lost_walker(last: int = 3, walk: int = 3):
    """Boxes of a walker seen in frames 0..``last`` (their box covers the legs and the body above,
    cut by the frame's top), then ``walk`` walk-on frames as bridge_after_end draws them: the last box
    joined with it carried on at 4 px a frame (the walker is faster: they outpace it)."""
    boxes = np.full((T, 4), np.nan, np.float32)
    for t in range(last + 1):
        a, _, _, d = legs(t)
        boxes[t] = [a - 4, 0, d + 4, 112]
    gap = np.zeros(T, bool)
    for n in range(1, walk + 1):
        boxes[last + n] = boxes[last] + [0, 0, 4 * n, 0]
        gap[last + n] = True
    return boxes, gap


def reader(video):
    return lambda a, b: video[a:b]


def covers(box, t) -> bool:
    a, _, _, d = legs(t)
    a, d = max(a, 0), min(d, W)
    return bool(box[0] <= a and box[2] >= d and box[1] <= 40 and box[3] >= min(110, H))


@pytest.mark.parametrize("pan", [0.0, 3.0])
def test_legs_walking_on_past_the_walk_on_stay_removed_until_they_leave(pan):
    """bikes.mp4 at 640 px: the passer-by's legs outpaced the walk-on's box and were shown.
    Followed frame by frame (a still camera, and a pan the homography takes out), the legs are
    inside the box removed in every frame they are in view, and nothing is removed once they left."""
    video = clip(pan)
    boxes, gap = lost_walker()
    set_ = follow_moving(boxes, gap, 3, reader(video), settings(follow_frames=40))
    leave = next(t for t in range(T) if legs(t)[0] >= W)  # the first frame with no leg in view
    assert set_ and set_[0] == 7  # right after the walk-on (frames 4-6)
    for t in range(7, leave - 1):
        assert gap[t] and covers(boxes[t], t), (t, boxes[t], legs(t))
    assert all(t <= leave + 1 for t in set_)  # they left: nothing more is removed
    assert np.isnan(boxes[leave + 2:, 0]).all()
    for t in set_:  # one region with the last sighting's box (the avatar is held there)
        assert boxes[t][0] <= boxes[3][0] and boxes[t][2] >= boxes[3][2]


def test_what_moves_behind_them_once_they_left_is_not_followed():
    """bikes.mp4: after the passer-by left, the hand-held camera's parallax on a bollard behind him
    kept changing pixels next to the last box. The follow stops where what moves falls back
    against the way they walked."""
    video = clip()
    leave = next(t for t in range(T) if legs(t)[0] >= W)
    for t in range(leave, T):  # something swaying where they had been
        x = W - 75 + int(10 * np.sin(t))
        video[t, 50:100, x:x + 30] = (240, 240, 240)
    boxes, gap = lost_walker()
    set_ = follow_moving(boxes, gap, 3, reader(video), settings(follow_frames=40))
    assert set_ and max(set_) <= leave + 1


def test_nothing_moving_after_the_walk_on_adds_nothing():
    """Someone who stopped or left before the walk-on ended: a still scene, nothing followed."""
    video = np.stack([background()] * T)
    boxes, gap = lost_walker()
    before = boxes.copy()
    assert follow_moving(boxes, gap, 3, reader(video), settings()) == []
    assert np.array_equal(boxes, before, equal_nan=True) and gap.sum() == 3


def test_much_more_moving_than_a_person_is_not_followed():
    """A van driving past a body drawn on it (bikes.mp4 frame 101) moves far more than a person of
    that size: followed no further than the walk-on (it would become a hole without an avatar)."""
    video = clip(size=3)
    boxes, gap = lost_walker()
    assert follow_moving(boxes, gap, 3, reader(video), settings(follow_max_area=2.5)) == []
    assert gap.sum() == 3


def test_follow_is_bounded_by_frames_and_the_shot():
    video = clip(speed=2.0)  # slow: in view for the whole clip
    boxes, gap = lost_walker()
    assert follow_moving(boxes, gap, 3, reader(video), settings(follow_frames=5)) == [7, 8, 9, 10, 11]
    boxes, gap = lost_walker()
    assert follow_moving(boxes, gap, 3, reader(video), settings(follow_frames=200))[-1] == T - 1
    boxes, gap = lost_walker()
    assert follow_moving(boxes, gap, 3, reader(video), settings(follow_motion=0.0)) == []  # 0: off


def test_hold_end_keeps_the_avatar_held_on_the_followed_frames():
    """Through bridge_after_end (the walk-on, then the follow): the followed frames are bridged and the
    avatar is held at the last sighting, so the hole has an avatar on it (no 'erased' person)."""
    from anonymask.models.anonymizer.pose.bridge import bridge_after_end
    from anonymask.models.shared.body.tracks import SMPLHTrack

    video = clip()
    boxes = np.full((T, 4), np.nan, np.float32)
    for t in range(4):
        a, _, _, d = legs(t)
        boxes[t] = [a - 4, 4, d + 4, 112]
    tr = SMPLHTrack.rest(0, T)
    tr.valid[4:] = False
    tr.transl[:4] = np.arange(4)[:, None] * [0.05, 0, 0] + [0, 0, 3]
    gap = np.zeros(T, bool)
    bridge_after_end(tr, boxes, gap, (H, W), 3, settings(), reader(video))
    walked = np.nonzero(gap)[0]
    assert walked[0] == 4 and walked[-1] > 7  # walk-on 4-6, then followed
    assert tr.valid[walked].all() and np.allclose(tr.transl[walked], tr.transl[3])
    gap2, boxes2, tr2 = np.zeros(T, bool), boxes.copy(), SMPLHTrack.rest(0, T)
    boxes2[4:] = np.nan
    bridge_after_end(tr2, boxes2, gap2, (H, W), 3, settings(), None)  # without frames: the walk-on only
    assert np.nonzero(gap2)[0].tolist() == [4, 5, 6]


def held_person(last: int, held: int, speed: float, swing: float):
    """Boxes of a person seen in frames 0..``last`` and held at the last box for ``held`` frames, as
    bridge_after_end holds someone whose box centre barely moved."""
    boxes = np.full((T, 4), np.nan, np.float32)
    for t in range(last + 1):
        a, b, c, d = legs(t, speed=speed, swing=swing)
        boxes[t] = [min(a, c) - 2, 0, max(b, d) + 2, 112]
    boxes[last + 1:last + 1 + held] = boxes[last]
    return boxes


def legs_covered(box, t, speed, swing) -> bool:
    a, b, c, d = legs(t, speed=speed, swing=swing)
    return bool(box[0] <= min(a, c) and box[2] >= max(b, d))


def test_a_slow_walker_held_in_place_keeps_their_moving_legs_removed():
    """hard_three with ±1 grey-level noise: the rear person, lost behind another, was held in their
    last box (their centre moved under the walk-on speed) while their legs stepped out of it. What
    moves at a held box stays removed while they are held; the plain hold misses the legs."""
    speed, swing, last, held = 1.5, 12.0, 10, 12
    video = clip(speed=speed, swing=swing)
    plain = held_person(last, held, speed, swing)
    held_frames = range(last + 1, last + 1 + held)
    assert not all(legs_covered(plain[t], t, speed, swing) for t in held_frames)  # the case is real
    boxes = plain.copy()
    grown = follow_held(boxes, last, held_frames, reader(video), settings())
    assert grown == list(held_frames)
    for t in held_frames:
        assert legs_covered(boxes[t], t, speed, swing), (t, boxes[t], legs(t, speed=speed, swing=swing))
        assert boxes[t][0] <= plain[t][0] and boxes[t][2] >= plain[t][2]  # never less than the hold
        assert (boxes[t][2] - boxes[t][0]) <= (plain[t][2] - plain[t][0]) + 2 * 0.25 * 112
    assert np.isnan(boxes[last + 1 + held:, 0]).all()  # nothing past the hold


def test_a_person_standing_still_keeps_the_held_box():
    video = np.stack([background()] * T)
    boxes = held_person(10, 12, 0.0, 0.0)
    before = boxes.copy()
    assert follow_held(boxes, 10, range(11, 23), reader(video), settings()) == []
    assert np.array_equal(boxes, before, equal_nan=True)


def test_what_moves_far_past_a_held_box_is_not_taken():
    """A van passing a held person (bikes.mp4 frames 90-92 drew a body on one) moves well past where
    their limbs can reach: the box grows by at most ``limit`` x their height on each side."""
    bg = background()
    van = np.ascontiguousarray(background(37.0)[:, ::-1][:, :200])  # textured, unlike the street behind it
    video = []
    for t in range(T):
        f = bg.copy()
        a, b, c, d = legs(t, speed=0.0, swing=0.0)  # someone standing still
        f[40:110, a:b], f[40:110, c:d] = (20, 20, 30), (30, 20, 20)
        x = -150 + 12 * (t - 10)  # a van 200 px long driving past them from the left from frame 11 on
        lo, hi = max(0, x), min(W, x + 200)
        if hi > lo:
            f[:, lo:hi] = van[:, lo - x:hi - x]  # its texture moves with it
        video.append(f)
    video = np.stack(video)
    boxes = held_person(10, 12, 0.0, 0.0)
    before = boxes.copy()
    grown = follow_held(boxes, 10, range(11, 23), reader(video), settings(held_still_share=1.0))
    assert grown  # the van moves at them
    reach = 0.25 * (before[10][3] - before[10][1])
    for t in grown:
        assert boxes[t][0] >= before[t][0] - reach - 1e-3 and boxes[t][2] <= before[t][2] + reach + 1e-3
    assert min(boxes[t][0] for t in grown) <= before[10][0] - reach + 1  # the van reached the limit
    wide = before.copy()
    follow_held(wide, 10, range(11, 23), reader(video), settings(held_reach=1.0, held_still_share=1.0))
    assert min(wide[t][0] for t in grown) < before[10][0] - reach - 5  # it moves farther than that
    assert follow_held(before.copy(), 10, range(11, 23), reader(video), settings(follow_motion=0.0)) == []  # 0: off


def test_motion_at_a_held_box_counts_only_where_the_rest_of_the_picture_is_still():
    """bikes.mp4, a hand-held street shot: boxes held on traffic grew with the parallax and the cars
    in every frame. Where much of the picture beyond a held person changes (here a band of traffic
    over the right third), what moves at them says nothing about their limbs: nothing grows."""
    speed, swing, last, held = 1.5, 12.0, 10, 12
    video = clip(speed=speed, swing=swing)
    traffic = np.ascontiguousarray(background(53.0)[:, ::-1])
    for t in range(T):
        video[t, :, 210:] = np.roll(traffic, 10 * t, axis=1)[:, 210:]
    held_frames = range(last + 1, last + 1 + held)
    busy = held_person(last, held, speed, swing)
    assert follow_held(busy, last, held_frames, reader(video), settings()) == []
    assert np.array_equal(busy, held_person(last, held, speed, swing), equal_nan=True)
    assert follow_held(busy, last, held_frames, reader(video), settings(held_still_share=1.0))


@pytest.mark.parametrize("on", [True, False])
def test_the_bridge_grows_a_held_box_only_with_the_setting(on):
    """bridge_after_end holds a person whose box centre barely moved; ``bridge.follow_held`` decides
    whether what moves at the held box is removed too (the avatar stays held either way)."""
    from anonymask.models.anonymizer.pose.bridge import bridge_after_end
    from anonymask.models.shared.body.tracks import SMPLHTrack

    speed, swing, last = 1.5, 12.0, 10
    video = clip(speed=speed, swing=swing)
    boxes = held_person(last, 0, speed, swing)
    boxes[:, 1], boxes[:, 3] = 30, 114  # inside the frame: held, not carried across a border
    tr = SMPLHTrack.rest(0, T)
    tr.valid[last + 1:] = False
    gap = np.zeros(T, bool)
    bridge_after_end(tr, boxes, gap, (H, W), 12, settings(follow_held=on), reader(video))
    held = range(last + 1, last + 13)
    assert gap[list(held)].all() and tr.valid[list(held)].all()
    covered = [legs_covered(boxes[t], t, speed, swing) for t in held]
    assert all(covered) if on else not all(covered)
    assert np.allclose(tr.transl[last + 12], tr.transl[last])  # the avatar stays where they were last seen
