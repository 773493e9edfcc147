"""Pose backend ``ntu-skeleton``: SMPL-H tracks fitted to NTU RGB+D's Kinect v2 joints.

The joints are metric 3-D points in the Kinect's camera space (the DEPTH sensor's frame: x to the
sensor's left, y up, z forward), and each joint also carries its pixel position in the 1920x1080
colour frame (``colorX/colorY``). NTU ships no colour-camera calibration, but those pairs are
exact correspondences, so one 3x4 projection per video is fitted to them (DLT, least squares),
decomposed into intrinsics K and the depth-to-colour pose [R|t], and the joints are moved into
the colour camera's OpenCV frame: the fitted avatar then overlays the video.

Handedness: in NTU files colorX grows with the Kinect x, i.e. the colour video is a mirror image
of the camera space (a proper rotation cannot map one onto the other). The fit detects this from
the sign of det(K R): the joints are reflected (x -> -x) and left/right labels swapped, so the
SMPL-H body fitted is the person as they appear in the video.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from anonymask.core.errors import DatasetError, NoPersonError
from anonymask.models.anonymizer.pose.estimate import PoseResult
from anonymask.models.anonymizer.pose.fit import FitConfig, fit_track
from anonymask.models.anonymizer.pose.keypoints import NTU_TO_SMPLH, mapping_arrays
from anonymask.models.shared.body.tracks import Camera
from anonymask.storage.datasets.ntu_skeleton import BodyTrack, NTUSkeleton, main_bodies, read_ntu_skeleton

#: NTU RGB+D colour frames (colorX/colorY refer to this size)
NTU_COLOR_SIZE = (1920, 1080)
#: nominal Kinect v2 colour intrinsics at 1920x1080, used only when the DLT is ill-conditioned
KINECT_V2_COLOR_K = np.array([[1063.0, 0.0, 959.5], [0.0, 1063.0, 539.5], [0.0, 0.0, 1.0]])
#: Kinect v2 joint pairs (left, right) swapped when the video is mirrored
_LEFT_RIGHT = ((4, 8), (5, 9), (6, 10), (7, 11), (12, 16), (13, 17), (14, 18), (15, 19), (21, 23), (22, 24))
_SWAP = np.arange(25)
for _l, _r in _LEFT_RIGHT:
    _SWAP[_l], _SWAP[_r] = _r, _l


@dataclass
class ColorProjection:
    """Depth-camera space -> colour pixels: u ~ K (R (F X) + t), F = diag(-1,1,1) when mirrored."""

    K: np.ndarray  # noqa: N815 - (3,3), K[2,2] = 1, positive diagonal
    R: np.ndarray  # noqa: N815 - (3,3), det +1
    t: np.ndarray  # (3,) metres
    mirrored: bool
    rms_px: float
    num_points: int
    source: str = "dlt"  # or "nominal" (Kinect v2 intrinsics + PnP, when the DLT is degenerate)

    def to_camera_frame(self, points: np.ndarray) -> np.ndarray:
        """(..., 3) Kinect camera-space points -> the colour camera's OpenCV frame (metres)."""
        p = np.asarray(points, np.float64)
        if self.mirrored:
            p = p * [-1.0, 1.0, 1.0]
        return p @ self.R.T + self.t

    def project(self, points: np.ndarray) -> np.ndarray:
        c = self.to_camera_frame(points) @ self.K.T
        return c[..., :2] / c[..., 2:3]


def _normaliser(x: np.ndarray) -> np.ndarray:
    """Similarity T (d+1, d+1) moving points to zero mean and mean distance sqrt(d) (Hartley)."""
    d = x.shape[1]
    mu = x.mean(0)
    s = np.sqrt(d) / max(np.linalg.norm(x - mu, axis=1).mean(), 1e-12)
    t = np.eye(d + 1)
    t[:d, :d] *= s
    t[:d, d] = -s * mu
    return t


