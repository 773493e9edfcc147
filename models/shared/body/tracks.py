"""Per-person SMPL-H pose tracks and the pinhole camera they live in.

Everything is in the CAMERA frame, OpenCV convention (x right, y down, z forward), metres.
Rotations are axis-angle (Rodrigues) vectors, as smplx expects them.

The SMPL-H canonical body is y-up, faces +z, and its left side is +x. A person standing upright
in front of an OpenCV camera, facing it, needs ``global_orient = upright_orient()`` (a half turn
about x). ``upright_orient(yaw)`` also turns the person about their own vertical axis
(yaw = pi: seen from behind). Because smplx rotates the body about its rest pelvis joint ``J0``
and then adds ``transl``, the posed pelvis lands at ``J0 + transl``: to put the pelvis at point
``P`` use ``transl = P - J0`` (see ``BodyModel.transl_for``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

BODY_JOINT_NAMES: tuple[str, ...] = (
    "pelvis", "left_hip", "right_hip", "spine1", "left_knee", "right_knee", "spine2",
    "left_ankle", "right_ankle", "spine3", "left_foot", "right_foot", "neck", "left_collar",
    "right_collar", "head", "left_shoulder", "right_shoulder", "left_elbow", "right_elbow",
    "left_wrist", "right_wrist",
)
_FINGERS = ("index", "middle", "pinky", "ring", "thumb")
HAND_JOINT_NAMES: tuple[str, ...] = tuple(f"{f}{k}" for f in _FINGERS for k in (1, 2, 3))
JOINT_NAMES: tuple[str, ...] = (
    BODY_JOINT_NAMES
    + tuple(f"left_{n}" for n in HAND_JOINT_NAMES)
    + tuple(f"right_{n}" for n in HAND_JOINT_NAMES)
)
NUM_JOINTS = len(JOINT_NAMES)  # 52
NUM_BODY_JOINTS = 21  # body_pose joints (pelvis excluded)
#: the skeleton proper, pelvis to wrists (the finger joints follow the wrists): joints 0..21
NUM_SKELETON_JOINTS = NUM_BODY_JOINTS + 1
NUM_HAND_JOINTS = 15
NUM_BETAS = 10


def _parents() -> tuple[int, ...]:
    body = [-1, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 12, 13, 14, 16, 17, 18, 19]
    hands: list[int] = []
    for wrist in (20, 21):
        start = len(body) + len(hands)
        for f in range(5):
            base = start + 3 * f
            hands += [wrist, base, base + 1]
    return tuple(body + hands)


PARENTS: tuple[int, ...] = _parents()
JOINT_INDEX: dict[str, int] = {n: i for i, n in enumerate(JOINT_NAMES)}

# Extra surface keypoints smplx appends after the 52 joints (vertex picks, same ids for the real
# and the procedural model).
KEYPOINT_NAMES: tuple[str, ...] = (
    "nose", "right_eye", "left_eye", "right_ear", "left_ear",
    "left_big_toe", "left_small_toe", "left_heel", "right_big_toe", "right_small_toe", "right_heel",
    "left_thumb_tip", "left_index_tip", "left_middle_tip", "left_ring_tip", "left_pinky_tip",
    "right_thumb_tip", "right_index_tip", "right_middle_tip", "right_ring_tip", "right_pinky_tip",
)
GENDERS: tuple[str, ...] = ("neutral", "male", "female")


def upright_orient(yaw: float = 0.0) -> np.ndarray:
    """Axis-angle global_orient for an upright person facing an OpenCV camera.

    yaw turns the person about their own vertical axis (radians; positive turns the person
    towards their left, 0 faces the camera, pi shows their back).
    """
    # R = Rx(pi) @ Ry(yaw): canonical y-up/z-front -> camera y-down, facing -z (the camera).
    c, s = np.cos(yaw), np.sin(yaw)
    ry = np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])
    rx = np.diag([1.0, -1.0, -1.0])
    return rotmat_to_axis_angle(rx @ ry).astype(np.float32)


def rotmat_to_axis_angle(rot: np.ndarray) -> np.ndarray:
    """(..., 3, 3) rotation matrices -> (..., 3) axis-angle vectors (robust near 0 and pi)."""
    from scipy.spatial.transform import Rotation

    rot = np.asarray(rot, dtype=np.float64)
    flat = rot.reshape(-1, 3, 3)
    out = Rotation.from_matrix(flat).as_rotvec()
    return out.reshape(rot.shape[:-2] + (3,))


def axis_angle_to_rotmat(aa: np.ndarray) -> np.ndarray:
    """(..., 3) axis-angle -> (..., 3, 3) rotation matrices."""
    from scipy.spatial.transform import Rotation

    aa = np.asarray(aa, dtype=np.float64)
    out = Rotation.from_rotvec(aa.reshape(-1, 3)).as_matrix()
    return out.reshape(aa.shape[:-1] + (3, 3))


@dataclass
class Camera:
    """Pinhole camera, OpenCV intrinsics: pixel (u, v) = (fx x/z + cx, fy y/z + cy).

    Integer pixel coordinates are pixel CENTRES (OpenCV convention).
    """

    fx: float
    fy: float
    cx: float
    cy: float
    width: int
    height: int

    def __post_init__(self) -> None:
        self.fx, self.fy, self.cx, self.cy = (float(v) for v in (self.fx, self.fy, self.cx, self.cy))
        self.width, self.height = int(self.width), int(self.height)

    @property
    def K(self) -> np.ndarray:  # noqa: N802 - the usual name of the intrinsics matrix
        return np.array([[self.fx, 0.0, self.cx], [0.0, self.fy, self.cy], [0.0, 0.0, 1.0]])

    def project(self, points: np.ndarray) -> np.ndarray:
        """(..., 3) camera-frame points -> (..., 2) pixel coordinates."""
        p = np.asarray(points, dtype=np.float64)
        z = p[..., 2]
        u = self.fx * p[..., 0] / z + self.cx
        v = self.fy * p[..., 1] / z + self.cy
        return np.stack([u, v], axis=-1)

    def to_array(self) -> np.ndarray:
        return np.array([self.fx, self.fy, self.cx, self.cy, self.width, self.height], dtype=np.float64)

    @classmethod
    def from_array(cls, a: np.ndarray) -> Camera:
        a = np.asarray(a, dtype=np.float64).reshape(-1)
        return cls(a[0], a[1], a[2], a[3], int(round(a[4])), int(round(a[5])))

    @classmethod
    def from_fov(cls, width: int, height: int, fov_deg: float = 60.0) -> Camera:
        """Camera with square pixels, principal point at the image centre, horizontal FOV."""
        f = 0.5 * width / np.tan(np.radians(fov_deg) / 2.0)
        return cls(f, f, (width - 1) / 2.0, (height - 1) / 2.0, width, height)

    def scaled(self, factor: float) -> Camera:
        """Same camera for an image resized by factor (pixel-centre convention kept)."""
        return Camera(
            self.fx * factor, self.fy * factor,
            (self.cx + 0.5) * factor - 0.5, (self.cy + 0.5) * factor - 0.5,
            int(round(self.width * factor)), int(round(self.height * factor)),
        )


_TRACK_KEYS = ("global_orient", "body_pose", "left_hand_pose", "right_hand_pose", "transl")
_TRACK_DIMS = {"global_orient": 3, "body_pose": 63, "left_hand_pose": 45, "right_hand_pose": 45, "transl": 3}


@dataclass
class SMPLHTrack:
    """One person over T frames: SMPL-H parameters (axis-angle, float32) in the camera frame.

    Hand poses are ABSOLUTE finger rotations (zero = flat open hand), the same meaning with the
    procedural and the real model (the body model loads with flat_hand_mean=True).
    ``valid[t]`` False means the person is absent in frame t (parameters there are ignored).

    ``start``: the video frame of row 0. A track usually covers the whole video (``start`` 0); a
    compact one (``compact()``) covers only its own frames, so a long video whose people come and
    go holds (tracks x their own frames), not (tracks x video length) (docs/SCALING.md).
    ``window(a, b)`` gives any track over video frames a..b-1 whatever its rows cover.
    """

    track_id: int
    betas: np.ndarray
    global_orient: np.ndarray
    body_pose: np.ndarray
    left_hand_pose: np.ndarray
    right_hand_pose: np.ndarray
    transl: np.ndarray
    valid: np.ndarray = field(default=None)  # type: ignore[assignment]
    gender: str = "neutral"
    start: int = 0

    def __post_init__(self) -> None:
        self.track_id = int(self.track_id)
        self.start = int(self.start)
        if self.start < 0:
            raise ValueError(f"SMPLHTrack {self.track_id}: start {self.start} < 0")
        self.betas = np.asarray(self.betas, dtype=np.float32).reshape(-1)
        if self.betas.shape[0] < NUM_BETAS:
            self.betas = np.pad(self.betas, (0, NUM_BETAS - self.betas.shape[0]))
        t = None
        for key in _TRACK_KEYS:
            arr = np.asarray(getattr(self, key), dtype=np.float32)
            dim = _TRACK_DIMS[key]
            arr = arr.reshape(-1, dim) if arr.size else np.zeros((0, dim), np.float32)
            if t is None:
                t = arr.shape[0]
            elif arr.shape[0] != t:
                raise ValueError(f"SMPLHTrack {self.track_id}: {key} has {arr.shape[0]} frames, expected {t}")
            setattr(self, key, arr)
        if self.valid is None:
            self.valid = np.ones(t, dtype=bool)
        self.valid = np.asarray(self.valid, dtype=bool).reshape(-1)
        if self.valid.shape[0] != t:
            raise ValueError(f"SMPLHTrack {self.track_id}: valid has {self.valid.shape[0]} frames, expected {t}")
        if self.gender not in GENDERS:
            raise ValueError(f"SMPLHTrack {self.track_id}: gender {self.gender!r} not in {GENDERS}")

    @property
    def num_frames(self) -> int:
        """Rows held (from video frame ``start``)."""
        return int(self.transl.shape[0])

    @property
    def stop(self) -> int:
        """The video frame after the last row."""
        return self.start + self.num_frames

    def window(self, a: int, b: int) -> SMPLHTrack:
        """The person over video frames a..b-1 (``start`` a): rows outside what this track holds
        repeat its nearest row and are not ``valid``."""
        a, b = int(a), int(b)
        if b < a:
            raise ValueError(f"SMPLHTrack {self.track_id}: window {a}..{b} is inverted")
        n = self.num_frames
        if n == 0:
            return SMPLHTrack.rest(self.track_id, b - a, self.betas, self.gender).invalid().at(a)
        rows = np.arange(a, b) - self.start
        out = self.slice(np.clip(rows, 0, n - 1))
        out.valid &= (rows >= 0) & (rows < n)
        return out.at(a)

    def compact(self) -> SMPLHTrack:
        """Only the rows from the first to the last valid frame (``start`` moved to match)."""
        idx = np.flatnonzero(self.valid)
        a, b = (int(idx[0]), int(idx[-1]) + 1) if idx.size else (0, 0)
        return self.slice(slice(a, b)).at(self.start + a)

    def at(self, start: int) -> SMPLHTrack:
        """This track with row 0 at video frame ``start`` (in place; returns self)."""
        self.start = int(start)
        return self

    def invalid(self) -> SMPLHTrack:
        """This track with no valid frame (in place; returns self)."""
        self.valid[:] = False
        return self

    @classmethod
    def rest(cls, track_id: int, num_frames: int, betas: np.ndarray | None = None,
             gender: str = "neutral") -> SMPLHTrack:
        """A track in the rest (T) pose, identity orientation, zero translation: fill it in."""
        z = np.zeros
        return cls(
            track_id, np.zeros(NUM_BETAS) if betas is None else betas,
            z((num_frames, 3)), z((num_frames, 63)), z((num_frames, 45)), z((num_frames, 45)),
            z((num_frames, 3)), np.ones(num_frames, bool), gender,
        )

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Plain numeric arrays (Zarr friendly); gender is stored as an int8 code in GENDERS."""
        out = {key: getattr(self, key).copy() for key in _TRACK_KEYS}
        out["betas"] = self.betas.copy()
        out["valid"] = self.valid.copy()
        out["gender_code"] = np.array([GENDERS.index(self.gender)], dtype=np.int8)
        out["start"] = np.array([self.start], dtype=np.int64)
        return out

    @classmethod
    def from_arrays(cls, track_id: int, arrays: dict[str, np.ndarray]) -> SMPLHTrack:
        gender = arrays.get("gender", None)
        if gender is None:
            code = arrays.get("gender_code", np.array([0]))
            gender = GENDERS[int(np.asarray(code).reshape(-1)[0])]
        return cls(
            track_id, np.asarray(arrays["betas"]),
            *(np.asarray(arrays[k]) for k in _TRACK_KEYS),
            valid=np.asarray(arrays["valid"]) if "valid" in arrays else None,
            gender=str(gender), start=int(np.asarray(arrays.get("start", [0])).reshape(-1)[0]),
        )

    def slice(self, frames: slice | np.ndarray | list[int]) -> SMPLHTrack:
        """The same person over a subset of rows (a slice or an index/bool array); row-relative:
        the result starts at 0 (``window`` selects by video frame)."""
        sel = frames if isinstance(frames, slice) else np.asarray(frames)
        return SMPLHTrack(
            self.track_id, self.betas.copy(),
            *(getattr(self, k)[sel].copy() for k in _TRACK_KEYS),
            valid=self.valid[sel].copy(), gender=self.gender,
        )


