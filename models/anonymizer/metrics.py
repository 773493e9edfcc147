"""Quality and privacy metrics for anonymized videos (pure numpy)."""

from __future__ import annotations

import math

import numpy as np

from anonymask.models.anonymizer.segment.masks import as_bool
from anonymask.models.shared.body.tracks import NUM_SKELETON_JOINTS


def mask_iou(pred: np.ndarray, gt: np.ndarray) -> float:
    """Intersection over union of two masks over the whole video (alpha > 0 counts). Both empty -> 1."""
    p, g = as_bool(pred), as_bool(gt)
    if p.shape != g.shape:
        raise ValueError(f"mask_iou: shapes differ {p.shape} vs {g.shape}")
    union = np.count_nonzero(p | g)
    if union == 0:
        return 1.0
    return np.count_nonzero(p & g) / union


def psnr(a: np.ndarray, b: np.ndarray, mask: np.ndarray | None = None, data_range: float = 255.0) -> float:
    """PSNR in dB over the whole video, or only over pixels where ``mask`` (T,H,W) is set.

    One MSE over all selected pixels and channels (not a mean of per-frame PSNRs). Identical
    inputs give inf; an empty mask gives nan.
    """
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    if a.shape != b.shape:
        raise ValueError(f"psnr: shapes differ {a.shape} vs {b.shape}")
    diff2 = (a - b) ** 2
    if mask is not None:
        m = as_bool(mask)
        if m.shape != a.shape[: m.ndim]:
            raise ValueError(f"psnr: mask {m.shape} does not match images {a.shape}")
        if not m.any():
            return math.nan
        diff2 = diff2[m]
    mse = float(diff2.mean())
    if mse == 0:
        return math.inf
    return 10.0 * math.log10(data_range**2 / mse)


def mpjpe_mm(
    pred_joints: np.ndarray,
    gt_joints: np.ndarray,
    root: int | None = None,
    unit_to_mm: float = 1000.0,
    valid: np.ndarray | None = None,
) -> float:
    """Mean per-joint position error in millimetres.

    Joints (..., K, 3) in metres by default (``unit_to_mm`` converts). ``root``: index of the joint
    subtracted from every joint first (root-aligned MPJPE, e.g. 0 = pelvis for SMPL-H); None keeps
    absolute positions. ``valid`` (..., K) bool drops missing joints from the mean.
    """
    p = np.asarray(pred_joints, np.float64)
    g = np.asarray(gt_joints, np.float64)
    if p.shape != g.shape or p.shape[-1] not in (2, 3):
        raise ValueError(f"mpjpe_mm: shapes must match and end in 2 or 3, got {p.shape} vs {g.shape}")
    if root is not None:
        p = p - p[..., root : root + 1, :]
        g = g - g[..., root : root + 1, :]
    err = np.linalg.norm(p - g, axis=-1) * unit_to_mm
    if valid is not None:
        v = np.asarray(valid, bool)
        if not v.any():
            return math.nan
        err = err[v]
    return float(err.mean())


def person_leak(
    original: np.ndarray,
    anonymized: np.ndarray,
    gt_person_mask: np.ndarray,
    background: np.ndarray,
    tol: float = 10.0,
    synthetic: np.ndarray | None = None,
) -> float:
    """Fraction of the person's distinguishable pixels whose real colour is still shown.

    Definitions, per pixel, with d(u, v) = max over RGB channels of |u - v| (0..255):
    - distinguishable: the pixel is a ground-truth person pixel and d(original, background) > tol,
      i.e. the person looks different from what is behind them there (where they do not, nothing
      about the person can be seen, or hidden);
    - leaked: distinguishable and d(anonymized, original) <= tol, i.e. the output still shows the
      person's real colour at that pixel.
    leak = leaked / distinguishable. An identity "anonymization" gives exactly 1; replacing the
    person with the background gives exactly 0; an avatar gives the small fraction of pixels where
    its colour happens to match the person's within ``tol``. No distinguishable pixel -> nan.
    ``background`` is (T,H,W,3) or one (H,W,3) image (the scene without the person).
    ``synthetic`` (T,H,W) bool: pixels that are avatar (rendered); they never count as leaked (an
    avatar pixel whose colour happens to match the person's shows nothing of them), and a pixel
    counts only where the output is closer to the person than to the background. The result is
    then the *real* leak: person pixels shown outside avatars.
    """
    leaked, n = person_leak_counts(original, anonymized, gt_person_mask, background, tol, synthetic)
    if n == 0:
        return math.nan
    return leaked / n


