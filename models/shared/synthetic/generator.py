"""Generate the synthetic dataset: videos of synthetic subjects with exact ground truth.

Layout of a generated root::

    dataset.json          name (the adapter: demo or synthetic), preset, version, seed, fps,
                          frames, size, classes, actions (clips, layout, people), subjects
                          (identity, gender, betas, style, clothing), cameras, backgrounds,
                          splits ("xsub": subjects, "xview": cameras), videos (see below)
    videos/<id>.mp4       H.264 (yuv420p, crf 16) RGB video, static camera
    gt/<id>.npz           ground truth of that video (keys below)

Video ids: ``s03_a02_r01`` (subject 3, action 2, repetition 1; numbers from 1); two-person videos
name both subjects, ``s02s04_a05_r01``. Each entry of ``videos`` holds video_id, path, gt, label,
action, subjects, camera, background, repetition, frames and split {"xsub": ..., "xview": ...}.
A two-person video belongs to the split of its subjects (pairs are never split across sets).

Keys of ``gt/<id>.npz`` (T frames, N people, H x W pixels; 3-D in the OpenCV camera frame,
metres; no pickled objects):

=====================  ===============  ======================================================
``person_masks``       (T,N,H,W) bool   pixels where person n is visible (majority coverage)
``mask``               (T,H,W) bool     union of the person masks
``alpha``              (T,H,W) uint8    exact compositing weight of the render (0..255)
``betas``              (N,10) float32   SMPL-H shape of each person
``global_orient``      (N,T,3) float32  SMPL-H parameters per person (axis-angle), the
``body_pose``          (N,T,63)         same meaning as :class:`SMPLHTrack` (hand poses are
``left_hand_pose``     (N,T,45)         absolute, zero = flat hand); pose the body model with
``right_hand_pose``    (N,T,45)         them to get the rendered mesh
``transl``             (N,T,3)
``valid``              (N,T) bool       person present in frame
``joints3d``           (T,N,52,3)       SMPL-H joints (JOINT_NAMES order)
``joints2d``           (T,N,52,2)       their pixel coordinates (may fall outside the frame)
``camera``             (6,) float64     fx, fy, cx, cy, width, height (pixel-centre convention)
``ground``             (4,) float64     ground plane n, d in the camera frame: n.p + d = 0
``background``         (H,W,3) uint8    the clean background photo
``subject_ids``        (N,) int32       identity numbers (``s03`` -> 3)
``genders``            (N,) str         "male" / "female"
``label``              () int64         class index into ``classes``
``action``             () str           class name
``fps``                () float64
=====================  ===============  ======================================================
"""

from __future__ import annotations

import json
import shutil
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from anonymask.models.shared.body.tracks import Camera, SMPLHTrack
from anonymask.models.shared.synthetic.actions import ActionSpec, action_spec
from anonymask.models.shared.synthetic.backgrounds import BACKGROUNDS, load_background
from anonymask.models.shared.synthetic.identities import Identity, make_identities
from anonymask.models.shared.synthetic.mocap import load_clip
from anonymask.models.shared.synthetic.retarget import retarget
from anonymask.models.shared.synthetic.scene import (
    CAMERA_SETUPS,
    CameraSetup,
    PlacedPerson,
    fit_in_view,
    heading,
    limit_travel,
    pose_in_ground,
    reach,
    rest_body,
    to_camera_track,
    transform,
    travel_angle,
)
from anonymask.models.shared.synthetic.style import apply_style

FORMAT_VERSION = 1
GT_KEYS = (
    "person_masks", "mask", "alpha", "betas", "global_orient", "body_pose", "left_hand_pose",
    "right_hand_pose", "transl", "valid", "joints3d", "joints2d", "camera", "ground", "background",
    "subject_ids", "genders", "label", "action", "fps",
)  # fmt: skip
_TRACK_KEYS = ("global_orient", "body_pose", "left_hand_pose", "right_hand_pose", "transl", "valid")

