"""Frame-accurate video reading and MP4 writing (PyAV).

Decisions users rely on:

* **Frame numbering.** Frame ``i`` is the ``i``-th frame the decoder outputs when every packet of
  the first video stream is decoded in file order (packets flagged corrupt or discard are skipped).
  ``probe(...).frames`` counts exactly these frames (by decoding, see ``exact``), and
  ``read_frames`` numbers frames the same way whether it seeks or not.
* **Seeking.** ``seek()`` lands on a keyframe at or before the target; the reader then decodes
  forward and identifies each frame by its timestamp in an index built from one demux pass (no
  decoding). Any doubt (missing or duplicate timestamps, a landing past the target, a gap in the
  sequence) falls back to decoding from the start, so results always equal a full decode.
* **Truncation.** An MP4/MOV cut short whose index (``moov`` atom) sits at the end of the file, as
  plain ffmpeg/PyAV writes it, cannot be opened at all: :class:`InvalidVideoError` saying so. When
  the index is at the front (``faststart``) or the container needs none (AVI, MKV), the frames
  before the cut decode normally; the incomplete last packet is flagged corrupt by the demuxer and
  skipped. Those calls return the decodable prefix and warn; ``probe(..., strict=True)`` raises
  instead. ``VideoMeta.truncated`` records it.
* **Sizes.** Width/height 0, odd sizes (the pipeline writes yuv420p, which needs even sizes) and
  sides above ``max_side`` (default 8192, env ``ANONYMASK_MAX_VIDEO_SIDE``) are rejected; pass
  ``allow_odd=True`` / a larger ``max_side`` to read such files anyway. The writer pads odd frames
  (edge replication) or rejects them, as chosen.
* **Writing** goes to a temporary file renamed into place on success, so a crash never leaves a
  half-written MP4 under the final name.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np

from anonymask.core.environment import environment
from anonymask.core.errors import InvalidVideoError

VIDEO_EXTENSIONS = (".mp4", ".avi", ".mov", ".mkv", ".webm", ".m4v", ".mpg", ".mpeg")
#: codecs that take x264-style ``crf``
_CRF_CODECS = {"libx264", "libx264rgb", "libx265", "libvpx-vp9", "libaom-av1", "libsvtav1"}
#: pixel formats whose chroma planes are subsampled (width, height) by 2
_SUBSAMPLED = {
    "yuv420p": (True, True),
    "yuvj420p": (True, True),
    "nv12": (True, True),
    "yuv420p10le": (True, True),
    "yuv422p": (True, False),
    "yuvj422p": (True, False),
}


@dataclass(frozen=True)
class VideoMeta:
    """What one video file holds. ``frames`` is exact (see module docstring)."""

    path: str
    frames: int
    fps: float
    width: int
    height: int
    codec: str
    duration_s: float
    #: frame count written in the container header (None when the container has none)
    declared_frames: int | None = None
    #: the end of the file is missing or damaged: ``frames`` is the decodable prefix
    truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------------------- opening
def _check_file(path: Path) -> None:
    if not path.exists():
        if path.is_symlink():
            raise InvalidVideoError(
                path, f"dangling symbolic link (points to {os.readlink(path)}, which does not exist)"
            )
        raise InvalidVideoError(path, "file does not exist")
    if path.is_dir():
        if not os.access(path, os.R_OK | os.X_OK):
            raise InvalidVideoError(path, "a folder that cannot be listed (permission denied)")
        raise InvalidVideoError(path, "is a directory, not a video file")
    if not os.access(path, os.R_OK):
        raise InvalidVideoError(path, "cannot be read (permission denied)")
    if path.stat().st_size == 0:
        raise InvalidVideoError(path, "file is empty (0 bytes)")


def _open_error_reason(path: Path, err: Exception) -> str:
    with open(path, "rb") as f:
        head = f.read(16)
    if head[4:8] == b"ftyp":
        return (
            "MP4/MOV file without a readable index (moov atom); the file is most likely truncated "
            f"(cut short while copying or downloading) [ffmpeg: {err}]"
        )
    return f"not a readable video file (ffmpeg could not open it: {err})"


def check_frame_size(
    path: str | Path, width: int, height: int, *, max_side: int | None = None, allow_odd: bool = False
) -> None:
    """Raise InvalidVideoError for sizes the pipeline cannot handle."""
    max_side = environment().max_video_side if max_side is None else max_side
    if width <= 0 or height <= 0:
        raise InvalidVideoError(path, f"unsupported frame size {width}x{height} (zero width or height)")
    if width > max_side or height > max_side:
        raise InvalidVideoError(
            path,
            f"unsupported frame size {width}x{height}: larger than the limit of {max_side} pixels per side",
        )
    if not allow_odd and (width % 2 or height % 2):
        raise InvalidVideoError(
            path,
            f"unsupported frame size {width}x{height}: odd width or height (yuv420p output needs even "
            "sizes; pass allow_odd=True to read it anyway)",
        )


def _open_video(path: Path) -> tuple[av.container.InputContainer, av.video.stream.VideoStream]:
    _check_file(path)
    try:
        container = av.open(str(path), mode="r")
    except PermissionError:
        raise InvalidVideoError(path, "cannot be read (permission denied)") from None
    except (av.error.FFmpegError, UnicodeDecodeError) as e:
        raise InvalidVideoError(path, _open_error_reason(path, e)) from None
    if not container.streams.video:
        kinds = sorted({s.type for s in container.streams})
        container.close()
        if "audio" in kinds:
            raise InvalidVideoError(path, "audio only: the file has no video stream")
        raise InvalidVideoError(path, f"no video stream (streams found: {', '.join(kinds) or 'none'})")
    stream = container.streams.video[0]
    stream.thread_type = "AUTO"
    return container, stream


def _stream_fps(stream) -> float | None:
    for rate in (stream.average_rate, stream.guessed_rate, stream.base_rate):
        if rate is not None and float(rate) > 0:
            return float(rate)
    return None


class _Decoder:
    """Decodes one stream in file order, skipping damaged packets and remembering that it did."""

    def __init__(self, path: Path, container, stream):
        self.path = path
        self.container = container
        self.stream = stream
        self.damaged = False

    def frames(self) -> Iterator[av.VideoFrame]:
        demux = self.container.demux(self.stream)
        while True:
            try:
                packet = next(demux)
            except StopIteration:
                return
            except av.error.FFmpegError:
                # the container ends inside a packet or its structure is damaged: keep the prefix
                self.damaged = True
                break
            if packet.is_corrupt or packet.is_discard:
                self.damaged = self.damaged or packet.is_corrupt
                continue
            try:
                yield from packet.decode()
            except av.error.FFmpegError:
                self.damaged = True
            if packet.size == 0:  # the demuxer's final flush packet: the decoder is drained
                return
        try:
            yield from self.stream.decode(None)
        except av.error.FFmpegError:
            self.damaged = True


# ---------------------------------------------------------------------------------------- probe
def probe(
    path: str | Path,
    *,
    exact: bool = True,
    max_side: int | None = None,
    allow_odd: bool = False,
    strict: bool = False,
) -> VideoMeta:
    """Metadata of a video file; raises InvalidVideoError naming the file and reason.

    ``exact=True`` (default) counts frames by decoding every frame once (no colour conversion), so
    the count is what ``read_frames`` returns even when the header is missing or wrong (AVI files
    often lack it, truncated files overstate it). ``exact=False`` trusts the header and falls back
    to counting packets (demux only, much faster; exact for undamaged files).
    ``strict=True`` raises for truncated/damaged files instead of warning.
    """
    path = Path(path)
    container, stream = _open_video(path)
    try:
        width, height = int(stream.codec_context.width), int(stream.codec_context.height)
        check_frame_size(path, width, height, max_side=max_side, allow_odd=allow_odd)
        declared = int(stream.frames) if stream.frames and stream.frames > 0 else None
        dec = _Decoder(path, container, stream)
        if exact:
            frames = sum(1 for _ in dec.frames())
        elif declared is not None:
            frames = declared
        else:
            frames = 0
            try:
                for p in container.demux(stream):
                    frames += bool(p.size) and not p.is_corrupt and not p.is_discard
            except av.error.FFmpegError:
                dec.damaged = True
        codec = stream.codec_context.name
        fps = _stream_fps(stream)
        duration = float(stream.duration * stream.time_base) if stream.duration and stream.time_base else None
    finally:
        container.close()
    if frames == 0:
        if declared:
            raise InvalidVideoError(
                path, f"no frame could be decoded (header declares {declared}; damaged file)"
            )
        raise InvalidVideoError(path, "the video stream has zero frames")
    if fps is None:
        if not duration:
            raise InvalidVideoError(path, "no frame rate and no duration in the file")
        fps = frames / duration
    truncated = dec.damaged or (declared is not None and exact and frames < declared)
    if truncated:
        msg = f"{path}: truncated or damaged video: {frames} decodable frames" + (
            f" of {declared} declared" if declared else ""
        )
        if strict:
            raise InvalidVideoError(path, msg.split(": ", 1)[1])
        warnings.warn(msg + "; using the decodable prefix", stacklevel=2)
    return VideoMeta(
        path=str(path),
        frames=frames,
        fps=fps,
        width=width,
        height=height,
        codec=codec,
        duration_s=frames / fps,
        declared_frames=declared,
        truncated=truncated,
    )


# ---------------------------------------------------------------------------------------- seek index
@dataclass(frozen=True)
class _PtsIndex:
    pos: dict[int, int]  # pts -> frame index
    keyframes: list[tuple[int, int]]  # (frame index, seek timestamp), ascending


@functools.lru_cache(maxsize=64)
def _pts_index_cached(path: str, size: int, mtime_ns: int) -> _PtsIndex | None:
    del size, mtime_ns  # cache keys only: a rewritten file gets a new index
    try:
        container = av.open(path)
    except av.error.FFmpegError:
        return None
    try:
        stream = container.streams.video[0]
        entries = []
        try:
            for p in container.demux(stream):
                if p.size == 0 or p.is_corrupt or p.is_discard:
                    continue
                if p.pts is None:
                    return None
                entries.append((p.pts, p.dts, p.is_keyframe))
        except av.error.FFmpegError:
            pass
    finally:
        container.close()
    entries.sort(key=lambda e: e[0])
    pos = {pts: i for i, (pts, _, _) in enumerate(entries)}
    if len(pos) != len(entries):
        return None  # duplicate timestamps: positions are ambiguous
    keys = [(i, pts if dts is None else min(pts, dts)) for i, (pts, dts, key) in enumerate(entries) if key]
    return _PtsIndex(pos=pos, keyframes=keys)


def _pts_index(path: Path) -> _PtsIndex | None:
    st = path.stat()
    return _pts_index_cached(str(path), st.st_size, st.st_mtime_ns)


class _Reader:
    """Yields ``(index, frame)`` from ``start`` on, seeking when it can prove where it landed."""

    def __init__(self, path: Path, *, max_side: int | None, allow_odd: bool):
        self.path = path
        self.container, self.stream = _open_video(path)
        self.damaged = False
        try:
            self.width = int(self.stream.codec_context.width)
            self.height = int(self.stream.codec_context.height)
            check_frame_size(path, self.width, self.height, max_side=max_side, allow_odd=allow_odd)
        except BaseException:
            self.close()
            raise
        self.declared = int(self.stream.frames) if self.stream.frames and self.stream.frames > 0 else None

    def close(self) -> None:
        self.container.close()

    def _reopen(self) -> _Decoder:
        self.container.close()
        self.container, self.stream = _open_video(self.path)
        return self._decoder()

    def _decoder(self) -> _Decoder:
        return _Decoder(self.path, self.container, self.stream)

    def _sequential(self, start: int, dec: _Decoder) -> Iterator[tuple[int, av.VideoFrame]]:
        for i, frame in enumerate(dec.frames()):
            if i >= start:
                yield i, frame
        self.damaged = self.damaged or dec.damaged

    def frames_from(self, start: int) -> Iterator[tuple[int, av.VideoFrame]]:
        index = _pts_index(self.path) if start > 0 else None
        if index is None:
            yield from self._sequential(start, self._decoder())
            return
        # try the nearest keyframes at or before ``start``; a landing past it means the demuxer
        # seeks on other timestamps than ours, so go one keyframe further back
        for _, seek_ts in [kf for kf in index.keyframes if kf[0] <= start][::-1][:3]:
            outcome = yield from self._from_keyframe(seek_ts, start, index)
            if outcome == "done":
                return
            if outcome == "fallback":
                break
        yield from self._sequential(start, self._reopen())

    def _from_keyframe(self, seek_ts: int, start: int, index: _PtsIndex):
        """Generator: yields frames >= start, returns "done", "too_late" or "fallback"."""
        dec = self._decoder()
        try:
            self.container.seek(seek_ts, backward=True, any_frame=False, stream=self.stream)
        except av.error.FFmpegError:
            return "fallback"
        expected = None
        for frame in dec.frames():
            i = index.pos.get(frame.pts) if frame.pts is not None else None
            if expected is None:  # first frame after the seek: where did we land?
                if i is None:
                    return "fallback"
                if i > start:
                    return "too_late"
                expected = i
            if i != expected:  # unknown frame or a gap: numbering is in doubt from here on
                yield from self._sequential(max(expected, start), self._reopen())
                return "done"
            if i >= start:
                yield i, frame
            expected += 1
        self.damaged = self.damaged or dec.damaged
        return "done" if expected is not None else "fallback"


def _rgb(reader: _Reader, index: int, frame: av.VideoFrame) -> np.ndarray:
    rgb = frame.to_ndarray(format="rgb24")
    if rgb.shape != (reader.height, reader.width, 3):
        raise InvalidVideoError(
            reader.path,
            f"frame {index} is {rgb.shape[1]}x{rgb.shape[0]}, not {reader.width}x{reader.height} "
            "(the frame size changes inside the video)",
        )
    return rgb


def _check_range(start: int, stop: int | None, step: int, max_frames: int | None) -> None:
    if start < 0 or (stop is not None and stop < 0):
        raise ValueError(f"start/stop must be >= 0 (got start={start}, stop={stop})")
    if step < 1:
        raise ValueError(f"step must be >= 1 (got {step})")
    if max_frames is not None and max_frames < 0:
        raise ValueError(f"max_frames must be >= 0 (got {max_frames})")


def _selected(
    reader: _Reader, start: int, stop: int | None, step: int, max_frames: int | None
) -> Iterator[tuple[int, av.VideoFrame]]:
    taken = 0
    if (stop is not None and stop <= start) or max_frames == 0:
        return
    for i, frame in reader.frames_from(start):
        if stop is not None and i >= stop:
            break
        if (i - start) % step:
            continue
        yield i, frame
        taken += 1
        if max_frames is not None and taken >= max_frames:
            break


def _warn_if_damaged(reader: _Reader) -> None:
    if reader.damaged:
        warnings.warn(
            f"{reader.path}: truncated or damaged video; returned the decodable frames", stacklevel=3
        )


# ---------------------------------------------------------------------------------------- reading
def read_frames(
    path: str | Path,
    start: int = 0,
    stop: int | None = None,
    step: int = 1,
    max_frames: int | None = None,
    *,
    max_side: int | None = None,
    allow_odd: bool = False,
) -> np.ndarray:
    """Frames ``start, start+step, ... < stop`` (at most ``max_frames``) as (T,H,W,3) uint8 RGB.

    Frame-accurate: equal to the same slice of a full decode. Indices past the end are simply not
    returned (``T`` may be smaller than asked).
    """
    path = Path(path)
    _check_range(start, stop, step, max_frames)
    reader = _Reader(path, max_side=max_side, allow_odd=allow_odd)
    try:
        h, w = reader.height, reader.width
        ends = [e for e in (stop, reader.declared) if e is not None]
        expect = len(range(start, min(ends), step)) if ends else 64
        if reader.declared is None:
            expect = min(expect, 1024)
        if max_frames is not None:
            expect = min(expect, max_frames)
        buf = np.empty((max(expect, 1), h, w, 3), np.uint8)
        n = 0
        for i, frame in _selected(reader, start, stop, step, max_frames):
            if n == len(buf):  # header undercounted: grow geometrically
                buf = np.concatenate([buf, np.empty_like(buf)])
            buf[n] = _rgb(reader, i, frame)
            n += 1
        _warn_if_damaged(reader)
    finally:
        reader.close()
    if n == 0 and start == 0 and stop != 0 and max_frames != 0:
        raise InvalidVideoError(path, "the video stream has zero decodable frames")
    return buf[:n] if n == len(buf) or n > len(buf) // 2 else buf[:n].copy()


# ---------------------------------------------------------------------------------------- ingest
def _ranges(indices: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted integers -> inclusive runs [(a, b), ...]."""
    out: list[tuple[int, int]] = []
    for i in sorted(set(indices)):
        if out and i == out[-1][1] + 1:
            out[-1] = (out[-1][0], i)
        else:
            out.append((i, i))
    return out


