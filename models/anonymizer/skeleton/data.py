"""Skeleton sequences for the anonymizer and its classifiers: conventions, normalisation, splits.

Conventions: one sequence is an array (T, J, 3) float32 of joint positions in metres (a batch is
(B, T, J, 3)); J = 25 for NTU Kinect joints, 22 (body) or 52 (with fingers) for SMPL-H joints of
pose tracks. Joint order follows :mod:`anonymask.models.anonymizer.skeleton.graphs`.

Vertical axis: y in both sources (up in the Kinect frame of NTU, down in the OpenCV camera frame of
the pose tracks), so ``up_axis=1`` aligns either; keep one source per experiment. For SMPL-H tracks
use the 22 body joints (:func:`body_joints`): finger joints of monocular fits are mostly noise.

Normalisation removes only what says nothing about the person: where the camera stood (absolute
position) and, optionally, which way the body faces. It keeps the scale: bone lengths and
proportions are genuine identity cues, so an attacker must be allowed to use them and the anonymizer
must learn to remove them. Every normalisation returns its parameters so it can be undone (the
pipeline stage puts anonymized joints back where the person stood).

Splits for re-identification: a re-ID classifier can only name subjects it has seen, so train and
test must contain the SAME subjects. Split by sequence (NTU: by repetition or camera), never by
subject; :func:`split_by_sequence` stratifies per (subject, action).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from anonymask.core.errors import DatasetError

# ----------------------------------------------------------------------------- normalisation


def normalize_sequence(
    x: np.ndarray,
    root_joint: int = 0,
    *,
    center: str = "mean",
    align_hips: tuple[int, int] | None = None,
    up_axis: int = 1,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Centre a sequence (T,J,3) or a batch (B,T,J,3) on its root joint; keep bone lengths.

    center: "mean" subtracts the root's mean position over the sequence (the trajectory stays, it
    is part of the motion), "first" the root at frame 0, "frame" the root at every frame (removes
    the trajectory too). align_hips=(left, right) also rotates about ``up_axis`` so the hip line
    points along +x at the mean pose: views from different cameras then look alike.

    Returns ``(x_norm, params)`` with ``x_norm = (x - offset) @ rotation.T``; undo it with
    :func:`denormalize_sequence`.
    """
    x = np.asarray(x)
    if x.ndim not in (3, 4) or x.shape[-1] != 3:
        raise ValueError(f"expected (T,J,3) or (B,T,J,3) joints, got shape {x.shape}")
    if not 0 <= root_joint < x.shape[-2]:
        raise ValueError(f"root joint {root_joint} outside 0..{x.shape[-2] - 1}")
    xd = x.astype(np.float64)
    root = xd[..., :, root_joint : root_joint + 1, :]  # (..., T, 1, 3)
    if center == "mean":
        offset = root.mean(axis=-3, keepdims=True)
    elif center == "first":
        offset = root[..., :1, :, :]
    elif center == "frame":
        offset = root
    else:
        raise ValueError(f"center must be 'mean', 'first' or 'frame', not {center!r}")
    lead = x.shape[:-3]
    rotation = np.broadcast_to(np.eye(3), (*lead, 3, 3)).copy()
    if align_hips is not None:
        left, right = align_hips
        across = (xd[..., :, left, :] - xd[..., :, right, :]).mean(axis=-2)  # (..., 3)
        a, b = [i for i in range(3) if i != up_axis]
        angle = np.arctan2(across[..., b], across[..., a])  # angle of the hip line in the a-b plane
        c, s = np.cos(-angle), np.sin(-angle)
        rotation[..., a, a], rotation[..., a, b] = c, -s
        rotation[..., b, a], rotation[..., b, b] = s, c
    centred = xd - offset
    out = np.einsum("...tjk,...ik->...tji", centred, rotation)
    return out.astype(np.float32), {"offset": offset.astype(np.float32), "rotation": rotation.astype(np.float32)}


def denormalize_sequence(x_norm: np.ndarray, params: dict[str, np.ndarray]) -> np.ndarray:
    """Invert :func:`normalize_sequence` (works on sequences of a different length when the
    offset is per sequence, e.g. after an anonymizer that keeps T)."""
    x = np.einsum("...tji,...ik->...tjk", np.asarray(x_norm, np.float64), params["rotation"].astype(np.float64))
    return (x + params["offset"]).astype(np.float32)


def body_joints(x: np.ndarray) -> np.ndarray:
    """The 22 SMPL body joints of SMPL-H joints (..., 52, 3); other joint sets pass through."""
    x = np.asarray(x)
    return x[..., :22, :] if x.shape[-2] == 52 else x


