"""Per-subject motion style: how one person performs any action.

Real people differ in tempo, in how far they swing their limbs and in how they carry themselves.
The style here is a small fixed vector per subject, applied on top of every clip, so it is a real,
learnable signature (skeleton re-identification should be able to find it, and the skeleton
anonymizer should be able to remove it) while the action stays the captured one.

All angles in radians. The posture offsets are rotations in the parent joint's frame (SMPL axes:
x = body left, y up, z forward), so they read the same whatever the action.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import numpy as np
from scipy.spatial.transform import Rotation

from anonymask.models.shared.body.tracks import JOINT_INDEX
from anonymask.models.shared.synthetic.retarget import SMPLHMotion

GROUPS: dict[str, tuple[str, ...]] = {
    "spine": ("spine1", "spine2", "spine3"),
    "head": ("neck", "head"),
    "arms": ("left_collar", "right_collar", "left_shoulder", "right_shoulder", "left_elbow",
             "right_elbow", "left_wrist", "right_wrist"),
    "legs": ("left_hip", "right_hip", "left_knee", "right_knee", "left_ankle", "right_ankle",
             "left_foot", "right_foot"),
}


@dataclass(frozen=True)
class MotionStyle:
    """A subject's motion signature (neutral: all scales 1, all offsets 0, no mirror)."""

    speed: float = 1.0  # tempo: clip time per video time
    amp_spine: float = 1.0  # range of motion about the clip's mean pose, per joint group
    amp_head: float = 1.0
    amp_arms: float = 1.0
    amp_legs: float = 1.0
    slouch: float = 0.0  # forward flexion spread over the three spine joints
    head_tilt: float = 0.0  # forward flexion of neck + head
    head_roll: float = 0.0  # sideways tilt of the head (towards the body's left if > 0)
    arm_abduction: float = 0.0  # arms carried away from the body
    elbow_flex: float = 0.0  # extra elbow bend
    stance_width: float = 0.0  # hip abduction (feet apart)
    toe_out: float = 0.0  # hips turned outwards
    mirror: bool = False  # left-handed: the whole motion mirrored left <-> right

    def to_dict(self) -> dict:
        return {k: (bool(v) if isinstance(v, bool | np.bool_) else float(v)) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict) -> MotionStyle:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def vector(self) -> np.ndarray:
        """The style as numbers (mirror as 0/1), e.g. for re-identification checks."""
        return np.array([float(v) for v in asdict(self).values()])


def sample_style(rng: np.random.Generator) -> MotionStyle:
    """A random but plausible style: tempo +-20%, ranges +-25%, postures of a few to 20 degrees."""
    deg = np.pi / 180
    return MotionStyle(
        speed=float(rng.uniform(0.82, 1.22)),
        amp_spine=float(rng.uniform(0.7, 1.3)),
        amp_head=float(rng.uniform(0.7, 1.3)),
        amp_arms=float(rng.uniform(0.75, 1.25)),
        amp_legs=float(rng.uniform(0.85, 1.15)),
        slouch=float(rng.uniform(-4, 18) * deg),
        head_tilt=float(rng.uniform(-8, 15) * deg),
        head_roll=float(rng.uniform(-8, 8) * deg),
        arm_abduction=float(rng.uniform(0, 18) * deg),
        elbow_flex=float(rng.uniform(0, 30) * deg),
        stance_width=float(rng.uniform(0, 7) * deg),
        toe_out=float(rng.uniform(-3, 15) * deg),
        mirror=bool(rng.uniform() < 0.25),
    )


# ----------------------------------------------------------------------------------- mirroring
def _pairs() -> list[tuple[int, int]]:
    out = []
    for name, i in JOINT_INDEX.items():
        if name.startswith("left_") and i < 22:
            out.append((i, JOINT_INDEX["right_" + name[5:]]))
    return out


_LR_PAIRS = _pairs()
_MIRROR = np.array([1.0, -1.0, -1.0])  # axis-angle under reflection x -> -x


def mirror_motion(m: SMPLHMotion) -> SMPLHMotion:
    """Reflect the motion across the body's sagittal plane (x -> -x): left and right swap."""
    body = m.body_pose.reshape(-1, 21, 3) * _MIRROR
    swapped = body.copy()
    for li, ri in _LR_PAIRS:
        swapped[:, li - 1], swapped[:, ri - 1] = body[:, ri - 1], body[:, li - 1]
    pelvis = m.pelvis * np.array([-1.0, 1.0, 1.0])
    return SMPLHMotion(m.name, m.fps, m.global_orient * _MIRROR, swapped.reshape(-1, 63), pelvis)


# ----------------------------------------------------------------------------------- application
def _scale_about_mean(aa: np.ndarray, scale: float) -> np.ndarray:
    """Scale a joint's rotations (T,3) about their temporal mean rotation."""
    if scale == 1.0 or len(aa) < 2:
        return aa
    r = Rotation.from_rotvec(aa)
    mean = r.mean()
    dev = (mean.inv() * r).as_rotvec() * scale
    return (mean * Rotation.from_rotvec(dev)).as_rotvec()


def _pre_rotate(aa: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """offset (in the parent's frame) composed before the joint's own rotation."""
    if not np.any(offset):
        return aa
    return (Rotation.from_rotvec(offset) * Rotation.from_rotvec(aa)).as_rotvec()


def posture_offsets(style: MotionStyle) -> dict[str, np.ndarray]:
    """Axis-angle offsets per joint name that realise the style's posture."""
    s = style
    x, y, z = np.eye(3)
    return {
        **{j: x * s.slouch / 3 for j in GROUPS["spine"]},
        "neck": x * s.head_tilt / 2 + z * s.head_roll / 2,
        "head": x * s.head_tilt / 2 + z * s.head_roll / 2,
        # a hanging left arm swings out (+x) about +z, the right one about -z
        "left_shoulder": z * s.arm_abduction,
        "right_shoulder": -z * s.arm_abduction,
        # elbow hinge after retargeting: -y for the left arm, +y for the right (positive = flexion)
        "left_elbow": -y * s.elbow_flex,
        "right_elbow": y * s.elbow_flex,
        "left_hip": z * s.stance_width + y * s.toe_out,
        "right_hip": -z * s.stance_width - y * s.toe_out,
    }


def apply_style(m: SMPLHMotion, style: MotionStyle) -> SMPLHMotion:
    """The motion as this subject performs it (tempo is applied when the clip is resampled)."""
    if style.mirror:
        m = mirror_motion(m)
    body = m.body_pose.reshape(-1, 21, 3).copy()
    amps = {"spine": style.amp_spine, "head": style.amp_head, "arms": style.amp_arms, "legs": style.amp_legs}
    for group, joints in GROUPS.items():
        for j in joints:
            k = JOINT_INDEX[j] - 1
            body[:, k] = _scale_about_mean(body[:, k], amps[group])
    for j, off in posture_offsets(style).items():
        k = JOINT_INDEX[j] - 1
        body[:, k] = _pre_rotate(body[:, k], off)
    return SMPLHMotion(m.name, m.fps, m.global_orient.copy(), body.reshape(-1, 63), m.pelvis.copy())
