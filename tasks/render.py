"""Stage ``render``: one avatar per track for the whole video -> ``render/{rgb,depth,mask}``.

A track's first and last pose are held ``hold_ends`` frames before and after it (within its
shot), since the segment stage widens the person's hole that far (``segment.unflicker``).

Each track gets the avatar ``AppearanceBank.choose("<video>/<track>")`` (deterministic) and that
avatar's body shape, so neither the person's look nor their body proportions reach the output.
Its clothes and hair stand off the body (``cloth_m``, ``hair_m``, ``shoes_m``): the body model is
unclothed, and a bare avatar leaves more of a dressed person's hole to the fill.
The shape keeps the skeleton the person was fitted with (``render.skeleton_tol_m``), so the
avatar's joints land on the person's. Also stores the avatar's projected joints and face points
for the ControlNet conditions; where the video has ground truth (synthetic data), metrics
``avatar_joint_err`` and ``avatar_ends_err`` say how far those joints are from the people's own
(body joints; head and wrists), in % of the person's height.
"""

from __future__ import annotations

import contextlib

import numpy as np

from anonymask.config.stages import RenderSettings
from anonymask.models.shared.body.tracks import hold_edge_poses
from anonymask.models.shared.body.tracks_io import read_tracks
from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.storage.tracks import TrackWriters, alive, span_of
from anonymask.storage.windows import frame_windows, video_shots
from anonymask.tasks.motion import motion_prefix


