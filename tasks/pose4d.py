"""Stage ``pose4d``: SMPL-H tracks + camera per video, into ``pose/``.

Backends (models/anonymizer/pose/backends.py): ``mediapipe`` (default) finds every person on every frame
(models/anonymizer/pose/discover.py; the person detector is ``detector: mediapipe`` offline, or ``rcnn``:
torchvision Keypoint/Mask R-CNN from ``$ANONYMASK_WEIGHTS``, models/anonymizer/pose/rcnn.py), streaming
``raw`` in windows of frames, and also writes what later stages need to remove and replace exactly
those people:
- ``pose/instances`` (T,H,W) uint16: raw track id + 1 of the person owning each pixel (0: nobody),
  ``pose/instance_track`` (R,) int32: raw track id -> posed track index (-1: not posed);
- ``pose/person_prob`` (T,H,W) uint8: person probability (max over people), 0..255;
- ``pose/boxes`` (N,T,4) with the frames bridged between detections filled, ``pose/gap`` (N,T);
- ``pose/kinds`` (N,) int8: 0 posed, 1 a neutral avatar fitted into the box (seen too briefly to
  pose), 2 a neutral avatar anchored on the face (a close-up or a face without a found body).
With ground truth in the store the stage records ``mpjpe_mm`` (root-aligned, 22 body joints).
"""

from __future__ import annotations

import numpy as np

from anonymask.config.stages import Pose4dSettings
from anonymask.models.shared.body.tracks_io import has_tracks, read_tracks, write_tracks
from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.storage.windows import WINDOW_FRAMES, iter_blocks, video_shots


def frame_windows(entry: VideoEntry, name: str = "raw", window: int = WINDOW_FRAMES):
    """(t0, frames) for consecutive windows of an array: bounded memory over long videos.
    Discovery takes frames one at a time, so the window size changes nothing but memory."""
    for win, frames in iter_blocks(entry.array(name), window):
        yield win.start, frames


# declared in config/stages.py (settings, deps, versions)
def run(entry: VideoEntry, cfg: Pose4dSettings, w: StageWriter) -> None:
    """The backend named by ``cfg.backend`` (models/anonymizer/pose/backends.py, through the registry)
    estimates the tracks; this stage gives it the store to read and write through."""
    from anonymask.config.stages import stage_backend
    from anonymask.models.anonymizer.pose.backends import PoseInputs

    raw = entry.array("raw")
    t_len, h, wd = (int(x) for x in raw.shape[:3])

    painter: list[_BlockPainter] = []

    def instance_outputs():
        labels = entry.create_array("pose/instances", (t_len, h, wd), np.uint16)
        prob = entry.create_array("pose/person_prob", (t_len, h, wd), np.uint8)
        painter.append(_BlockPainter(labels, prob))

        def write_window(t0, lab, p):
            painter[0].flush()  # a painted block must not overwrite this window later
            labels[t0 : t0 + len(lab)] = lab
            prob[t0 : t0 + len(p)] = np.clip(np.rint(p * 255), 0, 255).astype(np.uint8)

        return write_window, painter[0].paint, painter[0].relabel

    io = PoseInputs(
        video_id=entry.video_id, source=str(entry.info.path or entry.video_id), shape=(t_len, h, wd),
        windows=lambda: frame_windows(entry, window=cfg.window), read_frames=lambda a, b: np.asarray(raw[a:b]),
        instance_outputs=instance_outputs,
        gt_tracks=(lambda: read_tracks(entry, "gt/pose")) if has_tracks(entry, "gt/pose") else None,
        skeleton=entry.info.extra.get("skeleton"), visible_faces=lambda: visible_faces(entry),
        shots=video_shots(entry))
    out = stage_backend("pose4d", cfg).estimate(io)
    for p in painter:
        p.flush()
    for name in out.written:
        w.add_written(name)
    for name, arr in out.arrays.items():
        w.write(name, arr, frame_chunked=False)
    if out.metrics:
        w.metric(**out.metrics)
    write_tracks(w, "pose", out.tracks, out.camera)
    w.metric(tracks=len(out.tracks), avatars_per_frame=avatars_per_frame(out.tracks, t_len))
    if has_tracks(entry, "gt/pose") and cfg.backend != "gt":
        w.metric(mpjpe_mm=pose_mpjpe(entry, out.tracks))