# ----------------------------------------------------------------------------- fixed length


def to_length(x: np.ndarray, length: int, mode: str = "crop", start: int | None = None) -> np.ndarray:
    """Bring a sequence (T,J,3) to ``length`` frames.

    "crop": a window of ``length`` frames (centred, or from ``start``); shorter sequences are padded
    by repeating their last frame. Keeps the real speed of the motion (tempo is an identity cue).
    "resample": linear interpolation of the whole sequence onto ``length`` frames (changes tempo).
    """
    x = np.asarray(x, np.float32)
    t = x.shape[0]
    if t == 0:
        raise ValueError("empty sequence")
    if mode == "resample":
        if t == length:
            return x.copy()
        pos = np.linspace(0.0, t - 1, length)
        lo = np.floor(pos).astype(int)
        hi = np.minimum(lo + 1, t - 1)
        w = (pos - lo)[:, None, None].astype(np.float32)
        return (1 - w) * x[lo] + w * x[hi]
    if mode != "crop":
        raise ValueError(f"mode must be 'crop' or 'resample', not {mode!r}")
    if t >= length:
        s = (t - length) // 2 if start is None else int(np.clip(start, 0, t - length))
        return x[s : s + length].copy()
    pad = np.repeat(x[-1:], length - t, axis=0)
    return np.concatenate([x, pad], axis=0)


# ----------------------------------------------------------------------------- dataset


@dataclass
class SkeletonArrays:
    """Fixed-length arrays of a dataset (what the trainers consume)."""

    x: np.ndarray  # (N, T, J, 3) float32
    action: np.ndarray  # (N,) int64
    subject: np.ndarray  # (N,) int64, contiguous 0..K-1
    gender: np.ndarray  # (N,) int64, -1 where unknown

    def subset(self, idx: np.ndarray) -> SkeletonArrays:
        return SkeletonArrays(self.x[idx], self.action[idx], self.subject[idx], self.gender[idx])

    def __len__(self) -> int:
        return len(self.x)


class SkeletonDataset(Dataset):
    """Skeleton sequences with action, subject and gender labels.

    Sequences may differ in length; items come out at ``length`` frames (see :func:`to_length`),
    with a random window per item when ``random_crop`` (training) and the centred one otherwise.
    Subject ids (any hashables, e.g. NTU performer numbers) are mapped to contiguous indices
    (``subject_ids[i]`` is the original id of index i). Unknown genders are -1.
    """

    def __init__(
        self,
        sequences: Sequence[np.ndarray] | np.ndarray,
        actions: Sequence[int] | np.ndarray,
        subjects: Sequence[Any] | np.ndarray,
        genders: Sequence[int] | np.ndarray | None = None,
        *,
        length: int = 64,
        mode: str = "crop",
        random_crop: bool = False,
        normalize: bool = True,
        root_joint: int = 0,
        align_hips: tuple[int, int] | None = None,
        seed: int = 0,
        meta: list[dict[str, Any]] | None = None,
    ):
        n = len(sequences)
        for name, labels in (("actions", actions), ("subjects", subjects), ("genders", genders)):
            if labels is not None and len(labels) != n:
                raise ValueError(f"{name} has {len(labels)} entries for {n} sequences")
        if n == 0:
            raise ValueError("no sequences")
        joints = {np.shape(s)[1:] for s in sequences}
        if len(joints) != 1 or next(iter(joints))[-1:] != (3,) or len(next(iter(joints))) != 2:
            raise ValueError(f"all sequences must be (T, J, 3) with the same J, got {sorted(joints)}")
        self.sequences = []
        for s in sequences:
            s = np.asarray(s, np.float32)
            if normalize:
                s, _ = normalize_sequence(s, root_joint, align_hips=align_hips)
            self.sequences.append(s)
        self.num_joints = self.sequences[0].shape[1]
        self.actions = np.asarray(actions, np.int64)
        self.subject_ids = sorted(set(subjects))
        index = {s: i for i, s in enumerate(self.subject_ids)}
        self.subjects = np.array([index[s] for s in subjects], np.int64)
        self.genders = np.full(n, -1, np.int64) if genders is None else np.asarray(genders, np.int64)
        self.length = length
        self.mode = mode
        self.random_crop = random_crop
        self.meta = meta if meta is not None else [{} for _ in range(n)]
        self._rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return len(self.sequences)

    def _window(self, i: int, random: bool) -> np.ndarray:
        s = self.sequences[i]
        start = None
        if random and self.mode == "crop" and len(s) > self.length:
            start = int(self._rng.integers(0, len(s) - self.length + 1))
        return to_length(s, self.length, self.mode, start)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int, int, int]:
        x = self._window(i, self.random_crop)
        return torch.from_numpy(x), int(self.actions[i]), int(self.subjects[i]), int(self.genders[i])

    def arrays(self, idx: Sequence[int] | np.ndarray | None = None) -> SkeletonArrays:
        """Stacked centred windows of the sequences ``idx`` (all by default)."""
        idx = np.arange(len(self)) if idx is None else np.asarray(idx, int)
        x = np.stack([self._window(i, False) for i in idx]) if len(idx) else np.zeros((0, self.length, self.num_joints, 3), np.float32)
        return SkeletonArrays(x, self.actions[idx], self.subjects[idx], self.genders[idx])