#: How the generated videos are encoded. ``threads: 1``: libx264's bitstream depends on its thread
#: count (1, 2 and 3+ threads give three different files from the same frames here), and its default
#: ("auto") follows the machine's core count, so the same generator wrote different demo data on a
#: 2-core and a many-core machine and the demo's verdicts differed (docs/RESULTS.md).
#: One thread costs nothing that matters at these sizes (8 demo videos of 256x192x48).
ENCODE: dict = {"crf": 16, "preset": "medium", "options": {"threads": "1"}}


@dataclass(frozen=True)
class Preset:
    """Sizes of a generated dataset. ``videos_per_action`` None = every subject (or pair of
    subjects) performs every action in every repetition; a number = that many videos per action
    and repetition, alternating between train and test subjects."""

    name: str
    n_subjects: int
    actions: tuple[str, ...]
    repetitions: int = 1
    frames: int = 48
    width: int = 256
    height: int = 192
    fps: float = 15.0
    videos_per_action: int | None = None
    backgrounds: tuple[str, ...] = BACKGROUNDS
    supersample: int = 2  # render at this factor and average down: anti-aliased edges
    max_travel: float = 2.4  # metres of locomotion kept on screen (the rest is walked on the spot)
    depth: tuple[float, float] = (3.2, 4.8)  # metres from the camera


#: the bundled demo (``make demo``): 8 short videos, 4 subjects, one two-person action
DEMO_PRESET = Preset("demo", n_subjects=4, actions=("walk", "jump", "kick", "punch_other"), repetitions=1,
                     frames=48, width=256, height=192, fps=15.0, videos_per_action=2)
#: for training experiments: every subject x action x repetition
SYNTHETIC_PRESET = Preset(
    "synthetic", n_subjects=10,
    actions=("walk", "run", "jump", "kick", "punch", "spinkick", "dance_a", "getup_faceup",
             "punch_other", "kick_other", "dance_pair"),
    repetitions=2, frames=64, width=256, height=192, fps=15.0, videos_per_action=None,
)  # fmt: skip
#: for tests: 3 tiny videos (one with two people)
TINY_PRESET = Preset("tiny", n_subjects=2, actions=("walk", "punch_other"), repetitions=1, frames=8,
                     width=64, height=48, fps=15.0, videos_per_action=None, supersample=2)
PRESETS: dict[str, Preset] = {p.name: p for p in (DEMO_PRESET, SYNTHETIC_PRESET, TINY_PRESET)}


# ------------------------------------------------------------------------------------- planning
@dataclass(frozen=True)
class VideoPlan:
    video_id: str
    action: str
    label: int
    subjects: tuple[int, ...]  # subject ids (1-based)
    repetition: int
    camera: str
    background: str
    split: dict = field(default_factory=dict)


def subject_split(n_subjects: int) -> tuple[list[int], list[int]]:
    """Cross-subject protocol: the first half of the subject ids train, the rest test."""
    n_train = (n_subjects + 1) // 2
    ids = list(range(1, n_subjects + 1))
    return ids[:n_train], ids[n_train:]


def _video_id(subjects: tuple[int, ...], action_index: int, rep: int) -> str:
    return "".join(f"s{s:02d}" for s in subjects) + f"_a{action_index + 1:02d}_r{rep + 1:02d}"


