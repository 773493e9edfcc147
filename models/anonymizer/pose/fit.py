"""Fit an SMPL-H track to per-frame keypoints (2-D, optionally 3-D), smoothly over time.

One optimisation over all frames of a track at once: reprojection error (normalised by the
person's size in pixels) + 3-D structure error (root-relative metric keypoints from mediapipe's
world landmarks, or absolute camera-frame joints from a Kinect skeleton) + a pose prior +
temporal smoothness. Frames without keypoints are filled by the smoothness term and marked
invalid. Initialisation: per-frame torso orientation by Kabsch, depth from the torso's 3-D/2-D
size ratio, so Adam starts near the right basin.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import torch

from anonymask.models.anonymizer.pose.kinematics import forward_kinematics
from anonymask.models.shared.body.tracks import (
    JOINT_INDEX,
    NUM_BETAS,
    NUM_BODY_JOINTS,
    NUM_HAND_JOINTS,
    Camera,
    SMPLHTrack,
    rotmat_to_axis_angle,
)

#: axis-angle values of the body pose (21 joints, pelvis excluded: that is the global orientation)
BODY_POSE_DIMS = NUM_BODY_JOINTS * 3

_TORSO = ("left_hip", "right_hip", "left_shoulder", "right_shoulder")


@dataclass
class FitConfig:
    iterations: int = 100
    lr: float = 0.05
    w_2d: float = 1.0
    w_3d: float = 4.0
    # Measured on a known motion (24 frames, 1 px / 2 cm keypoint noise): root-aligned MPJPE
    # 18 mm without the smoothness term, 15 mm with w_smooth=0.1 (axis-angles unwrapped first).
    w_prior: float = 0.0
    w_smooth: float = 0.1
    smooth_sigma: float = 1.0
    min_confidence: float = 0.3
    min_joints: int = 4  # landmarks a frame needs to be fitted (fewer pin no body)
    min_spread_px: float = 10.0  # the smallest landmark spread a frame's 2-D error is divided by
    near_m: float = 0.1  # joints nearer the camera are projected at this depth (no division blow-up)
    w_smooth_transl: float = 10.0  # the translation's share of the smoothness term, against the rotations'


def _kabsch(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Rotation R minimising ||R src - dst|| for centred point sets (K,3)."""
    h = src.T @ dst
    u, _, vt = np.linalg.svd(h)
    d = np.sign(np.linalg.det(vt.T @ u.T))
    return vt.T @ np.diag([1.0, 1.0, d]) @ u.T


def _initial_orient_transl(
    rest: np.ndarray, kp2d: np.ndarray, conf: np.ndarray, kp3d: np.ndarray | None, absolute_3d: bool,
    src_idx: dict[str, int], camera: Camera, min_conf: float,
) -> tuple[np.ndarray, np.ndarray]:
    t_len = kp2d.shape[0]
    torso_dst = [JOINT_INDEX[n] for n in _TORSO]
    torso_src = [src_idx[n] for n in _TORSO]
    rest_t = rest[torso_dst] - rest[torso_dst].mean(0)
    orient = np.zeros((t_len, 3))
    transl = np.zeros((t_len, 3))
    last_r, last_tr = None, None
    for t in range(t_len):
        ok = conf[t, torso_src] >= min_conf
        if ok.sum() < 3 or kp3d is None:
            if last_r is None:
                continue
            orient[t], transl[t] = rotmat_to_axis_angle(last_r), last_tr
            continue
        obs = kp3d[t, torso_src]
        r = _kabsch(rest_t[ok], (obs - obs[ok].mean(0))[ok]) if ok.sum() >= 3 else np.eye(3)
        if absolute_3d:
            centre = obs[ok].mean(0)
        else:
            # depth from size: 3-D torso extent (metres) vs 2-D extent (pixels)
            p2 = kp2d[t, torso_src][ok]
            size2d = np.linalg.norm(p2 - p2.mean(0), axis=1).mean()
            size3d = np.linalg.norm(obs[ok] - obs[ok].mean(0), axis=1).mean()
            z = camera.fx * size3d / max(size2d, 1e-3)
            c2 = p2.mean(0)
            centre = np.array([(c2[0] - camera.cx) * z / camera.fx, (c2[1] - camera.cy) * z / camera.fy, z])
        rest_centre = rest[torso_dst].mean(0)
        # posed torso centre = R (rest_centre - rest_root) + rest_root + transl
        tr = centre - (r @ (rest_centre - rest[0]) + rest[0])
        orient[t], transl[t] = rotmat_to_axis_angle(r), tr
        last_r, last_tr = r, tr
    # frames before the first detection take the first detected values
    first = next((t for t in range(t_len) if np.any(orient[t]) or np.any(transl[t])), None)
    if first is not None:
        orient[:first], transl[:first] = orient[first], transl[first]
    return orient, transl


