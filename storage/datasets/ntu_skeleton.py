"""NTU RGB+D ``.skeleton`` files (Kinect v2 joints) as per-body tracks.

Text format, one value group per line::

    <frame count>
    per frame:   <body count>
      per body:  bodyID clipedEdges handLeftConfidence handLeftState handRightConfidence
                 handRightState isResticted leanX leanY trackingState
                 <joint count (25)>
                 25 x: x y z depthX depthY colorX colorY orientationW orientationX orientationY
                       orientationZ trackingState

Bodies are matched across frames by their Kinect ``bodyID``. The pose backend that fits SMPL-H to
these joints needs whole tracks, hence one :class:`BodyTrack` per body with NaN where it is absent.
Kinect also reports spurious "bodies" (furniture, noise) that barely move; :func:`main_bodies`
keeps the ones with the most motion.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from anonymask.core.errors import DatasetError

NUM_JOINTS = 25
#: Kinect v2 joint order used by NTU
JOINT_NAMES = (
    "spine_base", "spine_mid", "neck", "head", "shoulder_left", "elbow_left", "wrist_left", "hand_left",
    "shoulder_right", "elbow_right", "wrist_right", "hand_right", "hip_left", "knee_left", "ankle_left",
    "foot_left", "hip_right", "knee_right", "ankle_right", "foot_right", "spine_shoulder", "hand_tip_left",
    "thumb_left", "hand_tip_right", "thumb_right",
)  # fmt: skip
_BODY_FIELDS = 10
_JOINT_FIELDS = 12


@dataclass
class BodyTrack:
    """One tracked body. ``joints`` in metres (camera space), ``color_xy`` in RGB-frame pixels."""

    body_id: str
    joints: np.ndarray  # (T, 25, 3) float32, NaN where absent
    color_xy: np.ndarray  # (T, 25, 2) float32, NaN where absent
    present: np.ndarray  # (T,) bool

    @property
    def num_present(self) -> int:
        return int(self.present.sum())

    def motion_energy(self) -> float:
        """Sum over joints and axes of the temporal std of the joint positions (0 if seen once)."""
        pts = self.joints[self.present]
        if len(pts) < 2:
            return 0.0
        return float(np.std(pts, axis=0).sum())


@dataclass
class NTUSkeleton:
    path: str
    num_frames: int
    bodies: list[BodyTrack] = field(default_factory=list)


class _Lines:
    def __init__(self, path: Path, text: str):
        self.path = path
        self.lines = text.splitlines()
        self.i = 0

    def error(self, reason: str, lineno: int | None = None) -> DatasetError:
        n = self.i if lineno is None else lineno
        return DatasetError(f"{self.path}:{n}: {reason}")

    def next_values(self, expected: int, what: str) -> list[str]:
        if self.i >= len(self.lines):
            raise self.error(f"file ends early (truncated?): expected {what}", len(self.lines))
        line = self.lines[self.i]
        self.i += 1
        vals = line.split()
        if len(vals) != expected:
            raise self.error(f"expected {what} ({expected} value(s)), got {len(vals)}: {line[:80]!r}")
        return vals

    def next_floats(self, expected: int, what: str) -> list[float]:
        vals = self.next_values(expected, what)
        try:
            out = [float(v) for v in vals]
        except ValueError:
            raise self.error(f"{what} has a non-numeric value: {' '.join(vals)[:80]!r}") from None
        if not all(np.isfinite(out[:7])):
            raise self.error(f"{what} has a non-finite coordinate: {' '.join(vals)[:80]!r}")
        return out

    def next_int(self, what: str) -> int:
        (v,) = self.next_values(1, what)
        try:
            n = int(v)
        except ValueError:
            raise self.error(f"expected {what} (an integer), got {v!r}") from None
        if n < 0:
            raise self.error(f"negative {what}: {n}")
        return n


def read_ntu_skeleton(path: str | Path) -> NTUSkeleton:
    """Parse a ``.skeleton`` file; truncated or garbled files raise DatasetError with the line."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise DatasetError(f"{path}: skeleton file does not exist") from None
    except UnicodeDecodeError:
        raise DatasetError(f"{path}: not a text file (expected an NTU .skeleton file)") from None
    src = _Lines(path, text)
    num_frames = src.next_int("frame count")
    tracks: dict[str, dict[int, tuple[np.ndarray, np.ndarray]]] = {}
    for t in range(num_frames):
        num_bodies = src.next_int(f"body count of frame {t}")
        for _ in range(num_bodies):
            body_id = src.next_values(_BODY_FIELDS, "a body line")[0]
            num_joints = src.next_int("joint count")
            if num_joints != NUM_JOINTS:
                raise src.error(f"expected {NUM_JOINTS} joints, got {num_joints}")
            arr = np.asarray([src.next_floats(_JOINT_FIELDS, "joint line") for _ in range(NUM_JOINTS)])
            frames = tracks.setdefault(body_id, {})
            if t in frames:
                raise src.error(f"body {body_id} appears twice in frame {t}")
            frames[t] = (arr[:, 0:3], arr[:, 5:7])
    rest = [k for k, line in enumerate(src.lines[src.i :], start=src.i + 1) if line.strip()]
    if rest:
        raise src.error(f"unexpected content after the last of {num_frames} frames", rest[0])
    bodies = []
    for body_id, frames in tracks.items():
        joints = np.full((num_frames, NUM_JOINTS, 3), np.nan, np.float32)
        color = np.full((num_frames, NUM_JOINTS, 2), np.nan, np.float32)
        present = np.zeros(num_frames, bool)
        for t, (xyz, cxy) in frames.items():
            joints[t], color[t], present[t] = xyz, cxy, True
        bodies.append(BodyTrack(body_id, joints, color, present))
    return NTUSkeleton(str(path), num_frames, bodies)


