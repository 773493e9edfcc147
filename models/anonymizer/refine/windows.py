"""Temporal windows for denoising crops longer than the motion module's context.

AnimateDiff's motion modules were trained on 16-frame clips (positional encodings reach 32), and
memory grows with the frames denoised together. A longer crop is therefore denoised window by
window *at every denoising step*: each window's latents go through the ControlNets and the UNet,
and every frame's noise prediction is the weighted average of the predictions of all windows that
contain it. The scheduler then steps the whole crop at once, so windows that share frames are
pulled towards one another at every step and no seam is frozen in.

Two kinds of window (after the long-video practice around AnimateDiff: overlapping context
windows, plus strided frame subsets for long-range coherence):

* contiguous windows ``[s, s+1, ..., s+window-1]`` whose starts are ``stride`` apart (the last one
  ends at the last frame), overlapping by ``window - stride`` frames;
* with a dilation ``d > 1``, strided subsets ``[r, r+d, r+2d, ...]`` for each residue ``r < d``,
  cut into windows the same way: the motion module then relates frames ``d`` apart, which ties
  distant parts of the crop together.

"Iterative": the starts can be shifted per denoising step (``shift``), so window borders move from
step to step instead of sitting at the same frames every time.

Everything here is a pure function of its arguments (deterministic).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

WEIGHTINGS = ("uniform", "pyramid")


def _starts(length: int, window: int, stride: int, shift: int) -> list[int]:
    """Window starts over ``length`` items: 0, then every ``stride`` from ``shift``, then the last."""
    last = length - window
    inner = range(shift % stride, last, stride)
    return sorted({0, last, *inner})


def window_schedule(
    num_frames: int,
    window: int = 16,
    stride: int = 8,
    dilations: Sequence[int] = (1,),
    shift: int = 0,
) -> list[list[int]]:
    """The frame indices of every window for one denoising step.

    Every frame is covered by at least one window of every dilation; with ``num_frames <= window``
    the schedule is the single window of all frames (windowing is then a no-op). Windows come out
    in a fixed order: by dilation, then residue, then start.
    """
    if num_frames < 1:
        raise ValueError(f"num_frames must be >= 1, got {num_frames}")
    if window < 1 or not 1 <= stride <= window:
        raise ValueError(f"need window >= 1 and 1 <= stride <= window, got window={window}, stride={stride}")
    if not dilations or any(int(d) < 1 for d in dilations):
        raise ValueError(f"dilations must be positive integers, got {tuple(dilations)}")
    if num_frames <= window:
        return [list(range(num_frames))]
    schedule: list[list[int]] = []
    seen: set[tuple[int, ...]] = set()
    for d in sorted({int(d) for d in dilations}):
        for residue in range(d):
            frames = list(range(residue, num_frames, d))
            if len(frames) <= window:
                windows = [frames]
            else:
                windows = [frames[s : s + window] for s in _starts(len(frames), window, stride, shift)]
            for w in windows:
                if tuple(w) not in seen:
                    seen.add(tuple(w))
                    schedule.append(w)
    return schedule


def rolling_shift(step_index: int, stride: int) -> int:
    """The start shift used at denoising step ``step_index``: moves by half a stride per step."""
    return (step_index * max(1, stride // 2)) % stride


def position_weights(length: int, weighting: str = "pyramid") -> torch.Tensor:
    """Weights of the frames inside one window: flat, or highest in the middle and lowest at the ends.

    A frame at a window's border sees context on one side only, so its prediction from that window is
    trusted less ("pyramid"). All weights are > 0, so every covered frame gets a prediction.
    """
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")
    if weighting == "uniform":
        return torch.ones(length, dtype=torch.float64)
    pos = torch.arange(length, dtype=torch.float64)
    return torch.minimum(pos + 1, length - pos)


def window_weights(schedule: Sequence[Sequence[int]], num_frames: int, weighting: str = "pyramid") -> torch.Tensor:
    """Matrix (windows, frames): how much each window's prediction counts for each frame.

    Each column sums to 1 (a frame's prediction is a convex combination of its windows' predictions).
    Raises ValueError if a frame is not covered by any window.
    """
    raw = torch.zeros(len(schedule), num_frames, dtype=torch.float64)
    for i, frames in enumerate(schedule):
        raw[i, list(frames)] = position_weights(len(frames), weighting)
    total = raw.sum(0)
    if torch.any(total <= 0):
        uncovered = torch.nonzero(total <= 0).flatten().tolist()
        raise ValueError(f"frames {uncovered} are in no window")
    return raw / total


class WindowAccumulator:
    """Running weighted average of per-window predictions along one frame axis.

    Windows are added one at a time, so only one full-length buffer is kept in memory however many
    windows there are.
    """

    def __init__(self, num_frames: int, frame_dim: int = 2, weighting: str = "pyramid"):
        self.num_frames = num_frames
        self.frame_dim = frame_dim
        self.weighting = weighting
        self._sum: torch.Tensor | None = None
        self._weight = torch.zeros(num_frames, dtype=torch.float64)

    def add(self, frames: Sequence[int], pred: torch.Tensor) -> None:
        """Add one window's prediction ``pred`` (its frame axis has ``len(frames)`` entries)."""
        if pred.shape[self.frame_dim] != len(frames):
            raise ValueError(f"prediction has {pred.shape[self.frame_dim]} frames, window has {len(frames)}")
        weights = position_weights(len(frames), self.weighting)
        if self._sum is None:
            shape = list(pred.shape)
            shape[self.frame_dim] = self.num_frames
            self._sum = torch.zeros(shape, dtype=torch.float32, device=pred.device)
        view = [1] * pred.ndim
        view[self.frame_dim] = len(frames)
        w = weights.to(device=pred.device, dtype=torch.float32).view(view)
        index = torch.as_tensor(list(frames), device=pred.device)
        self._sum.index_add_(self.frame_dim, index, pred.float() * w)
        self._weight.index_add_(0, torch.as_tensor(list(frames)), weights)

    def result(self, dtype: torch.dtype | None = None) -> torch.Tensor:
        """The averaged prediction for all frames; fails if a frame got no window."""
        if self._sum is None:
            raise ValueError("no window was added")
        if torch.any(self._weight <= 0):
            uncovered = torch.nonzero(self._weight <= 0).flatten().tolist()
            raise ValueError(f"frames {uncovered} are in no window")
        view = [1] * self._sum.ndim
        view[self.frame_dim] = self.num_frames
        out = self._sum / self._weight.to(device=self._sum.device, dtype=torch.float32).view(view)
        return out.to(dtype) if dtype is not None else out


def average_over_windows(
    preds: Sequence[torch.Tensor],
    schedule: Sequence[Sequence[int]],
    num_frames: int,
    frame_dim: int = 2,
    weighting: str = "pyramid",
) -> torch.Tensor:
    """Combine one prediction per window (same order as ``schedule``) into one per frame."""
    if len(preds) != len(schedule):
        raise ValueError(f"{len(preds)} predictions for {len(schedule)} windows")
    acc = WindowAccumulator(num_frames, frame_dim=frame_dim, weighting=weighting)
    for frames, pred in zip(schedule, preds):
        acc.add(frames, pred)
    return acc.result(dtype=preds[0].dtype)
