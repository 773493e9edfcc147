"""Put retargeted motions on a ground plane in front of a static camera.

Frames: the motions come in the y-up "ground" frame of :mod:`retarget` (SMPL axes); the camera
stands on the ground frame's origin at ``height`` metres, looks along -z, pitched down by
``pitch``. Output tracks are in the OpenCV camera frame (x right, y down, z forward, metres), the
frame every other part of the project uses.

Layout per video: each person's lowest mesh point over the clip touches the ground (y = 0);
locomotion longer than ``max_travel`` is partly turned into walking on the spot (the path is
shortened linearly, the feet slide a little); the person (or pair) is turned so that travel runs
across the view, then pushed back and centred until the whole mesh stays inside the frame in
every frame (or ``max_depth`` is reached).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.spatial.transform import Rotation

from anonymask.models.shared.body.tracks import JOINT_INDEX, Camera, SMPLHTrack
from anonymask.models.shared.synthetic.retarget import SMPLHMotion


@dataclass(frozen=True)
class CameraSetup:
    """A static camera: height above the ground (m), downward pitch (rad), horizontal FOV (deg)."""

    name: str
    height: float
    pitch: float
    fov: float

    def intrinsics(self, width: int, height: int) -> Camera:
        return Camera.from_fov(width, height, self.fov)

    def extrinsics(self) -> tuple[np.ndarray, np.ndarray]:
        """(R, t) with p_camera = R @ p_ground + t."""
        a = self.pitch
        rot = np.array([[1.0, 0.0, 0.0], [0.0, -np.cos(a), np.sin(a)], [0.0, -np.sin(a), -np.cos(a)]])
        center = np.array([0.0, self.height, 0.0])
        return rot, -rot @ center

    def to_dict(self) -> dict:
        return {"name": self.name, "height": self.height, "pitch": self.pitch, "fov": self.fov}


# Three static cameras, like NTU's three views (but one room each): eye level, high, low.
CAMERA_SETUPS: tuple[CameraSetup, ...] = (
    CameraSetup("c01", 1.45, np.radians(8.0), 60.0),
    CameraSetup("c02", 1.85, np.radians(15.0), 55.0),
    CameraSetup("c03", 1.10, np.radians(3.0), 65.0),
)


@dataclass
class PlacedPerson:
    """One person's motion in the ground frame with their posed mesh (for layout decisions)."""

    motion: SMPLHMotion
    betas: np.ndarray
    gender: str
    vertices: np.ndarray  # (T, V, 3) ground frame
    joints: np.ndarray  # (T, 52, 3) ground frame


@lru_cache(maxsize=64)
def _rest_cached(body_model, betas_bytes: bytes):
    return body_model.rest(np.frombuffer(betas_bytes, np.float32))


def rest_body(body_model, betas: np.ndarray):
    """The body model's rest pose for ``betas`` (cached: the generator asks for it often)."""
    return _rest_cached(body_model, np.asarray(betas, np.float32).tobytes())


def pose_in_ground(body_model, motion: SMPLHMotion, betas: np.ndarray, gender: str) -> PlacedPerson:
    """Pose the motion and set it on the ground (lowest mesh point over the clip at y = 0)."""
    j0 = rest_body(body_model, betas).joints[0, 0]
    out = body_model.forward(betas, motion.global_orient, motion.body_pose, transl=motion.pelvis - j0)
    lift = -float(out.vertices[..., 1].min())
    m = motion.copy()
    m.pelvis[:, 1] += lift
    v, j = out.vertices.copy(), out.joints.copy()
    v[..., 1] += lift
    j[..., 1] += lift
    return PlacedPerson(m, np.asarray(betas, np.float32), gender, v, j)


def limit_travel(p: PlacedPerson, max_travel: float) -> PlacedPerson:
    """Shorten a horizontal path longer than ``max_travel`` by a linear drift (walking on the spot)."""
    disp = p.motion.pelvis[-1] - p.motion.pelvis[0]
    disp[1] = 0.0
    dist = float(np.linalg.norm(disp))
    if dist <= max_travel or p.motion.n_frames < 2:
        return p
    ramp = np.linspace(0.0, 1.0, p.motion.n_frames)[:, None] * disp * (1.0 - max_travel / dist)
    m = p.motion.copy()
    m.pelvis -= ramp
    return PlacedPerson(m, p.betas, p.gender, p.vertices - ramp[:, None], p.joints - ramp[:, None])


def transform(p: PlacedPerson, yaw: float, offset: np.ndarray) -> PlacedPerson:
    """Turn about the vertical axis through the ground origin by ``yaw``, then shift by ``offset``."""
    r = Rotation.from_rotvec([0.0, yaw, 0.0])
    rm = r.as_matrix().astype(np.float32)
    off = np.asarray(offset, np.float32)
    m = p.motion.copy()
    m.global_orient = (r * Rotation.from_rotvec(m.global_orient)).as_rotvec()
    m.pelvis = m.pelvis @ rm.T + off
    return PlacedPerson(m, p.betas, p.gender, p.vertices @ rm.T + off, p.joints @ rm.T + off)


