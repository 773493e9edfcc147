"""Motion-capture clips from pybullet's DeepMimic humanoid set, parsed and resampled.

pybullet ships 15 real motion-capture clips (walk, run, jump, kick, punch, dances, ...) as the JSON
files DeepMimic uses. They are the only real human motion installable from a package index, so the
synthetic dataset uses them as its action classes.

File format (checked against ``humanoid.urdf`` and pybullet's own pose interpolator): ``{"Loop":
"wrap"|"none", "Frames": [[...44 numbers...], ...]}``. Each frame is

    duration (s, until the next frame), root position (x, y, z, metres),
    root rotation (w, x, y, z), then per joint in this order:
    chest, neck, right hip (w,x,y,z each), right knee (1 angle), right ankle, right shoulder (w,x,y,z),
    right elbow (1 angle), left hip, left knee (angle), left ankle, left shoulder, left elbow (angle).

Frames of the DeepMimic humanoid: world y up; the body faces +x, its right side is +z, and every
joint frame is aligned with the root frame in the rest pose (all URDF joint origins have rpy 0).
The rest pose stands straight with the arms hanging down. Knees and elbows are hinges about +z:
a positive elbow angle swings the forearm forward, a negative knee angle swings the shin back.

Quaternions here are stored scalar-last (x, y, z, w), scipy's convention.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from anonymask.core.errors import DatasetError

#: DeepMimic joints in file order.
DM_JOINTS: tuple[str, ...] = (
    "chest", "neck",
    "right_hip", "right_knee", "right_ankle", "right_shoulder", "right_elbow",
    "left_hip", "left_knee", "left_ankle", "left_shoulder", "left_elbow",
)  # fmt: skip
#: joints stored as one hinge angle about +z instead of a quaternion
DM_HINGES = frozenset({"right_knee", "right_elbow", "left_knee", "left_elbow"})
FRAME_WIDTH = 1 + 3 + 4 + sum(1 if j in DM_HINGES else 4 for j in DM_JOINTS)  # 44
CLIP_PREFIX = "humanoid3d_"
#: joint -> (parent, offset from the parent joint in the parent's frame, metres), from humanoid.urdf
#: at pybullet's globalScaling 0.25. "root" is the pelvis; wrists are fixed end points.
DM_SKELETON: dict[str, tuple[str, tuple[float, float, float]]] = {
    "chest": ("root", (0.0, 0.944604, 0.0)),
    "neck": ("chest", (0.0, 0.895576, 0.0)),
    "right_hip": ("root", (0.0, 0.0, 0.339548)),
    "right_knee": ("right_hip", (0.0, -1.686184, 0.0)),
    "right_ankle": ("right_knee", (0.0, -1.639480, 0.0)),
    "right_shoulder": ("chest", (-0.0962, 0.974, 0.73244)),
    "right_elbow": ("right_shoulder", (0.0, -1.099152, 0.0)),
    "right_wrist": ("right_elbow", (0.0, -1.035788, 0.0)),
    "left_hip": ("root", (0.0, 0.0, -0.339548)),
    "left_knee": ("left_hip", (0.0, -1.686184, 0.0)),
    "left_ankle": ("left_knee", (0.0, -1.639480, 0.0)),
    "left_shoulder": ("chest", (-0.0962, 0.974, -0.73244)),
    "left_elbow": ("left_shoulder", (0.0, -1.099152, 0.0)),
    "left_wrist": ("left_elbow", (0.0, -1.035788, 0.0)),
}
DM_SCALE = 0.25


def motions_dir() -> Path:
    """Folder of the DeepMimic clips inside the installed pybullet data package."""
    try:
        import pybullet_data
    except ImportError as e:  # pragma: no cover - pybullet is a base requirement
        raise DatasetError("motion clips need the pybullet package (pip install pybullet)") from e
    return Path(pybullet_data.getDataPath()) / "data" / "motions"


def available_clips() -> list[str]:
    """Short names of the captured humanoid clips, e.g. ``["backflip", ..., "walk"]``."""
    return sorted(p.stem[len(CLIP_PREFIX):] for p in motions_dir().glob(f"{CLIP_PREFIX}*.txt"))


# ------------------------------------------------------------------------------- quaternions
def quat_normalize(q: np.ndarray) -> np.ndarray:
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product of scalar-last quaternions, broadcasting."""
    ax, ay, az, aw = np.moveaxis(a, -1, 0)
    bx, by, bz, bw = np.moveaxis(b, -1, 0)
    return np.stack(
        [
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz,
        ],
        axis=-1,
    )