# ----------------------------------------------------------------------------- splits


def split_by_sequence(
    subjects: Sequence[Any] | np.ndarray,
    actions: Sequence[int] | np.ndarray | None = None,
    test_fraction: float = 0.25,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Train/test indices with every subject on both sides (what re-identification needs).

    Within each (subject, action) group, ``round(n * test_fraction)`` sequences (at least 1, at
    most n-1) go to test; single-sequence groups stay in train.
    """
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    subjects = np.asarray(subjects)
    actions = np.zeros(len(subjects), int) if actions is None else np.asarray(actions)
    rng = np.random.default_rng(seed)
    groups: dict[tuple[Any, Any], list[int]] = {}
    for i, key in enumerate(zip(subjects.tolist(), actions.tolist())):
        groups.setdefault(key, []).append(i)
    train, test = [], []
    for key in sorted(groups, key=repr):
        members = np.array(groups[key])
        rng.shuffle(members)
        k = min(max(int(round(len(members) * test_fraction)), 1), len(members) - 1)
        test += members[:k].tolist()
        train += members[k:].tolist()
    return np.sort(np.array(train, int)), np.sort(np.array(test, int))


def split_by_values(values: Sequence[Any], test_values: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Train/test indices by a metadata field, e.g. NTU repetition: test = sequences whose value
    is in ``test_values`` (``split_by_values([m['replication'] for m in meta], [2])``)."""
    test_set = set(test_values)
    is_test = np.array([v in test_set for v in values], bool)
    return np.flatnonzero(~is_test), np.flatnonzero(is_test)


# ----------------------------------------------------------------------------- NTU RGB+D

_NTU_NAME = re.compile(r"^S(\d{3})C(\d{3})P(\d{3})R(\d{3})A(\d{3})$")


def parse_ntu_name(path: str | Path) -> dict[str, int]:
    """Setup, camera, performer, replication and action (1-based, as in the name) of an NTU file
    named SsssCcccPpppRrrrAaaa[.skeleton]. The performer is the subject id."""
    stem = Path(path).name.split(".")[0]
    m = _NTU_NAME.match(stem)
    if not m:
        raise DatasetError(f"{path}: not an NTU RGB+D name (expected SsssCcccPpppRrrrAaaa, e.g. S001C001P001R001A001)")
    setup, camera, performer, replication, action = (int(g) for g in m.groups())
    return {"setup": setup, "camera": camera, "performer": performer, "replication": replication, "action": action}


_MALE = {"m", "male", "man", "0"}
_FEMALE = {"f", "female", "woman", "1"}


def load_genders_csv(path: str | Path) -> dict[int, int]:
    """Performer -> gender (0 male, 1 female) from a user's CSV with columns ``performer`` (or
    ``subject``) and ``gender`` (M/F, male/female, 0/1).

    NTU RGB+D names carry no gender and the dataset ships none with the skeletons, so gender
    experiments on NTU need this file from the user; performer ids may be written 1 or P001.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: gender file not found")
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        cols = {c.strip().lower(): c for c in (reader.fieldnames or [])}
        key = cols.get("performer") or cols.get("subject")
        gcol = cols.get("gender")
        if key is None or gcol is None:
            raise DatasetError(f"{path}: needs columns 'performer' (or 'subject') and 'gender', found {reader.fieldnames}")
        out: dict[int, int] = {}
        for line, row in enumerate(reader, start=2):
            raw_id = (row[key] or "").strip().upper().lstrip("P")
            raw_g = (row[gcol] or "").strip().lower()
            if not raw_id.isdigit():
                raise DatasetError(f"{path}:{line}: bad performer id {row[key]!r}")
            if raw_g in _MALE:
                g = 0
            elif raw_g in _FEMALE:
                g = 1
            else:
                raise DatasetError(f"{path}:{line}: bad gender {row[gcol]!r} (use M/F, male/female or 0/1)")
            pid = int(raw_id)
            if pid in out and out[pid] != g:
                raise DatasetError(f"{path}:{line}: performer {pid} listed twice with different genders")
            out[pid] = g
    return out


@dataclass
class NTULoadReport:
    """What :func:`from_ntu_skeletons` skipped, so callers can log it."""

    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)


def _pick_body(bodies: Sequence[np.ndarray], path: Path) -> np.ndarray:
    # The performer is the body that moves most (NTU's Kinect also tracks passers-by and noise).
    bodies = [np.asarray(b, np.float32) for b in bodies if b is not None and len(b)]
    if not bodies:
        raise DatasetError(f"{path}: no body in the file")
    for b in bodies:
        if b.ndim != 3 or b.shape[1:] != (25, 3):
            raise DatasetError(f"{path}: body track has shape {b.shape}, expected (T, 25, 3)")
    motion = [float(np.nan_to_num(b).std(axis=0).sum()) if len(b) > 1 else 0.0 for b in bodies]
    return bodies[int(np.argmax(motion))]


def from_ntu_skeletons(
    paths: Sequence[str | Path],
    *,
    genders_csv: str | Path | None = None,
    length: int = 64,
    mode: str = "crop",
    reader: Callable[[Path], Sequence[np.ndarray]] | None = None,
    min_frames: int = 2,
    skip_bad: bool = False,
    report: NTULoadReport | None = None,
    **dataset_options: Any,
) -> SkeletonDataset:
    """A :class:`SkeletonDataset` from NTU RGB+D ``.skeleton`` files.

    Subjects are the performers in the file names (SsssCcccPpppRrrrAaaa), actions the 0-based action
    numbers (A001 -> 0). Genders come from ``genders_csv`` (see :func:`load_genders_csv`); every
    performer must be listed there. Each file gives the body that moves most. ``reader`` maps a path
    to its per-body (T, 25, 3) joint tracks; by default the project's NTU skeleton parser.

    A bad name, an unreadable file, no body, wrong joints or too few frames raise
    :class:`DatasetError` naming the file; with ``skip_bad`` such files are left out and listed in
    ``report`` instead (a mismatched gender file always raises).
    """
    if reader is None:
        reader = _default_ntu_reader()
    genders_by_performer = load_genders_csv(genders_csv) if genders_csv is not None else None
    sequences, actions, subjects, genders, meta = [], [], [], [], []
    for p in paths:
        path = Path(p)
        try:
            info = parse_ntu_name(path)
            if not path.is_file():
                raise DatasetError(f"{path}: file not found")
            try:
                bodies = reader(path)
            except DatasetError:
                raise
            except Exception as exc:  # the parser's own failure, reworded with the file name
                raise DatasetError(f"{path}: cannot read skeleton file ({type(exc).__name__}: {exc})") from exc
            track = _pick_body(bodies, path)
            if len(track) < min_frames:
                raise DatasetError(f"{path}: {len(track)} frame(s), need at least {min_frames}")
            if not np.isfinite(track).all():
                raise DatasetError(f"{path}: joint coordinates contain NaN or inf")
        except DatasetError as exc:
            if not skip_bad:
                raise
            if report is not None:
                report.skipped.append((str(path), str(exc)))
            continue
        if genders_by_performer is not None:
            if info["performer"] not in genders_by_performer:
                raise DatasetError(
                    f"{genders_csv}: no gender for performer P{info['performer']:03d} (needed by {path.name})"
                )
            genders.append(genders_by_performer[info["performer"]])
        sequences.append(track)
        actions.append(info["action"] - 1)
        subjects.append(info["performer"])
        meta.append({**info, "path": str(path)})
    if not sequences:
        raise DatasetError(f"no usable NTU skeleton files among {len(paths)} path(s)")
    dataset_options.setdefault("root_joint", 0)
    return SkeletonDataset(
        sequences, actions, subjects, genders if genders_by_performer is not None else None,
        length=length, mode=mode, meta=meta, **dataset_options,
    )


def _default_ntu_reader() -> Callable[[Path], Sequence[np.ndarray]]:
    try:
        from anonymask.storage.datasets import ntu_skeleton
    except ImportError as exc:  # pragma: no cover - depends on the checkout
        raise DatasetError("NTU skeleton parser anonymask.storage.datasets.ntu_skeleton is not available") from exc
    return ntu_skeleton.read_body_tracks  # type: ignore[attr-defined]
