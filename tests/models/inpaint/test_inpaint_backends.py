import cv2
import numpy as np
import pytest

from anonymask.models.anonymizer.inpaint import get_inpainter, masked_temporal_median
from anonymask.models.anonymizer.metrics import psnr


def textured_background(h, w, seed=0):
    """Smooth-ish texture: OpenCV fills of small holes in it are meaningful, yet it is not flat."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:h, :w].astype(np.float32)
    base = np.stack([
        120 + 60 * np.sin(xx / 7.0) * np.cos(yy / 9.0),
        100 + 50 * np.cos(xx / 11.0 + yy / 13.0),
        90 + 40 * np.sin((xx + yy) / 5.0),
    ], -1)
    return np.clip(base + rng.normal(0, 3, base.shape), 0, 255).astype(np.uint8)


def moving_person(t=24, h=48, w=64, size=14, seed=0):
    bg = textured_background(h, w, seed)
    rng = np.random.default_rng(seed + 1)
    # slight global brightness flicker outside the person: must be kept by the inpainter
    gains = 1.0 + 0.02 * rng.standard_normal(t)
    video = np.clip(bg[None].astype(np.float32) * gains[:, None, None, None], 0, 255).astype(np.uint8)
    mask = np.zeros((t, h, w), bool)
    for i in range(t):
        x0 = 2 + (i * (w - size - 4)) // (t - 1)
        mask[i, 15:15 + size, x0:x0 + size] = True
    person = rng.integers(0, 256, video.shape, dtype=np.uint8)
    video[mask] = person[mask]
    return video, bg, mask


def test_masked_median_is_exact_on_covered_video():
    rng = np.random.default_rng(3)
    video = rng.integers(0, 256, (7, 5, 6, 3), dtype=np.uint8)
    hole = rng.random((7, 5, 6)) < 0.4
    hole[:, 0, 0] = True  # never uncovered
    bg, count = masked_temporal_median(video, hole, block_rows=2)
    assert np.array_equal(count, (~hole).sum(0))
    for y in range(5):
        for x in range(6):
            vals = video[~hole[:, y, x], y, x].astype(np.float64)
            if len(vals) == 0:
                assert count[y, x] == 0
                continue
            s = np.sort(vals, axis=0)
            n = len(vals)
            expected = np.floor((s[(n - 1) // 2] + s[n // 2] + 1) / 2)
            assert np.array_equal(bg[y, x], expected), (y, x)


def test_temporal_median_recovers_static_background():
    video, bg, mask = moving_person()
    out = get_inpainter("temporal_median").inpaint(video, mask)
    assert out.shape == video.shape and out.dtype == np.uint8
    # outside the mask: the original frame, bit for bit (lighting flicker kept)
    assert np.array_equal(out[~mask], video[~mask])
    # inside the mask: the background, not the person
    assert psnr(out, np.broadcast_to(bg, video.shape), mask) > 45
    assert psnr(out, video, mask) < 15


def test_never_uncovered_pixels_are_filled_by_opencv():
    video, bg, mask = moving_person()
    mask[:, 30:36, 30:36] = True  # a static occluder that never moves away
    # grow_unseen 0: the fill of exactly the unseen pixels (5 px more would be most of this tiny frame)
    out = get_inpainter("temporal_median", method="telea", radius=3, grow_unseen=0).inpaint(video, mask)
    region = np.zeros_like(mask)
    region[:, 30:36, 30:36] = True
    assert psnr(out, np.broadcast_to(bg, video.shape), region) > 25
    assert not np.array_equal(out[region], video[region])


def test_opencv_backend_per_frame():
    video, bg, mask = moving_person()
    out = get_inpainter("opencv", method="ns", radius=3).inpaint(video, mask)
    assert np.array_equal(out[~mask], video[~mask])
    err_person = psnr(out, video, mask)
    err_bg = psnr(out, np.broadcast_to(bg, video.shape), mask)
    assert err_bg > err_person + 5  # closer to the background than to the person


def test_a_frame_that_is_all_hole_is_not_shown():
    """cv2.inpaint given a mask over the whole frame returns the frame unchanged (it has no pixel
    to fill from): a person filling a close-up frame, or a box held over the whole frame, would
    be shown as they are. Such a frame gets a flat grey instead; the others are inpainted."""

    video, _, mask = moving_person(t=3)
    mask[1] = True
    assert np.array_equal(cv2.inpaint(video[1], mask[1].view(np.uint8), 3, cv2.INPAINT_TELEA), video[1])
    out = get_inpainter("opencv").inpaint(video, mask)
    assert (out[1] == 128).all()
    assert np.array_equal(out[~mask], video[~mask]) and not np.array_equal(out[0], video[0])


def test_a_clip_that_is_all_hole_is_filled_grey_by_the_median():
    """A shot that a close-up covers in every frame: the temporal median has nothing to take a
    pixel from; it fills grey (it raised before, failing the video) and never shows the frames."""
    video, _, _ = moving_person(t=6)
    hole = np.ones(video.shape[:3], bool)
    out = get_inpainter("temporal_median").inpaint(video, hole)
    assert (out == 128).all()
    streamed = np.zeros_like(video)

    def write(t0, frames, made_up):
        streamed[t0 : t0 + len(frames)] = frames
        assert made_up.all()  # the grey is made up

    get_inpainter("temporal_median").inpaint_stream(lambda a, b: (video[a:b], hole[a:b]), 6, write, window=2,
                                                    context=1)
    assert (streamed == 128).all()


def test_inpainters_validate_inputs():
    video, _, mask = moving_person(t=4)
    with pytest.raises(ValueError):
        get_inpainter("temporal_median").inpaint(video, mask[:, :10])
    with pytest.raises(ValueError):
        get_inpainter("magic")
    with pytest.raises(ValueError):
        get_inpainter("opencv", method="fast")


def _static_person_video(t=120, h=24, w=32):
    """A person standing still (same pixels in every frame) next to one who walks through."""
    bg = textured_background(h, w, 3)
    video = np.repeat(bg[None], t, axis=0)
    hole = np.zeros((t, h, w), bool)
    video[:, 4:14, 3:9] = (250, 10, 250)  # the static person: magenta, never uncovered
    hole[:, 2:16, 1:11] = True
    for i in range(t):
        x = 12 + (i * 14) // t
        video[i, 8:20, x:x + 5] = (10, 250, 10)
        hole[i, 7:21, x - 1:x + 6] = True
    return bg, video, hole


def _stream(inpainter, video, hole, made=None, **windows):
    """``inpaint_stream`` over in-memory arrays: (the output, the length of every read); the
    made-up pixels it reports go into ``made`` (an array like ``hole``) when given."""
    from anonymask.models.anonymizer.inpaint.backends import inpaint_stream

    out = np.zeros_like(video)
    reads = []

    def read(a, b):
        reads.append(b - a)
        return video[a:b], hole[a:b]

    def write(t0, frames, made_up):
        out[t0:t0 + len(frames)] = frames
        if made is not None:
            made[t0:t0 + len(frames)] = made_up

    inpaint_stream(inpainter, read, len(video), write, **windows)
    return out, reads


def test_streamed_median_never_copies_a_person_back():

    bg, video, hole = _static_person_video()
    out, reads = _stream(get_inpainter("temporal_median"), video, hole, window=32)
    assert max(reads) <= 32 + 2 * 16  # bounded by the window and its context
    # no person colour anywhere in the output; outside the hole the frames are untouched
    assert not (np.abs(out.astype(int) - (250, 10, 250)).max(-1) < 60).any()
    assert not (np.abs(out.astype(int) - (10, 250, 10)).max(-1) < 60).any()
    assert np.array_equal(out[~hole], video[~hole])
    # the walker's trail is filled from frames where those pixels are background
    seen = ~hole.all(0)
    assert psnr(out[:, seen], np.broadcast_to(bg, video.shape)[:, seen], mask=hole[:, seen]) > 30


def test_streamed_median_matches_the_whole_video_median_on_a_static_background():
    """Windows of 8 frames (+2 context) instead of one median over all 40 frames: the same output
    when the background does not change (a pixel a window never uncovers takes the median of the
    frames sampled over the whole video, here all of them), and every window's read is bounded."""

    video, bg, mask = moving_person(t=40)
    video = np.where(mask[..., None], video, bg[None])  # no brightness flicker: a static background
    inp = get_inpainter("temporal_median", method="telea", radius=3)
    whole = inp.inpaint(video, mask)
    out, reads = _stream(inp, video, mask, window=8, context=2)
    assert max(reads) <= 8 + 2 * 2
    np.testing.assert_array_equal(out, whole)
    assert psnr(out, np.broadcast_to(bg, video.shape), mask) > 45