def read_body_tracks(path: str | Path) -> list[np.ndarray]:
    """Per body, its joints (n_present, 25, 3) over the frames where it is present (no NaN).

    The compact form the skeleton models train on (``models.skeleton.data`` uses it as reader).
    """
    return [b.joints[b.present] for b in read_ntu_skeleton(path).bodies]


def main_bodies(skeleton: NTUSkeleton, max_bodies: int = 2) -> list[BodyTrack]:
    """The ``max_bodies`` bodies with the most motion (ties: first seen first).

    NTU actions involve one or two people; extra Kinect bodies are usually static false
    detections, which have (near) zero motion energy.
    """
    order = sorted(range(len(skeleton.bodies)), key=lambda k: (-skeleton.bodies[k].motion_energy(), k))
    return [skeleton.bodies[k] for k in order[:max_bodies]]


def write_ntu_skeleton(
    path: str | Path,
    joints: np.ndarray,
    color_xy: np.ndarray | None = None,
    body_ids: list[str] | None = None,
) -> Path:
    """Write (M,T,25,3) joints (NaN = body absent in that frame) in the NTU text format.

    Fields the project does not use are written with plausible constants. Used to build test
    and demo data in the real format.
    """
    joints = np.asarray(joints, np.float64)
    if joints.ndim != 4 or joints.shape[2:] != (NUM_JOINTS, 3):
        raise ValueError(f"joints must be (M,T,{NUM_JOINTS},3), got {joints.shape}")
    m, t = joints.shape[:2]
    if color_xy is None:
        color_xy = 960 + 400 * joints[..., :2] * [1, -1]
    ids = body_ids or [str(72057594037927936 + 1000 + k) for k in range(m)]
    lines = [str(t)]
    for f in range(t):
        here = [k for k in range(m) if not np.isnan(joints[k, f]).any()]
        lines.append(str(len(here)))
        for k in here:
            lines.append(f"{ids[k]} 0 1 1 1 1 0 0.01 0.02 2")
            lines.append(str(NUM_JOINTS))
            for j in range(NUM_JOINTS):
                x, y, z = joints[k, f, j]
                cx, cy = color_xy[k, f, j]
                dx, dy = 256 + 100 * x, 212 - 100 * y
                lines.append(f"{x:.7g} {y:.7g} {z:.7g} {dx:.7g} {dy:.7g} {cx:.7g} {cy:.7g} 1 0 0 0 2")
    path = Path(path)
    path.write_text("\n".join(lines) + "\n")
    return path