def quat_rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate vectors ``v`` (...,3) by unit quaternions ``q`` (...,4)."""
    u, w = q[..., :3], q[..., 3:4]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def quat_slerp(a: np.ndarray, b: np.ndarray, f: np.ndarray) -> np.ndarray:
    """Spherical interpolation, shortest arc; ``f`` broadcasts against the leading axes."""
    f = np.asarray(f, dtype=np.float64)[..., None]
    dot = np.sum(a * b, axis=-1, keepdims=True)
    b = np.where(dot < 0, -b, b)
    dot = np.clip(np.abs(dot), -1.0, 1.0)
    theta = np.arccos(dot)
    sin = np.sin(theta)
    small = sin < 1e-6
    safe = np.where(small, 1.0, sin)
    wa = np.where(small, 1.0 - f, np.sin((1.0 - f) * theta) / safe)
    wb = np.where(small, f, np.sin(f * theta) / safe)
    return quat_normalize(wa * a + wb * b)


def quat_about(axis: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """Quaternions for rotations by ``angle`` (...) about unit ``axis`` (3,)."""
    angle = np.asarray(angle, dtype=np.float64)[..., None]
    return np.concatenate([np.sin(angle / 2) * np.asarray(axis, float), np.cos(angle / 2)], axis=-1)


def yaw_of(q: np.ndarray) -> np.ndarray:
    """Heading about world +y of the body's forward axis (+x in DeepMimic), radians."""
    fwd = quat_rotate(q, np.array([1.0, 0.0, 0.0]))
    return np.arctan2(-fwd[..., 2], fwd[..., 0])


# ------------------------------------------------------------------------------- clips
@dataclass(frozen=True)
class MotionFrames:
    """Poses at regular times: root position (T,3) metres, root rotation (T,4) and joint rotations
    (T,12,4) scalar-last quaternions, all in DeepMimic's frames (see module docstring)."""

    name: str
    fps: float
    root_pos: np.ndarray
    root_rot: np.ndarray
    joint_rot: np.ndarray

    @property
    def n_frames(self) -> int:
        return int(self.root_pos.shape[0])


@dataclass(frozen=True)
class MotionClip:
    """One clip's keyframes. ``times`` (K,) start at 0; the last keyframe ends the clip."""

    name: str
    times: np.ndarray
    root_pos: np.ndarray
    root_rot: np.ndarray
    joint_rot: np.ndarray
    loop: bool

    @property
    def duration(self) -> float:
        return float(self.times[-1])

    def _cycle_shift(self) -> np.ndarray:
        """Horizontal root shift from one cycle of a looping clip to the next."""
        shift = self.root_pos[-1] - self.root_pos[0]
        shift[1] = 0.0
        return shift

    def sample(self, t: np.ndarray, fps: float = 0.0) -> MotionFrames:
        """Poses at times ``t`` (seconds). Looping clips continue cycle after cycle (also for t < 0),
        shifted by one cycle's travel each time; others hold their first/last pose outside
        ``[0, duration]``."""
        t = np.asarray(t, dtype=np.float64)
        dur = self.duration
        if self.loop and dur > 0:
            cycles = np.floor(t / dur).astype(int)
            local = t - cycles * dur
        else:
            cycles = np.zeros(t.shape, dtype=int)
            local = np.clip(t, 0.0, dur)
        k = np.clip(np.searchsorted(self.times, local, side="right") - 1, 0, len(self.times) - 2)
        span = self.times[k + 1] - self.times[k]
        f = np.clip((local - self.times[k]) / np.where(span > 0, span, 1.0), 0.0, 1.0)
        pos = self.root_pos[k] + f[:, None] * (self.root_pos[k + 1] - self.root_pos[k])
        rot = quat_slerp(self.root_rot[k], self.root_rot[k + 1], f)
        joints = quat_slerp(self.joint_rot[k], self.joint_rot[k + 1], f[:, None])
        if self.loop:
            pos = pos + cycles[:, None] * self._cycle_shift()
        return MotionFrames(self.name, fps, pos, rot, joints)

    def resample(self, fps: float, n_frames: int | None = None, *, start: float = 0.0,
                 speed: float = 1.0) -> MotionFrames:
        """``n_frames`` poses at ``fps`` from clip time ``start``, played ``speed`` times as fast.
        Without ``n_frames``, the whole clip (from ``start``) at that rate."""
        if fps <= 0 or speed <= 0:
            raise ValueError(f"fps and speed must be positive (got {fps}, {speed})")
        if n_frames is None:
            n_frames = int(np.floor((self.duration - start) / speed * fps)) + 1
        t = start + np.arange(n_frames) * (speed / fps)
        return self.sample(t, fps=fps)


def forward_kinematics(frames: MotionFrames) -> dict[str, np.ndarray]:
    """World positions (T,3) of the DeepMimic joints (and wrists) for posed frames: the capture's
    own skeleton, the reference the retargeted SMPL-H body is checked against."""
    world_rot = {"root": frames.root_rot}
    pos = {"root": frames.root_pos}
    for joint, (parent, offset) in DM_SKELETON.items():
        pos[joint] = pos[parent] + quat_rotate(world_rot[parent], DM_SCALE * np.asarray(offset))
        if joint in DM_JOINTS:
            world_rot[joint] = quat_mul(world_rot[parent], frames.joint_rot[:, DM_JOINTS.index(joint)])
        else:
            world_rot[joint] = world_rot[parent]
    return pos


