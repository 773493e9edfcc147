"""Temporal windows: coverage, determinism, and averaging weights (pure functions, no models)."""

import itertools

import pytest
import torch

from anonymask.models.anonymizer.refine.windows import (
    WindowAccumulator,
    average_over_windows,
    position_weights,
    rolling_shift,
    window_schedule,
    window_weights,
)

CASES = list(itertools.product([1, 16, 17, 20, 45, 101], [4, 16], [1, 4], [(1,), (1, 2), (1, 2, 4)], [0, 3]))


@pytest.mark.parametrize("num_frames,window,stride,dilations,shift", CASES)
def test_every_frame_covered_by_every_dilation(num_frames, window, stride, dilations, shift):
    if stride > window:
        pytest.skip("stride > window is rejected")
    schedule = window_schedule(num_frames, window, stride, dilations, shift)
    assert schedule == window_schedule(num_frames, window, stride, dilations, shift)  # deterministic
    assert len({tuple(w) for w in schedule}) == len(schedule)  # no duplicate windows
    for w in schedule:
        assert 1 <= len(w) <= window
        assert all(0 <= f < num_frames for f in w)
        steps = {b - a for a, b in zip(w, w[1:])}
        assert len(steps) <= 1  # contiguous or evenly strided
    if num_frames <= window:
        assert schedule == [list(range(num_frames))]
        return
    for d in dilations:
        of_dilation = [w for w in schedule if len(w) == 1 or w[1] - w[0] == d]
        covered = set().union(*map(set, of_dilation))
        assert covered == set(range(num_frames)), f"dilation {d} leaves frames out"


def test_contiguous_windows_overlap_by_window_minus_stride():
    schedule = window_schedule(40, window=16, stride=8)
    assert schedule == [list(range(0, 16)), list(range(8, 24)), list(range(16, 32)), list(range(24, 40))]
    for a, b in zip(schedule, schedule[1:]):
        assert len(set(a) & set(b)) >= 16 - 8


def test_last_window_ends_at_last_frame_and_shift_moves_borders():
    plain = window_schedule(20, window=16, stride=8)
    assert plain == [list(range(0, 16)), list(range(4, 20))]
    shifted = window_schedule(50, window=16, stride=8, shift=4)
    assert [w[0] for w in shifted] == [0, 4, 12, 20, 28, 34]
    assert [w[0] for w in window_schedule(50, 16, 8)] == [0, 8, 16, 24, 32, 34]


def test_strided_windows_are_residue_classes():
    schedule = window_schedule(20, window=16, stride=8, dilations=(2,))
    assert schedule == [list(range(0, 20, 2)), list(range(1, 20, 2))]


def test_rolling_shift_cycles_within_stride():
    assert [rolling_shift(i, 8) for i in range(4)] == [0, 4, 0, 4]
    assert all(0 <= rolling_shift(i, 5) < 5 for i in range(20))
    assert rolling_shift(3, 1) == 0


@pytest.mark.parametrize("bad", [dict(window=0), dict(stride=0), dict(stride=17), dict(dilations=(0,)), dict(dilations=())])
def test_invalid_settings_raise(bad):
    kwargs = dict(window=16, stride=8, dilations=(1,)) | bad
    with pytest.raises(ValueError):
        window_schedule(40, **kwargs)
    with pytest.raises(ValueError):
        window_schedule(0)


@pytest.mark.parametrize("weighting", ["uniform", "pyramid"])
@pytest.mark.parametrize("num_frames,dilations", [(7, (1,)), (37, (1,)), (37, (1, 2)), (70, (1, 2, 4))])
def test_weights_sum_to_one_per_frame(weighting, num_frames, dilations):
    schedule = window_schedule(num_frames, 16, 8, dilations, shift=3)
    w = window_weights(schedule, num_frames, weighting)
    assert w.shape == (len(schedule), num_frames)
    assert torch.allclose(w.sum(0), torch.ones(num_frames, dtype=w.dtype))
    assert torch.all(w >= 0)
    for i, frames in enumerate(schedule):  # a window weighs only its own frames
        outside = [f for f in range(num_frames) if f not in set(frames)]
        assert torch.all(w[i, outside] == 0)
        assert torch.all(w[i, frames] > 0)


def test_pyramid_weights_peak_in_the_middle():
    w = position_weights(6, "pyramid")
    assert w.tolist() == [1, 2, 3, 3, 2, 1]
    assert position_weights(5, "uniform").tolist() == [1] * 5
    with pytest.raises(ValueError):
        position_weights(3, "gaussian")


def test_uncovered_frame_raises():
    with pytest.raises(ValueError, match=r"\[2\]"):
        window_weights([[0, 1], [3]], 4)
    acc = WindowAccumulator(3)
    acc.add([0, 1], torch.zeros(1, 1, 2))
    with pytest.raises(ValueError):
        acc.result()


@pytest.mark.parametrize("weighting", ["uniform", "pyramid"])
def test_single_window_average_is_the_window_prediction(weighting):
    pred = torch.randn(1, 4, 9, 5, 5)
    schedule = window_schedule(9, 16, 8)
    out = average_over_windows([pred], schedule, 9, frame_dim=2, weighting=weighting)
    assert out.shape == pred.shape
    assert torch.allclose(out, pred, atol=1e-6)


@pytest.mark.parametrize("weighting", ["uniform", "pyramid"])
def test_consistent_predictions_are_reproduced_exactly(weighting):
    """If every window predicts the same value for a frame, the average is that value (weights sum to 1)."""
    num_frames = 45
    truth = torch.randn(2, 3, num_frames, 4, 4)
    schedule = window_schedule(num_frames, 16, 4, (1, 2, 4), shift=2)
    preds = [truth[:, :, w] for w in schedule]
    out = average_over_windows(preds, schedule, num_frames, weighting=weighting)
    assert torch.allclose(out, truth, atol=1e-5)


def test_average_matches_hand_computation():
    schedule = [[0, 1, 2], [1, 2, 3]]
    a = torch.tensor([1.0, 2.0, 3.0]).view(1, 1, 3)
    b = torch.tensor([10.0, 20.0, 30.0]).view(1, 1, 3)
    uniform = average_over_windows([a, b], schedule, 4, frame_dim=2, weighting="uniform").flatten()
    assert torch.allclose(uniform, torch.tensor([1.0, (2 + 10) / 2, (3 + 20) / 2, 30.0]))
    # pyramid weights for 3 frames are (1, 2, 1)
    pyramid = average_over_windows([a, b], schedule, 4, frame_dim=2, weighting="pyramid").flatten()
    assert torch.allclose(pyramid, torch.tensor([1.0, (2 * 2 + 10 * 1) / 3, (3 * 1 + 20 * 2) / 3, 30.0]))


def test_prediction_length_must_match_window():
    acc = WindowAccumulator(5, frame_dim=0)
    with pytest.raises(ValueError):
        acc.add([0, 1, 2], torch.zeros(2))
    with pytest.raises(ValueError):
        average_over_windows([torch.zeros(1, 1, 2)], [[0, 1], [1, 2]], 3)