def format_ranges(runs: list[tuple[int, int]], limit: int = 6) -> str:
    parts = [f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:limit]]
    if len(runs) > limit:
        parts.append(f"... ({len(runs) - limit} more)")
    return ", ".join(parts)


@dataclass
class DecodeReport:
    """What decoding one whole video found, as recorded per video by ingest.

    Frame numbers are positions among the frames delivered. ``damaged`` frames decoded, but from
    a damaged bitstream: flagged corrupt by the decoder, or following a packet that failed to
    decode, up to the next keyframe (the damage propagates through predicted frames). ``lost``
    frames never came out: packets that failed to decode, and frames the header declares
    beyond the end of a truncated file.
    """

    path: str
    frames: int = 0
    declared_frames: int | None = None
    damaged: list[int] = field(default_factory=list)
    lost_packets: list[int] = field(default_factory=list)  # position (next frame) of each failed packet
    lost_at_end: int = 0
    errors: list[str] = field(default_factory=list)
    rotation: int = 0  # clockwise degrees applied to every frame (display matrix)
    fps_declared: float | None = None
    fps_timestamps: float | None = None
    vfr: bool = False
    stopped_at_cap: bool = False

    @property
    def lost(self) -> int:
        return len(self.lost_packets) + self.lost_at_end

    @property
    def bad_frames(self) -> int:
        return len(set(self.damaged)) + self.lost

    @property
    def fps(self) -> float | None:
        """Frames per second: from the timestamps when they are usable, else the stream's rate."""
        return self.fps_timestamps or self.fps_declared

    def describe_bad(self) -> str:
        """One line naming the frame ranges: what a failed ingest says."""
        parts = []
        if self.damaged:
            parts.append(f"damaged frames {format_ranges(_ranges(self.damaged))} (decode errors)")
        if self.lost_packets:
            where = format_ranges(_ranges(self.lost_packets))
            parts.append(f"{len(self.lost_packets)} frame(s) lost before frame(s) {where} (undecodable packets)")
        if self.lost_at_end:
            parts.append(
                f"frames {self.frames}-{self.frames + self.lost_at_end - 1} lost (the file ends early: "
                f"{self.frames} of {self.declared_frames} declared frames decodable)"
            )
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "frames": self.frames,
            "declared_frames": self.declared_frames,
            "damaged_frames": len(set(self.damaged)),
            "damaged_ranges": [list(r) for r in _ranges(self.damaged)],
            "lost_frames": self.lost,
            "lost_before": [list(r) for r in _ranges(self.lost_packets)],
            "lost_at_end": self.lost_at_end,
            "bad_frames": self.bad_frames,
            "errors": self.errors[:10],
            "rotation": self.rotation,
            "fps_declared": self.fps_declared,
            "fps_timestamps": self.fps_timestamps,
            "vfr": self.vfr,
            "stopped_at_cap": self.stopped_at_cap,
        }