def plan_videos(preset: Preset, seed: int = 0) -> list[VideoPlan]:
    """Which subjects perform which action, with which camera and background; deterministic in
    ``seed``. Groups (one subject, or a pair) are drawn from one split's subjects at a time."""
    train, test = subject_split(preset.n_subjects)
    pools = [train, test] if test else [train]
    specs = [action_spec(a) for a in preset.actions]
    used = [0] * len(pools)  # round-robin position per pool
    rows: list[tuple[int, ActionSpec, int, tuple[int, ...]]] = []
    for rep in range(preset.repetitions):
        for a, spec in enumerate(specs):
            k = spec.n_people
            if preset.videos_per_action is None:
                groups = []
                for pool in (pools if all(len(q) >= k for q in pools) else [train + test]):
                    rot = (rep * k) % len(pool)
                    order = pool[rot:] + pool[:rot]
                    groups += [tuple(order[i:i + k]) for i in range(0, len(order) - k + 1, k)]
            else:
                groups = []
                for g in range(preset.videos_per_action):
                    pi = g % len(pools)
                    pool = pools[pi] if len(pools[pi]) >= k else train + test
                    groups.append(tuple(pool[(used[pi] + i) % len(pool)] for i in range(k)))
                    used[pi] += k
            rows += [(a, spec, rep, grp) for grp in groups if len(set(grp)) == k]
    if not rows:
        raise ValueError(f"preset {preset.name!r} plans no video (too few subjects for its actions?)")
    # backgrounds and cameras spread evenly over the videos, in a seeded order
    rng = np.random.default_rng([seed, 0xB1A5])
    cams = [c.name for c in CAMERA_SETUPS]
    bgs = [preset.backgrounds[i % len(preset.backgrounds)] for i in rng.permutation(len(rows))]
    cam_of = [cams[i % len(cams)] for i in rng.permutation(len(rows))]
    plans = []
    for (a, spec, rep, grp), bg, cam in zip(rows, bgs, cam_of):
        split = {"xsub": "train" if grp[0] in train else "test",
                 "xview": "test" if cam == cams[0] else "train"}
        plans.append(VideoPlan(_video_id(grp, a, rep), spec.name, a, grp, rep + 1, cam, bg, split))
    return plans


# ------------------------------------------------------------------------------------- one video
def _video_rng(seed: int, video_id: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(video_id.encode())])


def _leg_length(body_model, betas: np.ndarray) -> float:
    rest = rest_body(body_model, betas)
    hips = rest.joints[0, [1, 2], 1].mean()
    return float(hips - rest.vertices[0, :, 1].min())


def _perform(identity: Identity, clip_name: str, preset: Preset, rng: np.random.Generator) -> PlacedPerson:
    """The identity performing the clip for the video's length, on the ground frame's ground."""
    from anonymask.models.shared.body.model import get_body_model

    bm = get_body_model(identity.gender)
    clip = load_clip(clip_name)
    speed = identity.style.speed * float(rng.uniform(0.97, 1.03))
    span = preset.frames / preset.fps * speed  # clip seconds the video covers
    if clip.loop:
        start = float(rng.uniform(0.0, clip.duration))
    elif span >= clip.duration:  # whole action, with a random share of the slack before it
        start = -float(rng.uniform(0.15, 0.6)) * (span - clip.duration)
    else:
        start = float(rng.uniform(0.0, clip.duration - span))
    frames = clip.resample(preset.fps, preset.frames, start=start, speed=speed)
    motion = apply_style(retarget(frames, leg_length=_leg_length(bm, identity.betas)), identity.style)
    placed = pose_in_ground(bm, motion, identity.betas, identity.gender)
    return limit_travel(placed, preset.max_travel)


