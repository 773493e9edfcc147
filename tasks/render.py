"""Stage ``render``: one avatar per track for the whole video -> ``render/{rgb,depth,mask}``.

Each track gets the avatar ``AppearanceBank.choose("<video>/<track>")`` (deterministic) and that
avatar's body shape, so neither the person's look nor their body proportions reach the output.
Also stores the avatar's projected joints and face points for the ControlNet conditions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.storage.tracks_io import read_tracks
from anonymask.tasks.common import stage
from anonymask.tasks.motion import motion_prefix


@stage("render", deps=("pose4d", "motion"), backend=lambda c: "pyrender")
def run(entry: VideoEntry, cfg: dict[str, Any], w: StageWriter) -> None:
    from anonymask.models.body.appearance import AppearanceBank
    from anonymask.models.body.landmarks import face_landmarks
    from anonymask.models.body.model import get_body_model
    from anonymask.models.render.renderer import render_sequence

    tracks, camera = read_tracks(entry, motion_prefix(entry))
    h, wd = int(entry.attrs["height"]), int(entry.attrs["width"])
    if (camera.height, camera.width) != (h, wd):
        raise ValueError(f"{entry.video_id}: pose camera is {camera.width}x{camera.height}, video {wd}x{h}")
    bank = AppearanceBank(size=int(cfg.get("bank_size", 32)), seed=int(cfg.get("bank_seed", 0)))
    avatars = [bank.choose(f"{entry.video_id}/{t.track_id}") for t in tracks]
    body = get_body_model()
    # the avatar's body shape, feet kept on the floor (not the person's proportions)
    # (a face-anchored fallback avatar keeps its pelvis, so its face stays on the person's face)
    kinds = entry.read("pose/kinds") if entry.has_array("pose/kinds") else np.zeros(len(tracks), np.int8)
    tracks = [body.reshape_track(tr, av.betas, keep="pelvis" if k == 2 else "feet")
              for tr, av, k in zip(tracks, avatars, kinds)]
    out = render_sequence(body, tracks, avatars, camera)
    t_len, n = out["masks"].shape[:2]
    w.write("render/rgb", out["rgb"])
    w.write("render/depth", out["depth"])
    w.write("render/mask", out["masks"].any(axis=1))
    w.write("render/track_masks", out["masks"])
    # joints and the 5 face keypoints (nose, r/l eye, r/l ear) come with the render (NaN when absent)
    joints2d = camera.project(out["joints"]).astype(np.float32)
    face5 = camera.project(out["keypoints"][..., :5, :]).astype(np.float32)
    _, face_ids = face_landmarks(body)
    face = np.full((t_len, n, len(face_ids), 2), np.nan, np.float32)
    for j, tr in enumerate(tracks):
        ok = tr.valid
        face[ok, j] = camera.project(body.pose_track(tr.slice(ok)).vertices[:, face_ids])
    w.write("render/joints2d", joints2d, frame_chunked=False)
    w.write("render/face5_2d", face5, frame_chunked=False)
    w.write("render/face_2d", face, frame_chunked=False)
    w.write("render/avatar_ids", np.array([a.index for a in avatars], np.int32), frame_chunked=False)
    w.metric(avatars=[int(a.index) for a in avatars], render_fraction=float(out["masks"].any(axis=1).mean()))
