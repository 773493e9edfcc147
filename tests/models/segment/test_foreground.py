"""The pixels next to a person that are not the scene (models/anonymizer/segment/foreground.py): a
limb the mask cut is added, the scene and things apart from the person are not, and a frame the
background does not describe (the camera moved) gets nothing."""

import numpy as np

from anonymask.models.anonymizer.segment.foreground import MIN_SAMPLES, block_background, touching_foreground

T, H, W = 20, 96, 128
KW = dict(tol=25.0, reach=0.15, max_scene_change=0.05)


def _add(frames, person, heights, margin=2, **kw):
    """The stage's use: one block's background (all its frames), then the pixels it adds."""
    opts = {**KW, **kw}
    bg = block_background(frames, person, heights, margin, opts["reach"])
    return touching_foreground(frames, person, heights, [bg] * len(frames), **opts)


def _scene(seed: int = 0) -> np.ndarray:
    """A textured still scene with sensor noise (sigma 4 grey levels) on every frame."""
    rng = np.random.default_rng(seed)
    base = rng.integers(40, 200, (H // 8, W // 8, 3)).repeat(8, 0).repeat(8, 1).astype(np.float32)
    noise = rng.normal(0, 4, (T, H, W, 3))
    return np.clip(base[None] + noise, 0, 255).astype(np.uint8)


def _walker(frames: np.ndarray):
    """A dark body walking right (x = 20 + 2t) with a leg kicked out to its right that the mask
    leaves out (5 px wide, 12 px long): the masks and the leg's pixels per frame."""
    body = np.zeros((T, H, W), bool)
    leg = np.zeros((T, H, W), bool)
    for t in range(T):
        x = 20 + 2 * t
        body[t, 20:80, x : x + 16] = True
        leg[t, 62:74, x + 16 : x + 21] = True
    frames = frames.copy()
    frames[body | leg] = 15
    return frames, body, leg


def test_a_cut_limb_next_to_the_mask_is_added_and_the_scene_is_not():
    frames, body, leg = _walker(_scene())
    heights = np.full(T, 60.0)
    add = _add(frames, body, heights)
    got = (add & leg).sum() / leg.sum()
    assert got > 0.95, got
    assert not (add & ~leg).any()  # nothing of the scene, noise included
    # the same with the setting's distance too short to reach past the margin: the leg is 5 px
    # out, so a reach of 1 px takes only its first column
    short = _add(frames, body, heights, reach=1 / 60)
    assert 0 < short.sum() < add.sum()


def test_something_apart_from_the_person_or_out_of_reach_is_not_theirs():
    frames, body, _ = _walker(_scene(1))
    frames[:, 5:15, 100:120] = 250  # a lamp switched on far from the person, not touching them
    add = _add(frames, body, np.full(T, 60.0))
    assert not add[:, 5:15, 100:120].any()


def test_a_frame_the_background_does_not_describe_gets_nothing():
    frames, body, leg = _walker(_scene(2))
    moved = frames.copy()
    moved[10:] = np.roll(frames[10:], 8, axis=2)  # the camera panned by 8 px for the second half
    body2, leg2 = body.copy(), leg.copy()
    body2[10:] = np.roll(body[10:], 8, axis=2)
    add = _add(moved, body2, np.full(T, 60.0))
    assert not (add & ~leg2).any()  # no scene pixel in any frame: the panned ones keep the mask they had
    # with the scene-change test off, the frames take the changed scene around the body
    loose = _add(moved, body2, np.full(T, 60.0), max_scene_change=1.0)
    assert (loose & ~leg2).sum() > 100


def test_the_background_is_the_median_of_the_frames_nobody_covers():
    frames = np.zeros((5, 8, 8, 3), np.uint8)
    frames[:, 0, 0] = [[10] * 3, [20] * 3, [30] * 3, [200] * 3, [250] * 3]
    people = np.zeros((5, 8, 8), bool)
    people[3:, 0, 1] = True  # a person next to the pixel in the last two frames
    bg = block_background(frames, people, np.full(5, 8.0), 1, 0.25)
    assert bg.known[0, 0] and bg.colour[0, 0, 0] == 20.0  # the margin (1 px) leaves out frames 3 and 4
    people[1:, 0, 1] = True  # then only frame 0 is free there: fewer than MIN_SAMPLES
    bg = block_background(frames, people, np.full(5, 8.0), 1, 0.25)
    assert MIN_SAMPLES > 1 and not bg.known[0, 0]
    assert not bg.known[7, 7]  # out of every person's reach and off the scene grid: not computed