def avatars_per_frame(tracks: list, t_len: int) -> float:
    """Avatars an average frame shows: the posed tracks' valid frames over the video's frames. More
    than the people in view means avatars on something else (clutter the landmark model took for a
    body), which a long video accumulates: the number to watch beside ``tracks``."""
    return float(sum(int(np.asarray(tr.valid).sum()) for tr in tracks)) / max(int(t_len), 1)


def study_inputs(entry: VideoEntry, window: int):
    """The pose inputs of a stored video that write nothing (instances and paints dropped): for
    scripts that run pose4d's discovery to measure it (scripts/verify_evidence.py,
    scripts/discovery_trace.py) without touching the store."""
    from anonymask.models.anonymizer.pose.backends import PoseInputs

    raw = entry.array("raw")
    t_len, h, wd = (int(x) for x in raw.shape[:3])
    return PoseInputs(video_id=entry.video_id, source=entry.video_id, shape=(t_len, h, wd),
                      windows=lambda: frame_windows(entry, window=window), read_frames=lambda a, b: np.asarray(raw[a:b]),
                      instance_outputs=lambda: ((lambda t0, labels, prob: None), (lambda t, d, tid: None),
                                                        (lambda t, old, new: None)),
                      shots=video_shots(entry))


class _BlockPainter:
    """Draws people found later (followed back, faces) into frames already written, one block of
    frames at a time: a frame written alone into a sharded array rewrites its whole shard (about
    0.15 s a frame at 640x480), and the face pass paints every frame where a face is seen. The block
    is the arrays' shard; it is written back when a frame of another block is painted, before a
    window is written, and at :meth:`flush`."""

    def __init__(self, labels, prob):
        self.labels, self.prob = labels, prob
        self.block = int((getattr(labels, "shards", None) or labels.chunks)[0])
        self._span: tuple[int, int] | None = None
        self._lab = self._p = None

    def _load(self, t: int) -> int:
        """Frame ``t``'s index in the loaded block (its block loaded, the last one written back)."""
        a = (t // self.block) * self.block
        if self._span is None or self._span[0] != a:
            self.flush()
            b = min(a + self.block, self.labels.shape[0])
            self._span = (a, b)
            self._lab = np.asarray(self.labels[a:b])
            self._p = np.asarray(self.prob[a:b]).astype(np.float32) / 255.0
        return t - a

    def paint(self, t: int, d, tid: int) -> None:
        from anonymask.models.anonymizer.pose.discover import paint

        k = self._load(t)
        lab, p = self._lab[k], self._p[k]
        paint(lab, p, d, tid)
        self._p[k] = np.clip(np.rint(p * 255), 0, 255) / 255.0

    def relabel(self, t: int, old: int, new: int) -> None:
        """Frame ``t``'s pixels of raw track ``old`` now belong to raw track ``new`` (a split track)."""
        k = self._load(t)
        lab = self._lab[k]
        lab[lab == old + 1] = new + 1

    def flush(self) -> None:
        if self._span is None:
            return
        a, b = self._span
        self.labels[a:b] = self._lab
        self.prob[a:b] = np.clip(np.rint(self._p * 255), 0, 255).astype(np.uint8)
        self._span, self._lab, self._p = None, None, None


def visible_faces(entry: VideoEntry, samples: int = 16) -> list[int]:
    """Frames (of up to ``samples`` spread over the video) where the audit's face detector sees a
    face: "no person found" must not be said of a video that shows one."""
    from anonymask.models.anonymizer.audit import get_auditor

    raw = entry.array("raw")
    faces = get_auditor("face")
    idx = np.unique(np.linspace(0, raw.shape[0] - 1, min(samples, raw.shape[0])).round().astype(int))
    return [int(t) for t in idx if faces.detect(np.asarray(raw[int(t)]))]


def pose_mpjpe(entry: VideoEntry, fit_tracks: list) -> float:
    """Root-aligned MPJPE (mm) of each ground-truth person matched to the nearest fitted track."""
    from anonymask.models.anonymizer.pose.accuracy import matched_mpjpe

    gt_tracks, _ = read_tracks(entry, "gt/pose")
    return matched_mpjpe(gt_tracks, fit_tracks, gt_tracks[0].num_frames if gt_tracks else entry.num_frames)