def unwrap_rotvecs(rv: np.ndarray) -> np.ndarray:
    """Make a (T,3) axis-angle sequence continuous: r and r(1 - 2pi/|r|) are the same rotation;
    near |r| = pi consecutive frames flip between them, which breaks smoothing and smoothness."""
    out = np.array(rv, dtype=np.float64, copy=True)
    for t in range(1, len(out)):
        r = out[t]
        n = np.linalg.norm(r)
        if n < 1e-6:
            continue
        alt = r * (1.0 - 2.0 * np.pi / n)
        if np.linalg.norm(alt - out[t - 1]) < np.linalg.norm(r - out[t - 1]):
            out[t] = alt
    return out.astype(np.asarray(rv).dtype)


def smooth_over_time(x: np.ndarray, sigma: float) -> np.ndarray:
    """Gaussian smoothing along frames (axis-angle components are smooth away from pi)."""
    if sigma <= 0 or x.shape[0] < 3:
        return x
    from scipy.ndimage import gaussian_filter1d

    return gaussian_filter1d(x, sigma, axis=0, mode="nearest").astype(x.dtype)


@contextlib.contextmanager
def _one_thread():
    """Fitting works on tiny tensors (T x 22 joints): intra-op threads only add overhead, and on a
    busy machine they make each step ~10x slower (measured: 19 s vs 1.7 s for 100 steps, T=10)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@dataclass
class FitInput:
    """One person's keypoints for :func:`fit_tracks` (see :func:`fit_track` for the arrays)."""

    kp2d: np.ndarray
    conf: np.ndarray
    kp3d: np.ndarray | None = None
    track_id: int = 0
    betas: np.ndarray | None = None


def fit_track(
    rest_joints: np.ndarray,
    kp2d: np.ndarray,
    conf: np.ndarray,
    camera: Camera,
    mapping: tuple[list[int], list[int], list[float]],
    kp3d: np.ndarray | None = None,
    absolute_3d: bool = False,
    betas: np.ndarray | None = None,
    track_id: int = 0,
    cfg: FitConfig | None = None,
) -> tuple[SMPLHTrack, dict[str, float]]:
    """Fit one person's track.

    kp2d (T,K,2) pixels, conf (T,K) in [0,1] (0 = not seen); kp3d (T,K,3) metres, root-relative
    (mediapipe world landmarks, camera-aligned axes) or absolute in the camera frame
    (``absolute_3d=True``). ``mapping`` = (keypoint indices, SMPL-H joint indices, weights).
    Returns the track and the final loss terms.
    """
    return fit_tracks(rest_joints, [FitInput(kp2d, conf, kp3d, track_id, betas)], camera, mapping,
                      absolute_3d=absolute_3d, cfg=cfg)[0]


