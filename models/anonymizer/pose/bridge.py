"""Bridge pass of person discovery: a track's avatar and removed box past the frames where the
landmark model saw the person. Someone who stops being seen in the open was not gone: held in
place; someone who was walking walks on; someone at a border was entering or leaving; someone
found late behind another person was there before. Every value comes from
:class:`~anonymask.models.anonymizer.pose.settings.BridgeSettings`.

Each function works in place on one person's full-length track, boxes (T,4, NaN where absent) and
gap (T,) bool (frames bridged: segment removes the box there).
"""

from __future__ import annotations

import numpy as np

from anonymask.models.anonymizer.pose.settings import BridgeSettings
from anonymask.models.shared.geometry import box_union, inside_frame


def bridge_after_end(track, boxes: np.ndarray, gap: np.ndarray, hw: tuple[int, int], frames: int,
             settings: BridgeSettings, read_frames) -> None:
    """A person does not vanish in the middle of the frame: a track whose last box lies inside the
    frame (farther than ``settings.edge`` of its size from every border) but ends before the video does is
    held for up to ``frames`` more frames (last box, last pose; the frames count as bridged, so
    segment removes the box and the avatar stays). Someone who was moving when the landmark model
    let go (box centre moving >= ``settings.min_speed`` x the box height per frame over their last
    ``settings.velocity_frames`` frames) may walk on: the box removed is then the union of the last box and that box
    moved on at its centre's speed (at its last size), while that is in the frame (a passer-by lost while crossing the frame walked out
    of the held box and his legs were shown; docs/RESULTS.md). The
    avatar stays held: moving it as well uncovered a person leaning beside the walker (more of her
    pixels shown), so this never removes or covers less than holding. With
    ``read_frames`` (the shot's frames; None: not available) and ``settings.follow_motion`` > 0 (grey levels), what keeps moving next to
    the walker is followed too (models/anonymizer/pose/follow.py: their legs outpaced the walk-on's box and
    walked on past its end); for up to ``settings.follow_frames`` frames past it. Someone held in place
    (``settings.follow_held``) keeps what moves at their held box, up to ``settings.held_reach`` x their
    height past it, removed while they are held and the rest of the picture is still
    (follow.py's :func:`follow_held`: a slow walker's box centre barely moves while their legs step
    out of it). In place, on the track, its boxes and gaps."""
    edge, k, follow = settings.edge, settings.velocity_frames, settings.follow_motion
    seen = np.nonzero(np.isfinite(boxes[:, 0]))[0]
    if seen.size == 0 or seen[-1] >= len(boxes) - 1:
        return
    last = int(seen[-1])
    if not inside_frame(boxes[last], hw, edge):
        return  # at the border: they may have left
    v_box, v_tr = _velocity(track, boxes, _after_jump(boxes, seen[-k:], settings.max_step, 1))
    b = boxes[last]
    speed = float(np.hypot(v_box[0] + v_box[2], v_box[1] + v_box[3])) / 2 / max(float(b[3] - b[1]), 1.0)
    if speed >= settings.min_speed:
        # the box walks on at its centre's speed, at its last size: a person's size does not change
        # by several px a frame for frames on end, a box's last few frames often do (a region
        # refined once, a limb found), and that growth carried on drew a box over most of the frame
        centre = np.float32([(v_box[0] + v_box[2]) / 2, (v_box[1] + v_box[3]) / 2])
        _walk_on(track, boxes, gap, hw, last, 1, frames, np.concatenate([centre, centre]), v_tr, keep_end=True)
        if read_frames is not None and follow > 0:
            from anonymask.models.anonymizer.pose.follow import follow_moving

            # past the walk-on (follow_moving sets those frames' boxes): the avatar stays held
            _repeat_pose(track, last, follow_moving(boxes, gap, last, read_frames, settings))
        return
    held = range(last + 1, min(len(boxes), last + 1 + int(frames)))
    _repeat_box_and_pose(track, boxes, gap, last, slice(held.start, held.stop))
    if read_frames is not None and follow > 0 and settings.follow_held:
        from anonymask.models.anonymizer.pose.follow import follow_held

        follow_held(boxes, last, held, read_frames, settings)


def bridge_before_late_start(track, boxes: np.ndarray, gap: np.ndarray, others: np.ndarray, frames: int,
               settings: BridgeSettings) -> None:
    """A person found late while overlapping someone else was most likely there before, half
    hidden behind that person or merged with them in the detector's eyes (a woman half behind
    a man, found five frames late, was shown in those frames). Such a track is held for up to
    ``frames`` frames before its first one (first box, first pose, bridged frames). ``others``:
    (M,T,4) boxes of the other people (NaN where absent); overlapping = at least ``min_overlap``
    of the first box's area inside one of their boxes at that frame. A person appearing in the
    open (entering from behind a tree, a door) is not held: there is nobody to have hidden them,
    and an avatar there would stand where nobody is seen. In place, like :func:`bridge_after_end`."""
    seen = np.nonzero(np.isfinite(boxes[:, 0]))[0]
    if seen.size == 0 or seen[0] == 0:
        return
    first = int(seen[0])
    b = boxes[first]
    area = max(float((b[2] - b[0]) * (b[3] - b[1])), 1e-6)
    for o in np.asarray(others, np.float32).reshape(-1, *boxes.shape)[:, first]:
        if not np.all(np.isfinite(o)):
            continue
        iw = max(0.0, min(b[2], o[2]) - max(b[0], o[0]))
        ih = max(0.0, min(b[3], o[3]) - max(b[1], o[1]))
        if iw * ih >= settings.start_overlap * area:
            _repeat_box_and_pose(track, boxes, gap, first, slice(max(0, first - int(frames)), first))
            return


