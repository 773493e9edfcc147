"""Helpers of the export tests: an audio track muxed into a source, audio packets and duration."""

from __future__ import annotations

from fractions import Fraction

import av
import numpy as np


def remux_with_audio(src, dst, seconds: float | None = None, rate: int = 44100, rotation_ccw: int = 0) -> None:
    """Copy ``src``'s video packets into ``dst`` and add an AAC sine track of ``seconds``
    (default: the video's duration)."""
    with av.open(str(src)) as inp, av.open(str(dst), "w", format="mp4") as out:
        vin = inp.streams.video[0]
        vout = out.add_stream_from_template(vin)
        if rotation_ccw:
            vout.set_display_rotation(rotation_ccw)
        dur = seconds if seconds is not None else float(vin.frames / vin.average_rate)
        aout = out.add_stream("aac", rate=rate)
        aout.layout = "mono"
        for p in inp.demux(vin):
            if p.dts is None:
                continue
            p.stream = vout
            out.mux(p)
        n = int(dur * rate)
        pcm = (0.3 * np.sin(2 * np.pi * 440 * np.arange(n) / rate)).astype(np.float32)
        for i in range(0, n, 1024):
            f = av.AudioFrame.from_ndarray(pcm[None, i : i + 1024], format="fltp", layout="mono")
            f.sample_rate, f.pts, f.time_base = rate, i, Fraction(1, rate)
            for p in aout.encode(f):
                out.mux(p)
        for p in aout.encode():
            out.mux(p)


def audio_packets(path) -> list[bytes]:
    with av.open(str(path)) as c:
        if not c.streams.audio:
            return []
        return [bytes(p) for p in c.demux(c.streams.audio[0]) if p.size]


def audio_duration(path) -> float:
    with av.open(str(path)) as c:
        a = c.streams.audio[0]
        return float(sum(p.duration for p in c.demux(a) if p.size) * a.time_base)


#: the tiny set's video that gets no audio track (the others get one)
SILENT = "s02_a01_r01"
