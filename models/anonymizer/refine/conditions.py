"""ControlNet condition images per tubelet crop, computed exactly from the render.

Depth, body joints and face points come from the avatar we rendered, so no estimator is needed
and the conditions match the avatar pixel for pixel. Point coordinates are crop pixel coordinates
with OpenCV's convention (the centre of pixel (row i, col j) is (x=j, y=i)); ``points_to_crop``
(compose.tubelets) converts frame coordinates with the same box mapping the crops use.

- ``depth_condition``: inverse depth normalised per clip, near = bright, background black
  (MiDaS-style maps, which depth ControlNets are trained on);
- ``openpose_condition``: the 18-keypoint OpenPose body skeleton (COCO order) in the usual limb
  and joint colours, drawn as OpenPose ControlNets expect; ``smplh_to_openpose18`` maps SMPL-H
  joints (+ optional nose/eye/ear points) to that order;
- ``face_condition``: white dots (and optional white lines) for face landmarks.
"""

from __future__ import annotations

from collections.abc import Sequence

import cv2
import numpy as np

OPENPOSE18_NAMES = (
    "nose", "neck", "r_shoulder", "r_elbow", "r_wrist", "l_shoulder", "l_elbow", "l_wrist",
    "r_hip", "r_knee", "r_ankle", "l_hip", "l_knee", "l_ankle", "r_eye", "l_eye", "r_ear", "l_ear",
)

# Limbs as index pairs in OPENPOSE18_NAMES order (the standard 17 body limbs).
OPENPOSE18_LIMBS = (
    (1, 2), (1, 5), (2, 3), (3, 4), (5, 6), (6, 7), (1, 8), (8, 9), (9, 10),
    (1, 11), (11, 12), (12, 13), (1, 0), (0, 14), (14, 16), (0, 15), (15, 17),
)

# RGB colours of the OpenPose renderings ControlNet was trained on: colour i is used for joint i
# and for limb i.
OPENPOSE18_COLORS = (
    (255, 0, 0), (255, 85, 0), (255, 170, 0), (255, 255, 0), (170, 255, 0), (85, 255, 0),
    (0, 255, 0), (0, 255, 85), (0, 255, 170), (0, 255, 255), (0, 170, 255), (0, 85, 255),
    (0, 0, 255), (85, 0, 255), (170, 0, 255), (255, 0, 255), (255, 0, 170), (255, 0, 85),
)

# SMPL-H joint index (52-joint body+hands order) for every OpenPose-18 keypoint that has one.
# Neck is the midpoint of the shoulders (OpenPose's neck sits there, SMPL's neck joint is higher);
# nose/eyes/ears are not SMPL-H joints: they come from head vertices given by the caller.
SMPLH_TO_OPENPOSE18 = {
    2: 17, 3: 19, 4: 21,  # right shoulder, elbow, wrist
    5: 16, 6: 18, 7: 20,  # left shoulder, elbow, wrist
    8: 2, 9: 5, 10: 8,  # right hip, knee, ankle
    11: 1, 12: 4, 13: 7,  # left hip, knee, ankle
}
SMPLH_HEAD = 15
FACE5_TO_OPENPOSE18 = (0, 14, 15, 16, 17)  # face points in order nose, r_eye, l_eye, r_ear, l_ear

_SHIFT = 4  # sub-pixel bits for cv2 drawing
_ONE = 1 << _SHIFT