def _repeat_box_and_pose(track, boxes: np.ndarray, gap: np.ndarray, src: int, held: slice) -> None:
    """Frames ``held`` take frame ``src``'s box and pose, as bridged frames."""
    boxes[held] = boxes[src]
    gap[held] = True
    _repeat_pose(track, src, held)


def _repeat_pose(track, src: int, held) -> None:
    """Frames ``held`` (a slice or indices) take frame ``src``'s pose and place; the avatar is drawn there."""
    for key in ("global_orient", "body_pose", "left_hand_pose", "right_hand_pose", "transl"):
        arr = getattr(track, key)
        arr[held] = arr[src]
    track.valid[held] = True


def bridge_across_border(track, boxes: np.ndarray, gap: np.ndarray, hw: tuple[int, int], frames: int,
                     settings: BridgeSettings) -> None:
    """A person entering or leaving through a border is partly in the frame for a few frames
    before the landmark model finds them and after it lets them go (a quarter of a body at
    the edge: 4% of a synthetic clip's person pixels were shown). A track whose first (last) box touches a
    border is extended backwards (forwards) for up to ``frames`` frames, its box moving on with
    the mean velocity of its first (last) ``settings.velocity_frames`` seen frames, until the box has left the frame; the
    avatar moves with it (translation extrapolated, pose held). The frames count as bridged
    (segment removes the box). In place, on the track, its boxes and gaps. The ends are the
    person's first and last sightings: a box another bridge carried on to the border (a walk-on)
    is not carried on again, or the second extrapolation starts from the first's."""
    edge, k = settings.edge, settings.velocity_frames
    seen = np.nonzero(np.isfinite(boxes[:, 0]) & ~np.asarray(gap, bool))[0]
    if seen.size == 0:
        return
    for end, step in ((int(seen[-1]), 1), (int(seen[0]), -1)):
        if inside_frame(boxes[end], hw, edge):
            continue
        ref = _after_jump(boxes, seen[-k:] if step > 0 else seen[:k], settings.max_step, step)
        v_box, v_tr = _velocity(track, boxes, ref)
        _walk_on(track, boxes, gap, hw, end, step, frames, v_box * step, v_tr * step, keep_end=False)


def _after_jump(boxes: np.ndarray, ref: np.ndarray, max_step: float, step: int) -> np.ndarray:
    """The sightings ``ref`` (sorted) from the track's end inwards (``step`` +1: the last ones, -1:
    the first ones) up to its first jump: a box centre that moved more than ``max_step`` x the
    person's height (their tallest box among ``ref``) per frame between two sightings. A velocity
    measured across a jump is the jump's, not the person's."""
    ref = np.asarray(ref)
    order = ref[::-1] if step > 0 else ref
    height = max(float(np.max(boxes[ref, 3] - boxes[ref, 1])), 1.0)
    keep = 1
    while keep < len(order):
        a, b = boxes[order[keep - 1]], boxes[order[keep]]
        moved = float(np.hypot((a[0] + a[2] - b[0] - b[2]) / 2, (a[1] + a[3] - b[1] - b[3]) / 2))
        if moved > max_step * height * abs(int(order[keep - 1]) - int(order[keep])):
            break
        keep += 1
    return np.sort(order[:keep])


def _velocity(track, boxes: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-frame change of the box and of the translation over the frames ``ref`` (sorted)."""
    span = max(1, int(ref[-1] - ref[0]))
    return (boxes[ref[-1]] - boxes[ref[0]]) / span, (track.transl[ref[-1]] - track.transl[ref[0]]) / span


def _walk_on(track, boxes: np.ndarray, gap: np.ndarray, hw: tuple[int, int], end: int, step: int, frames: int,
             v_box: np.ndarray, v_tr: np.ndarray, keep_end: bool) -> None:
    """From frame ``end`` on in direction ``step`` (+1 forwards, -1 backwards), for up to ``frames``
    frames not already seen: the box moves by ``v_box`` and the avatar by ``v_tr`` a frame (pose
    held), until the box has left the frame (a box shrinking at the edge, extrapolated past
    nothing, has left too). ``keep_end``: the box removed is also frame ``end``'s box, for all
    ``frames`` frames (the moved part only while it is in the frame) and the avatar is held at
    frame ``end``, so it never removes or covers less than holding would. Bridged frames
    (segment removes the box)."""
    h, w = hw
    moved = 0  # the last step whose moved box was in the frame
    for n in range(1, int(frames) + 1):
        t = end + step * n
        if t < 0 or t >= len(boxes) or np.isfinite(boxes[t, 0]):
            break
        b = boxes[end] + n * v_box
        gone = bool(b[2] <= 0 or b[0] >= w or b[3] <= 0 or b[1] >= h or b[2] - b[0] < 1 or b[3] - b[1] < 1)
        if gone and not keep_end:
            break
        if keep_end:
            b = boxes[end] if gone else box_union(b, boxes[end])
        moved = 0 if keep_end else (moved if gone else n)
        boxes[t], gap[t] = b, True
        for key in ("global_orient", "body_pose", "left_hand_pose", "right_hand_pose"):
            getattr(track, key)[t] = getattr(track, key)[end]
        track.transl[t] = track.transl[end] + moved * v_tr
        track.valid[t] = True