def test_a_part_the_mask_missed_in_a_few_frames_is_not_copied_into_the_others():
    """A person stands still and the mask misses their shoe in 2 of 30 frames: those 2 frames are
    the only ones where the shoe's pixels are uncovered, and a median of them puts the shoe back
    into the 28 frames where the mask hid it. A median needs ``min_support`` (5) uncovered frames;
    pixels seen fewer times are filled spatially, from the background around them."""
    video, bg, _ = moving_person(t=30, h=48, w=64)
    shoe = np.zeros(video.shape[:3], bool)
    shoe[:, 30:36, 20:30] = True
    video[shoe] = (250, 10, 250)
    hole = shoe.copy()
    hole[[7, 19], 30:36, 20:30] = False  # the mask missed it there
    shown = lambda out: np.abs(out[hole].astype(int) - (250, 10, 250)).max(-1) < 60  # noqa: E731
    old = get_inpainter("temporal_median", min_support=1, grow_unseen=0).inpaint(video, hole)
    assert shown(old).mean() > 0.9  # the mechanism: without the rule the shoe is back in every frame
    out = get_inpainter("temporal_median").inpaint(video, hole)
    assert not shown(out).any()
    assert np.array_equal(out[~hole], video[~hole])
    assert psnr(out, np.broadcast_to(bg, video.shape), hole) > 20
    streamed, _ = _stream(get_inpainter("temporal_median"), video, hole, window=8, context=2)
    assert not np.abs(streamed[hole].astype(int) - (250, 10, 250)).max(-1).__lt__(60).any()