def smplh_to_openpose18(
    joints: np.ndarray, face5: np.ndarray | None = None, head_as_nose: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """SMPL-H joints (..., 52, D) -> OpenPose-18 keypoints (..., 18, D) and validity (..., 18).

    ``face5`` (..., 5, D): nose, right eye, left eye, right ear, left ear (e.g. projected head
    vertices of the body model); NaN entries stay invalid. Without it the nose is approximated by
    the SMPL-H head joint (``head_as_nose``) and eyes/ears are left out.
    """
    j = np.asarray(joints, np.float64)
    if j.shape[-2] < 22:
        raise ValueError(f"smplh_to_openpose18: need >= 22 SMPL-H joints, got {j.shape}")
    out = np.full(j.shape[:-2] + (18, j.shape[-1]), np.nan)
    for op, sm in SMPLH_TO_OPENPOSE18.items():
        out[..., op, :] = j[..., sm, :]
    out[..., 1, :] = 0.5 * (j[..., 16, :] + j[..., 17, :])
    if face5 is not None:
        f = np.asarray(face5, np.float64)
        if f.shape[-2] != 5:
            raise ValueError(f"smplh_to_openpose18: face5 must hold 5 points, got {f.shape}")
        out[..., list(FACE5_TO_OPENPOSE18), :] = f
    elif head_as_nose:
        out[..., 0, :] = j[..., SMPLH_HEAD, :]
    valid = np.all(np.isfinite(out), axis=-1)
    return out, valid


def _visibility(points: np.ndarray, visibility: np.ndarray | None) -> np.ndarray:
    vis = np.all(np.isfinite(points), axis=-1)
    if visibility is not None:
        vis &= np.asarray(visibility) > 0
    return vis


def _fixed(p: np.ndarray) -> tuple[int, int]:
    return int(round(float(p[0]) * _ONE)), int(round(float(p[1]) * _ONE))


def openpose_condition(
    joints2d: np.ndarray,
    size: int,
    visibility: np.ndarray | None = None,
    stick_width: float = 4.0,
    radius: int = 4,
) -> np.ndarray:
    """OpenPose-18 skeleton images (T,S,S,3) uint8 RGB on black from keypoints (T,18,2) in crop px.

    Limbs are filled ellipses along the bone in 60 % of the limb colour, joints full-colour discs
    drawn on top. A keypoint is drawn if visible (``visibility`` > 0, default all) and finite; a
    limb if both its ends are.
    """
    pts = np.asarray(joints2d, np.float64)
    if pts.ndim != 3 or pts.shape[1:] != (18, 2):
        raise ValueError(f"openpose_condition: joints2d must be (T,18,2), got {pts.shape}")
    vis = _visibility(pts, visibility)
    out = np.zeros((pts.shape[0], size, size, 3), np.uint8)
    for t in range(pts.shape[0]):
        canvas = out[t]
        for i, (a, b) in enumerate(OPENPOSE18_LIMBS):
            if not (vis[t, a] and vis[t, b]):
                continue
            pa, pb = pts[t, a], pts[t, b]
            centre = 0.5 * (pa + pb)
            length = float(np.hypot(*(pb - pa)))
            angle = float(np.degrees(np.arctan2(pb[1] - pa[1], pb[0] - pa[0])))
            poly = cv2.ellipse2Poly(
                (int(round(centre[0])), int(round(centre[1]))),
                (max(1, int(round(length / 2))), max(1, int(round(stick_width)))), int(round(angle)), 0, 360, 1,
            )
            # blended only over the limb's bounding rectangle (a whole-canvas pass per limb was
            # most of the conditions stage's time)
            x, y, bw, bh = cv2.boundingRect(poly)
            x0, y0, x1, y1 = max(0, x), max(0, y), min(size, x + bw), min(size, y + bh)
            if x1 <= x0 or y1 <= y0:
                continue
            limb = np.zeros((y1 - y0, x1 - x0, 3), np.uint8)
            cv2.fillConvexPoly(limb, poly - np.array([x0, y0], poly.dtype), tuple(int(c) for c in OPENPOSE18_COLORS[i]))
            on = limb.any(-1)
            sub = canvas[y0:y1, x0:x1]
            sub[on] = (0.4 * sub[on] + 0.6 * limb[on]).astype(np.uint8)
        for k in range(18):
            if vis[t, k]:
                color = tuple(int(c) for c in OPENPOSE18_COLORS[k])
                cv2.circle(canvas, _fixed(pts[t, k]), radius * _ONE, color, -1, cv2.LINE_8, _SHIFT)
    return out


def face_condition(
    face_points: np.ndarray,
    size: int,
    visibility: np.ndarray | None = None,
    connections: Sequence[tuple[int, int]] | None = None,
    radius: int = 1,
    thickness: int = 1,
    color: tuple[int, int, int] = (255, 255, 255),
) -> np.ndarray:
    """Face landmark images (T,S,S,3) uint8: white dots at (T,P,2) crop px, optional white lines.

    ``connections``: pairs of point indices to join (e.g. ``face_mesh_contours()`` for mediapipe's
    468/478-point mesh). Invisible or non-finite points and their lines are skipped.
    """
    pts = np.asarray(face_points, np.float64)
    if pts.ndim != 3 or pts.shape[-1] != 2:
        raise ValueError(f"face_condition: face_points must be (T,P,2), got {pts.shape}")
    vis = _visibility(pts, visibility)
    out = np.zeros((pts.shape[0], size, size, 3), np.uint8)
    for t in range(pts.shape[0]):
        canvas = out[t]
        for a, b in connections or ():
            if vis[t, a] and vis[t, b]:
                cv2.line(canvas, _fixed(pts[t, a]), _fixed(pts[t, b]), color, thickness, cv2.LINE_AA, _SHIFT)
        for k in np.flatnonzero(vis[t]):
            cv2.circle(canvas, _fixed(pts[t, k]), radius * _ONE, color, -1, cv2.LINE_8, _SHIFT)
    return out


def face_mesh_contours() -> list[tuple[int, int]]:
    """Contour connections of mediapipe's face mesh (lips, eyes, brows, face oval), for 468+ points."""
    from mediapipe.python.solutions import face_mesh_connections as fmc

    return sorted(fmc.FACEMESH_CONTOURS)


def inverse_depth_range(depth: np.ndarray, mask: np.ndarray | None = None) -> tuple[float, float] | None:
    """(min, max) of 1/z over the avatar pixels of ``depth`` (T,S,S), None if there are none.

    ``depth_condition`` normalises with the whole clip's range; for a long clip handled window by
    window, take the min of the mins and the max of the maxes and pass it as ``inv_range``."""
    z = np.asarray(depth, np.float64)
    valid = np.isfinite(z) & (z > 0)
    if mask is not None:
        valid &= np.asarray(mask) > 0
    if not valid.any():
        return None
    inv = 1.0 / z[valid]
    return float(inv.min()), float(inv.max())


def depth_condition(
    depth: np.ndarray, mask: np.ndarray | None = None, far_level: int = 80,
    inv_range: tuple[float, float] | None = None,
) -> np.ndarray:
    """Depth ControlNet images (T,S,S,3) uint8 from rendered depth (T,S,S) (camera z, any unit).

    Inverse depth 1/z is normalised over the whole clip (not per frame, so brightness does not
    flicker): the nearest avatar point of the clip maps to 255, the farthest to ``far_level``, so
    the avatar stays distinct from the black background. ``mask`` (T,S,S): avatar pixels; by
    default those with finite z > 0 (renderers write 0 where nothing is hit). ``inv_range``:
    the clip's (min, max) of 1/z when ``depth`` is only part of it (``inverse_depth_range``).
    """
    z = np.asarray(depth, np.float64)
    if z.ndim != 3:
        raise ValueError(f"depth_condition: depth must be (T,S,S), got {z.shape}")
    valid = np.isfinite(z) & (z > 0)
    if mask is not None:
        valid &= np.asarray(mask) > 0
    out = np.zeros(z.shape + (3,), np.uint8)
    if not valid.any():
        return out
    inv = np.zeros_like(z)
    inv[valid] = 1.0 / z[valid]
    lo, hi = inv_range if inv_range is not None else (inv[valid].min(), inv[valid].max())
    if hi > lo:
        norm = (inv - lo) / (hi - lo)
    else:
        norm = np.ones_like(inv)
    level = far_level + norm * (255 - far_level)
    gray = np.where(valid, np.clip(np.rint(level), 0, 255), 0).astype(np.uint8)
    out[...] = gray[..., None]
    return out
