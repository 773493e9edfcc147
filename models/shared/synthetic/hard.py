"""Hard cases for person discovery and removal, with exact ground truth (issue 8, item 6).

Each case is one video in the generator's layout (``dataset.json`` read by the ``demo`` adapter,
``videos/<id>.mp4``, ``gt/<id>.npz`` with the keys of :mod:`generator`), built from the same
identities, motion-capture clips, backgrounds and renderer as the demo set, but with the people
placed on purpose:

=================  =================================================================================
``static``         a walker and a bystander who stands still at the side the whole video
``closeup``        head and shoulders filling the frame (a person 0.55 m from the camera)
``occluded``       a person walking behind a counter (an object that hides their legs and more)
``enter_leave``    a person who walks in from outside one edge and out through the other
``three``          three people: one walking, one standing, one jumping
``far``            a small person far away (~12 m, about 30 px tall at 192 px) beside a near one
=================  =================================================================================

Ground truth: ``person_masks`` are the pixels where each person is visible (an occluder hides
them), ``background`` is the scene without people (with the occluder: the counter is part of the
background), ``valid[n, t]`` is True where person n has at least ``MIN_VISIBLE`` visible pixels
(a person outside the frame is absent). Same output for the same seed on any machine: every
random draw comes from ``seed`` and the case name, and rendering is deterministic (OpenGL
software rasteriser, the generator's supersampling).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from anonymask.models.shared.synthetic.actions import action_spec
from anonymask.models.shared.synthetic.backgrounds import load_background
from anonymask.models.shared.synthetic.generator import (
    DEMO_PRESET,
    ENCODE,
    FORMAT_VERSION,
    Preset,
    VideoPlan,
    _floor_row,
    _gt_arrays,
    _perform,
    _render_composite,
    _save_npz,
    _setup,
    _video_rng,
)
from anonymask.models.shared.synthetic.identities import make_identities
from anonymask.models.shared.synthetic.scene import (
    CameraSetup,
    PlacedPerson,
    to_camera_track,
    transform,
    travel_angle,
)

MIN_VISIBLE = 20  # pixels: below this a person counts as absent from the frame


@dataclass(frozen=True)
class PersonSpec:
    clip: str
    x: float = 0.0  # ground position, metres right of the camera axis
    depth: float = 4.0  # metres in front of the camera
    yaw_deg: float = 0.0  # 0 faces the camera; for ``across`` the walking direction is +x
    across: bool = False  # walk across the whole view (from outside one edge to outside the other)


@dataclass(frozen=True)
class HardCase:
    name: str
    people: tuple[PersonSpec, ...]
    background: str = "courtyard"
    camera: str = "c01"
    occluder: tuple[float, float, float, float, float] | None = None  # x, depth, width, height, thickness (m)
    frames: int | None = None  # None: the preset's


CLOSEUP_CAMERA = CameraSetup("closeup", 1.50, 0.0, 55.0)

HARD_CASES: tuple[HardCase, ...] = (
    HardCase("static", (PersonSpec("walk", 0.0, 4.0, across=True), PersonSpec("stand", -1.3, 4.6, 20.0)),
             background="garden"),
    HardCase("closeup", (PersonSpec("stand", 0.0, 0.55, 0.0),), background="chelsea", camera="closeup"),
    HardCase("occluded", (PersonSpec("walk", 0.0, 4.2, across=True),), background="coffee",
             occluder=(0.2, 3.2, 1.2, 1.15, 0.4)),
    HardCase("enter_leave", (PersonSpec("walk", 0.0, 2.6, across=True),), background="motorcycle", frames=64),
    HardCase("three", (PersonSpec("walk", 0.0, 4.4, across=True), PersonSpec("stand", -1.4, 4.0, -25.0),
                       PersonSpec("jump", 1.3, 4.8, 15.0)), background="courtyard"),
    HardCase("far", (PersonSpec("stand", 1.6, 12.0, 10.0), PersonSpec("kick", -0.6, 3.6, 40.0)),
             background="rocket"),
)


def _setup_for(name: str) -> CameraSetup:
    return CLOSEUP_CAMERA if name == CLOSEUP_CAMERA.name else _setup(name)


def _place(p: PlacedPerson, spec: PersonSpec) -> PlacedPerson:
    """Turn and move a performed clip (ground frame) to the spec's place."""
    deg = np.pi / 180
    if spec.across:
        travel = travel_angle(p)
        p = transform(p, (90.0 * deg) - (travel if travel is not None else 0.0), np.zeros(3))
    else:
        fwd = p.motion.global_orient[0]
        from scipy.spatial.transform import Rotation

        f = Rotation.from_rotvec(fwd).apply([0.0, 0.0, 1.0])
        p = transform(p, spec.yaw_deg * deg - float(np.arctan2(f[0], f[2])), np.zeros(3))
    c = p.motion.pelvis.mean(axis=0)
    return transform(p, 0.0, np.array([spec.x - c[0], 0.0, -spec.depth - c[2]]))


def _box_mesh(cx: float, depth: float, width: float, height: float, thick: float) -> tuple[np.ndarray, np.ndarray]:
    """A box standing on the ground (ground frame), corners repeated 3 times so every corner is in
    every third vertex (the renderer's crop box samples vertices ``[::3]``)."""
    x0, x1 = cx - width / 2, cx + width / 2
    z0, z1 = -depth + thick / 2, -depth - thick / 2
    corners = np.array([[x, y, z] for x in (x0, x1) for y in (0.0, height) for z in (z0, z1)], np.float32)
    faces = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                      [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]], np.int64)
    return np.repeat(corners, 3, axis=0), faces * 3


