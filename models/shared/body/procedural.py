"""A procedural body model in the SMPL-H file format.

The real SMPL-H files are licence-gated, so the project builds its own stand-in: a closed human
surface made of smooth parts (torso with neck, head, arms, legs, feet, palms, fingers), each a
closed tube of varying elliptical cross-section, skinned smoothly to the 52 SMPL-H joints. It is
written with exactly the keys, shapes, joint order and kinematic tree smplx reads from a real
``SMPLH_<GENDER>.npz``, so everything downstream runs the same code with either file.

Shape space: ``shapedirs[..., k]`` is the secant of the nonlinear generator between beta_k = -1
and +1 (SHAPE_COMPONENTS names what each component changes). The joint regressor is solved so it
reproduces the generator's joints exactly for the template and along every shape direction.
Posedirs are zero (no pose-corrective shapes). The vertex ids smplx uses for its extra keypoints
(nose, eyes, ears, toes, heels, finger tips) are placed on those features.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.interpolate import PchipInterpolator

from .tracks import GENDERS, JOINT_INDEX, NUM_JOINTS, PARENTS

NUM_VERTICES = 6890
FORMAT_VERSION = 6  # bump when the generator changes: cached files are regenerated
SHAPE_COMPONENTS: tuple[str, ...] = (
    "height", "girth", "shoulder_width", "leg_length", "arm_length", "belly", "head_size",
    "hip_width", "chest", "muscle", "torso_length", "hand_size", "foot_size", "neck_length",
    "thigh", "upper_arm",
)
NUM_SHAPE = len(SHAPE_COMPONENTS)
FLOOR_Y = -1.15  # the soles of the rest body sit on this plane for every shape

# smplx's default extra keypoint vertex ids for SMPL-H (smplx/vertex_ids.py).
LANDMARK_VERTEX_IDS: dict[str, int] = {
    "nose": 332, "reye": 6260, "leye": 2800, "rear": 4071, "lear": 583,
    "rthumb": 6191, "rindex": 5782, "rmiddle": 5905, "rring": 6016, "rpinky": 6133,
    "lthumb": 2746, "lindex": 2319, "lmiddle": 2445, "lring": 2556, "lpinky": 2673,
    "LBigToe": 3216, "LSmallToe": 3226, "LHeel": 3387, "RBigToe": 6617, "RSmallToe": 6624,
    "RHeel": 6787,
}

J = JOINT_INDEX


# ---------------------------------------------------------------------------------------------
# Proportions
# ---------------------------------------------------------------------------------------------

_BASE: dict[str, dict[str, float]] = {
    "neutral": dict(stature=1.70, shoulder=0.100, pelvis_w=1.0, waist_w=1.0, chest_w=1.0, bust=0.3,
                    head=1.0, hand=1.0, foot=1.0),
    "male": dict(stature=1.77, shoulder=0.106, pelvis_w=0.94, waist_w=1.02, chest_w=1.07, bust=0.0,
                 head=1.0, hand=1.04, foot=1.04),
    "female": dict(stature=1.63, shoulder=0.094, pelvis_w=1.09, waist_w=0.89, chest_w=0.95, bust=1.0,
                   head=0.97, hand=0.93, foot=0.93),
}


def _dims(gender: str, betas: np.ndarray) -> dict[str, float]:
    """Scalar body dimensions for a gender and shape vector (NUM_SHAPE betas)."""
    b = np.zeros(NUM_SHAPE)
    betas = np.asarray(betas, dtype=np.float64).reshape(-1)[:NUM_SHAPE]
    b[: betas.shape[0]] = betas
    d = dict(girth=1.0, belly=0.0, leg=1.0, arm=1.0, muscle=1.0, torso=1.0, neck=1.0, thigh=1.0,
             upper_arm=1.0)
    d.update(_BASE[gender])
    d["stature"] += 0.07 * b[0]
    d["girth"] *= 1.0 + 0.10 * b[1]
    d["belly"] += 0.35 * b[1] + b[5]
    d["shoulder"] += 0.006 * b[2]
    d["leg"] *= 1.0 + 0.035 * b[3]
    d["arm"] *= 1.0 + 0.04 * b[4]
    d["head"] *= 1.0 + 0.05 * b[6]
    d["pelvis_w"] *= 1.0 + 0.06 * b[7]
    d["chest_w"] *= 1.0 + 0.05 * b[8]
    d["bust"] += 0.5 * b[8]
    d["muscle"] *= 1.0 + 0.08 * b[9]
    d["torso"] *= 1.0 + 0.03 * b[10]
    d["hand"] *= 1.0 + 0.06 * b[11]
    d["foot"] *= 1.0 + 0.06 * b[12]
    d["neck"] *= 1.0 + 0.15 * b[13]
    d["thigh"] *= 1.0 + 0.08 * b[14]
    d["upper_arm"] *= 1.0 + 0.08 * b[15]
    return d


# ---------------------------------------------------------------------------------------------
# Geometry helpers
# ---------------------------------------------------------------------------------------------

@dataclass
class _Part:
    """One closed surface piece and how its vertices are skinned along its axis."""

    name: str
    verts: np.ndarray
    faces: np.ndarray
    axial: np.ndarray  # per-vertex coordinate along the part's axis
    chain: list[tuple[int, float, float]]  # (joint, axial position, blend half-width)
    parent: int  # joint owning the part before the first chain joint
    extra: dict = field(default_factory=dict)


def _frames(tangents: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-ring axes u, v with u x v = tangent; u is ref made orthogonal to the tangent."""
    t = tangents / np.linalg.norm(tangents, axis=1, keepdims=True)
    u = ref[None, :] - (t @ ref)[:, None] * t
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    v = np.cross(t, u)
    return u, v


def _superellipse(around: int, expo: float) -> tuple[np.ndarray, np.ndarray]:
    th = np.linspace(0.0, 2.0 * np.pi, around, endpoint=False)
    c, s = np.cos(th), np.sin(th)
    p = 2.0 / expo
    return np.sign(c) * np.abs(c) ** p, np.sign(s) * np.abs(s) ** p


