"""Stage ``pose4d``: SMPL-H tracks + camera per video, into ``pose/``.

Also stores the segmentation map it used to find people (``pose/person_prob``) so the segment
stage reuses it instead of running the segmenter twice. With ground truth in the store the stage
records ``mpjpe_mm`` (root-aligned, 22 body joints).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from anonymask.models.pose.keypoints import BODY_JOINTS
from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.storage.tracks_io import has_tracks, read_tracks, write_tracks
from anonymask.tasks.common import stage


def person_probability(frames: np.ndarray, backend: str) -> np.ndarray:
    from anonymask.models.segment.backends import get_segmenter

    return np.asarray(get_segmenter(backend).segment(frames), np.float32)


@stage("pose4d", deps=("ingest",))
def run(entry: VideoEntry, cfg: dict[str, Any], w: StageWriter) -> None:
    from anonymask.models.body.model import get_body_model

    backend = cfg.get("backend", "mediapipe")
    if backend == "gt":
        if not has_tracks(entry, "gt/pose"):
            raise ValueError(f"{entry.video_id}: pose4d backend 'gt' needs ground truth (synthetic data only)")
        tracks, camera = read_tracks(entry, "gt/pose")
    elif backend == "mediapipe":
        from anonymask.models.pose.detect import detection_probability
        from anonymask.models.pose.estimate import estimate_mediapipe
        from anonymask.models.pose.fit import FitConfig

        frames = entry.read("raw")
        prob = person_probability(frames, cfg.get("segmenter", "mediapipe"))
        det = detection_probability(frames, prob, use_motion=bool(cfg.get("motion_cue", True)))
        # the segment stage unites this with the fitted silhouettes: a person the pose model missed
        # is still removed wherever segmentation or motion saw them (privacy before fidelity)
        w.write("pose/person_prob", (np.clip(det, 0, 1) * 255).astype(np.uint8))
        body = get_body_model()
        res = estimate_mediapipe(
            frames, det, body.rest_joints(), threshold=cfg.get("threshold", 0.5),
            min_visible_frames=cfg.get("min_visible_frames", 2),
            fit=FitConfig(iterations=int(cfg.get("iterations", 150))), source=str(entry.info.path or entry.video_id),
        )
        tracks, camera = res.tracks, res.camera
        w.write("pose/boxes", res.boxes, frame_chunked=False)
        w.metric(**res.diagnostics)
    elif backend == "ntu-skeleton":
        from anonymask.models.pose.fit import FitConfig
        from anonymask.models.pose.ntu import estimate_from_ntu_skeleton

        res = estimate_from_ntu_skeleton(entry.info.extra.get("skeleton"), entry.array("raw").shape,
                                         get_body_model(),
                                         fit=FitConfig(iterations=int(cfg.get("iterations", 100))),
                                         video=entry.video_id)
        tracks, camera = res.tracks, res.camera
        w.metric(**res.diagnostics)
    else:
        raise ValueError(f"unknown pose4d backend {backend!r} (gt, mediapipe, ntu-skeleton)")
    write_tracks(w, "pose", tracks, camera)
    w.metric(tracks=len(tracks))
    if has_tracks(entry, "gt/pose") and backend != "gt":
        w.metric(mpjpe_mm=pose_mpjpe(entry, tracks))


def pose_mpjpe(entry: VideoEntry, fit_tracks: list) -> float:
    """Root-aligned MPJPE (mm) of each ground-truth person matched to the nearest fitted track."""
    from anonymask.models.body.model import get_body_model
    from anonymask.models.metrics import mpjpe_mm

    body = get_body_model()
    gt_tracks, _ = read_tracks(entry, "gt/pose")
    fit_joints = [body.pose_track(f).joints[:, BODY_JOINTS] for f in fit_tracks]  # pose each once
    errs = []
    for g in gt_tracks:
        gj = body.pose_track(g).joints[:, BODY_JOINTS]
        best = np.inf
        for f, fj in zip(fit_tracks, fit_joints):
            both = g.valid & f.valid
            if both.sum() == 0:
                continue
            d_root = np.linalg.norm(gj[both, 0] - fj[both, 0], axis=-1).mean()
            if d_root < best:
                best = d_root
                err = mpjpe_mm(fj[both], gj[both], root=0)
        if np.isfinite(best):
            errs.append(err)
    return float(np.mean(errs)) if errs else float("nan")