def parse_frames(frames: np.ndarray, name: str, loop: bool) -> MotionClip:
    """Keyframe rows of a DeepMimic humanoid file -> :class:`MotionClip`."""
    frames = np.asarray(frames, dtype=np.float64)
    if frames.ndim != 2 or frames.shape[1] != FRAME_WIDTH or len(frames) < 2:
        raise DatasetError(f"motion {name}: expected >= 2 frames of {FRAME_WIDTH} numbers, got {frames.shape}")
    times = np.concatenate([[0.0], np.cumsum(frames[:-1, 0])])
    root_pos = frames[:, 1:4].copy()
    wxyz_to_xyzw = [1, 2, 3, 0]
    root_rot = quat_normalize(frames[:, 4:8][:, wxyz_to_xyzw])
    col = 8
    rots = []
    z = np.array([0.0, 0.0, 1.0])
    for joint in DM_JOINTS:
        if joint in DM_HINGES:
            rots.append(quat_about(z, frames[:, col]))
            col += 1
        else:
            rots.append(quat_normalize(frames[:, col:col + 4][:, wxyz_to_xyzw]))
            col += 4
    joint_rot = np.stack(rots, axis=1)
    # consistent hemisphere along time so that interpolation never takes the long way
    for q in (root_rot[:, None], joint_rot):
        for i in range(1, len(q)):
            flip = np.sum(q[i] * q[i - 1], axis=-1) < 0
            q[i][flip] *= -1
    if loop:
        root_pos, root_rot = _close_loop(times, root_pos, root_rot)
    return MotionClip(name, times, root_pos, root_rot, joint_rot, loop)


def _close_loop(times: np.ndarray, pos: np.ndarray, rot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Spread a looping clip's heading mismatch (last vs first keyframe, capture noise of up to ~20
    degrees) over the cycle's root rotations, so repeated cycles join without a jump. Positions stay
    as captured: the path's direction is right, the pelvis heading is what drifts."""
    dyaw = float(yaw_of(rot[-1]) - yaw_of(rot[0]))
    dyaw = (dyaw + np.pi) % (2 * np.pi) - np.pi
    if abs(dyaw) < 1e-6:
        return pos, rot
    q = quat_about(np.array([0.0, 1.0, 0.0]), -dyaw * times / times[-1])
    return pos, quat_mul(q, rot)


@lru_cache(maxsize=32)
def _load_cached(path: str) -> MotionClip:
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
        frames = np.asarray(doc["Frames"], dtype=np.float64)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise DatasetError(f"{p}: not a DeepMimic motion file ({e})") from e
    name = p.stem[len(CLIP_PREFIX):] if p.stem.startswith(CLIP_PREFIX) else p.stem
    return parse_frames(frames, name, loop=str(doc.get("Loop", "none")).lower() == "wrap")


STAND = "stand"


@lru_cache(maxsize=1)
def stand_clip() -> MotionClip:
    """The one clip not captured: quiet standing with a slow sway (4 s loop), for the passive
    partner of a two-person action."""
    times = np.arange(0.0, 4.0 + 1e-9, 0.25)
    ph = 2 * np.pi * times / 4.0
    x, y, z = np.eye(3)
    root_pos = np.stack([0.01 * np.sin(ph), np.full_like(ph, 0.87), 0.015 * np.sin(2 * ph)], axis=1)
    root_rot = quat_mul(quat_about(y, 0.04 * np.sin(ph)), quat_about(x, 0.02 * np.sin(ph)))
    joint = {j: np.tile([0.0, 0.0, 0.0, 1.0], (len(times), 1)) for j in DM_JOINTS}
    joint["chest"] = quat_about(z, -0.03 + 0.015 * np.sin(ph + 1.0))  # slight forward lean, breathing
    joint["neck"] = quat_about(z, -0.05 + 0.02 * np.sin(ph + 2.0))
    for side, sign in (("right", -1.0), ("left", 1.0)):
        # arms: a little forward and out; elbows and knees a little bent
        joint[f"{side}_shoulder"] = quat_mul(quat_about(x, sign * 0.12), quat_about(z, 0.10))
        joint[f"{side}_elbow"] = quat_about(z, np.full_like(ph, 0.25))
        joint[f"{side}_knee"] = quat_about(z, np.full_like(ph, -0.06))
        joint[f"{side}_hip"] = quat_about(z, np.full_like(ph, 0.03))
    joint_rot = np.stack([np.broadcast_to(joint[j], (len(times), 4)) for j in DM_JOINTS], axis=1)
    return MotionClip(STAND, times, root_pos, quat_normalize(root_rot), quat_normalize(joint_rot), True)


def load_clip(name: str | Path) -> MotionClip:
    """A clip by short name (``"walk"``, or ``"stand"``: see :func:`stand_clip`) or by path to a
    DeepMimic humanoid motion file."""
    if name == STAND:
        return stand_clip()
    p = Path(name)
    if not p.suffix:
        p = motions_dir() / f"{CLIP_PREFIX}{name}.txt"
        if not p.exists():
            raise DatasetError(f"motion clip {name!r} not found in {motions_dir()}; "
                               f"known: {', '.join(available_clips())}")
    return _load_cached(str(p))