def dlt_projection(points: np.ndarray, pixels: np.ndarray) -> np.ndarray:
    """Least-squares 3x4 P with pixels ~ P [X;1] (normalised DLT); needs >= 6 non-coplanar points."""
    x = np.asarray(points, np.float64)
    u = np.asarray(pixels, np.float64)
    tx, tu = _normaliser(x), _normaliser(u)
    xh = np.c_[x, np.ones(len(x))] @ tx.T
    uh = np.c_[u, np.ones(len(u))] @ tu.T
    n = len(x)
    a = np.zeros((2 * n, 3 * 4))  # two equations per point in the 3x4 entries of P
    a[0::2, 0:4] = xh
    a[0::2, 8:12] = -uh[:, 0:1] * xh
    a[1::2, 4:8] = xh
    a[1::2, 8:12] = -uh[:, 1:2] * xh
    _, _, vt = np.linalg.svd(a, full_matrices=False)
    p = vt[-1].reshape(3, 4)
    return np.linalg.inv(tu) @ p @ tx


def _reprojection_errors(p: np.ndarray, points: np.ndarray, pixels: np.ndarray) -> np.ndarray:
    c = np.c_[points, np.ones(len(points))] @ p.T
    return np.linalg.norm(c[:, :2] / c[:, 2:3] - pixels, axis=1)