_ROT_K = {0: 0, 90: -1, 180: 2, 270: 1}  # clockwise degrees -> np.rot90 k


def display_rotation(frame: av.VideoFrame) -> int:
    """Clockwise degrees (0, 90, 180, 270) a player turns this frame by (its display matrix)."""
    try:
        ccw = float(frame.rotation or 0)
    except (AttributeError, TypeError, ValueError):
        return 0
    cw = int(round(-ccw / 90.0)) * 90 % 360
    return cw


class VideoStream:
    """One pass over a whole video, for ingest: RGB batches with the display rotation applied,
    and a :class:`DecodeReport` of everything that went wrong on the way.

    ``with VideoStream(path) as vs: for batch in vs.batches(16): ...; vs.report``. Memory is one
    batch. Decoding goes on past damaged packets (each is counted, with where it happened);
    nothing is silently dropped or repaired. ``height``/``width`` are the displayed size (after
    rotation), known once the first batch is out.
    """

    def __init__(self, path: str | Path, *, max_side: int | None = None, allow_odd: bool = False,
                 apply_rotation: bool = True):
        self.path = Path(path)
        self.container, self.stream = _open_video(self.path)
        try:
            self.coded_width = int(self.stream.codec_context.width)
            self.coded_height = int(self.stream.codec_context.height)
            check_frame_size(self.path, self.coded_width, self.coded_height, max_side=max_side,
                             allow_odd=allow_odd)
        except BaseException:
            self.container.close()
            raise
        self.apply_rotation = apply_rotation
        declared = int(self.stream.frames) if self.stream.frames and self.stream.frames > 0 else None
        self.report = DecodeReport(path=str(self.path), declared_frames=declared,
                                   fps_declared=_stream_fps(self.stream))
        self.height: int | None = None
        self.width: int | None = None

    def __enter__(self) -> VideoStream:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.container.close()

    def _frames(self) -> Iterator[av.VideoFrame]:
        """Frames in output order; failed packets are noted with their timestamp and skipped.

        Frame threading delivers frames several packets after their packet went in, so damage
        is placed by timestamp, not by when the error surfaced: see :meth:`_finish`.
        """
        rep = self.report
        self._key_pts: list[int] = []
        self._bad_pts: list[int] = []
        self._out_pts: list[int | None] = []
        self._lost_pts: list[int | None] = []
        demux = self.container.demux(self.stream)
        while True:
            try:
                packet = next(demux)
            except StopIteration:
                break
            except av.error.FFmpegError as e:  # the container ends inside a packet / is damaged
                rep.errors.append(f"demux: {e}")
                break
            if packet.is_discard:
                continue
            if packet.is_keyframe and packet.pts is not None and not packet.is_corrupt:
                self._key_pts.append(int(packet.pts))
            if packet.is_corrupt:
                rep.errors.append(f"corrupt packet (pts {packet.pts})")
                self._lost(packet)
                continue
            try:
                decoded = packet.decode()
            except av.error.FFmpegError as e:
                rep.errors.append(f"undecodable packet (pts {packet.pts}): {e}")
                self._lost(packet)
                decoded = []
            yield from self._deliver_all(decoded)
            if packet.size == 0:
                return
        try:
            rest = list(self.stream.decode(None))
        except av.error.FFmpegError as e:
            rep.errors.append(f"flush: {e}")
            rest = []
        yield from self._deliver_all(rest)

    def _lost(self, packet) -> None:
        self.report.lost_packets.append(self.report.frames)  # placed by timestamp in _finish
        self._lost_pts.append(None if packet.pts is None else int(packet.pts))
        if packet.pts is not None:
            self._bad_pts.append(int(packet.pts))
        else:
            self._pts_less_error = True

    def _deliver_all(self, frames) -> Iterator[av.VideoFrame]:
        for frame in frames:
            rep = self.report
            if frame.is_corrupt:
                rep.damaged.append(rep.frames)
                if frame.pts is not None:
                    self._bad_pts.append(int(frame.pts))
            self._out_pts.append(None if frame.pts is None else int(frame.pts))
            self._timestamp(frame)
            yield frame
            rep.frames += 1

    def _timestamp(self, frame: av.VideoFrame) -> None:
        if frame.pts is None or frame.time_base is None:
            self._ts_ok = False
            return
        t = float(frame.pts * frame.time_base)
        last = getattr(self, "_t_last", None)
        if last is not None:
            dt = t - last
            if dt <= 0:
                self._ts_ok = False
            else:
                self._dt_min = min(getattr(self, "_dt_min", dt), dt)
                self._dt_max = max(getattr(self, "_dt_max", dt), dt)
        else:
            self._t_first = t
        self._t_last = t

    def batches(self, size: int = 16, max_frames: int | None = None) -> Iterator[np.ndarray]:
        """(b,H,W,3) uint8 RGB batches in display orientation; at most ``max_frames`` frames."""
        if size < 1:
            raise ValueError(f"batch size must be >= 1 (got {size})")
        rep = self.report
        buf: np.ndarray | None = None
        n = 0
        k = 0
        for frame in self._frames():
            if max_frames is not None and rep.frames >= max_frames:
                rep.stopped_at_cap = True
                # this frame is not kept: the fps comes from the kept frames' timestamps only
                self._t_last = getattr(self, "_t_kept", getattr(self, "_t_last", None))
                break
            self._t_kept = getattr(self, "_t_last", None)
            if buf is None:
                rot = display_rotation(frame) if self.apply_rotation else 0
                rep.rotation = rot
                k = _ROT_K.get(rot, 0)
                h, w = (self.coded_width, self.coded_height) if k in (1, -1) else (self.coded_height, self.coded_width)
                self.height, self.width = h, w
                buf = np.empty((size, h, w, 3), np.uint8)
            rgb = frame.to_ndarray(format="rgb24")
            if rgb.shape[:2] != (self.coded_height, self.coded_width):
                raise InvalidVideoError(
                    self.path,
                    f"frame {rep.frames} is {rgb.shape[1]}x{rgb.shape[0]}, not "
                    f"{self.coded_width}x{self.coded_height} (the frame size changes inside the video)",
                )
            buf[n] = np.rot90(rgb, k) if k else rgb
            n += 1
            if n == size:
                yield buf.copy()
                n = 0
        if n:
            yield buf[:n].copy()
        self._finish()

    def _finish(self) -> None:
        """Place the damage: a failed packet or corrupt frame spoils its group of pictures (the
        frames predicted from it) from its keyframe up to the next keyframe, by timestamp."""
        import bisect

        rep = self.report
        keys = sorted(set(getattr(self, "_key_pts", [])))
        damaged = set(rep.damaged)
        out = getattr(self, "_out_pts", [])
        for b in getattr(self, "_bad_pts", []):
            i = bisect.bisect_right(keys, b)
            lo = keys[i - 1] if i > 0 else None
            hi = keys[i] if i < len(keys) else None
            for pos, p in enumerate(out):
                if p is None:
                    continue
                if p == b or ((lo is None or p > lo) and (hi is None or p < hi)):
                    damaged.add(pos)
        if getattr(self, "_pts_less_error", False):  # no timestamps to place it: all later frames
            first = min(rep.lost_packets) if rep.lost_packets else 0
            damaged.update(range(first, rep.frames))
        rep.damaged = sorted(damaged)
        shown = sorted(p for p in out if p is not None)
        rep.lost_packets = [bisect.bisect_left(shown, lp) if lp is not None else pos
                            for lp, pos in zip(getattr(self, "_lost_pts", []), rep.lost_packets)]
        if rep.declared_frames is not None and rep.frames < rep.declared_frames and not rep.stopped_at_cap:
            rep.lost_at_end = max(0, rep.declared_frames - rep.frames - len(rep.lost_packets))
        if getattr(self, "_ts_ok", True) and rep.frames >= 2 and hasattr(self, "_dt_min"):
            span = self._t_last - self._t_first
            if span > 0:
                rep.fps_timestamps = (rep.frames - 1) / span
                rep.vfr = rep.lost == 0 and self._dt_max > 1.5 * self._dt_min


