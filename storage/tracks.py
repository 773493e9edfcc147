"""Per-track frame arrays stored over each track's own frames.

A video's per-track images (``render/track_masks``: each avatar's silhouette,
``person_track_alphas``: each person's reintegration alpha) were one (T, N, H, W) array: a
window of it held every track, though on a long video most tracks are elsewhere in time, and N
grows with the video's length when people come and go. Here track ``j`` is the array
``<name>/<j>`` of shape (stop - start, H, W) holding frames ``start..stop-1`` only, and
``<name>_spans`` ((N, 2) int64, [start, stop)) says where; a track with an empty span has no
array. Outside its span a track is all zeros, so a window reads only the tracks alive in it and a
stage holds one (small, ``TRACK_SHARD_BYTES``) shard buffer per *alive* track, whatever N is.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from anonymask.storage.store import SHARD_BYTES, StageWriter, VideoEntry

#: shard size of a per-track array (and of a tubelet's): a stage writes one per alive track at once, each writer
#: holding up to a shard (64 MiB x several tracks was more than the old single (T,N,H,W) shard)
TRACK_SHARD_BYTES = SHARD_BYTES // 8


def spans_name(name: str) -> str:
    return f"{name}_spans"


def read_spans(entry: VideoEntry, name: str) -> np.ndarray:
    """(N, 2) [start, stop) of every track of ``name``."""
    return np.asarray(entry.read(spans_name(name)), np.int64).reshape(-1, 2)


def has_tracks(entry: VideoEntry, name: str) -> bool:
    return entry.has_array(spans_name(name))


def track_count(entry: VideoEntry, name: str) -> int:
    return int(read_spans(entry, name).shape[0])


def alive(spans: np.ndarray, a: int, b: int) -> list[int]:
    """Tracks whose span meets frames a..b-1."""
    return [j for j, (s, e) in enumerate(spans) if s < e and s < b and a < e]


def span_of(present: np.ndarray, pad: int = 0) -> tuple[int, int]:
    """[start, stop) of the frames where ``present`` (T,) is True, ``pad`` frames wider (clipped);
    (0, 0) when it is never True."""
    idx = np.flatnonzero(np.asarray(present, bool))
    if not idx.size:
        return 0, 0
    return max(0, int(idx[0]) - pad), min(len(present), int(idx[-1]) + 1 + pad)


def read_window(entry: VideoEntry, name: str, a: int, b: int, tracks=None,
                spans: np.ndarray | None = None) -> dict[int, np.ndarray]:
    """Frames a..b-1 of every track alive there (or of ``tracks`` among them): {j: (b-a, ...)},
    zeros where the window reaches past the track's span."""
    spans = read_spans(entry, name) if spans is None else spans
    return {j: span_window(entry.array(f"{name}/{j}"), spans[j], a, b) for j in alive(spans, a, b)
            if tracks is None or j in tracks}


def span_window(arr, span, a: int, b: int, edge: bool = False) -> np.ndarray:
    """Frames a..b-1 of an array stored over frames ``span`` = [start, stop) (it must meet a..b):
    zeros where the window reaches past the span (``edge``: its first/last stored frame repeated,
    e.g. boxes, which must stay valid boxes)."""
    s, e = (int(x) for x in span)
    lo, hi = max(a, s), min(b, e)
    if hi <= lo:
        raise ValueError(f"an array stored over frames {s}..{e - 1} read at {a}..{b - 1}")
    part = np.asarray(arr[lo - s : hi - s])
    if lo == a and hi == b:
        return part
    if edge:
        return np.pad(part, [(lo - a, b - hi)] + [(0, 0)] * (part.ndim - 1), mode="edge")
    block = np.zeros((b - a, *part.shape[1:]), part.dtype)
    block[lo - a : hi - a] = part
    return block


class TrackWriters:
    """Streams per-track frames window by window (windows in order, covering the video): a
    track's writer opens at the first window meeting its span and closes (its last shard
    written) after the window holding its last frame, so only the tracks alive in a window hold a
    shard buffer. Frames outside a track's span must be zero: :meth:`write` checks it, so a span
    that is too short fails the stage instead of losing pixels."""

    def __init__(self, w: StageWriter, name: str, frame_shape, dtype, spans: np.ndarray):
        self.w, self.name = w, name
        self.frame_shape, self.dtype = tuple(int(s) for s in frame_shape), np.dtype(dtype)
        self.spans = np.asarray(spans, np.int64).reshape(-1, 2)
        self._open: dict[int, Any] = {}
        entry = w.entry
        if entry.has_array(name) or _is_group(entry, name):  # an older layout, or more tracks
            parent, leaf = entry._parent_and_leaf(name, create=False)
            del parent[leaf]
        w.write(spans_name(name), self.spans, frame_chunked=False)

    def write(self, a: int, b: int, blocks: dict[int, np.ndarray]) -> None:
        """Frames a..b-1: ``blocks`` {j: (b-a, *frame_shape)}; tracks absent from it are zeros."""
        for j, blk in blocks.items():
            s, e = (int(x) for x in self.spans[j])
            lo, hi = min(max(a, s), b), max(min(b, e), a)
            if (lo > a and np.any(blk[: lo - a])) or (hi < b and np.any(blk[hi - a :])) or (s >= e and np.any(blk)):
                raise ValueError(f"{self.w.entry.video_id}/{self.name}/{j}: pixels outside the track's "
                                 f"frames {s}..{e - 1} in frames {a}..{b - 1}")
        for j in alive(self.spans, a, b):
            s, e = (int(x) for x in self.spans[j])
            if j not in self._open:
                if a > s:
                    raise ValueError(f"{self.name}/{j}: windows must come in order (track starts at {s}, window at {a})")
                self._open[j] = self.w.entry.frame_writer(f"{self.name}/{j}", self.frame_shape, self.dtype,
                                                          frames=e - s, shard_bytes=TRACK_SHARD_BYTES)
            lo, hi = max(a, s), min(b, e)
            blk = blocks.get(j)
            self._open[j].write(blk[lo - a : hi - a] if blk is not None
                                else np.zeros((hi - lo, *self.frame_shape), self.dtype))
            if e <= b:
                self.w.add_output(f"{self.name}/{j}", self._open.pop(j).close())

    def close(self) -> None:
        if self._open:
            raise ValueError(f"{self.name}: tracks {sorted(self._open)} not written to their end")


def _is_group(entry: VideoEntry, name: str) -> bool:
    try:
        parent, leaf = entry._parent_and_leaf(name, create=False)
    except KeyError:
        return False
    return leaf in parent
