"""Synthetic NTU-style skeleton sequences with known actions, identities and genders.

Why: the anonymizer's claims (re-ID down, action kept) need data where both are learnable and the
ground truth is known, small enough to train on a CPU in seconds. Each subject has a body signature
(height, limb proportions, shoulder/hip widths that also depend on gender) and a motion style
(tempo, amplitude, posture lean, arm carriage); each action is a distinct periodic motion pattern
driven through forward kinematics on the 25-joint NTU skeleton. Every sequence gets its own phase,
small style jitter, camera yaw, position and sensor noise.
"""

from __future__ import annotations

import numpy as np

from anonymask.models.anonymizer.skeleton.graphs import NTU25

ACTIONS = ("walk", "wave", "squat", "raise_arms", "kick", "bow")

# Rest offsets of each NTU joint from its parent (x = subject's left, y = up, z = forward), metres.
_REST = np.array([
    [0.0, 1.0, 0.0],  # 0 spine base (root, at hip height)
    [0.0, 0.25, 0.0],  # 1 spine mid
    [0.0, 0.08, 0.0],  # 2 neck (from spine shoulder)
    [0.0, 0.15, 0.02],  # 3 head
    [0.18, -0.02, 0.0],  # 4 l shoulder
    [0.0, -0.28, 0.0],  # 5 l elbow
    [0.0, -0.25, 0.0],  # 6 l wrist
    [0.0, -0.08, 0.0],  # 7 l hand
    [-0.18, -0.02, 0.0],  # 8 r shoulder
    [0.0, -0.28, 0.0],  # 9 r elbow
    [0.0, -0.25, 0.0],  # 10 r wrist
    [0.0, -0.08, 0.0],  # 11 r hand
    [0.09, -0.02, 0.0],  # 12 l hip
    [0.0, -0.42, 0.0],  # 13 l knee
    [0.0, -0.42, 0.0],  # 14 l ankle
    [0.0, -0.05, 0.12],  # 15 l foot
    [-0.09, -0.02, 0.0],  # 16 r hip
    [0.0, -0.42, 0.0],  # 17 r knee
    [0.0, -0.42, 0.0],  # 18 r ankle
    [0.0, -0.05, 0.12],  # 19 r foot
    [0.0, 0.25, 0.0],  # 20 spine shoulder
    [0.0, -0.07, 0.0],  # 21 l hand tip
    [0.03, -0.04, 0.03],  # 22 l thumb
    [0.0, -0.07, 0.0],  # 23 r hand tip
    [-0.03, -0.04, 0.03],  # 24 r thumb
])
_ARM = [5, 6, 7, 9, 10, 11, 21, 22, 23, 24]
_LEG = [13, 14, 15, 17, 18, 19]


def _rx(a: np.ndarray) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    o, z = np.ones_like(a), np.zeros_like(a)
    return np.stack([np.stack([o, z, z], -1), np.stack([z, c, -s], -1), np.stack([z, s, c], -1)], -2)


def _ry(a: np.ndarray) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    o, z = np.ones_like(a), np.zeros_like(a)
    return np.stack([np.stack([c, z, s], -1), np.stack([z, o, z], -1), np.stack([-s, z, c], -1)], -2)


def _rz(a: np.ndarray) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    o, z = np.ones_like(a), np.zeros_like(a)
    return np.stack([np.stack([c, -s, z], -1), np.stack([s, c, z], -1), np.stack([z, z, o], -1)], -2)


def _subject_styles(num_subjects: int, rng: np.random.Generator) -> list[dict[str, float]]:
    styles = []
    genders = rng.permutation(np.arange(num_subjects) % 2)
    for k in range(num_subjects):
        g = int(genders[k])
        styles.append({
            "gender": g,
            "height": rng.uniform(0.88, 1.12) * (0.95 if g else 1.0),
            "arm": rng.uniform(0.9, 1.1),
            "leg": rng.uniform(0.9, 1.1),
            "shoulder": rng.uniform(0.92, 1.08) * (0.88 if g else 1.0),
            "hip": rng.uniform(0.92, 1.08) * (1.12 if g else 1.0),
            "tempo": rng.uniform(0.8, 1.25),
            "amplitude": rng.uniform(0.75, 1.25),
            "lean": rng.uniform(-0.08, 0.15),
            "elbow": rng.uniform(0.0, 0.4),
            "arm_out": rng.uniform(0.0, 0.2),
        })
    return styles