class _Adam:
    """Adam with torch's defaults (betas 0.9/0.999, eps 1e-8), the same arithmetic as
    ``torch.optim.Adam``'s single-tensor path. Built here because constructing ``torch.optim.Adam``
    imports torch._dynamo, 1-1.7 s once per process (10% of pose4d on the 48-frame bench)."""

    def __init__(self, params: list[torch.Tensor], lr: float, betas=(0.9, 0.999), eps: float = 1e-8):
        self.params, self.lr, self.b1, self.b2, self.eps = params, float(lr), betas[0], betas[1], float(eps)
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]
        self.t = 0

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        self.t += 1
        c1 = 1 - self.b1 ** self.t
        c2 = 1 - self.b2 ** self.t
        for p, m, v in zip(self.params, self.m, self.v):
            g = p.grad
            m.lerp_(g, 1 - self.b1)
            v.mul_(self.b2).addcmul_(g, g, value=1 - self.b2)
            denom = (v.sqrt() / (c2 ** 0.5)).add_(self.eps)
            p.addcdiv_(m, denom, value=-self.lr / c1)


def fit_tracks(
    rest_joints: np.ndarray,
    people: list[FitInput],
    camera: Camera,
    mapping: tuple[list[int], list[int], list[float]],
    absolute_3d: bool = False,
    cfg: FitConfig | None = None,
) -> list[tuple[SMPLHTrack, dict[str, float]]]:
    """Fit several people's tracks in one optimisation: each person's loss is the one
    :func:`fit_track` minimises, and they are summed; Adam works element by element, so every
    track follows the path it would alone (a test compares them), while the steps' fixed cost
    (forward kinematics joint by joint, autograd) is paid once for all of them instead of once
    per person. Tracks of different lengths are padded; the padding has no weight and no
    smoothness link."""
    cfg = cfg or FitConfig()
    if not people:
        return []
    src, dst, wts = mapping
    name_of = {JOINT_INDEX_INV[d]: i for i, d in enumerate(dst)}
    n, k_n = len(people), len(src)
    lens = [int(p.kp2d.shape[0]) for p in people]
    t_max = max(lens)
    has3 = [p.kp3d is not None for p in people]
    kp_all = np.zeros((n, t_max, k_n, 2))
    conf_all = np.zeros((n, t_max, k_n))
    k3_all = np.zeros((n, t_max, k_n, 3))
    go0 = np.zeros((n, t_max, 3))
    tr0 = np.zeros((n, t_max, 3))
    scale_all = np.ones((n, t_max)) * cfg.min_spread_px
    valid_all = []
    for i, p in enumerate(people):
        t_len = lens[i]
        kp2d = np.asarray(p.kp2d, np.float64)[:, src]
        raw = np.asarray(p.conf, np.float64)[:, src]
        conf = np.where(raw >= cfg.min_confidence, raw, 0.0)
        k3 = None if p.kp3d is None else np.asarray(p.kp3d, np.float64)[:, src]
        valid_all.append((conf > 0).sum(1) >= cfg.min_joints)
        orient0, transl0 = _initial_orient_transl(rest_joints, kp2d, conf, k3, absolute_3d, name_of, camera,
                                                  cfg.min_confidence)
        go0[i, :t_len], tr0[i, :t_len] = unwrap_rotvecs(orient0), transl0
        go0[i, t_len:], tr0[i, t_len:] = go0[i, t_len - 1], tr0[i, t_len - 1]  # padding: harmless values
        tr0[i, t_len:, 2] = max(float(tr0[i, t_len - 1, 2]), 1.0)
        kp_all[i, :t_len] = np.nan_to_num(kp2d)  # unseen points may be NaN (weight 0)
        conf_all[i, :t_len] = conf
        if k3 is not None:
            k3_all[i, :t_len] = np.nan_to_num(k3)
        scale_all[i, :t_len] = [max(float(np.ptp(kp2d[t][conf[t] > 0], axis=0).max())
                                    if (conf[t] > 0).sum() > 1 else 1.0, cfg.min_spread_px) for t in range(t_len)]
    dt = torch.float32
    rest = torch.as_tensor(rest_joints, dtype=dt)
    go = torch.tensor(go0, dtype=dt, requires_grad=True)
    bp = torch.zeros((n, t_max, BODY_POSE_DIMS), dtype=dt, requires_grad=True)
    tr = torch.tensor(tr0, dtype=dt, requires_grad=True)
    kp = torch.as_tensor(kp_all, dtype=dt)
    c = torch.as_tensor(conf_all, dtype=dt) * torch.as_tensor(wts, dtype=dt)
    scale = torch.as_tensor(scale_all, dtype=dt)
    use3 = torch.as_tensor(has3, dtype=dt)
    tgt3 = torch.as_tensor(k3_all, dtype=dt)
    frame = torch.as_tensor([[t < lens[i] for t in range(t_max)] for i in range(n)], dtype=dt)  # (N,T)
    link = frame[:, 1:] * frame[:, :-1]  # consecutive frames of one track
    n_frames = torch.as_tensor(lens, dtype=dt)
    n_links = link.sum(1)
    dst_t = torch.as_tensor(dst)
    n_fk = max(dst) + 1
    hips = [name_of["left_hip"], name_of["right_hip"]]
    opt = _Adam([go, bp, tr], lr=cfg.lr)
    fx, fy, cx, cy = (float(v) for v in (camera.fx, camera.fy, camera.cx, camera.cy))

    def mean_link(x: torch.Tensor) -> torch.Tensor:
        """Per track: the mean squared change between consecutive frames (0 for one frame)."""
        d = ((x[:, 1:] - x[:, :-1]) ** 2).sum(-1) * link
        return d.sum(1) / (n_links * x.shape[-1]).clamp(min=1)

    per = {}
    with _one_thread():
        for _ in range(cfg.iterations):
            opt.zero_grad()
            joints = forward_kinematics(rest, go.reshape(-1, 3), bp.reshape(-1, BODY_POSE_DIMS), tr.reshape(-1, 3),
                                        num_joints=n_fk)[:, dst_t].reshape(n, t_max, k_n, 3)
            z = joints[..., 2].clamp(min=cfg.near_m)
            proj = torch.stack([fx * joints[..., 0] / z + cx, fy * joints[..., 1] / z + cy], -1)
            e2 = (((proj - kp) / scale[..., None, None]) ** 2).sum(-1)
            loss2 = (c * e2).sum((1, 2)) / c.sum((1, 2)).clamp(min=1)
            loss = cfg.w_2d * loss2
            if cfg.w_3d and any(has3):
                if absolute_3d:
                    e3 = ((joints - tgt3) ** 2).sum(-1)
                else:
                    rel = joints - joints[:, :, hips].mean(2, keepdim=True)
                    obs = tgt3 - tgt3[:, :, hips].mean(2, keepdim=True)
                    e3 = ((rel - obs) ** 2).sum(-1)
                loss3 = (c * e3).sum((1, 2)) / c.sum((1, 2)).clamp(min=1) * use3
                loss = loss + cfg.w_3d * loss3
            prior = (bp ** 2 * frame[..., None]).sum((1, 2)) / (n_frames * BODY_POSE_DIMS)
            smooth = mean_link(go) + mean_link(bp) + mean_link(tr) * cfg.w_smooth_transl
            loss = loss + cfg.w_prior * prior + cfg.w_smooth * smooth
            loss.sum().backward()
            opt.step()
            per = {"reproj": loss2, "total": loss}
            if cfg.w_3d and any(has3):
                per["structure_3d"] = loss3
    out = []
    for i, p in enumerate(people):
        t_len = lens[i]
        terms = {k: float(v[i].detach()) for k, v in per.items() if k != "structure_3d" or has3[i]}
        zeros = np.zeros((t_len, NUM_HAND_JOINTS * 3), np.float32)
        go_np = smooth_over_time(unwrap_rotvecs(go[i, :t_len].detach().numpy()), cfg.smooth_sigma)
        bp_np, tr_np = (smooth_over_time(v[i, :t_len].detach().numpy(), cfg.smooth_sigma) for v in (bp, tr))
        track = SMPLHTrack(p.track_id, np.zeros(NUM_BETAS) if p.betas is None else p.betas, go_np, bp_np, zeros,
                           zeros.copy(), tr_np, valid_all[i])
        out.append((track, terms))
    return out


JOINT_INDEX_INV = {v: k for k, v in JOINT_INDEX.items()}
