"""Stage ``ingest``: decode the source video into ``raw`` (resized so its long side <= max_side).

Streams: one batch of frames in memory, written shard by shard, so a video of any length ingests
in the same memory. Every frame is kept unless the user sets ``ingest.max_frames`` (the cap is
then recorded in the video's attrs and shown by ``status``). The display rotation of the file is
applied, fps comes from the frames' timestamps (variable-frame-rate files), and decode errors and
lost frames are counted per video: more than ``ingest.max_bad_frames`` of them fail the video
with the file and the frame ranges named.

Hard cuts are found while decoding (models/shared/shots.py, ``ingest.cut_threshold``,
``ingest.cut_structure``) and stored as ``shots`` ((S, 2) int32, [start, stop) per shot): later
stages do not carry people or background across a cut.

For datasets with ground truth (the synthetic demo data) it also copies the ground truth into
``gt/*`` so every later metric reads it from the store.
"""

from __future__ import annotations

import numpy as np

from anonymask.config.stages import IngestSettings
from anonymask.core.errors import InvalidVideoError
from anonymask.models.shared.frames import resize_video, target_size
from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.storage.video_io import VideoStream
from anonymask.tasks.identity import cached_checksum, source_identity

#: frames decoded, resized and written per step (one store chunk)
BATCH = 16


# declared in config/stages.py (settings, deps, versions)
def run(entry: VideoEntry, cfg: IngestSettings, w: StageWriter) -> None:
    info = entry.info
    if not info.path:
        raise InvalidVideoError(entry.video_id, "the manifest has no source path for this video")
    from anonymask.models.shared.shots import CutDetector, shot_spans

    cap, max_bad = cfg.max_frames, cfg.max_bad_frames
    fw = None
    hw = None
    cuts = CutDetector(cfg.cut_threshold, cfg.cut_structure)
    with VideoStream(info.path, allow_odd=True) as vs:
        declared = vs.report.declared_frames
        for batch in vs.batches(BATCH, max_frames=cap):
            if fw is None:
                hw = target_size(vs.height, vs.width, cfg.max_side)
                hint = min(declared, cap) if declared and cap else declared
                fw = entry.frame_writer("raw", (*hw, 3), np.uint8, hint=hint)
            small = resize_video(batch, hw)
            cuts.push(small)
            fw.write(small)
        rep = vs.report
        source_hw = (vs.height, vs.width)
    if fw is None or rep.frames == 0:
        why = rep.describe_bad()
        raise InvalidVideoError(info.path, "no frame could be decoded" + (f" ({why})" if why else ""))
    if rep.bad_frames > max_bad:
        raise InvalidVideoError(
            info.path,
            f"{rep.bad_frames} damaged or lost frame(s), more than ingest.max_bad_frames={max_bad}: "
            f"{rep.describe_bad()}",
        )
    w.add_output("raw", fw.close())
    shots = shot_spans(int(rep.frames), cuts.cuts)
    w.write("shots", np.asarray(shots, np.int32).reshape(-1, 2), frame_chunked=False)
    fps = rep.fps
    if not fps:
        raise InvalidVideoError(info.path, "no frame rate: neither usable timestamps nor a stream rate")
    entry.update_attrs(
        source=str(info.path),
        source_checksum=cached_checksum(entry, info.path),
        source_identity=source_identity(entry),
        fps=float(fps),
        fps_declared=rep.fps_declared,
        variable_frame_rate=bool(rep.vfr),
        rotation=int(rep.rotation),
        frames=int(rep.frames),
        height=int(hw[0]),
        width=int(hw[1]),
        source_size=[int(source_hw[0]), int(source_hw[1])],
        # a user's cap: how many frames the source has (when its header says) and what was kept
        frame_cap=cap if rep.stopped_at_cap else None,
        source_frames=declared,
        decode=rep.to_dict(),
    )
    gt = (info.extra or {}).get("gt")
    if gt:
        from anonymask.tasks.gt import ingest_ground_truth

        ingest_ground_truth(entry, gt, w, rep.frames, source_hw, hw)
    w.metric(frames=int(rep.frames), fps=float(fps), bad_frames=int(rep.bad_frames), shots=len(shots))
    if rep.stopped_at_cap:
        w.metric(frame_cap=int(cap))