def person_leak_counts(
    original: np.ndarray,
    anonymized: np.ndarray,
    gt_person_mask: np.ndarray,
    background: np.ndarray,
    tol: float = 10.0,
    synthetic: np.ndarray | None = None,
) -> tuple[int, int]:
    """(leaked, distinguishable) pixel counts of :func:`person_leak`: sums over windows of frames
    add up to the whole video's, so long videos are measured window by window."""
    x = np.asarray(original)
    y = np.asarray(anonymized)
    if x.shape != y.shape or x.ndim != 4:
        raise ValueError(f"person_leak: videos must be (T,H,W,3) of equal shape, got {x.shape} vs {y.shape}")
    m = as_bool(gt_person_mask)
    if m.shape != x.shape[:3]:
        raise ValueError(f"person_leak: mask {m.shape} does not match video {x.shape[:3]}")
    bg = np.broadcast_to(np.asarray(background), x.shape)
    leaked, distinguishable = leak_flags(x[m], y[m], bg[m], tol, None if synthetic is None else as_bool(synthetic)[m])
    return int(np.count_nonzero(leaked)), int(np.count_nonzero(distinguishable))


def leak_flags(original: np.ndarray, anonymized: np.ndarray, background: np.ndarray, tol: float = 10.0,
               synthetic: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The leak test of :func:`person_leak` on person pixels gathered as (N,3) colours (original,
    output, background) and ``synthetic`` (N,) bool: per pixel (leaked, distinguishable)."""
    xs, ys, bs = (np.asarray(a).astype(np.int16) for a in (original, anonymized, background))
    d_out = np.abs(ys - xs).max(axis=-1)
    distinguishable = np.abs(xs - bs).max(axis=-1) > tol
    leaked = distinguishable & (d_out <= tol)
    if synthetic is not None:
        # real leak: outside avatars, and closer to the person than to the background (an
        # inpainted pixel where the person's colour is within ``tol`` of the background shows
        # the background, not the person)
        leaked &= ~synthetic & (d_out < np.abs(ys - bs).max(axis=-1))
    return leaked, distinguishable


#: SMPL-H joints whose place matters most for an action: the head and the wrists
HEAD_AND_WRISTS = (15, 20, 21)


#: px: people shorter than this on screen are not measured (a few pixels say nothing of joints)
MIN_PERSON_PX = 10.0
#: person heights: an avatar whose body joints are further than this from a person on average is
#: not on them (no avatar on that person: the audit's business, not this measurement's)
ON_PERSON = 0.5


def avatar_joint_errors(truth2d: np.ndarray, avatar2d: np.ndarray) -> tuple[list[float], list[float]]:
    """How far the avatars drawn on real people put their joints from the people's own (synthetic
    data: ground-truth 2-D joints). ``truth2d`` (T, P, >=22, 2) and ``avatar2d`` (T, N, >=22, 2)
    pixels, NaN where absent. Per person and frame, the avatar whose body joints are nearest on
    average is theirs if that mean is under :data:`ON_PERSON` of the person's 2-D height (else no
    avatar is on them: not counted); returns that mean, and the mean over the head and wrists,
    each in % of the person's 2-D height (people under :data:`MIN_PERSON_PX` tall are skipped)."""
    body, ends = [], []
    joints = list(range(NUM_SKELETON_JOINTS))
    for t in range(truth2d.shape[0]):
        av = avatar2d[t][:, joints]
        ok = np.isfinite(av).all(axis=(1, 2))
        if not ok.any():
            continue
        av, av_ends = av[ok], avatar2d[t][ok][:, list(HEAD_AND_WRISTS)]
        for p in range(truth2d.shape[1]):
            g = truth2d[t, p, joints]
            if not np.isfinite(g).all():
                continue
            h = float(g[:, 1].max() - g[:, 1].min())
            if h < MIN_PERSON_PX:
                continue
            d = np.linalg.norm(av - g[None], axis=-1).mean(axis=1)
            k = int(np.argmin(d))
            if d[k] < ON_PERSON * h:
                body.append(100.0 * float(d[k]) / h)
                ends.append(100.0 * float(np.linalg.norm(av_ends[k] - truth2d[t, p, list(HEAD_AND_WRISTS)],
                                                         axis=-1).mean()) / h)
    return body, ends
