"""Dim footage brightened for the person models: one gain per shot, on their inputs only.

Why: the landmark model, the person detector and the face detector were trained on well-exposed
pictures. On a dim shot (lights low, a night scene) a small or far person drops below their
confidence thresholds while the same person in the same shot at normal exposure is found
(docs/RESULTS.md, "Dim footage"). A gain is what a camera's exposure correction does: it keeps
every pixel's order and every edge, and only lifts the picture to where the models work.

What it touches: the frames person discovery reads (detect, follow, hold, backfill, bridge,
faces). The video, the masks' pixels, the inpainting and the audit read the video as it is.

One gain per shot, never per frame: the hold and change tests compare grey levels between frames
(``discover.hold_tol``, ``scan.change_tol``), which a gain that moved from frame to frame would
break. The gain comes from frames spread over the whole shot, so a dark opening does not set it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np

from anonymask.models.anonymizer.pose.settings import ExposureSettings

#: Rec. 601 luma weights (R, G, B): what "brightness" means for the percentile
_LUMA = np.array([0.299, 0.587, 0.114], np.float32)


def luminance_level(frames: np.ndarray, percentile: float) -> float:
    """The ``percentile`` of the frames' ((n,H,W,3) uint8) luminance, in grey levels."""
    return float(np.percentile(frames.astype(np.float32) @ _LUMA, percentile))


def shot_gain(frames: np.ndarray, settings: ExposureSettings) -> float:
    """The gain for a shot from some of its frames ((n,H,W,3) uint8): 1.0 unless the shot is dim
    (its ``percentile`` luminance below ``dim_below``); then what brings that percentile to
    ``target``, at most ``max_gain``."""
    if not settings.enabled or frames.size == 0:
        return 1.0
    level = luminance_level(frames, settings.percentile)
    if level >= settings.dim_below:
        return 1.0
    return float(min(settings.max_gain, settings.target / max(level, 1.0)))


def gain_table(gain: float) -> np.ndarray | None:
    """The 256-entry table that applies ``gain`` to uint8 pixels (clipped at 255); None for 1."""
    if gain == 1.0:
        return None
    return np.clip(np.rint(np.arange(256, dtype=np.float32) * gain), 0, 255).astype(np.uint8)


def sample_frames(read_frames: Callable[[int, int], np.ndarray], t_len: int, count: int) -> np.ndarray:
    """``count`` frames evenly spaced over [0, t_len) (fewer in a short shot)."""
    idx = np.unique(np.linspace(0, t_len - 1, min(count, t_len)).round().astype(int))
    return np.concatenate([np.asarray(read_frames(int(t), int(t) + 1)) for t in idx])


def brightened(read_frames, windows: Iterable, t_len: int,
               settings: ExposureSettings) -> tuple[Callable | None, Iterator, float]:
    """``read_frames`` and ``windows`` (person discovery's inputs) with the shot's gain applied,
    and the gain. Without ``read_frames`` the gain comes from the first window."""
    windows = iter(windows)
    if not settings.enabled:
        return read_frames, windows, 1.0
    first = None
    if read_frames is not None and t_len > 0:
        gain = shot_gain(sample_frames(read_frames, t_len, settings.sample_frames), settings)
    else:
        first = next(windows, None)
        gain = shot_gain(first[1], settings) if first is not None else 1.0
    table = gain_table(gain)

    def win() -> Iterator:
        if first is not None:
            yield first[0], first[1] if table is None else table[first[1]]
        for t0, frames in windows:
            yield t0, frames if table is None else table[frames]

    if table is None or read_frames is None:
        return read_frames, win(), gain
    return (lambda a, b: table[np.asarray(read_frames(a, b))]), win(), gain