def test_made_up_pixels_are_the_spatially_filled_ones_and_no_copied_pixel():
    """The still person's place is never uncovered: the median has no sample there and the fill
    makes it up (with the ``grow_unseen`` ring, inside the hole); the walker's trail is copied from
    frames that show it and is not made up. Whole video and streamed in windows alike."""
    from anonymask.models.anonymizer.inpaint.backends import TemporalMedianInpainter

    bg, video, hole = _static_person_video()
    inp = get_inpainter("temporal_median")
    out, made = inp.fill(video, hole)
    assert np.array_equal(out, inp.inpaint(video, hole))
    never = hole.all(0)
    assert made[:, never].all()  # the still person's place, in every frame
    assert not (made & ~hole).any()  # only hole pixels
    trail = hole & ~never[None]
    ring = cv2.dilate(never.view(np.uint8), np.ones((2 * inp.grow_unseen + 1,) * 2, np.uint8)).astype(bool)
    assert not made[trail & ~ring[None]].any()  # copied from other frames: real pixels
    assert made[trail & ring[None]].any()  # the grown ring is rewritten by the fill: made up too
    streamed = np.zeros_like(hole)
    _stream(inp, video, hole, made=streamed, window=32)
    assert streamed[:, never].all() and not (streamed & ~hole).any()
    assert not streamed[trail & ~ring[None]].any()
    assert isinstance(inp, TemporalMedianInpainter)


def test_every_hole_pixel_of_the_frame_by_frame_fill_is_made_up():
    video, _, mask = moving_person(t=4)
    out, made = get_inpainter("opencv").fill(video, mask)
    assert np.array_equal(made, mask.astype(bool)) and np.array_equal(out, get_inpainter("opencv").inpaint(video, mask))


def test_aligned_median_makes_up_only_what_no_neighbour_shows():
    """A still camera through the aligned median: the walker's trail is shown by neighbours (not
    made up), the still person's place by none (made up)."""
    t, h, w = 16, 96, 128
    video = np.repeat(textured_background(h, w, 5)[None], t, axis=0)
    hole = np.zeros((t, h, w), bool)
    video[:, 10:40, 8:20] = (250, 10, 250)  # still, never uncovered
    hole[:, 8:42, 6:22] = True
    for i in range(t):  # a walker 6 px a frame: their place is shown a few frames later
        x = 30 + 6 * i
        video[i, 50:80, x:x + 8] = (10, 250, 10)
        hole[i, 48:82, x - 2:x + 10] = True
    out, made = get_inpainter("aligned_median", reach=6, step=1).fill(video, hole)
    never = hole.all(0)
    assert made[:, never].all() and not (made & ~hole).any()
    assert (~made[hole & ~never[None]]).mean() > 0.5  # most of the trail came from aligned neighbours


def test_a_source_margin_keeps_what_the_mask_missed_out_of_the_fill():
    """A person stands still for most of the clip and the mask misses a 2-px rim of them (their
    colour just outside the hole, frame after frame): the window's median copies that rim into
    the hole of the frames where they have left. With ``source_margin`` 3 it takes the background."""
    from anonymask.models.anonymizer.inpaint.backends import TemporalMedianInpainter

    t, h, w = 40, 24, 24
    video = np.full((t, h, w, 3), 100, np.uint8)
    hole = np.zeros((t, h, w), bool)
    video[:30, 6:18, 6:18] = 200  # the person, frames 0-29, in one place
    hole[:30, 8:16, 8:16] = True  # their mask misses a 2-px rim
    hole[30:, 6:18, 6:18] = True  # later frames: a hole over the rim's place (someone else's)
    plain = TemporalMedianInpainter(min_support=1, grow_unseen=0).inpaint(video, hole)
    kept_out = TemporalMedianInpainter(min_support=1, grow_unseen=0, source_margin=3).inpaint(video, hole)
    assert (plain[35, 6, 6:18] == 200).all()  # the rim copied into a frame they are not in
    # with the margin the rim is never a sample: filled from the background around it
    assert (np.abs(kept_out[35, 6, 6:18].astype(int) - 100) <= 3).all()
    assert np.array_equal(kept_out[~hole], video[~hole])  # only hole pixels change