# ---------------------------------------------------------------------------------------- writing
def _rate(fps: float) -> Fraction:
    if not fps or fps <= 0 or not np.isfinite(fps):
        raise ValueError(f"fps must be a positive number (got {fps})")
    return Fraction(fps).limit_denominator(1001)


class Mp4Writer:
    """Streaming MP4 writer: ``with Mp4Writer(path, fps) as w: w.write(frames)``.

    Frames are (H,W,3) or (T,H,W,3) uint8 RGB, all the same size. With a chroma-subsampled
    ``pix_fmt`` (yuv420p) odd sizes are padded by repeating the last row/column (``odd="pad"``) or
    rejected (``odd="error"``). The file appears under ``path`` only when closed without error.
    """

    def __init__(
        self,
        path: str | Path,
        fps: float,
        *,
        crf: int = 18,
        codec: str = "libx264",
        pix_fmt: str = "yuv420p",
        odd: str = "pad",
        preset: str | None = None,
        faststart: bool = True,
        options: dict[str, str] | None = None,
    ):
        if odd not in ("pad", "error"):
            raise ValueError(f"odd must be 'pad' or 'error' (got {odd!r})")
        self.path = Path(path)
        self.rate = _rate(fps)
        self.crf = crf
        self.codec = codec
        self.pix_fmt = pix_fmt
        self.odd = odd
        self.preset = preset
        self.options = dict(options or {})
        self.faststart = faststart
        self.frames_written = 0
        self.size: tuple[int, int] | None = None  # (width, height) as written
        self._input_hw: tuple[int, int] | None = None
        self._tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.part")
        self._container = None
        self._stream = None

    def __enter__(self) -> Mp4Writer:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def _start(self, h: int, w: int) -> None:
        sub_w, sub_h = _SUBSAMPLED.get(self.pix_fmt, (False, False))
        out_w = w + (w % 2 if sub_w else 0)
        out_h = h + (h % 2 if sub_h else 0)
        if (out_w, out_h) != (w, h) and self.odd == "error":
            raise ValueError(f"{self.path}: frame size {w}x{h} is odd; {self.pix_fmt} needs even sizes")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        opts = {"movflags": "+faststart"} if self.faststart else {}
        self._container = av.open(str(self._tmp), mode="w", format="mp4", options=opts)
        copts = dict(self.options)
        if self.codec in _CRF_CODECS:
            copts.setdefault("crf", str(self.crf))
        if self.preset:
            copts.setdefault("preset", self.preset)
        self._stream = self._container.add_stream(self.codec, rate=self.rate, options=copts)
        self._stream.width, self._stream.height = out_w, out_h
        self._stream.pix_fmt = self.pix_fmt
        self._input_hw = (h, w)
        self.size = (out_w, out_h)

    def write(self, frames: np.ndarray) -> None:
        arr = np.asarray(frames)
        if arr.ndim == 3:
            arr = arr[None]
        if arr.ndim != 4 or arr.shape[-1] != 3:
            raise ValueError(f"{self.path}: frames must be (H,W,3) or (T,H,W,3) RGB, got shape {arr.shape}")
        if arr.dtype != np.uint8:
            raise ValueError(f"{self.path}: frames must be uint8, got {arr.dtype}")
        if self._container is None:
            self._start(arr.shape[1], arr.shape[2])
        if arr.shape[1:3] != self._input_hw:
            raise ValueError(
                f"{self.path}: frame size {arr.shape[1:3]} differs from the first frames' {self._input_hw}"
            )
        out_w, out_h = self.size
        for img in arr:
            if (out_h, out_w) != img.shape[:2]:
                img = np.pad(img, ((0, out_h - img.shape[0]), (0, out_w - img.shape[1]), (0, 0)), mode="edge")
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(img), format="rgb24")
            frame.pts = self.frames_written
            frame.time_base = 1 / self.rate
            for packet in self._stream.encode(frame):
                self._container.mux(packet)
            self.frames_written += 1

    def close(self) -> Path:
        """Flush, close and move the file into place. Raises if nothing was written."""
        if self._container is None:
            if self.frames_written == 0:
                raise ValueError(f"{self.path}: no frames written (an MP4 needs at least one frame)")
            return self.path
        try:
            for packet in self._stream.encode():
                self._container.mux(packet)
            self._container.close()
        except BaseException:
            self.abort()
            raise
        self._container = None
        os.replace(self._tmp, self.path)
        return self.path

    def abort(self) -> None:
        """Drop the partial file."""
        if self._container is not None:
            try:
                self._container.close()
            except av.error.FFmpegError:
                pass
            self._container = None
        self._tmp.unlink(missing_ok=True)


def write_mp4(
    path: str | Path,
    frames: np.ndarray | Iterable[np.ndarray],
    fps: float,
    crf: int = 18,
    codec: str = "libx264",
    **kwargs: Any,
) -> Path:
    """Write frames ((T,H,W,3) uint8 RGB, or an iterable of frames/batches) to an MP4 file."""
    with Mp4Writer(path, fps, crf=crf, codec=codec, **kwargs) as w:
        if isinstance(frames, np.ndarray):
            w.write(frames)
        else:
            for f in frames:
                w.write(f)
    return Path(path)