def hold_edge_poses(track: SMPLHTrack, frames: int, shots: list[tuple[int, int]],
              yielded: np.ndarray | None = None) -> SMPLHTrack:
    """``track`` with its first pose held ``frames`` frames before its first valid frame and its
    last pose ``frames`` frames after its last one, within the shot each end lies in (``shots``:
    [start, stop) video frames; never across a cut or past the video).

    Why: the segment stage widens each person's hole by ``segment.unflicker`` frames in time (a
    person detected a frame late is still removed in the frame before), and without an avatar
    there the person would be erased from that frame, not replaced. A track with no valid frame
    is returned as it is. ``yielded`` ((T,) bool, video frames): frames where this body's avatar
    yields to another one that covers the person (models/anonymizer/pose/estimate.py ``yield_to_face``,
    ``yield_parts_to_face``); the hold stops there (a body found on a close-up's person a few frames
    late would otherwise be held back over the face avatar, in the frames where it had yielded)."""
    idx = np.flatnonzero(track.valid)
    if frames <= 0 or idx.size == 0:
        return track
    first, last = track.start + int(idx[0]), track.start + int(idx[-1])

    def shot_of(t: int) -> tuple[int, int]:
        return next(((a, b) for a, b in shots if a <= t < b), (t, t + 1))

    a = max(shot_of(first)[0], first - int(frames))
    b = min(shot_of(last)[1], last + 1 + int(frames))
    if yielded is not None:
        y = np.asarray(yielded, bool)
        before = np.flatnonzero(y[a:first])
        after = np.flatnonzero(y[last + 1 : b])
        if before.size:
            a = a + int(before[-1]) + 1
        if after.size:
            b = last + 1 + int(after[0])
    # rows outside the compact track repeat its nearest row: the first or last pose, held
    out = track.compact().window(a, b)
    out.valid[: first - a] = True
    out.valid[last + 1 - a :] = True
    return out