def _mean_heading_angle(p: PlacedPerson) -> float:
    h = np.mean([heading(p, t) for t in range(0, p.motion.n_frames, max(1, p.motion.n_frames // 8))], axis=0)
    return float(np.arctan2(h[0], h[2]))


def _face(p: PlacedPerson, angle: float) -> PlacedPerson:
    """Turn p so that its travel (or, for actions in place, its mean facing) points at ``angle``
    (from +z, the camera, towards +x)."""
    travel = travel_angle(p)
    if travel is not None:
        return transform(p, angle - travel, np.zeros(3))
    return transform(p, angle - _mean_heading_angle(p), np.zeros(3))


def _layout(spec: ActionSpec, people: list[PlacedPerson], rng: np.random.Generator) -> list[PlacedPerson]:
    deg = np.pi / 180
    side = 1.0 if rng.uniform() < 0.5 else -1.0
    if spec.layout == "single":
        p = people[0]
        if travel_angle(p) is not None:  # locomotion: across the view
            return [_face(p, side * 90 * deg + rng.uniform(-25, 25) * deg)]
        return [_face(p, rng.uniform(-70, 70) * deg)]
    if spec.layout == "facing":
        a, b = people
        _, u, _ = reach(a)
        yaw = side * 90 * deg + rng.uniform(-20, 20) * deg - float(np.arctan2(u[0], u[2]))
        a = transform(a, yaw, np.zeros(3))
        t, u, dist = reach(a)
        target = a.joints[t, 0] + u * (dist + 0.3)
        target[1] = 0.0
        b = transform(b, float(np.arctan2(-u[0], -u[2])) - _mean_heading_angle(b), np.zeros(3))
        centre = b.motion.pelvis.mean(axis=0)
        centre[1] = 0.0
        b = transform(b, 0.0, target - centre)
        # A keeps moving after the blow: step B back along u until no body joint of A comes closer
        # than 0.5 m (horizontally) to B's pelvis in any frame
        for _ in range(20):
            gap = a.joints[:, :22] - b.joints[:, :1]
            gap = float(np.min(np.hypot(gap[..., 0], gap[..., 2])))
            if gap >= 0.5:
                break
            b = transform(b, 0.0, u * (0.55 - gap))
        return [a, b]
    if spec.layout == "side_by_side":
        facing = rng.uniform(-35, 35) * deg
        out = []
        for k, p in enumerate(people):
            p = transform(p, facing + rng.uniform(-10, 10) * deg - _mean_heading_angle(p), np.zeros(3))
            c = p.motion.pelvis.mean(axis=0)
            c[1] = 0.0
            out.append(transform(p, 0.0, np.array([(k - 0.5) * 1.3, 0.0, 0.0]) - c))
        return out
    raise ValueError(f"unknown layout {spec.layout!r}")


def _crop_box(meshes: list[np.ndarray], camera: Camera, pad: int = 2) -> tuple[int, int, int, int]:
    """(x0, y0, x1, y1) pixel box holding every body in every frame: only it needs rendering."""
    uv = camera.project(np.concatenate([m[:, ::3].reshape(-1, 3) for m in meshes]))
    x0, y0 = np.floor(uv.min(axis=0)).astype(int) - pad
    x1, y1 = np.ceil(uv.max(axis=0)).astype(int) + pad + 1
    x0, y0 = max(x0, 0), max(y0, 0)
    x1, y1 = min(x1, camera.width), min(y1, camera.height)
    if x1 <= x0 or y1 <= y0:
        return 0, 0, camera.width, camera.height
    return int(x0), int(y0), int(x1), int(y1)


def _video_array(shape: tuple[int, ...], dtype, scratch: Path | None, name: str) -> np.ndarray:
    """A zeroed array as long as the video: in memory, or with ``scratch`` a ``.npy`` file there,
    mapped (a 5-minute two-person clip's frames, masks and alpha are ~12 GB: more than a 24 GiB
    machine holds next to the rest, and the kernel killed the generator)."""
    if scratch is None:
        return np.zeros(shape, dtype)
    scratch.mkdir(parents=True, exist_ok=True)
    return np.lib.format.open_memmap(scratch / f"{name}.npy", mode="w+", dtype=dtype, shape=shape)


def _render_composite(meshes: list[np.ndarray], colours: list[np.ndarray], faces: list[np.ndarray],
                      camera: Camera, background: np.ndarray, ss: int, scratch: Path | None = None):
    """Render T frames of N bodies at ``ss`` x resolution, average down, composite on background.
    Only the box around the bodies is rendered (a camera with a shifted principal point).
    Returns (frames (T,H,W,3) uint8, person_masks (T,N,H,W) bool, alpha (T,H,W) uint8); with
    ``scratch`` (a folder) they are files there, mapped (:func:`_video_array`)."""
    from anonymask.models.shared.render.renderer import MeshSpec, get_renderer

    n, t = len(meshes), meshes[0].shape[0]
    h, w = camera.height, camera.width
    x0, y0, x1, y1 = _crop_box(meshes, camera)
    ch, cw = y1 - y0, x1 - x0
    crop = Camera(camera.fx * ss, camera.fy * ss, (camera.cx - x0 + 0.5) * ss - 0.5,
                  (camera.cy - y0 + 0.5) * ss - 0.5, cw * ss, ch * ss)
    renderer = get_renderer(crop.width, crop.height)
    bg = background[y0:y1, x0:x1].astype(np.float32) / 255.0
    frames = _video_array((t, h, w, 3), np.uint8, scratch, "frames")
    frames[:] = background
    masks = _video_array((t, n, h, w), bool, scratch, "person_masks")
    alpha_out = _video_array((t, h, w), np.uint8, scratch, "alpha")
    inv = 1.0 / (ss * ss)
    for f in range(t):
        out = renderer.render([MeshSpec(meshes[i][f], faces[i], colours[i]) for i in range(n)], crop)
        rgb = out.rgb.reshape(ch, ss, cw, ss, 3).sum(axis=(1, 3), dtype=np.float32) * (inv / 255.0)
        cov = out.masks.reshape(n, ch, ss, cw, ss).sum(axis=(2, 4), dtype=np.float32) * inv  # per person
        alpha = cov.sum(axis=0)
        img = rgb + (1.0 - alpha[..., None]) * bg  # rgb is premultiplied (black outside bodies)
        frames[f, y0:y1, x0:x1] = np.clip(np.rint(img * 255.0), 0, 255).astype(np.uint8)
        owner = np.argmax(np.concatenate([(1.0 - alpha)[None], cov]), axis=0)  # ties -> background
        masks[f, :, y0:y1, x0:x1] = owner[None] == np.arange(1, n + 1)[:, None, None]
        alpha_out[f, y0:y1, x0:x1] = np.clip(np.rint(alpha * 255.0), 0, 255).astype(np.uint8)
    return frames, masks, alpha_out


def render_video(plan: VideoPlan, identities: dict[int, Identity], preset: Preset, seed: int,
                 classes: list[str], scratch: Path | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(frames (T,H,W,3) uint8, ground-truth arrays) of one planned video; with ``scratch`` the
    arrays as long as the video are files there, mapped (the caller removes the folder)."""
    from anonymask.models.shared.body.model import get_body_model, relaxed_hand_pose

    rng = _video_rng(seed, plan.video_id)
    spec = action_spec(plan.action)
    setup = _setup(plan.camera)
    camera = setup.intrinsics(preset.width, preset.height)
    subjects = [identities[s] for s in plan.subjects]
    people = [_perform(idt, clip, preset, rng) for idt, clip in zip(subjects, spec.clips)]
    people = _layout(spec, people, rng)
    people = fit_in_view(people, setup, camera, depth=float(rng.uniform(*preset.depth)),
                         shift=float(rng.uniform(-0.12, 0.12)))
    models = [get_body_model(idt.gender) for idt in subjects]
    hands = (relaxed_hand_pose("left"), relaxed_hand_pose("right"))
    tracks = [to_camera_track(p, setup, bm, k, hands) for k, (p, bm) in enumerate(zip(people, models))]
    posed = [bm.pose_track(tr) for bm, tr in zip(models, tracks)]
    background = load_background(plan.background, preset.width, preset.height, floor_row=_floor_row(setup, camera))
    frames, person_masks, alpha = _render_composite(
        [p.vertices for p in posed], [idt.vertex_colors(bm) for idt, bm in zip(subjects, models)],
        [bm.faces for bm in models], camera, background, preset.supersample, scratch)
    gt = _gt_arrays(plan, tracks, posed, camera, setup, background, person_masks, alpha, subjects, preset, scratch)
    return frames, gt


def _setup(name: str) -> CameraSetup:
    for c in CAMERA_SETUPS:
        if c.name == name:
            return c
    raise ValueError(f"unknown camera {name!r}")


def _floor_row(setup: CameraSetup, camera: Camera, wall_distance: float = 9.0) -> int:
    """Image row where a wall ``wall_distance`` m away meets the ground."""
    rot, t = setup.extrinsics()
    p = rot @ np.array([0.0, 0.0, -wall_distance]) + t
    return int(round(camera.project(p)[1]))


#: frames per step where a whole video's ground truth is derived chunk by chunk
_GT_CHUNK = 256


def _ground_plane(setup: CameraSetup) -> np.ndarray:
    rot, t = setup.extrinsics()
    n = rot @ np.array([0.0, 1.0, 0.0])  # ground normal (up) in the camera frame
    d = -float(n @ t)  # points p_cam = R p_g + t with p_g.y = 0 satisfy n.p + d = 0
    return np.concatenate([n, [d]])


def _gt_arrays(plan, tracks: list[SMPLHTrack], posed, camera: Camera, setup: CameraSetup,
               background: np.ndarray, person_masks: np.ndarray, alpha: np.ndarray,
               subjects: list[Identity], preset: Preset, scratch: Path | None = None) -> dict[str, np.ndarray]:
    arrays = [tr.to_arrays() for tr in tracks]
    joints3d = np.stack([p.joints for p in posed], axis=1).astype(np.float32)  # (T,N,52,3)
    anyone = _video_array((person_masks.shape[0], *person_masks.shape[2:]), bool, scratch, "mask")
    for a in range(0, len(anyone), _GT_CHUNK):  # a chunk of frames at a time: bounded memory
        anyone[a : a + _GT_CHUNK] = person_masks[a : a + _GT_CHUNK].any(axis=1)
    gt = {
        "person_masks": person_masks,
        "mask": anyone,
        "alpha": alpha,
        "betas": np.stack([a["betas"] for a in arrays]).astype(np.float32),
        **{k: np.stack([a[k] for a in arrays]) for k in _TRACK_KEYS},
        "joints3d": joints3d,
        "joints2d": camera.project(joints3d).astype(np.float32),
        "camera": camera.to_array(),
        "ground": _ground_plane(setup),
        "background": background,
        "subject_ids": np.array([s.subject_id for s in subjects], np.int32),
        "genders": np.array([s.gender for s in subjects]),
        "label": np.array(plan.label, np.int64),
        "action": np.array(plan.action),
        "fps": np.array(float(preset.fps)),
    }
    return gt


# ------------------------------------------------------------------------------------- dataset
def generate_dataset(root: str | Path, *, preset: Preset | str = DEMO_PRESET, seed: int = 0,
                     overwrite: bool = True, progress=None, **overrides) -> Path:
    """Write a dataset (layout in the module docstring) to ``root`` and return ``root``.

    ``overrides`` replace preset fields: n_subjects, actions, repetitions, frames, width, height,
    fps, videos_per_action, backgrounds, supersample, max_travel, depth. Width and height must be
    even (yuv420p). ``progress(i, n, video_id)`` is called after each video.
    """
    from anonymask.storage.video_io import write_mp4

    p = PRESETS[preset] if isinstance(preset, str) else preset
    if "actions" in overrides:
        overrides["actions"] = tuple(overrides["actions"])
    p = replace(p, **overrides)
    if p.width % 2 or p.height % 2 or p.width < 16 or p.height < 16:
        raise ValueError(f"width and height must be even and >= 16 (got {p.width}x{p.height})")
    if p.frames < 1 or p.fps <= 0:
        raise ValueError(f"frames and fps must be positive (got {p.frames}, {p.fps})")
    for b in p.backgrounds:
        if b not in BACKGROUNDS:
            raise ValueError(f"unknown background {b!r}; known: {', '.join(BACKGROUNDS)}")
    root = Path(root)
    if overwrite:
        for sub in ("videos", "gt"):
            shutil.rmtree(root / sub, ignore_errors=True)
        (root / "dataset.json").unlink(missing_ok=True)
    (root / "videos").mkdir(parents=True, exist_ok=True)
    (root / "gt").mkdir(parents=True, exist_ok=True)

    identities = make_identities(p.n_subjects, seed)
    by_id = {i.subject_id: i for i in identities}
    plans = plan_videos(p, seed)
    classes = [action_spec(a).name for a in p.actions]
    videos = []
    scratch = root / ".scratch"
    for i, plan in enumerate(plans):
        try:  # the video-long arrays live in files there while the video is written (bounded memory)
            frames, gt = render_video(plan, by_id, p, seed, classes, scratch=scratch)
            write_mp4(root / "videos" / f"{plan.video_id}.mp4", frames, p.fps, **ENCODE)
            _save_npz(root / "gt" / f"{plan.video_id}.npz", gt)
            del frames, gt
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        videos.append({
            "video_id": plan.video_id, "path": f"videos/{plan.video_id}.mp4", "gt": f"gt/{plan.video_id}.npz",
            "label": plan.label, "action": plan.action, "subjects": [by_id[s].name for s in plan.subjects],
            "genders": [by_id[s].gender for s in plan.subjects], "camera": plan.camera,
            "background": plan.background, "repetition": plan.repetition, "frames": p.frames,
            "split": plan.split,
        })
        if progress is not None:
            progress(i + 1, len(plans), plan.video_id)
    train, test = subject_split(p.n_subjects)
    doc = {
        "name": "demo" if p.name in ("demo", "tiny") else "synthetic",  # the adapter that reads it
        "preset": p.name,
        "version": FORMAT_VERSION,
        "generator": "anonymask.models.shared.synthetic",
        "seed": seed,
        "fps": p.fps,
        "frames": p.frames,
        "size": [p.width, p.height],
        "classes": classes,
        "actions": {a: action_spec(a).to_dict() for a in classes},
        "subjects": [i.to_dict() for i in identities],
        "cameras": [c.to_dict() for c in CAMERA_SETUPS],
        "backgrounds": list(p.backgrounds),
        "splits": {
            "xsub": {"train": [f"s{s:02d}" for s in train], "test": [f"s{s:02d}" for s in test]},
            "xview": {"train": [c.name for c in CAMERA_SETUPS[1:]], "test": [CAMERA_SETUPS[0].name]},
        },
        "videos": videos,
    }
    tmp = root / ".dataset.json.part"
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(root / "dataset.json")  # written last: its presence means the dataset is complete
    return root


def _save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    tmp = path.with_name(f".{path.name}.part")
    with open(tmp, "wb") as fh:
        np.savez_compressed(fh, **arrays)
    tmp.replace(path)


def generate_demo(root: str | Path, preset: str = "demo", seed: int = 0, **overrides) -> Path:
    """The CLI's entry point: generate preset ``demo``, ``synthetic`` or ``tiny`` into ``root``."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; known: {', '.join(PRESETS)}")
    return generate_dataset(root, preset=preset, seed=seed, **overrides)


# ------------------------------------------------------------------------------------- reading
def load_gt(path: str | Path) -> dict[str, np.ndarray]:
    """The arrays of one ``gt/<id>.npz`` (all keys of the module docstring)."""
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def gt_tracks(gt: dict[str, np.ndarray]) -> list[SMPLHTrack]:
    """The ground-truth SMPL-H tracks of a video (track ids 0..N-1)."""
    out = []
    for n in range(gt["betas"].shape[0]):
        arrays = {k: gt[k][n] for k in _TRACK_KEYS}
        arrays["betas"] = gt["betas"][n]
        arrays["gender"] = str(gt["genders"][n])
        out.append(SMPLHTrack.from_arrays(n, arrays))
    return out
