"""Where the person pixels that the audit's ground-truth check counts as shown come from.

A diagnostic for synthetic videos (ground truth), not part of the verdict. It splits the
person-caused leak (the audit's own rule and inputs: ``ground_truth.leaked_pixels``, a fill the
person did not cause excluded) into pixels *inside* the hole (the fill reproduced the person) and pixels
*outside* it, and describes the outside ones by their distance to the nearest removed or avatar
pixel and by the avatar joint nearest to them. The two call for different fixes: a fill problem,
a margin that is a pixel short, or a body part that neither the mask nor the fit found.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import cv2
import numpy as np

from anonymask.models.anonymizer.audit.ground_truth import leaked_pixels

#: upper edges (px, inclusive) of the distance bins for pixels outside the hole and the avatars
DISTANCE_BINS: tuple[int, ...] = (1, 2, 3, 8)

_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("hand", ("wrist", "index", "middle", "pinky", "ring", "thumb")),
    ("foot", ("ankle", "foot")),
    ("leg", ("knee", "hip")),
    ("arm", ("elbow", "shoulder", "collar")),
    ("head", ("head", "neck")),
    ("torso", ("pelvis", "spine")),
)


def joint_group(name: str) -> str:
    """The body part a joint name belongs to (hand, foot, leg, arm, head, torso)."""
    for group, keys in _GROUPS:
        if any(k in name for k in keys):
            return group
    return "other"


def distance_bin(d: float) -> str:
    """Label of the bin of ``DISTANCE_BINS`` holding distance ``d`` (px)."""
    lo = 0
    for hi in DISTANCE_BINS:
        if d <= hi:
            return f"{lo + 1}-{hi}px" if hi > lo + 1 else f"{hi}px"
        lo = hi
    return f">{DISTANCE_BINS[-1]}px"


@dataclass
class LeakAnatomy:
    """Counts over the frames added so far (``add_chunk``). ``joint_names``: the names of the
    rendered joints in ``render/joints2d`` order (the body model's layout: the caller's)."""

    joint_names: tuple[str, ...]
    person_px: int = 0  # distinguishable person pixels (the audit's denominator)
    in_hole: int = 0  # person-caused leaked pixels inside the hole: the fill shows the person
    outside: int = 0  # ... outside the hole and every avatar: nothing removed them
    by_distance: Counter = field(default_factory=Counter)  # outside pixels by distance to hole or avatar
    by_joint: Counter = field(default_factory=Counter)  # outside pixels by nearest avatar joint's part
    per_frame: dict[int, int] = field(default_factory=dict)

    @property
    def leaked(self) -> int:
        return self.in_hole + self.outside

    @property
    def share(self) -> float:
        """Leaked share of the distinguishable person pixels (the audit's ground-truth number)."""
        return self.leaked / self.person_px if self.person_px else 0.0

    def add_chunk(self, t0: int, raw: np.ndarray, out: np.ndarray, person: np.ndarray, background: np.ndarray,
                  avatar: np.ndarray, excused: np.ndarray | None, hole: np.ndarray,
                  joints2d: np.ndarray | None) -> None:
        """Frames t0.. as the audit's ground-truth check sees them (tasks/audit.py ``_gt_chunks``:
        (n,H,W,3) raw and output, (n,H,W) true person, the avatars as the check counts them,
        ``excused``: a fill the person did not cause, or None), plus the (n,H,W) hole and the
        avatars' rendered joints (n,N,J,2), NaN or 0 where none is drawn."""
        leaked, distinguishable = leaked_pixels(raw, out, np.asarray(person, bool), background,
                                                np.asarray(avatar, bool))
        if excused is not None:
            leaked &= ~np.asarray(excused, bool)
        self.person_px += int(distinguishable.sum())
        for k in np.flatnonzero(leaked.reshape(len(leaked), -1).any(1)):
            self._add_frame(t0 + int(k), leaked[k], np.asarray(hole[k], bool), np.asarray(avatar[k], bool),
                            None if joints2d is None else joints2d[k])

    def _add_frame(self, t: int, flags: np.ndarray, hole: np.ndarray, avatar: np.ndarray,
                   joints2d: np.ndarray | None) -> None:
        self.per_frame[t] = int(flags.sum())
        self.in_hole += int((flags & hole).sum())
        outside = flags & ~hole
        n_out = int(outside.sum())
        if not n_out:
            return
        self.outside += n_out
        covered = hole | avatar
        ys, xs = np.nonzero(outside)
        if covered.any():
            dist = cv2.distanceTransform((~covered).view(np.uint8), cv2.DIST_L2, 5)[ys, xs]
            self.by_distance.update(distance_bin(float(d)) for d in dist)
        else:
            self.by_distance["no hole or avatar"] += n_out
        self.by_joint.update(_nearest_parts(xs, ys, joints2d, self.joint_names))

    def worst_frames(self, k: int = 3) -> list[tuple[int, int]]:
        return sorted(self.per_frame.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


def _nearest_parts(xs: np.ndarray, ys: np.ndarray, joints2d: np.ndarray | None,
                   joint_names: tuple[str, ...]) -> list[str]:
    """The body part of the avatar joint nearest to each pixel ("no avatar" where none is drawn)."""
    if joints2d is None:
        return ["no avatar"] * len(xs)
    j = np.asarray(joints2d, np.float64).reshape(-1, 2)
    names = [joint_names[i % len(joint_names)] for i in range(len(j))]
    ok = np.isfinite(j).all(1) & (np.abs(j).sum(1) > 0)
    if not ok.any():
        return ["no avatar"] * len(xs)
    j, names = j[ok], [n for n, keep in zip(names, ok) if keep]
    d = np.hypot(xs[:, None] - j[None, :, 0], ys[:, None] - j[None, :, 1])
    return [joint_group(names[i]) for i in d.argmin(1)]