# declared in config/stages.py (settings, deps, versions)
def run(entry: VideoEntry, cfg: RenderSettings, w: StageWriter) -> None:
    """Windowed: bodies are posed and rendered ``render.window`` frames at a time (posed vertices
    of a whole long video would not fit in memory); per-frame images stream to the store."""
    from anonymask.models.anonymizer.metrics import avatar_joint_errors
    from anonymask.models.shared.body.appearance import AppearanceBank, person_keys, surface_offsets
    from anonymask.models.shared.body.landmarks import face_landmarks
    from anonymask.models.shared.body.model import get_body_model
    from anonymask.models.shared.render.renderer import render_sequence

    tracks, camera = read_tracks(entry, motion_prefix(entry), compact=True)
    h, wd = int(entry.attrs["height"]), int(entry.attrs["width"])
    if (camera.height, camera.width) != (h, wd):
        raise ValueError(f"{entry.video_id}: pose camera is {camera.width}x{camera.height}, video {wd}x{h}")
    bank = AppearanceBank(size=cfg.bank_size, seed=cfg.bank_seed, skeleton_tol=cfg.skeleton_tol_m)
    # one person seen as several tracks in turn keeps one appearance (the first track's)
    visible = [tuple(np.add(span_of(t.valid), t.start)) if t.valid.any() else (0, 0) for t in tracks]
    pose_boxes = entry.read("pose/boxes") if entry.has_array("pose/boxes") else None
    shots = video_shots(entry)
    keys = (person_keys(visible, pose_boxes, shots) if pose_boxes is not None and len(pose_boxes) == len(tracks)
            else list(range(len(tracks))))
    avatars = [bank.choose(f"{entry.video_id}/{tracks[k].track_id}") for k in keys]
    # clothes and hair with volume: a dressed person's outline, not a bare body's
    offsets = [surface_offsets(av, cfg.cloth_m, cfg.hair_m, cfg.shoes_m) for av in avatars]
    body = get_body_model()
    # the avatar's body shape, feet kept on the floor (not the person's proportions)
    # (a face-anchored fallback avatar keeps its pelvis, so its face stays on the person's face)
    kinds = entry.read("pose/kinds") if entry.has_array("pose/kinds") else np.zeros(len(tracks), np.int8)
    # each track's first and last pose held render.hold_ends frames (within its shot): segment
    # widens a person's hole that far past their track, and an avatar must be on it
    # (not into frames where the body yielded to another avatar on the same person: its box is
    # there, its pose is not)
    yielded = [None] * len(tracks)
    if pose_boxes is not None and len(pose_boxes) == len(tracks):
        for j, tr in enumerate(tracks):
            shown = np.zeros(len(pose_boxes[j]), bool)
            shown[tr.start : tr.stop] = tr.valid
            yielded[j] = np.isfinite(pose_boxes[j][:, 0]) & ~shown
    tracks = [hold_edge_poses(body.reshape_track(tr, av.betas, keep="pelvis" if k == 2 else "feet"), cfg.hold_ends, shots,
                        y) for tr, av, k, y in zip(tracks, avatars, kinds, yielded)]
    t_len = entry.num_frames
    n = len(tracks)
    _, face_ids = face_landmarks(body)
    covered = 0
    # synthetic data: how far each avatar's joints land from its person's own (ground truth)
    truth2d = entry.array("gt/joints2d") if entry.has_array("gt/joints2d") else None
    joint_err: tuple[list[float], list[float]] = ([], [])
    # a silhouette exists only where its track is valid: each track's masks are stored over its
    # own frames (storage/tracks.py), and a window poses and renders only the tracks alive in it
    spans = np.array([np.add(span_of(tr.valid), tr.start) if tr.valid.any() else (0, 0) for tr in tracks],
                     np.int64).reshape(-1, 2)
    f_tracks = TrackWriters(w, "render/track_masks", (h, wd), bool, spans)
    with contextlib.ExitStack() as stack:
        f_rgb, f_depth, f_mask, f_joints, f_face5, f_face = (
            stack.enter_context(w.frames(name, shape, dtype, t_len)) for name, shape, dtype in (
                ("render/rgb", (h, wd, 3), np.uint8), ("render/depth", (h, wd), np.float32),
                ("render/mask", (h, wd), bool),
                # joints and the 5 face keypoints (nose, r/l eye, r/l ear) come with the render (NaN
                # when absent); per frame too, so a long video never holds them whole either
                ("render/joints2d", (n, 52, 2), np.float32), ("render/face5_2d", (n, 5, 2), np.float32),
                ("render/face_2d", (n, len(face_ids), 2), np.float32)))
        for win in frame_windows(t_len, cfg.window):
            m = win.core_stop - win.core_start
            here = alive(spans, win.core_start, win.core_stop)  # a track invalid in every frame draws nothing
            part = [tracks[j].window(win.core_start, win.core_stop) for j in here]
            if part:
                out = render_sequence(body, part, [avatars[j] for j in here], camera, [offsets[j] for j in here])
            else:  # nobody to draw: empty layers of the window's length
                out = {"rgb": np.zeros((m, h, wd, 3), np.uint8), "depth": np.zeros((m, h, wd), np.float32),
                       "masks": np.zeros((m, 0, h, wd), bool), "joints": np.zeros((m, 0, 52, 3), np.float32),
                       "keypoints": np.zeros((m, 0, 21, 3), np.float32)}
            f_rgb.write(out["rgb"])
            f_depth.write(out["depth"])
            any_mask = out["masks"].any(axis=1)
            f_mask.write(any_mask)
            f_tracks.write(win.core_start, win.core_stop, {j: out["masks"][:, k] for k, j in enumerate(here)})
            covered += int(np.count_nonzero(any_mask))
            joints = np.full((m, n, 52, 2), np.nan, np.float32)
            face5 = np.full((m, n, 5, 2), np.nan, np.float32)
            face = np.full((m, n, len(face_ids), 2), np.nan, np.float32)
            for k, (j, tr) in enumerate(zip(here, part)):
                joints[:, j] = camera.project(out["joints"][:, k]).astype(np.float32)
                face5[:, j] = camera.project(out["keypoints"][:, k, :5, :]).astype(np.float32)
                ok = tr.valid
                if ok.any():
                    face[ok, j] = camera.project(body.pose_track(tr.slice(ok)).vertices[:, face_ids])
            f_joints.write(joints)
            if truth2d is not None:
                body_err, end_err = avatar_joint_errors(np.asarray(truth2d[win.core_start : win.core_stop]), joints)
                joint_err[0].extend(body_err)
                joint_err[1].extend(end_err)
            f_face5.write(face5)
            f_face.write(face)
            del out
    f_tracks.close()
    w.write("render/avatar_ids", np.array([a.index for a in avatars], np.int32), frame_chunked=False)
    w.metric(avatars=[int(a.index) for a in avatars], render_fraction=covered / float(max(t_len * h * wd, 1)))
    if joint_err[0]:  # median over person-frames, % of the person's height (models/anonymizer/metrics.py)
        w.metric(avatar_joint_err=float(np.median(joint_err[0])), avatar_ends_err=float(np.median(joint_err[1])))