def travel_angle(p: PlacedPerson) -> float | None:
    """Direction of the pelvis' horizontal travel (angle from +z towards +x), None if it stays."""
    d = p.motion.pelvis[-1] - p.motion.pelvis[0]
    if np.hypot(d[0], d[2]) < 0.4:
        return None
    return float(np.arctan2(d[0], d[2]))


def heading(p: PlacedPerson, t: int) -> np.ndarray:
    """Unit horizontal direction the body faces at frame t."""
    fwd = Rotation.from_rotvec(p.motion.global_orient[t]).apply([0.0, 0.0, 1.0])
    fwd[1] = 0.0
    n = np.linalg.norm(fwd)
    return fwd / n if n > 1e-6 else np.array([0.0, 0.0, 1.0])


_EFFECTORS = ("left_wrist", "right_wrist", "left_ankle", "right_ankle")


def reach(p: PlacedPerson) -> tuple[int, np.ndarray, float]:
    """(frame, unit horizontal direction, distance) of the farthest hand/foot reach from the pelvis:
    where a punch or a kick lands."""
    idx = [JOINT_INDEX[e] for e in _EFFECTORS]
    d = p.joints[:, idx] - p.joints[:, :1]
    d[..., 1] = 0.0
    dist = np.linalg.norm(d, axis=-1)
    t, k = np.unravel_index(int(np.argmax(dist)), dist.shape)
    return int(t), d[t, k] / max(float(dist[t, k]), 1e-6), float(dist[t, k])


def centroid(people: list[PlacedPerson]) -> np.ndarray:
    c = np.mean([p.motion.pelvis.mean(axis=0) for p in people], axis=0)
    c[1] = 0.0
    return c


def fit_in_view(people: list[PlacedPerson], setup: CameraSetup, camera: Camera, depth: float,
                shift: float = 0.0, margin: float = 0.03, max_depth: float = 9.0) -> list[PlacedPerson]:
    """Move the group to ``depth`` m in front of the camera, its centre ``shift`` (fraction of the
    width) off the image centre, then push it back and re-centre it until every vertex of every
    frame projects inside the frame with a ``margin`` (fraction), or ``max_depth`` is reached."""
    rot, t = setup.extrinsics()
    c = centroid(people)
    people = [transform(p, 0.0, -c) for p in people]
    pts0 = np.concatenate([p.vertices[:, ::4].reshape(-1, 3) for p in people])
    pos = np.array([0.0, 0.0, -depth])
    w, h = camera.width, camera.height
    for _ in range(16):
        cam = (pts0 + pos) @ rot.T + t
        if np.any(cam[:, 2] < 0.3):
            pos[2] -= 0.5
            continue
        uv = camera.project(cam)
        (u0, v0), (u1, v1) = uv.min(axis=0), uv.max(axis=0)
        du = (u0 + u1) / 2 - ((w - 1) / 2 + shift * w)
        fits_h = u0 >= w * margin and u1 <= w * (1 - margin)
        fits_v = v0 >= h * margin and v1 <= h * (1 - margin)
        z = float(-pos[2])
        if fits_v and fits_h:
            break
        if not fits_v or (u1 - u0) > w * (1 - 2 * margin):
            scale = max((u1 - u0) / (w * (1 - 2 * margin)), (v1 - v0) / (h * (1 - 2 * margin)), 1.08)
            if z >= max_depth:
                break
            pos[2] = -min(max_depth, z * scale)
        elif not fits_h:
            shift *= 0.5  # wide enough but off-centre: give up part of the requested offset
        pos[0] -= du * z / camera.fx
    return [transform(p, 0.0, pos) for p in people]


def to_camera_track(p: PlacedPerson, setup: CameraSetup, body_model, track_id: int,
                    hand_pose: tuple[np.ndarray, np.ndarray] | None = None) -> SMPLHTrack:
    """The placed motion as an SMPL-H track in the OpenCV camera frame."""
    rot, t = setup.extrinsics()
    m = p.motion
    go = (Rotation.from_matrix(rot) * Rotation.from_rotvec(m.global_orient)).as_rotvec()
    pelvis = m.pelvis @ rot.T + t
    transl = pelvis - rest_body(body_model, p.betas).joints[0, 0]
    n = m.n_frames
    lh, rh = hand_pose if hand_pose is not None else (np.zeros(45), np.zeros(45))
    return SMPLHTrack(track_id, p.betas, go, m.body_pose, np.tile(lh, (n, 1)), np.tile(rh, (n, 1)),
                      transl, np.ones(n, bool), p.gender)