def _angles(action: int, t: np.ndarray, st: dict[str, float], phase: float) -> dict[str, np.ndarray]:
    """Joint angles (radians) and root motion over time ``t`` (seconds) for one action."""
    w = 2 * np.pi * 0.9 * st["tempo"]
    amp = st["amplitude"]
    s = np.sin(w * t + phase)
    c = np.cos(w * t + phase)
    zero = np.zeros_like(t)
    a = {name: zero.copy() for name in (
        "hip_l", "hip_r", "knee_l", "knee_r", "sh_l", "sh_r", "abd_l", "abd_r", "elb_l", "elb_r",
        "spine", "root_y", "root_z",
    )}
    a["spine"] = zero + st["lean"]
    a["elb_l"] = zero + st["elbow"]
    a["elb_r"] = zero + st["elbow"]
    a["abd_l"] = zero + st["arm_out"]
    a["abd_r"] = zero + st["arm_out"]
    name = ACTIONS[action % len(ACTIONS)]
    if name == "walk":
        a["hip_l"], a["hip_r"] = 0.45 * amp * s, -0.45 * amp * s
        a["knee_l"] = 0.6 * amp * np.clip(-c, 0, None)
        a["knee_r"] = 0.6 * amp * np.clip(c, 0, None)
        a["sh_l"], a["sh_r"] = -0.4 * amp * s, 0.4 * amp * s
        a["root_z"] = 0.9 * st["tempo"] * t
        a["root_y"] = 0.02 * amp * np.cos(2 * (w * t + phase))
    elif name == "wave":
        a["abd_r"] = zero + 2.4
        a["elb_r"] = 0.9 + 0.5 * amp * s
        a["spine"] = a["spine"] + 0.03 * s
    elif name == "squat":
        depth = 0.5 * (1 - c) * amp
        a["hip_l"] = a["hip_r"] = 1.2 * depth
        a["knee_l"] = a["knee_r"] = 2.0 * depth
        a["root_y"] = -0.3 * depth
        a["sh_l"] = a["sh_r"] = 1.2 * depth
    elif name == "raise_arms":
        up = 0.5 * (1 - c)
        a["sh_l"] = a["sh_r"] = (2.6 * amp) * up
        a["elb_l"] = a["elb_r"] = st["elbow"] * (1 - up)
    elif name == "kick":
        pulse = np.clip(s, 0, None) ** 3
        a["hip_r"] = 1.3 * amp * pulse
        a["knee_r"] = 0.9 * amp * np.clip(c, 0, None) * (pulse > 0.05)
        a["sh_l"], a["sh_r"] = 0.3 * pulse, -0.3 * pulse
    elif name == "bow":
        a["spine"] = a["spine"] + 0.9 * amp * 0.5 * (1 - c)
        a["sh_l"] = a["sh_r"] = 0.4 * amp * 0.5 * (1 - c)
    return a


def _pose_sequence(action: int, st: dict[str, float], length: int, fps: float, rng: np.random.Generator) -> np.ndarray:
    jit = {k: v * rng.uniform(0.95, 1.05) if k in ("tempo", "amplitude") else v for k, v in st.items()}
    t = np.arange(length) / fps
    a = _angles(action, t, jit, rng.uniform(0, 2 * np.pi))
    offsets = _REST * st["height"]
    offsets[_ARM] *= st["arm"]
    offsets[_LEG] *= st["leg"]
    offsets[[4, 8], 0] *= st["shoulder"]
    offsets[[12, 16], 0] *= st["hip"]
    eye = np.broadcast_to(np.eye(3), (length, 3, 3))
    local = {j: eye for j in range(NTU25.num_joints)}
    yaw = _ry(np.full(length, rng.uniform(-np.pi / 4, np.pi / 4)))  # the camera's view of the body
    local[0] = yaw
    local[1] = _rx(a["spine"])  # forward lean / bow
    local[12], local[16] = _rx(-a["hip_l"]), _rx(-a["hip_r"])
    local[13], local[17] = _rx(a["knee_l"]), _rx(a["knee_r"])
    local[4] = _rz(a["abd_l"]) @ _rx(-a["sh_l"])
    local[8] = _rz(-a["abd_r"]) @ _rx(-a["sh_r"])
    local[5], local[9] = _rx(-a["elb_l"]), _rx(-a["elb_r"])
    pos = np.zeros((length, NTU25.num_joints, 3))
    rot = np.zeros((length, NTU25.num_joints, 3, 3))
    root = np.einsum("tik,tk->ti", yaw, np.stack([np.zeros(length), offsets[0, 1] + a["root_y"], a["root_z"]], -1))
    root += rng.uniform([-1.0, -0.1, 2.0], [1.0, 0.1, 3.5])  # where the subject stands
    for j in NTU25.topological_order():
        p = NTU25.parents[j]
        if p < 0:
            pos[:, j], rot[:, j] = root, local[j]
        else:
            pos[:, j] = pos[:, p] + np.einsum("tik,k->ti", rot[:, p], offsets[j])
            rot[:, j] = rot[:, p] @ local[j]
    return pos


def make_synthetic_skeletons(
    num_subjects: int = 8,
    num_actions: int = 4,
    repetitions: int = 6,
    length: int = 48,
    *,
    fps: float = 30.0,
    noise: float = 0.01,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """``repetitions`` sequences of each action by each subject, in world coordinates.

    Returns ``sequences`` (N, length, 25, 3) float32 (NTU joint order), ``actions``, ``subjects``,
    ``genders`` (N,) int64 and ``action_names``. Sensor noise is Gaussian with std ``noise`` metres.
    """
    if not 1 <= num_actions <= len(ACTIONS):
        raise ValueError(f"num_actions must be in 1..{len(ACTIONS)}")
    rng = np.random.default_rng(seed)
    styles = _subject_styles(num_subjects, rng)
    seqs, acts, subs, gens = [], [], [], []
    for k, st in enumerate(styles):
        for action in range(num_actions):
            for _ in range(repetitions):
                x = _pose_sequence(action, st, length, fps, rng)
                seqs.append(x + rng.normal(0, noise, x.shape))
                acts.append(action)
                subs.append(k)
                gens.append(st["gender"])
    return {
        "sequences": np.stack(seqs).astype(np.float32),
        "actions": np.array(acts, np.int64),
        "subjects": np.array(subs, np.int64),
        "genders": np.array(gens, np.int64),
        "action_names": np.array(ACTIONS[:num_actions]),
    }
