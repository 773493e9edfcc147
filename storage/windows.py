"""Bounded-memory passes over a video in the store: overlapping frame windows.

A stage that must look at neighbouring frames (temporal smoothing, medians, unflicker, crops that
follow a smoothed box) reads the video window by window instead of whole:

    for win in frame_windows(entry.num_frames, size=64, context=8):
        block = entry.read("raw", win.read)         # frames win.start .. win.stop (with context)
        out = process(block)                        # may use the context frames
        writer.write(out[win.core_in_block])        # keep only the frames this window owns

Windows partition the video into consecutive *cores* of ``size`` frames (the last one shorter);
each window reads its core plus up to ``context`` frames on either side (clipped at the video's
ends). Writing every window's core, in order, through a
:class:`~anonymask.storage.store.FrameArrayWriter` produces each frame exactly once, and memory
holds one window (``size + 2 * context`` frames) whatever the video's length. An operation whose
reach per output frame is at most ``context`` frames (a filter of radius ``context``) gives the
same result as on the whole video; wider ones (a median over the whole video) must be rewritten
as two passes (collect small per-frame statistics in pass 1, apply them per window in pass 2).

``WINDOW_FRAMES`` is the default core length: a multiple of the store's 16-frame chunks, so window
reads touch whole chunks.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

#: default core length of a window (frames); 4 store chunks
WINDOW_FRAMES = 64


@dataclass(frozen=True)
class Window:
    """One window: read frames ``[start, stop)``, own (write) frames ``[core_start, core_stop)``."""

    start: int
    stop: int
    core_start: int
    core_stop: int

    @property
    def read(self) -> slice:
        """The frames to read from the store (core plus context)."""
        return slice(self.start, self.stop)

    @property
    def core(self) -> slice:
        """The frames this window owns, in video frame numbers."""
        return slice(self.core_start, self.core_stop)

    @property
    def core_in_block(self) -> slice:
        """The owned frames as positions inside the block read with :attr:`read`."""
        return slice(self.core_start - self.start, self.core_stop - self.start)

    def __len__(self) -> int:
        return self.stop - self.start


def frame_windows(n_frames: int, size: int = WINDOW_FRAMES, context: int = 0) -> list[Window]:
    """Windows over ``n_frames`` frames: cores of ``size`` frames, ``context`` frames either side."""
    if size < 1:
        raise ValueError(f"window size must be >= 1, got {size}")
    if context < 0:
        raise ValueError(f"window context must be >= 0, got {context}")
    out = []
    for c0 in range(0, max(int(n_frames), 0), size):
        c1 = min(c0 + size, n_frames)
        out.append(Window(max(0, c0 - context), min(n_frames, c1 + context), c0, c1))
    return out


def iter_blocks(array, size: int = WINDOW_FRAMES, context: int = 0) -> Iterator[tuple[Window, object]]:
    """``(window, frames)`` over a zarr (or numpy) array along axis 0, one window in memory."""
    import numpy as np

    for win in frame_windows(int(array.shape[0]), size, context):
        yield win, np.asarray(array[win.read])


def video_shots(entry) -> list[tuple[int, int]]:
    """[start, stop) of each shot of a stored video (``shots``, written by ingest; a store from
    before cut detection has none: one shot)."""
    t_len = int(entry.num_frames)
    if not entry.has_array("shots"):
        return [(0, t_len)]
    return [(int(a), int(b)) for a, b in entry.read("shots")]
