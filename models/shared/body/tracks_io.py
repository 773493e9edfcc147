"""Pose tracks in the store: ``<prefix>/camera`` and ``<prefix>/track_<j>/<param>`` per person.

A track is stored over the rows it holds (``start``: its first video frame; a compact track from
pose4d holds only its own frames, docs/SCALING.md); stores written before ``start`` existed hold
whole-video tracks and read as such."""

from __future__ import annotations

import numpy as np

from anonymask.models.shared.body.tracks import Camera, SMPLHTrack
from anonymask.storage.store import StageWriter, VideoEntry


def write_tracks(writer: StageWriter, prefix: str, tracks: list[SMPLHTrack], camera: Camera) -> None:
    writer.write(f"{prefix}/camera", camera.to_array(), frame_chunked=False)
    writer.write(f"{prefix}/track_ids", np.array([t.track_id for t in tracks], np.int32), frame_chunked=False)
    for j, tr in enumerate(tracks):
        for key, arr in tr.to_arrays().items():
            writer.write(f"{prefix}/track_{j}/{key}", arr, frame_chunked=False)


def read_tracks(entry: VideoEntry, prefix: str, compact: bool = False) -> tuple[list[SMPLHTrack], Camera]:
    """Every track of ``prefix`` over the whole video (``start`` 0, ``entry.num_frames`` rows), or
    (``compact``) as stored: a reader that goes window by window (render) then never holds
    (tracks x video length) rows."""
    camera = Camera.from_array(entry.read(f"{prefix}/camera"))
    ids = entry.read(f"{prefix}/track_ids")
    tracks = []
    for j, tid in enumerate(ids.tolist()):
        g = entry.group[f"{prefix}/track_{j}"]
        arrays = {name: np.asarray(g[name][...]) for name in g.array_keys()}
        tracks.append(SMPLHTrack.from_arrays(int(tid), arrays))
    if not compact:
        t_len = entry.num_frames or max((t.stop for t in tracks), default=0)
        tracks = [t if (t.start, t.num_frames) == (0, t_len) else t.window(0, t_len) for t in tracks]
    return tracks, camera


def has_tracks(entry: VideoEntry, prefix: str) -> bool:
    return entry.has_array(f"{prefix}/track_ids")
