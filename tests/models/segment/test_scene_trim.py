"""Margin pixels that show the scene leave the hole (models/anonymizer/segment/scene_trim.py): a
walker's margins where the place shows through go, a limb the mask missed stays, the person's own
mask never goes, a still person's margin stays (their place is never seen free), a panned frame
keeps its margins, and noise does not perforate the hole."""

import cv2
import numpy as np

from anonymask.models.anonymizer.segment.foreground import block_background
from anonymask.models.anonymizer.segment.masks import build_person_masks, grow
from anonymask.models.anonymizer.segment.scene_trim import scene_pixels, unsplit

T, H, W = 20, 96, 128
REACH, MARGIN = 0.15, 2
KW = dict(tol=8.0, reach=REACH, scene_tol=25.0, max_scene_change=0.05)


def _scene(seed: int = 0, sigma: float = 2.0) -> np.ndarray:
    """A textured still scene with sensor noise on every frame."""
    rng = np.random.default_rng(seed)
    base = rng.integers(40, 200, (H // 8, W // 8, 3)).repeat(8, 0).repeat(8, 1).astype(np.float32)
    return np.clip(base[None] + rng.normal(0, sigma, (T, H, W, 3)), 0, 255).astype(np.uint8)


def _walker(frames: np.ndarray, speed: int = 3, still: bool = False):
    """A dark body (16 x 60 px) walking right, or standing still, with a foot the mask leaves out
    (4 px below its mask): frames, masks, foot pixels."""
    body = np.zeros((T, H, W), bool)
    foot = np.zeros((T, H, W), bool)
    for t in range(T):
        x = 20 + (0 if still else speed * t)
        body[t, 20:80, x : x + 16] = True
        foot[t, 80:84, x : x + 16] = True
    frames = frames.copy()
    frames[body | foot] = 15
    return frames, body, foot


def _shows_scene(frames, person, **kw):
    """The stage's use: one block's background with nobody near, then the pixels that show it."""
    heights = np.full(len(frames), 60.0)
    bg = block_background(frames, person, heights, MARGIN, REACH, clear_reach=True)
    return scene_pixels(frames, person, heights, [bg] * len(frames), **{**KW, **kw})


def _holes(frames, body, trim: bool):
    """The hole with a wide margin (6 px) and unflicker over +-2 frames, trimmed or not."""
    scene = _shows_scene(frames, body) if trim else None
    return build_person_masks(body.astype(np.float32), threshold=0.5, window=2, grow_pixels=6, scene=scene).hole


def test_a_walkers_margin_where_the_place_shows_leaves_the_hole_and_the_missed_foot_stays():
    frames, body, foot = _walker(_scene())
    before, after = _holes(frames, body, False), _holes(frames, body, True)
    assert (after <= before).all()  # only ever fewer pixels
    assert after[body].all()  # the mask itself never leaves
    inner = slice(3, T - 3)  # frames whose place is seen free in enough others
    assert after[inner][foot[inner]].all()  # the foot differs from the place: it stays
    safety = grow(body, 6)  # the safety margin around the frame's own mask never leaves
    assert after[safety & before].all()
    # most of the rest (unflicker's sweep of the frames before and after) shows the place, and goes
    sweep = before & ~safety & ~foot
    gone = (sweep & ~after)[inner].sum() / sweep[inner].sum()
    assert gone > 0.7, gone


def test_a_person_who_stands_still_keeps_their_margin():
    frames, body, foot = _walker(_scene(1), still=True)
    before, after = _holes(frames, body, False), _holes(frames, body, True)
    # their place is never free of them: no background there, so no pixel of their margin goes
    assert np.array_equal(before, after)


def test_a_frame_the_background_does_not_describe_keeps_its_margins():
    frames, body, _ = _walker(_scene(2))
    moved = frames.copy()
    moved[15:] = np.roll(frames[15:], 8, axis=2)  # the camera panned by 8 px for the last quarter
    body2 = body.copy()
    body2[15:] = np.roll(body[15:], 8, axis=2)
    heights = np.full(T, 60.0)
    bg = block_background(moved, body2, heights, MARGIN, REACH, clear_reach=True)
    shows = scene_pixels(moved, body2, heights, [bg] * T, **KW)
    assert shows[3:12].any()  # the frames the place (the median of the block) still describes
    assert not shows[15:].any()


def test_noise_does_not_perforate_the_hole():
    """Under heavy sensor noise single pixels of the place fall outside the tolerance: only whole
    3 x 3 neighbourhoods within it leave, so no single pixel is cut out of the hole."""
    frames, body, _ = _walker(_scene(3, sigma=5.0))
    shows = _shows_scene(frames, body)
    assert shows.any()
    heights = np.full(T, 60.0)
    bg = block_background(frames, body, heights, MARGIN, REACH, clear_reach=True)
    diff = np.abs(frames.astype(int) - bg.colour.astype(int)).max(-1)
    within = ((diff <= KW["tol"]) & bg.known & ~body).astype(np.uint8)
    seeds = cv2.erode(within.reshape(-1, W), np.ones((3, 3), np.uint8)).reshape(T, H, W)  # 3 x 3 centres
    for t in range(T):
        n, lab = cv2.connectedComponents(shows[t].view(np.uint8), connectivity=8)
        for c in range(1, n):
            assert seeds[t][lab == c].any()
    # the raw test alone would have let isolated pixels go
    lone = within.astype(bool) & ~shows
    assert lone.any()


def test_the_tolerance_decides_what_shows_the_place():
    """One frame 6 grey levels brighter than the rest (light flicker): within a tolerance of 8 its
    margin shows the place, within 3 it does not (no seed anywhere in it)."""
    frames, body, _ = _walker(_scene(4, sigma=1.0))
    t = 10
    frames[t] = np.clip(frames[t].astype(int) + 6, 0, 255).astype(np.uint8)
    assert _shows_scene(frames, body, tol=8.0)[t].sum() > 500
    assert not _shows_scene(frames, body, tol=3.0)[t].any()
    assert not _shows_scene(frames, body, tol=-1.0).any()


def test_a_trim_that_would_cut_a_region_apart_is_not_made():
    """A piece of the hole the trim would cut off (here a strip beyond the place's known pixels)
    brings its region back whole: the trim shaves, it never splits."""
    before = np.zeros((1, 20, 40), bool)
    before[0, 5:15, 5:35] = True
    cut = before.copy()
    cut[0, 5:15, 18:22] = False  # a trim through the middle: two pieces
    assert np.array_equal(unsplit(before, cut), before)
    shaved = before.copy()
    shaved[0, 5:15, 30:35] = False  # a trim of one side: one piece
    assert np.array_equal(unsplit(before, shaved), shaved)
    crumb = shaved.copy()
    crumb[0, 5:7, 28:30] = False  # leaves a 2 x 2 crumb (28..29, 7..14 stays connected): fine
    crumb[0, 10, 30] = True  # a lone pixel beyond the shave: smaller than 3 x 3, not a piece
    assert np.array_equal(unsplit(before, crumb), crumb)


def test_clear_reach_takes_the_place_only_from_frames_with_nobody_near():
    frames = np.zeros((5, 8, 8, 3), np.uint8)
    frames[:, 0, 0] = [[10] * 3, [20] * 3, [30] * 3, [200] * 3, [250] * 3]
    people = np.zeros((5, 8, 8), bool)
    people[3:, 0, 3] = True  # a person 3 px away in the last two frames (reach 0.25 x 8 = 2 px, margin 1)
    near = block_background(frames, people, np.full(5, 8.0), 1, 0.25)
    far = block_background(frames, people, np.full(5, 8.0), 1, 0.25, clear_reach=True)
    assert near.colour[0, 0, 0] == 30  # the margin alone keeps every frame: median of all five
    assert far.known[0, 0] and far.colour[0, 0, 0] == 20  # with their reach clear, frames 0-2 only