def decompose_projection(p: np.ndarray, points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """P -> (K, R, t, mirrored) with K[2,2] = 1, positive diagonal, det R = +1, points in front.

    P is known up to scale (sign included). The sign that puts the points in front of the camera
    fixes it; if then det(M) < 0 no proper rotation explains the data: the image is mirrored,
    and P F (F = diag(-1,1,1)) is decomposed instead, for reflected points F X.
    """
    from scipy.linalg import rq

    p = np.asarray(p, np.float64)
    w = np.c_[points, np.ones(len(points))] @ p[2]
    if np.median(w) < 0:
        p = -p
    mirrored = bool(np.linalg.det(p[:, :3]) < 0)
    if mirrored:
        p = p @ np.diag([-1.0, 1.0, 1.0, 1.0])
    k, r = rq(p[:, :3])
    d = np.diag(np.sign(np.diag(k)))
    k, r = k @ d, d @ r  # d d = I: same product, positive diagonal
    t = np.linalg.solve(k, p[:, 3])  # P = lambda K [R|t] and k = lambda K: t comes out metric
    return k / k[2, 2], r, t, mirrored


#: a DLT camera is believed when its focal length lies within these frame widths (a 180-degree
#: fisheye to a 14-degree telephoto), its pixels are this close to square (fy / fx) and its principal
#: point lies inside the frame grown by ``CENTRE_SLACK`` of its size: outside, the joints' colour
#: mapping was bad and the nominal Kinect camera is used
FOCAL_WIDTHS, PIXEL_ASPECT, CENTRE_SLACK = (0.25, 4.0), (0.8, 1.25), 0.25
#: a PnP pose counts only near the Kinect's physical layout (degrees, metres): for near-planar
#: joints a mirrored scene seen from behind reprojects just as well
LAYOUT_MAX_DEG, LAYOUT_MAX_OFFSET_M = 30.0, 0.5
#: joints whose smallest spread (singular value) is under this share of the largest are (nearly)
#: coplanar: the DLT has no unique solution
COPLANAR_RATIO = 0.02
#: outlier trimming keeps joints within this many median reprojection errors, and within this share
#: of the frame width at least (a good fit's median error is tiny)
TRIM_MEDIANS, TRIM_MIN_WIDTH_SHARE = 3.0, 0.004
#: a camera needs this many joints (a 3x4 projection has 11 degrees of freedom, 2 per joint)
MIN_CAMERA_JOINTS = 6
#: metres: joints nearer the depth sensor than this are sensor noise
MIN_DEPTH_M = 0.1
#: NTU RGB+D's Kinect v2 skeleton has this many joints
NTU_JOINTS = 25
#: a body's box around its projected joints is grown by this share of its larger side (the joints
#: are inside the body: head top, hands and feet reach past them)
BOX_MARGIN = 0.1


def _plausible(k: np.ndarray, width: float, height: float) -> bool:
    fx, fy = k[0, 0], k[1, 1]
    (f_lo, f_hi), (a_lo, a_hi), c = FOCAL_WIDTHS, PIXEL_ASPECT, CENTRE_SLACK
    return (
        f_lo * width < fx < f_hi * width and a_lo < fy / fx < a_hi
        and -c * width < k[0, 2] < (1 + c) * width and -c * height < k[1, 2] < (1 + c) * height
    )


#: Kinect camera space (x left, y up) -> OpenCV (x right, y down): the colour camera sits ~5 cm
#: from the depth sensor, looking the same way
_KINECT_TO_OPENCV = np.diag([-1.0, -1.0, 1.0])


def _nominal_projection(points: np.ndarray, pixels: np.ndarray, k: np.ndarray) -> ColorProjection:
    """Known intrinsics, pose by PnP started at the Kinect's physical layout, for both handednesses.

    Only solutions near that layout (rotation within 30 degrees, offset < 0.5 m) count: for
    near-planar points a mirrored scene seen from behind reprojects just as well. A handedness
    whose PnP solution is not near it is scored with the layout itself.
    """
    import cv2

    def score(x, r, t):
        cam = x @ r.T + t
        if np.median(cam[:, 2]) <= 0:
            return np.inf
        proj = cam @ k.T
        return float(np.sqrt(np.mean(np.sum((proj[:, :2] / proj[:, 2:3] - pixels) ** 2, axis=1))))

    guess = cv2.Rodrigues(_KINECT_TO_OPENCV)[0]
    cands = []
    for mirrored in (True, False):
        x = points * [-1.0, 1.0, 1.0] if mirrored else points
        ok, rvec, tvec = cv2.solvePnP(x, pixels, k, None, rvec=guess.copy(), tvec=np.zeros((3, 1)),
                                      useExtrinsicGuess=True, flags=cv2.SOLVEPNP_ITERATIVE)
        r, t = (cv2.Rodrigues(rvec)[0], tvec.reshape(3)) if ok else (_KINECT_TO_OPENCV, np.zeros(3))
        angle = np.degrees(np.arccos(np.clip((np.trace(r.T @ _KINECT_TO_OPENCV) - 1) / 2, -1, 1)))
        if not (angle < LAYOUT_MAX_DEG and np.linalg.norm(t) < LAYOUT_MAX_OFFSET_M):
            r, t = _KINECT_TO_OPENCV, np.zeros(3)
        rms = score(x, r, t)
        if np.isfinite(rms):
            cands.append(ColorProjection(k.copy(), r, t, mirrored, rms, len(x), "nominal"))
    if not cands:
        raise DatasetError("could not relate the Kinect joints to their colour pixels (no camera puts them in front)")
    return min(cands, key=lambda c: c.rms_px)


def _dlt_camera(x: np.ndarray, u: np.ndarray, width: float, trim_rounds: int) -> ColorProjection | None:
    """DLT + outlier trimming + decomposition; None when the points cannot determine a camera."""
    spread = np.linalg.svd(x - x.mean(0), compute_uv=False)
    if spread[-1] < COPLANAR_RATIO * spread[0]:
        return None
    keep = np.ones(len(x), bool)
    try:
        p = dlt_projection(x, u)
        for _ in range(trim_rounds):
            err = _reprojection_errors(p, x, u)
            new_keep = err <= max(TRIM_MEDIANS * float(np.median(err)), TRIM_MIN_WIDTH_SHARE * width)
            if new_keep.sum() < MIN_CAMERA_JOINTS or (new_keep == keep).all():
                break
            keep = new_keep
            p = dlt_projection(x[keep], u[keep])
        k, r, t, mirrored = decompose_projection(p, x[keep])
    except np.linalg.LinAlgError:
        return None
    err = _reprojection_errors(p, x[keep], u[keep])
    if not (np.isfinite(k).all() and np.isfinite(t).all() and np.isfinite(err).all()):
        return None
    return ColorProjection(k, r, t, mirrored, float(np.sqrt(np.mean(err**2))), int(keep.sum()))


def fit_color_projection(
    points: np.ndarray, pixels: np.ndarray, width: float, height: float, trim_rounds: int = 2
) -> ColorProjection:
    """Projection from Kinect camera space (N,3) to colour pixels (N,2) of a width x height frame.

    DLT with two rounds of outlier trimming (joints whose colour mapping went wrong); falls back
    to nominal Kinect v2 intrinsics (scaled) + PnP when the DLT is degenerate (too few distinct
    or near-coplanar points) or gives implausible intrinsics.
    """
    x = np.asarray(points, np.float64)
    u = np.asarray(pixels, np.float64)
    ok = np.isfinite(x).all(1) & np.isfinite(u).all(1) & (x[:, 2] > MIN_DEPTH_M)
    x, u = x[ok], u[ok]
    if len(x) < MIN_CAMERA_JOINTS:
        raise DatasetError(f"only {len(x)} usable joint(s) with colour coordinates; a camera needs "
                           f">= {MIN_CAMERA_JOINTS}")
    proj = _dlt_camera(x, u, width, trim_rounds)
    if proj is not None and _plausible(proj.K, width, height):
        return proj
    nominal = KINECT_V2_COLOR_K.copy()
    nominal[0] *= width / NTU_COLOR_SIZE[0]
    nominal[1] *= height / NTU_COLOR_SIZE[1]
    nominal[0, 2] = (KINECT_V2_COLOR_K[0, 2] + 0.5) * width / NTU_COLOR_SIZE[0] - 0.5
    nominal[1, 2] = (KINECT_V2_COLOR_K[1, 2] + 0.5) * height / NTU_COLOR_SIZE[1] - 0.5
    return _nominal_projection(x, u, nominal)


def _scale_color(xy: np.ndarray, width: int, height: int) -> np.ndarray:
    """NTU colour pixels (1920x1080) -> pixels of the ingested frame (pixel-centre convention)."""
    s = np.array([width / NTU_COLOR_SIZE[0], height / NTU_COLOR_SIZE[1]])
    return (np.asarray(xy, np.float64) + 0.5) * s - 0.5


def _frames(a: np.ndarray, t_len: int) -> np.ndarray:
    """Align a per-frame array to the video's length (NTU skeleton and video counts can differ)."""
    if len(a) >= t_len:
        return a[:t_len]
    pad = np.full((t_len - len(a),) + a.shape[1:], np.nan if a.dtype.kind == "f" else 0, a.dtype)
    return np.concatenate([a, pad])


def select_bodies(bodies: list[BodyTrack], max_bodies: int, min_motion_ratio: float = 0.05,
                  min_frames: int = 2) -> list[BodyTrack]:
    """The main 1-2 people: the most-moving bodies, minus Kinect's near-static false bodies.

    A body is kept if seen in >= min_frames frames and it moves at least ``min_motion_ratio`` as
    much as the main actor (furniture mistaken for a body has ~zero motion; a passive partner in a
    mutual action still sways and gestures).
    """
    if not bodies:
        return []
    need = min(min_frames, max(b.num_present for b in bodies))  # a 1-frame clip keeps its bodies
    seen = [b for b in bodies if b.num_present >= need]
    ranked = main_bodies(NTUSkeleton("", 0, seen), max_bodies=max(len(seen), 1))
    top = ranked[0].motion_energy()
    kept = [ranked[0]] + [b for b in ranked[1:] if b.motion_energy() >= min_motion_ratio * top]
    return kept[:max_bodies]


def _missing_skeleton(skeleton_path, video: str | None) -> DatasetError:
    if video:
        stem = Path(str(video)).name.split(".")[0]
        stem = stem[:-4] if stem.endswith("_rgb") else stem
        expected = f"nturgb+d_skeletons/{stem}.skeleton"
    else:
        expected = "nturgb+d_skeletons/<video name without _rgb.avi>.skeleton"
    where = f"{skeleton_path} does not exist" if skeleton_path else "none is recorded for this video"
    return DatasetError(
        f"pose4d backend 'ntu-skeleton' needs the video's NTU .skeleton file ({expected}), but {where}; "
        "put NTU's skeleton files under the dataset root, or use pose4d.backend=mediapipe"
    )


def estimate_from_ntu_skeleton(
    skeleton_path: str | Path | None,
    frames_shape: tuple[int, ...],
    body_model,
    max_bodies: int = 2,
    *,
    fit: FitConfig | None = None,
    video: str | None = None,
) -> PoseResult:
    """SMPL-H tracks (colour-camera OpenCV frame) + camera for an NTU video from its .skeleton.

    frames_shape (T,H,W,3) is the ingested video's shape: the camera is expressed for that frame
    size; tracks have T frames (a skeleton with fewer frames leaves the rest invalid). ``video``
    (id or path) only names the expected skeleton file in errors.
    """
    if not skeleton_path or not Path(skeleton_path).is_file():
        raise _missing_skeleton(skeleton_path, video)
    t_len, height, width = (int(v) for v in frames_shape[:3])
    skel = read_ntu_skeleton(skeleton_path)
    bodies = select_bodies([b for b in skel.bodies if b.num_present > 0], max_bodies)
    if not bodies:
        raise NoPersonError(f"{skeleton_path}: no person found (the skeleton file has no bodies in any frame)")
    joints = [_frames(b.joints, t_len).astype(np.float64) for b in bodies]  # (T,25,3) each
    pixels = [_scale_color(_frames(b.color_xy, t_len), width, height) for b in bodies]
    here = [k for k, j in enumerate(joints) if np.isfinite(j[..., 0]).any()]  # seen within the video
    if not here:
        raise NoPersonError(f"{skeleton_path}: no person found in the video's {t_len} frames")
    joints, pixels = [joints[k] for k in here], [pixels[k] for k in here]
    try:
        proj = fit_color_projection(np.concatenate([j.reshape(-1, 3) for j in joints]),
                                    np.concatenate([p.reshape(-1, 2) for p in pixels]), width, height)
    except DatasetError as err:
        raise DatasetError(f"{skeleton_path}: {err}") from None
    k = proj.K
    camera = Camera(k[0, 0], k[1, 1], k[0, 2], k[1, 2], width, height)
    mapping = mapping_arrays(NTU_TO_SMPLH)
    rest = body_model.rest_joints()
    tracks, boxes = [], np.full((len(joints), t_len, 4), np.nan, np.float32)
    diag = {"ntu_bodies": float(len(joints)), "ntu_mirrored": float(proj.mirrored),
            "ntu_camera_reproj_px": proj.rms_px, "ntu_camera_nominal": float(proj.source == "nominal"),
            "ntu_fx": float(k[0, 0])}
    for i, (jk, px) in enumerate(zip(joints, pixels)):
        if proj.mirrored:  # the reflected body's left is the person's right
            jk, px = jk[:, _SWAP], px[:, _SWAP]
        cam = proj.to_camera_frame(jk)
        present = np.isfinite(cam).all(-1).all(-1)
        conf = np.where(present[:, None], 1.0, 0.0) * np.ones((1, NTU_JOINTS))
        track, terms = fit_track(rest, np.nan_to_num(px), conf, camera, mapping, kp3d=np.nan_to_num(cam),
                                 absolute_3d=True, track_id=i, cfg=fit)
        track.valid &= present
        tracks.append(track)
        if present.any():
            lo, hi = np.min(px[present], axis=1), np.max(px[present], axis=1)
            margin = BOX_MARGIN * (hi - lo).max(axis=1, keepdims=True)
            boxes[i, present] = np.c_[lo - margin, hi + margin]
        diag[f"track{i}_reproj"] = terms.get("reproj", float("nan"))
        diag[f"track{i}_joint_err_m"] = float(np.sqrt(terms.get("structure_3d", float("nan"))))
    return PoseResult(tracks, camera, boxes, diag)