def render_case(case: HardCase, preset: Preset, seed: int = 0):
    """(video_id, frames (T,H,W,3) uint8, ground truth dict, subjects) of one hard case."""
    from anonymask.models.shared.body.model import get_body_model, relaxed_hand_pose

    p = replace(preset, frames=case.frames or preset.frames, max_travel=100.0)
    video_id = f"hard_{case.name}"
    rng = _video_rng(seed, video_id)
    setup = _setup_for(case.camera)
    camera = setup.intrinsics(p.width, p.height)
    identities = make_identities(max(4, len(case.people)), seed)
    subjects = [identities[k % len(identities)] for k in range(len(case.people))]
    people = [_place(_perform(idt, spec.clip, p, rng), spec) for idt, spec in zip(subjects, case.people)]
    models = [get_body_model(idt.gender) for idt in subjects]
    hands = (relaxed_hand_pose("left"), relaxed_hand_pose("right"))
    tracks = [to_camera_track(pp, setup, bm, k, hands) for k, (pp, bm) in enumerate(zip(people, models))]
    posed = [bm.pose_track(tr) for bm, tr in zip(models, tracks)]
    floor = _floor_row(setup, camera) if setup.pitch > 0 else None
    background = load_background(case.background, p.width, p.height, floor_row=floor)
    meshes = [po.vertices for po in posed]
    colours = [idt.vertex_colors(bm) for idt, bm in zip(subjects, models)]
    faces = [bm.faces for bm in models]
    if case.occluder is not None:
        verts, tri = _box_mesh(*case.occluder)
        rot, t = setup.extrinsics()
        cam_verts = (verts @ rot.T + t).astype(np.float32)
        box_colour = np.tile(np.array([[120, 96, 80]], np.uint8), (len(cam_verts), 1))
        # the counter is part of the scene: the clean background is the photo with the counter
        background = _render_composite([cam_verts[None]], [box_colour], [tri], camera, background,
                                       p.supersample)[0][0]
        meshes.append(np.repeat(cam_verts[None], p.frames, axis=0))
        colours.append(box_colour)
        faces.append(tri)
    frames, masks, alpha = _render_composite(meshes, colours, faces, camera, background, p.supersample)
    n = len(case.people)
    masks = masks[:, :n]  # the occluder (if any) is not a person: it only hides them
    for k, tr in enumerate(tracks):
        tr.valid = masks[:, k].sum(axis=(1, 2)) >= MIN_VISIBLE
    plan = VideoPlan(video_id, f"hard_{case.name}", 0, tuple(s.subject_id for s in subjects), 1, setup.name,
                     case.background)
    gt = _gt_arrays(plan, tracks, posed, camera, setup, background, masks, alpha, subjects, p)
    gt["label"] = np.array(0, np.int64)
    return video_id, frames, gt, subjects, p


def generate_hard_cases(root: str | Path, *, seed: int = 0, cases: tuple[str, ...] | None = None,
                        preset: Preset = DEMO_PRESET, progress=None, **overrides) -> Path:
    """Write the hard cases (all, or those named) to ``root`` in the generator's layout, read by the
    ``demo`` adapter. ``overrides`` replace preset fields (width, height, frames, fps, supersample)."""
    from anonymask.storage.video_io import write_mp4

    p = replace(preset, **overrides)
    chosen = [c for c in HARD_CASES if cases is None or c.name in cases]
    unknown = set(cases or ()) - {c.name for c in HARD_CASES}
    if unknown:
        raise ValueError(f"unknown hard case(s) {sorted(unknown)}; known: {[c.name for c in HARD_CASES]}")
    root = Path(root)
    for sub in ("videos", "gt"):
        shutil.rmtree(root / sub, ignore_errors=True)
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "dataset.json").unlink(missing_ok=True)
    videos, subjects_all = [], {}
    for i, case in enumerate(chosen):
        video_id, frames, gt, subjects, pc = render_case(case, p, seed)
        write_mp4(root / "videos" / f"{video_id}.mp4", frames, pc.fps, **ENCODE)
        _save_npz(root / "gt" / f"{video_id}.npz", gt)
        for s in subjects:
            subjects_all[s.name] = s.to_dict()
        videos.append({"video_id": video_id, "path": f"videos/{video_id}.mp4", "gt": f"gt/{video_id}.npz",
                       "label": 0, "action": f"hard_{case.name}", "subjects": [s.name for s in subjects],
                       "genders": [s.gender for s in subjects], "camera": case.camera,
                       "background": case.background, "repetition": 1, "frames": pc.frames,
                       "split": {"xsub": "test", "xview": "test"}})
        if progress is not None:
            progress(i + 1, len(chosen), video_id)
    doc = {"name": "demo", "preset": "hard", "version": FORMAT_VERSION, "generator": "anonymask.models.shared.synthetic.hard",
           "seed": seed, "fps": p.fps, "frames": p.frames, "size": [p.width, p.height], "classes": ["hard"],
           "actions": {"hard": action_spec("stand").to_dict()}, "subjects": list(subjects_all.values()),
           "splits": {"xsub": {"train": [], "test": sorted(subjects_all)}, "xview": {"train": [], "test": []}},
           "cases": {c.name: [s.__dict__ for s in c.people] for c in chosen}, "videos": videos}
    tmp = root / ".dataset.json.part"
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(root / "dataset.json")
    return root