def _tube(centers: np.ndarray, tangents: np.ndarray, ref: np.ndarray, ru: np.ndarray, rv: np.ndarray,
          around: int, start_pole: np.ndarray, end_pole: np.ndarray, expo: float = 2.0,
          offsets_v: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Closed tube: rings around centers, capped by one pole vertex at each end."""
    n = centers.shape[0]
    u, v = _frames(tangents, ref)
    cu, cv = _superellipse(around, expo)
    if offsets_v is not None:  # per-ring, per-angle extra radius along v (bulges on one side)
        rv_full = rv[:, None] + offsets_v
    else:
        rv_full = np.repeat(rv[:, None], around, axis=1)
    rings = (centers[:, None, :] + (ru[:, None] * cu[None, :])[..., None] * u[:, None, :]
             + (rv_full * cv[None, :])[..., None] * v[:, None, :])
    verts = np.concatenate([rings.reshape(-1, 3), start_pole[None], end_pole[None]], axis=0)
    faces = []
    k = np.arange(around)
    k1 = (k + 1) % around
    for i in range(n - 1):
        a, b = i * around + k, i * around + k1
        c, d = (i + 1) * around + k, (i + 1) * around + k1
        faces.append(np.stack([a, b, c], 1))
        faces.append(np.stack([b, d, c], 1))
    s_idx, e_idx = n * around, n * around + 1
    faces.append(np.stack([np.full(around, s_idx), k1, k], 1))
    last = (n - 1) * around
    faces.append(np.stack([np.full(around, e_idx), last + k, last + k1], 1))
    faces = np.concatenate(faces, 0)
    return verts, _orient_outward(verts, faces)


def _orient_outward(verts: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Flip the winding of a closed surface if its signed volume is negative."""
    a, b, c = verts[faces[:, 0]], verts[faces[:, 1]], verts[faces[:, 2]]
    vol = np.einsum("ij,ij->i", a, np.cross(b, c)).sum()
    return faces if vol > 0 else faces[:, ::-1].copy()


def _rounded_profile(s: np.ndarray, s0: float, s1: float, cap0: float, cap1: float) -> np.ndarray:
    """Radius factor in [0, 1]: 1 in the middle, quarter-circle falloff over the end caps."""
    f = np.ones_like(s)
    lo = s < s0 + cap0
    f[lo] = np.sqrt(np.clip(1.0 - ((s0 + cap0 - s[lo]) / cap0) ** 2, 0.0, 1.0))
    hi = s > s1 - cap1
    f[hi] = np.sqrt(np.clip(1.0 - ((s[hi] - (s1 - cap1)) / cap1) ** 2, 0.0, 1.0))
    return f


def _cap_samples(s0: float, s1: float, cap0: float, cap1: float, n: int) -> np.ndarray:
    """Axial ring positions, denser on the caps so the rounded ends stay round."""
    n_cap0 = max(3, int(round(n * 0.18)))
    n_cap1 = max(3, int(round(n * 0.18)))
    n_mid = n - n_cap0 - n_cap1
    # Caps: sample the quarter circle evenly in angle (rings exclude the pole itself).
    a0 = np.linspace(np.pi / 2, 0.0, n_cap0 + 1)[1:]
    cap_a = s0 + cap0 - cap0 * np.sin(a0)
    mid = np.linspace(s0 + cap0, s1 - cap1, n_mid + 2)[1:-1]
    a1 = np.linspace(0.0, np.pi / 2, n_cap1 + 1)[:-1]
    cap_b = s1 - cap1 + cap1 * np.sin(a1)
    return np.concatenate([cap_a, mid, cap_b])


def _polyline(points: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions and smoothed tangents at arclength s along a polyline (extrapolated at both ends).

    Returns (positions, tangents, knots) where knots are the arclengths of the points.
    """
    seg = np.diff(points, axis=0)
    length = np.linalg.norm(seg, axis=1)
    knots = np.concatenate([[0.0], np.cumsum(length)])
    dirs = seg / length[:, None]
    i = np.clip(np.searchsorted(knots, s, side="right") - 1, 0, seg.shape[0] - 1)
    pos = points[i] + (s - knots[i])[:, None] * dirs[i]
    # Tangents blend between adjacent segments near inner knots so rings do not fold there.
    width = 0.3 * length.min()
    t = dirs[i].copy()
    for k in range(1, seg.shape[0]):
        w = _smoothstep((s - knots[k] + width) / (2.0 * width))
        near = np.abs(s - knots[k]) < width
        t[near] = ((1.0 - w[near])[:, None] * dirs[k - 1] + w[near][:, None] * dirs[k])
    t /= np.linalg.norm(t, axis=1, keepdims=True)
    return pos, t, knots


def _knot_positions(at: list[float], knots: np.ndarray) -> np.ndarray:
    """Positions given in knot units (1.5 = half way between knot 1 and 2), linear beyond the ends."""
    at = np.asarray(at, dtype=np.float64)
    idx = np.clip(np.floor(at).astype(int), 0, len(knots) - 2)
    return knots[idx] + (at - idx) * (knots[idx + 1] - knots[idx])


def _pchip(x: list[float], y: list[float]):
    return PchipInterpolator(np.asarray(x, float), np.asarray(y, float), extrapolate=True)


# ---------------------------------------------------------------------------------------------
# Skeleton
# ---------------------------------------------------------------------------------------------

_FINGER_ORDER = ("index", "middle", "pinky", "ring", "thumb")
# Left hand, metres for a 0.185 m hand, hand along +x, palm down (-y), thumb to the front (+z).
_KNUCKLES = {  # MCP position relative to the wrist, spread angle (deg, towards +z), phalanges
    "index": ((0.088, -0.002, 0.025), 7.0, (0.040, 0.025, 0.022), 0.0095),
    "middle": ((0.092, 0.000, 0.005), 1.0, (0.044, 0.028, 0.024), 0.0098),
    "ring": ((0.087, -0.002, -0.014), -5.0, (0.041, 0.027, 0.023), 0.0092),
    "pinky": ((0.078, -0.004, -0.031), -12.0, (0.032, 0.020, 0.020), 0.0082),
}
_THUMB = ((0.024, -0.012, 0.024), (0.040, 0.032, 0.028), 0.0115)


def _finger_chain(name: str, wrist: np.ndarray, side: float, scale: float):
    """Joint positions (3) and tip of one finger; side=+1 left hand, -1 right hand."""
    if name == "thumb":
        base, lengths, _ = _THUMB
        dirs = [np.array([0.70, -0.22, 0.68]), np.array([0.85, -0.20, 0.48]), np.array([0.92, -0.18, 0.35])]
    else:
        base, ang, lengths, _ = _KNUCKLES[name]
        a = np.radians(ang)
        d = np.array([np.cos(a), -0.03, np.sin(a)])
        dirs = [d, d, d]
    p = wrist + scale * np.array([side * base[0], base[1], base[2]])
    pts = [p]
    for d, ln in zip(dirs, lengths):
        d = d / np.linalg.norm(d)
        p = p + scale * ln * np.array([side * d[0], d[1], d[2]])
        pts.append(p)
    return np.array(pts)  # 4 points: joint1, joint2, joint3, tip


def _skeleton(d: dict[str, float]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The 52 rest joints (y-up, +z front, +x = person's left) and a few helper points."""
    h = d["stature"]
    y0 = FLOOR_Y
    jt = np.zeros((NUM_JOINTS, 3))
    ankle_h, knee_h, hip_h = 0.045 * h * d["foot"] ** 0.3, 0.285 * h * d["leg"], 0.498 * h * d["leg"]
    tor = h * d["torso"]
    pelvis_h = hip_h + 0.055 * tor
    spine1_h, spine2_h, spine3_h = hip_h + 0.118 * tor, hip_h + 0.190 * tor, hip_h + 0.222 * tor
    neck_h = hip_h + 0.345 * tor
    head_h = neck_h + 0.036 * h * d["neck"]
    shoulder_h = hip_h + 0.310 * tor
    hip_x = 0.041 * h * d["pelvis_w"] ** 0.5
    jt[J["pelvis"]] = (0.0, y0 + pelvis_h, 0.005)
    jt[J["spine1"]] = (0.0, y0 + spine1_h, -0.012)
    jt[J["spine2"]] = (0.0, y0 + spine2_h, -0.005)
    jt[J["spine3"]] = (0.0, y0 + spine3_h, 0.010)
    jt[J["neck"]] = (0.0, y0 + neck_h, -0.015)
    jt[J["head"]] = (0.0, y0 + head_h, 0.020)
    for side, s in (("left", 1.0), ("right", -1.0)):
        jt[J[f"{side}_hip"]] = (s * hip_x, y0 + hip_h, 0.0)
        jt[J[f"{side}_knee"]] = (s * (hip_x + 0.020 * h), y0 + knee_h, 0.005)
        jt[J[f"{side}_ankle"]] = (s * (hip_x + 0.012 * h), y0 + ankle_h, -0.035)
        fl = 0.152 * h * d["foot"]
        jt[J[f"{side}_foot"]] = jt[J[f"{side}_ankle"]] + (s * 0.02 * fl, -ankle_h * 0.72, 0.50 * fl)
        sh_x = d["shoulder"] * h
        jt[J[f"{side}_collar"]] = (s * 0.045 * h, y0 + shoulder_h - 0.004 * h, -0.010)
        jt[J[f"{side}_shoulder"]] = (s * sh_x, y0 + shoulder_h, -0.020)
        upper, fore = 0.158 * h * d["arm"], 0.150 * h * d["arm"]
        jt[J[f"{side}_elbow"]] = jt[J[f"{side}_shoulder"]] + (s * upper, -0.008 * h, -0.015)
        jt[J[f"{side}_wrist"]] = jt[J[f"{side}_elbow"]] + (s * fore, 0.004 * h, 0.0)
        hand_scale = 0.108 * h * d["hand"] / 0.185
        wrist = jt[J[f"{side}_wrist"]]
        for f in _FINGER_ORDER:
            pts = _finger_chain(f, wrist, s, hand_scale)
            for k in range(3):
                jt[J[f"{side}_{f}{k + 1}"]] = pts[k]
    extra = {"head_top": np.array([0.0, y0 + head_h + 0.125 * h * d["head"], 0.0])}
    return jt, extra


# ---------------------------------------------------------------------------------------------
# Surface parts
# ---------------------------------------------------------------------------------------------

def _torso(d, jt, around=42, rings=38) -> _Part:
    h, g = d["stature"], d["girth"]
    hip_y = jt[J["left_hip"]][1]
    sh_y = jt[J["left_shoulder"]][1]
    neck_y, head_y = jt[J["neck"]][1], jt[J["head"]][1]
    bottom = hip_y - 0.055 * h
    cap_b = 0.075 * h
    top = head_y + 0.012 * h
    sw = d["shoulder"] / 0.100
    pw, ww, cw = d["pelvis_w"], d["waist_w"], d["chest_w"]
    tor_len = sh_y - hip_y
    # Levels are fractions between hip and shoulder height (above the shoulder: neck levels).
    lv = [0.0, 0.18, 0.36, 0.55, 0.72, 0.86, 0.97]
    ys = [hip_y + f * tor_len for f in lv]
    hs = (h / 1.7) ** 0.7
    # At the hip joints the pelvis is as wide as the thighs' outer sides, so the hips run
    # smoothly into the legs (see _leg: thigh_lateral_radius).
    hip_x = jt[J["left_hip"]][0]
    thigh = _thigh_lateral_radius(d)
    half_w = [hip_x + 0.95 * thigh, hip_x + 0.93 * thigh, 0.150 * (0.6 * pw + 0.4 * ww) * g * hs,
              0.138 * ww * g * hs, 0.155 * cw * g * hs, 0.170 * cw * (0.5 + 0.5 * sw) * g * hs, 0.176 * sw * g * hs]
    half_d = [0.105 * g * hs, 0.102 * g * hs, 0.095 * g * hs, 0.094 * g * hs, 0.108 * cw * g * hs,
              0.112 * cw * g * hs, 0.088 * g * hs]
    zc = [-0.018, -0.010, 0.0, 0.004, 0.006, 0.002, -0.012]
    # Shoulder slope into the neck.
    neck_r = 0.056 * g ** 0.5 * d["muscle"] ** 0.3 * hs
    # Acromion level covers the top of the arm, then the trapezius slopes into the neck.
    ys += [sh_y + 0.012 * h, sh_y + 0.026 * h, neck_y + 0.006 * h, neck_y + 0.022 * h, head_y]
    half_w += [0.165 * sw * g * hs, 0.120 * sw * g * hs, 1.15 * neck_r, neck_r, 0.95 * neck_r]
    half_d += [0.076 * g * hs, 0.068 * g * hs, 1.0 * neck_r, neck_r, 0.95 * neck_r]
    zc += [-0.016, -0.020, -0.018, -0.012, -0.004]
    fw, fd, fz = _pchip(ys, half_w), _pchip(ys, half_d), _pchip(ys, zc)
    y = _cap_samples(bottom, top, cap_b, 0.02 * h, rings)
    prof = _rounded_profile(y, bottom, top, cap_b, 0.02 * h)
    # The bottom cap rounds into the crotch (the thighs make the hips' sides); the top cap sits
    # inside the head.
    wide = prof
    ru = fd(y) * wide  # u = +z (front-back)
    rv = fw(y) * wide  # v = x (left-right)
    centers = np.stack([np.zeros_like(y), y, fz(y)], 1)
    tangents = np.tile([0.0, 1.0, 0.0], (y.shape[0], 1))
    # Belly and bust bulge forward (only the front half of each ring: cos > 0 on u).
    th = np.linspace(0.0, 2.0 * np.pi, around, endpoint=False)
    front = np.clip(np.cos(th), 0.0, None) ** 1.5
    side = np.abs(np.sin(th))
    waist_y = hip_y + 0.38 * tor_len
    chest_y = hip_y + 0.74 * tor_len
    belly = 0.028 * d["belly"] * np.exp(-0.5 * ((y - waist_y) / (0.085 * h)) ** 2) * wide
    bust = 0.020 * d["bust"] * np.exp(-0.5 * ((y - chest_y) / (0.035 * h)) ** 2) * wide
    # offsets go on u (front); do it by scaling ru per angle through a custom ring build
    u_extra = (belly + bust)[:, None] * front[None, :]
    # the bust is two mounds: modulate it by |sin| around the front so the centre dips a bit
    u_extra -= (0.35 * bust)[:, None] * front[None, :] * (1 - side[None, :]) ** 4
    verts, faces = _tube_u_offsets(centers, tangents, np.array([0.0, 0.0, 1.0]), ru, rv, around,
                                   np.array([0.0, bottom, fz(bottom)]), np.array([0.0, top, fz(top)]),
                                   u_extra, expo=2.3)
    axial = np.concatenate([np.repeat(y, around), [bottom, top]])
    chain = [(J["spine1"], jt[J["spine1"]][1], 0.035 * h), (J["spine2"], jt[J["spine2"]][1], 0.025 * h),
             (J["spine3"], jt[J["spine3"]][1], 0.025 * h), (J["neck"], neck_y, 0.020 * h),
             (J["head"], head_y, 0.012 * h)]
    return _Part("torso", verts, faces, axial, chain, J["pelvis"])


def _tube_u_offsets(centers, tangents, ref, ru, rv, around, sp, ep, u_extra, expo=2.0):
    """_tube whose radius along u gets a per-ring, per-angle extra (front bulges)."""
    n = centers.shape[0]
    u, v = _frames(tangents, ref)
    cu, cv = _superellipse(around, expo)
    ru_full = ru[:, None] + u_extra
    rings = (centers[:, None, :] + (ru_full * cu[None, :])[..., None] * u[:, None, :]
             + (rv[:, None] * cv[None, :])[..., None] * v[:, None, :])
    base_v, faces = _tube(centers, tangents, ref, ru, rv, around, sp, ep, expo)
    base_v[: n * around] = rings.reshape(-1, 3)
    return base_v, _orient_outward(base_v, faces)


def _head(d, jt, lat=20, lon=34) -> _Part:
    h = d["stature"]
    hs = d["head"]
    head = jt[J["head"]]
    top_y = head[1] + 0.125 * h * hs
    ry, rx, rz = 0.066 * h * hs, 0.047 * h * hs, 0.058 * h * hs
    center = np.array([0.0, top_y - ry, head[2] + 0.004])
    phi = np.linspace(0.0, np.pi, lat + 2)[1:-1]  # from top (0) to bottom (pi)
    th = np.linspace(0.0, 2 * np.pi, lon, endpoint=False)  # 0 = front (+z), pi/2 = left (+x)
    P, T = np.meshgrid(phi, th, indexing="ij")
    cy = np.cos(P)
    sr = np.sin(P)
    # Narrower jaw/chin (lower front), fuller back of the skull.
    lower = np.clip(-cy, 0.0, 1.0)
    front = np.clip(np.cos(T), 0.0, 1.0)
    sx = rx * (1.0 - 0.22 * lower ** 1.5)
    sz = rz * (1.0 - 0.10 * lower ** 2 * front + 0.05 * np.clip(-np.cos(T), 0, 1) * (1 - lower))
    x = sx * sr * np.sin(T)
    z = sz * sr * np.cos(T)
    y = ry * cy
    pts = np.stack([x, y, z], -1) + center
    # Nose: a bump on the front, below the eye line.
    nose_dir = np.exp(-0.5 * ((T - 0.0 + np.pi) % (2 * np.pi) - np.pi) ** 2 / 0.09 ** 2)
    nose_h = np.exp(-0.5 * ((cy + 0.02) / 0.10) ** 2)
    bump = 0.022 * h / 1.7 * hs * nose_dir * nose_h
    # Ears: small bumps on the sides at eye height.
    ear = np.zeros_like(bump)
    for ang in (np.pi / 2, -np.pi / 2):
        dt = (T - ang + np.pi) % (2 * np.pi) - np.pi
        ear += np.exp(-0.5 * (dt / 0.16) ** 2) * np.exp(-0.5 * ((cy - 0.05) / 0.16) ** 2)
    bump = bump + 0.010 * h / 1.7 * hs * ear
    normal = pts - center
    normal /= np.linalg.norm(normal, axis=-1, keepdims=True)
    pts = pts + bump[..., None] * normal
    verts = np.concatenate([pts.reshape(-1, 3), [center + (0, ry, 0)], [center - (0, ry, 0)]], 0)
    faces = []
    k = np.arange(lon)
    k1 = (k + 1) % lon
    for i in range(lat - 1):
        a, b, c, dd = i * lon + k, i * lon + k1, (i + 1) * lon + k, (i + 1) * lon + k1
        faces += [np.stack([a, b, c], 1), np.stack([b, dd, c], 1)]
    n = lat * lon
    faces += [np.stack([np.full(lon, n), k1, k], 1),
              np.stack([np.full(lon, n + 1), (lat - 1) * lon + k, (lat - 1) * lon + k1], 1)]
    faces = _orient_outward(verts, np.concatenate(faces))
    # Landmarks (features on the surface): nose tip, eyes, ears.
    eye_y = center[1] + ry * 0.12
    marks = {
        "nose": center + (0.0, -ry * 0.02, sz.max() + bump.max()),
        "leye": center + (0.36 * rx, eye_y - center[1], 0.88 * rz),
        "reye": center + (-0.36 * rx, eye_y - center[1], 0.88 * rz),
        "lear": center + (rx + 0.010 * h / 1.7 * hs, ry * 0.05, 0.0),
        "rear": center + (-rx - 0.010 * h / 1.7 * hs, ry * 0.05, 0.0),
    }
    axial = np.concatenate([pts[..., 1].reshape(-1), [verts[-2][1], verts[-1][1]]])
    return _Part("head", verts, faces, axial, [(J["head"], head[1], 0.015 * h)], J["neck"],
                 extra={"landmarks": marks})


def _limb(name, points, radii_u, radii_v, at, ref, around, rings, cap0, cap1, ext0, ext1,
          chain_joints, blend, parent, offsets_u=None, expo=2.0) -> _Part:
    """A tube along a polyline of joints, extended ext0 before the first and ext1 after the last.

    Radii (and optional centre offsets along u) are given at positions ``at`` in knot units.
    """
    _, _, knots = _polyline(points, np.zeros(1))
    s0, s1 = -ext0, knots[-1] + ext1
    s = _cap_samples(s0, s1, cap0, cap1, rings)
    pos, tan, _ = _polyline(points, s)
    prof = _rounded_profile(s, s0, s1, cap0, cap1)
    xs = _knot_positions(at, knots)
    sc = np.clip(s, xs[0], xs[-1])
    ru, rv = _pchip(xs, radii_u)(sc) * prof, _pchip(xs, radii_v)(sc) * prof
    if offsets_u is not None:  # shift ring centres along u (e.g. calf behind the shin)
        u, _ = _frames(tan, ref)
        pos = pos + (_pchip(xs, offsets_u)(sc) * prof)[:, None] * u
    ends, _, _ = _polyline(points, np.array([s0, s1]))
    verts, faces = _tube(pos, tan, ref, ru, rv, around, ends[0], ends[1], expo=expo)
    axial = np.concatenate([np.repeat(s, around), [s0, s1]])
    chain = [(j, knots[i], blend[i]) for i, j in enumerate(chain_joints) if j is not None]
    return _Part(name, verts, faces, axial, chain, parent)


def _thigh_lateral_radius(d) -> float:
    """Half-width of the thigh at the hip joint (wider pelvis, wider thigh tops)."""
    return 0.086 * d["stature"] / 1.7 * d["girth"] * d["thigh"] * d["pelvis_w"]


def _leg(d, jt, side, around=20, rings=34) -> _Part:
    h, g, m = d["stature"], d["girth"], d["muscle"]
    th = d["thigh"]
    pw = d["pelvis_w"]
    pts = np.array([jt[J[f"{side}_hip"]], jt[J[f"{side}_knee"]], jt[J[f"{side}_ankle"]]])
    # knot units: 0 hip, 1 knee, 2 ankle (fractions in between).
    at = [-0.25, 0.0, 0.3, 0.7, 1.0, 1.25, 1.55, 1.9, 2.0, 2.2]
    gm = g * m
    ru = np.array([0.080, 0.090, 0.080, 0.064, 0.052, 0.056, 0.050, 0.036, 0.034, 0.034]) * h / 1.7
    rv = np.array([0.070, 0.086, 0.076, 0.062, 0.050, 0.052, 0.046, 0.032, 0.030, 0.030]) * h / 1.7
    scale = np.array([g * th, g * th, g * th, gm * th, gm, gm, gm, g, g, g])
    lat = scale * np.array([pw, pw, pw ** 0.7, pw ** 0.3, 1, 1, 1, 1, 1, 1])
    off = np.array([0.0, -0.008, 0.004, 0.004, 0.0, -0.010, -0.012, -0.004, 0.0, 0.0]) * h / 1.7
    return _limb(f"{side}_leg", pts, ru * scale, rv * lat, at, np.array([0.0, 0.0, 1.0]), around, rings,
                 0.06 * h, 0.025 * h, 0.065 * h, 0.02 * h,
                 [J[f"{side}_hip"], J[f"{side}_knee"], J[f"{side}_ankle"]],
                 [0.05 * h, 0.04 * h, 0.025 * h], J["pelvis"], offsets_u=off)


def _arm(d, jt, side, around=18, rings=32) -> _Part:
    h, g, m = d["stature"], d["girth"], d["muscle"]
    ua = d["upper_arm"]
    pts = np.array([jt[J[f"{side}_shoulder"]], jt[J[f"{side}_elbow"]], jt[J[f"{side}_wrist"]]])
    at = [-0.2, 0.0, 0.3, 0.7, 1.0, 1.25, 1.6, 2.0, 2.1]
    gm = g ** 0.7 * m
    # u = +y (up/down: thickness), v = z (front/back: width at the wrist)
    ru = np.array([0.042, 0.046, 0.045, 0.041, 0.036, 0.040, 0.034, 0.022, 0.020]) * h / 1.7
    rv = np.array([0.046, 0.049, 0.046, 0.041, 0.038, 0.042, 0.037, 0.029, 0.027]) * h / 1.7
    scale = np.array([gm * ua, gm * ua, gm * ua, gm * ua, gm, gm, gm, g ** 0.3, g ** 0.3])
    return _limb(f"{side}_arm", pts, ru * scale, rv * scale, at, np.array([0.0, 1.0, 0.0]), around, rings,
                 0.05 * h, 0.012 * h, 0.06 * h, 0.014 * h,
                 [J[f"{side}_shoulder"], J[f"{side}_elbow"], J[f"{side}_wrist"]],
                 [0.035 * h, 0.030 * h, 0.012 * h], J[f"{side}_collar"])


def _foot(d, jt, side, around=16, rings=18) -> tuple[_Part, dict[str, np.ndarray]]:
    h = d["stature"]
    s = 1.0 if side == "left" else -1.0
    ankle, ball = jt[J[f"{side}_ankle"]], jt[J[f"{side}_foot"]]
    fl = 0.152 * h * d["foot"]
    heel_z, toe_z = ankle[2] - 0.26 * fl, ankle[2] + 0.74 * fl
    sole = FLOOR_Y
    zs = [heel_z, ankle[2] - 0.1 * fl, ankle[2] + 0.2 * fl, ball[2], toe_z]
    half_w = np.array([0.030, 0.034, 0.040, 0.046, 0.036]) * fl / 0.258
    k = fl / 0.258
    top = np.array([ankle[1] + 0.010, ankle[1] + 0.020, sole + 0.065 * k, sole + 0.034 * k, sole + 0.022 * k])
    xc = [ankle[0], ankle[0], ankle[0] + s * 0.004, ball[0] - s * 0.004, ball[0] - s * 0.006]
    fw, ft, fx = _pchip(zs, half_w), _pchip(zs, top), _pchip(zs, xc)
    z = _cap_samples(heel_z, toe_z, 0.05 * fl, 0.07 * fl, rings)
    prof = _rounded_profile(z, heel_z, toe_z, 0.05 * fl, 0.07 * fl)
    hh = 0.5 * (ft(z) - sole)
    cy = sole + hh
    centers = np.stack([fx(z), cy, z], 1)
    tangents = np.tile([0.0, 0.0, 1.0], (z.shape[0], 1))
    ru = hh * np.sqrt(prof)  # u = y (height): keep the sole flat to the ends
    rv = fw(z) * prof
    mid_c = lambda zz: np.array([fx(zz), sole + 0.5 * (ft(zz) - sole), zz])  # noqa: E731
    verts, faces = _tube(centers, tangents, np.array([0.0, 1.0, 0.0]), ru, rv, around,
                         mid_c(heel_z), mid_c(toe_z), expo=3.0)
    axial = np.concatenate([np.repeat(z, around), [heel_z, toe_z]])
    part = _Part(f"{side}_foot", verts, faces, axial, [(J[f"{side}_foot"], ball[2], 0.025 * fl / 0.258)],
                 J[f"{side}_ankle"])
    big = np.array([ball[0] + s * 0.012 * fl / 0.258, sole + 0.018, toe_z - 0.004])
    small = np.array([ball[0] + s * 0.042 * fl / 0.258, sole + 0.014, ball[2] + 0.30 * (toe_z - ball[2])])
    heel = np.array([ankle[0], sole + 0.02, heel_z])
    pre = "L" if side == "left" else "R"
    return part, {f"{pre}BigToe": big, f"{pre}SmallToe": small, f"{pre}Heel": heel}


def _hand(d, jt, side, around=10, rings=10) -> tuple[list[_Part], dict[str, np.ndarray]]:
    h = d["stature"]
    s = 1.0 if side == "left" else -1.0
    sc = 0.108 * h * d["hand"] / 0.185
    wrist = jt[J[f"{side}_wrist"]]
    parts = []
    # Palm: a flat rounded box along x from just behind the wrist to the knuckle line.
    x0, x1 = -0.012 * sc, 0.092 * sc
    n_p = 12
    xs = _cap_samples(x0, x1, 0.010 * sc, 0.012 * sc, n_p)
    prof = _rounded_profile(xs, x0, x1, 0.010 * sc, 0.012 * sc)
    width = _pchip([x0, 0.02 * sc, 0.06 * sc, x1], [0.030 * sc, 0.036 * sc, 0.042 * sc, 0.040 * sc])
    zc = _pchip([x0, 0.03 * sc, x1], [0.002 * sc, 0.0, -0.003 * sc])
    thick = _pchip([x0, 0.03 * sc, x1], [0.016 * sc, 0.017 * sc, 0.013 * sc])
    centers = np.stack([wrist[0] + s * xs, np.full_like(xs, wrist[1] - 0.004 * sc), wrist[2] + zc(xs)], 1)
    tangents = np.tile([s, 0.0, 0.0], (xs.shape[0], 1))
    pv, pf = _tube(centers, tangents, np.array([0.0, 1.0, 0.0]), thick(xs) * prof ** 0.7,
                   width(xs) * prof ** 0.7, 18, centers[0] - (s * 0.004 * sc, 0, 0),
                   centers[-1] + (s * 0.004 * sc, 0, 0), expo=3.2)
    parts.append(_Part(f"{side}_palm", pv, pf, np.concatenate([np.repeat(xs, 18), [x0, x1]]),
                       [(J[f"{side}_wrist"], 0.0, 0.010 * sc)], J[f"{side}_elbow"]))
    tips = {}
    for f in _FINGER_ORDER:
        pts = _finger_chain(f, wrist, s, sc)
        r = (_THUMB[2] if f == "thumb" else _KNUCKLES[f][3]) * sc
        if f == "thumb":
            ru = np.array([1.45, 1.35, 1.0, 0.92, 0.85, 0.80]) * r
            at = [-0.3, 0.0, 0.7, 1.0, 2.0, 3.0]
            ext0 = 0.012 * sc
        else:
            ru = np.array([1.0, 1.0, 0.93, 0.86, 0.80, 0.74]) * r
            at = [-0.3, 0.0, 1.0, 1.5, 2.0, 3.0]
            ext0 = 0.014 * sc
        rv = ru * 1.08
        part = _limb(f"{side}_{f}", pts, ru, rv, at, np.array([0.0, 1.0, 0.0]), around, rings,
                     0.8 * ru[0], 0.9 * ru[-1], ext0, 0.0,
                     [J[f"{side}_{f}1"], J[f"{side}_{f}2"], J[f"{side}_{f}3"], None],
                     [0.35 * r, 0.5 * r, 0.5 * r], J[f"{side}_wrist"], expo=2.0)
        parts.append(part)
        pre = "l" if side == "left" else "r"
        tips[f"{pre}{f}"] = pts[3] - 0.002 * sc * (pts[3] - pts[2]) / np.linalg.norm(pts[3] - pts[2])
    return parts, tips


# ---------------------------------------------------------------------------------------------
# Assembly
# ---------------------------------------------------------------------------------------------

@dataclass
class _Build:
    verts: np.ndarray
    faces: np.ndarray
    joints: np.ndarray
    parts: list[_Part]
    offsets: list[int]
    landmarks: dict[str, np.ndarray]


def _build(gender: str, betas: np.ndarray) -> _Build:
    d = _dims(gender, betas)
    jt, _ = _skeleton(d)
    parts = [_torso(d, jt), _head(d, jt)]
    marks = dict(parts[1].extra["landmarks"])
    for side in ("left", "right"):
        parts.append(_leg(d, jt, side))
        fp, fm = _foot(d, jt, side)
        parts.append(fp)
        marks.update(fm)
        parts.append(_arm(d, jt, side))
        hp, hm = _hand(d, jt, side)
        parts += hp
        marks.update(hm)
    verts, faces, offsets = [], [], []
    n = 0
    for p in parts:
        offsets.append(n)
        verts.append(p.verts)
        faces.append(p.faces + n)
        n += p.verts.shape[0]
    v = np.concatenate(verts)
    if n > NUM_VERTICES:
        raise RuntimeError(f"procedural body has {n} vertices, more than {NUM_VERTICES}")
    # Pad to the SMPL vertex count with unreferenced points at the pelvis (never rendered).
    pad = np.repeat(jt[J["pelvis"]][None], NUM_VERTICES - n, axis=0)
    return _Build(np.concatenate([v, pad]), np.concatenate(faces), jt, parts, offsets, marks)


def _smoothstep(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 0.0, 1.0)
    return x * x * (3.0 - 2.0 * x)


def _skin_weights(b: _Build) -> np.ndarray:
    """(V, 52) weights: each part blends its joint chain smoothly along its own axis."""
    w = np.zeros((NUM_VERTICES, NUM_JOINTS))
    for part, off in zip(b.parts, b.offsets):
        s = part.axial
        n = s.shape[0]
        t = [_smoothstep((s - a + bw) / (2.0 * bw)) for (_, a, bw) in part.chain]
        pw = np.zeros((n, NUM_JOINTS))
        pw[:, part.parent] += 1.0 - t[0]
        for k, (j, _, _) in enumerate(part.chain):
            nxt = t[k + 1] if k + 1 < len(t) else 0.0
            pw[:, j] += np.clip(t[k] - nxt, 0.0, None)
        if part.name == "torso":
            pw = _torso_side_weights(part, pw, b.joints)
        pw /= pw.sum(1, keepdims=True)
        w[off: off + n] = pw
    w[b.offsets[-1] + b.parts[-1].verts.shape[0]:, J["pelvis"]] = 1.0
    return w


def _torso_side_weights(part: _Part, pw: np.ndarray, jt: np.ndarray) -> np.ndarray:
    """Shoulder tops follow the collars; the lower sides follow the hips a little."""
    x, y = part.verts[:, 0], part.verts[:, 1]
    sh_y = jt[J["left_shoulder"]][1]
    s3_y = jt[J["spine3"]][1]
    col_x = jt[J["left_collar"]][0]
    sh_x = jt[J["left_shoulder"]][0]
    c = _smoothstep((np.abs(x) - 0.6 * col_x) / (sh_x - 0.6 * col_x)) * _smoothstep(
        (y - s3_y) / max(sh_y - s3_y, 1e-3))
    hip_y = jt[J["left_hip"]][1]
    hip_x = jt[J["left_hip"]][0]
    hw = 0.6 * _smoothstep((np.abs(x) - hip_x) / (1.4 * hip_x)) * _smoothstep((hip_y + 0.02 - y) / 0.08)
    out = pw * (1.0 - c - hw)[:, None]
    left = x >= 0
    out[left, J["left_collar"]] += c[left]
    out[~left, J["right_collar"]] += c[~left]
    out[left, J["left_hip"]] += hw[left]
    out[~left, J["right_hip"]] += hw[~left]
    return out


def _joint_regressor(v0: np.ndarray, dirs: np.ndarray, joints0: np.ndarray, djoints: np.ndarray,
                     weights: np.ndarray, support: int = 250) -> np.ndarray:
    """(52, V) regressor: convex weights on nearby vertices that reproduce the joints.

    Each joint uses its nearest vertices skinned to it or its parent/children. Non-negative
    weights summing to one (a convex combination, numerically as tame as the vertices) are fitted
    to the template joint and, less strictly, to how the joint moves along every shape direction.
    """
    from scipy.optimize import nnls

    reg = np.zeros((NUM_JOINTS, NUM_VERTICES))
    children = {j: [c for c, p in enumerate(PARENTS) if p == j] for j in range(NUM_JOINTS)}
    for j in range(NUM_JOINTS):
        related = [j] + children[j] + ([PARENTS[j]] if PARENTS[j] >= 0 else [])
        cand = np.where(weights[:, related].sum(1) > 0.05)[0]
        dist = np.linalg.norm(v0[cand] - joints0[j], axis=1)
        idx = cand[np.argsort(dist)[:support]]
        n = idx.shape[0]
        rows, rhs = [np.full(n, 100.0)], [100.0]  # sum to one
        for c in range(3):
            rows.append(100.0 * v0[idx, c])
            rhs.append(100.0 * joints0[j, c])
            for k in range(dirs.shape[2]):
                rows.append(30.0 * dirs[idx, c, k])
                rhs.append(30.0 * djoints[k, j, c])
        lam = 0.03
        a = np.concatenate([np.array(rows), lam * np.eye(n)])
        b = np.concatenate([np.array(rhs), np.full(n, lam / n)])
        w, _ = nnls(a, b, maxiter=50 * n)
        reg[j, idx] = w / w.sum()
    return reg


def _landmark_permutation(v: np.ndarray, n_real: int, marks: dict[str, np.ndarray]) -> np.ndarray:
    """order[i] = old vertex placed at new index i, so smplx's keypoint ids hit the features."""
    order = np.arange(NUM_VERTICES)
    pos = np.arange(NUM_VERTICES)  # pos[old] = current new index
    used = set()
    for name, target in LANDMARK_VERTEX_IDS.items():
        dist = np.linalg.norm(v[:n_real] - marks[name], axis=1)
        for cand in np.argsort(dist):
            if cand not in used:
                break
        used.add(int(cand))
        i, k = target, pos[cand]
        a, b = order[i], order[k]
        order[i], order[k] = b, a
        pos[b], pos[a] = i, k
    return order


@dataclass
class ProceduralModel:
    """Everything a SMPL-H file holds, plus the part label of every vertex."""

    arrays: dict[str, np.ndarray]
    part_of_vertex: np.ndarray
    part_names: list[str]


def build_model(gender: str = "neutral") -> ProceduralModel:
    """Generate the SMPL-H arrays for one gender (deterministic)."""
    if gender not in GENDERS:
        raise ValueError(f"gender {gender!r} not in {GENDERS}")
    base = _build(gender, np.zeros(NUM_SHAPE))
    n_real = sum(p.verts.shape[0] for p in base.parts)
    dirs = np.zeros((NUM_VERTICES, 3, NUM_SHAPE))
    djoints = np.zeros((NUM_SHAPE, NUM_JOINTS, 3))
    for k in range(NUM_SHAPE):
        e = np.zeros(NUM_SHAPE)
        e[k] = 1.0
        plus, minus = _build(gender, e), _build(gender, -e)
        dirs[:, :, k] = 0.5 * (plus.verts - minus.verts)
        djoints[k] = 0.5 * (plus.joints - minus.joints)
    weights = _skin_weights(base)
    order = _landmark_permutation(base.verts, n_real, base.landmarks)
    inv = np.empty_like(order)
    inv[order] = np.arange(NUM_VERTICES)
    v0 = base.verts[order]
    dirs = dirs[order]
    weights = weights[order]
    faces = inv[base.faces]
    part_ids = np.full(NUM_VERTICES, -1, dtype=np.int16)
    for i, (p, off) in enumerate(zip(base.parts, base.offsets)):
        part_ids[off: off + p.verts.shape[0]] = i
    part_ids = part_ids[order]
    reg = _joint_regressor(v0, dirs, base.joints, djoints, weights)
    kintree = np.stack([np.array(PARENTS, dtype=np.int64), np.arange(NUM_JOINTS)])
    kintree[0, 0] = 4294967295  # as in the released files; smplx resets the root's parent to -1
    hand_mean = _relaxed_hand()
    arrays = {
        "v_template": v0.astype(np.float64),
        "f": faces.astype(np.int64),
        "shapedirs": dirs.astype(np.float64),
        "posedirs": np.zeros((NUM_VERTICES, 3, 9 * (NUM_JOINTS - 1)), dtype=np.float32),
        "J_regressor": reg.astype(np.float64),
        "weights": weights.astype(np.float64),
        "kintree_table": kintree,
        "hands_componentsl": np.eye(45),
        "hands_componentsr": np.eye(45),
        "hands_meanl": hand_mean.copy(),
        "hands_meanr": hand_mean * np.tile([1.0, -1.0, -1.0], 15),
        "J": base.joints.astype(np.float64),
        "gender": np.array(gender),
        "procedural_version": np.array(FORMAT_VERSION),
        "part_of_vertex": part_ids,
    }
    return ProceduralModel(arrays, part_ids, [p.name for p in base.parts])


def _relaxed_hand() -> np.ndarray:
    """A gently curled left hand (45,), axis-angle per finger joint, for hands_meanl."""
    pose = np.zeros((15, 3))
    for f in range(4):  # index, middle, pinky, ring curl about the hand's z axis (towards the palm)
        pose[3 * f: 3 * f + 3, 2] = [-0.25, -0.30, -0.20]
    pose[12:15, 1] = [0.15, 0.10, 0.10]
    return pose.reshape(-1)


def write_model_file(folder: str | os.PathLike, gender: str = "neutral") -> Path:
    """Write SMPLH_<GENDER>.npz into folder (atomically) and return its path."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"SMPLH_{gender.upper()}.npz"
    model = build_model(gender)
    tmp = folder / f".{path.stem}.{os.getpid()}.tmp.npz"
    np.savez_compressed(tmp, **model.arrays)
    os.replace(tmp, path)
    return path
