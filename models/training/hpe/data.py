"""Person crops with 2-D keypoints for the pose model, cut from the synthetic dataset's ground truth.

One sample = one person in one frame: a box around the person (the union of the box of its
body joints and of its mask, grown by ``padding``, widened to the input's aspect ratio) is
resampled to the model's input size with one affine map, and the keypoints go through the same
map. Crops that reach outside the frame are padded with black.

Keypoints come from SMPL-H's 52 joints (``gt/<id>.npz: joints2d``). Two subsets:

``mpii16`` (default; the paper trains and tests on MPII), MPII's order and names -> SMPL-H joint:
  r/l ankle, knee, hip -> the same SMPL-H joints; pelvis -> pelvis; thorax -> spine3;
  upper_neck -> neck; head_top -> head (SMPL-H's head joint sits at the skull base, not the top of
  the head: it is the nearest joint, not the same point); r/l wrist, elbow, shoulder -> the same.
``coco13``: COCO's 17 keypoints less the four eye/ear points, with "nose" -> SMPL-H head (the body
  model's joints carry no face points), then shoulders, elbows, wrists, hips, knees, ankles (l, r).

A keypoint is annotated (visible = 1) when it projects inside the frame and inside the crop; the
pose model learns and is scored only on annotated keypoints (as with MPII's annotations,
self-occlusion does not remove a label).

Per crop we also keep the PCKh head size (``HEAD_SCALE * |head - neck|`` in crop pixels, see
metrics.py) and the side of the box around the annotated keypoints (for PCK@0.2 of bbox).
Splits follow the dataset's protocols ("xsub": subjects; "xview": cameras).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import torch
from torch.utils.data import Dataset

from anonymask.core.errors import DatasetError
from anonymask.models.shared.body.tracks import JOINT_INDEX, NUM_BODY_JOINTS

from .metrics import HEAD_SCALE
from .model import IMAGENET_MEAN, IMAGENET_STD

#: keypoint name -> SMPL-H joint name, in the order the model predicts them
KEYPOINT_SETS: dict[str, tuple[tuple[str, str], ...]] = {
    "mpii16": (
        ("right_ankle", "right_ankle"), ("right_knee", "right_knee"), ("right_hip", "right_hip"),
        ("left_hip", "left_hip"), ("left_knee", "left_knee"), ("left_ankle", "left_ankle"),
        ("pelvis", "pelvis"), ("thorax", "spine3"), ("upper_neck", "neck"), ("head_top", "head"),
        ("right_wrist", "right_wrist"), ("right_elbow", "right_elbow"), ("right_shoulder", "right_shoulder"),
        ("left_shoulder", "left_shoulder"), ("left_elbow", "left_elbow"), ("left_wrist", "left_wrist"),
    ),
    "coco13": (
        ("nose", "head"), ("left_shoulder", "left_shoulder"), ("right_shoulder", "right_shoulder"),
        ("left_elbow", "left_elbow"), ("right_elbow", "right_elbow"), ("left_wrist", "left_wrist"),
        ("right_wrist", "right_wrist"), ("left_hip", "left_hip"), ("right_hip", "right_hip"),
        ("left_knee", "left_knee"), ("right_knee", "right_knee"), ("left_ankle", "left_ankle"),
        ("right_ankle", "right_ankle"),
    ),
}  # fmt: skip


def keypoint_names(keypoints: str | Sequence[str]) -> tuple[str, ...]:
    return tuple(name for name, _ in _keypoint_pairs(keypoints))


def _keypoint_pairs(keypoints: str | Sequence[str]) -> tuple[tuple[str, str], ...]:
    """A named set, or a list of SMPL-H joint names (used as their own keypoint names)."""
    if isinstance(keypoints, str):
        if keypoints not in KEYPOINT_SETS:
            raise ValueError(f"unknown keypoint set {keypoints!r}; choose one of {tuple(KEYPOINT_SETS)} or pass joint names")
        return KEYPOINT_SETS[keypoints]
    unknown = [k for k in keypoints if k not in JOINT_INDEX]
    if unknown or not keypoints:
        raise ValueError(f"not SMPL-H joint names: {unknown or 'empty list'}")
    return tuple((k, k) for k in keypoints)


def smplh_indices(keypoints: str | Sequence[str]) -> np.ndarray:
    return np.array([JOINT_INDEX[j] for _, j in _keypoint_pairs(keypoints)], dtype=np.int64)


# --------------------------------------------------------------------------- one crop
def crop_box(joints: np.ndarray, mask: np.ndarray | None, aspect: float, padding: float) -> tuple[float, float, float, float]:
    """(x0, y0, w, h) in pixel-edge coordinates: joints' box U mask box, grown, aspect w/h."""
    pts = joints.reshape(-1, 2) + 0.5  # pixel centres -> edge coordinates
    lo, hi = pts.min(0), pts.max(0)
    if mask is not None and mask.any():
        ys, xs = np.nonzero(mask)
        lo = np.minimum(lo, [xs.min(), ys.min()])
        hi = np.maximum(hi, [xs.max() + 1, ys.max() + 1])
    cx, cy = (lo + hi) / 2
    w, h = max(hi[0] - lo[0], 1.0), max(hi[1] - lo[1], 1.0)
    h = max(h, w / aspect) * padding
    w = h * aspect
    return float(cx - w / 2), float(cy - h / 2), float(w), float(h)


def box_affine(box: tuple[float, float, float, float], out_hw: tuple[int, int]) -> np.ndarray:
    """2x3 map from frame pixel-centre coordinates to crop pixel-centre coordinates."""
    x0, y0, w, h = box
    sx, sy = out_hw[1] / w, out_hw[0] / h
    return np.array([[sx, 0.0, (0.5 - x0) * sx - 0.5], [0.0, sy, (0.5 - y0) * sy - 0.5]], dtype=np.float64)


def apply_affine(affine: np.ndarray, points: np.ndarray) -> np.ndarray:
    return points @ affine[:, :2].T + affine[:, 2]


def crop_image(frame: np.ndarray, affine: np.ndarray, out_hw: tuple[int, int]) -> np.ndarray:
    """Resample ``frame`` through ``affine`` (bilinear; outside the frame = black)."""
    return cv2.warpAffine(
        frame, affine, (out_hw[1], out_hw[0]), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=0
    )


# --------------------------------------------------------------------------- the crop arrays
@dataclass
class PoseCrops:
    """Arrays of N person crops (all in crop pixel coordinates)."""

    images: np.ndarray  # (N, H, W, 3) uint8
    keypoints: np.ndarray  # (N, K, 2) float32
    visible: np.ndarray  # (N, K) bool
    head_size: np.ndarray  # (N,) float32, PCKh normaliser
    bbox_size: np.ndarray  # (N,) float32, longer side of the annotated keypoints' box
    video_ids: np.ndarray  # (N,) str
    frames: np.ndarray  # (N,) int
    persons: np.ndarray  # (N,) int, person index in the video
    keypoint_names: tuple[str, ...] = ()

    def __len__(self) -> int:
        return int(self.images.shape[0])

    @property
    def input_size(self) -> tuple[int, int]:
        return int(self.images.shape[1]), int(self.images.shape[2])

    def subset(self, index: np.ndarray | Sequence[int]) -> PoseCrops:
        index = np.asarray(index)
        return PoseCrops(
            self.images[index], self.keypoints[index], self.visible[index], self.head_size[index],
            self.bbox_size[index], self.video_ids[index], self.frames[index], self.persons[index], self.keypoint_names,
        )  # fmt: skip

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(images (N,3,H,W) float, ImageNet-normalised; targets (N,K,3) = x, y, visible)."""
        return images_to_tensor(self.images), targets_tensor(self.keypoints, self.visible)

    def record_ids(self, record: str = "video") -> list[str]:
        """The record each crop belongs to: its video, or (``"track"``) its person in its video."""
        if record == "video":
            return [str(v) for v in self.video_ids]
        if record == "track":
            return [f"{v}/{int(p)}" for v, p in zip(self.video_ids, self.persons)]
        raise ValueError(f"record must be 'video' or 'track', got {record!r}")

    def fingerprint_items(self) -> list[tuple]:
        return [(str(v), int(f), int(p)) for v, f, p in zip(self.video_ids, self.frames, self.persons)]

    @staticmethod
    def concat(parts: Sequence[PoseCrops]) -> PoseCrops:
        if not parts:
            raise ValueError("nothing to concatenate")
        cat = np.concatenate
        return PoseCrops(
            cat([p.images for p in parts]), cat([p.keypoints for p in parts]), cat([p.visible for p in parts]),
            cat([p.head_size for p in parts]), cat([p.bbox_size for p in parts]), cat([p.video_ids for p in parts]),
            cat([p.frames for p in parts]), cat([p.persons for p in parts]), parts[0].keypoint_names,
        )  # fmt: skip


def images_to_tensor(images: np.ndarray) -> torch.Tensor:
    x = torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2).float() / 255.0
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    return (x - mean) / std


def targets_tensor(keypoints: np.ndarray, visible: np.ndarray) -> torch.Tensor:
    kp = torch.from_numpy(np.asarray(keypoints, np.float32))
    vis = torch.from_numpy(np.asarray(visible, np.float32)).unsqueeze(-1)
    return torch.cat([kp, vis], dim=-1)


class PoseCropDataset(Dataset):
    """Map-style dataset: ``ds[i] -> (image (3,H,W) float normalised, target (K,3))``."""

    def __init__(self, crops: PoseCrops):
        self.crops = crops

    def __len__(self) -> int:
        return len(self.crops)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = images_to_tensor(self.crops.images[i : i + 1])[0]
        y = targets_tensor(self.crops.keypoints[i], self.crops.visible[i])
        return x, y


def _empty(input_size: tuple[int, int], k: int, names: tuple[str, ...]) -> PoseCrops:
    h, w = input_size
    return PoseCrops(
        np.zeros((0, h, w, 3), np.uint8), np.zeros((0, k, 2), np.float32), np.zeros((0, k), bool),
        np.zeros(0, np.float32), np.zeros(0, np.float32), np.zeros(0, str), np.zeros(0, np.int64),
        np.zeros(0, np.int64), names,
    )  # fmt: skip


_BODY = NUM_BODY_JOINTS + 1  # pelvis + the 21 body_pose joints


def crops_from_arrays(
    frames: np.ndarray,
    joints2d: np.ndarray,
    valid: np.ndarray,
    person_masks: np.ndarray | None,
    input_size: tuple[int, int],
    keypoints: str | Sequence[str] = "mpii16",
    padding: float = 1.25,
    min_visible: float = 0.5,
    video_id: str = "",
    frame_numbers: Sequence[int] | None = None,
) -> PoseCrops:
    """Crops of every valid person in ``frames`` (T,H,W,3) with joints2d (T,N,52,2), valid (T,N).

    A person is kept when at least ``min_visible`` of its keypoints are annotated.
    """
    t_count, height, width = frames.shape[:3]
    idx = smplh_indices(keypoints)
    names = keypoint_names(keypoints)
    head_i, neck_i = JOINT_INDEX["head"], JOINT_INDEX["neck"]
    frame_numbers = list(range(t_count)) if frame_numbers is None else list(frame_numbers)
    aspect = input_size[1] / input_size[0]
    rows: dict[str, list] = {k: [] for k in ("img", "kp", "vis", "head", "bbox", "frame", "person")}
    for t in range(t_count):
        for n in range(joints2d.shape[1]):
            if not valid[t, n]:
                continue
            joints = joints2d[t, n].astype(np.float64)
            mask = None if person_masks is None else person_masks[t, n]
            in_frame = (joints[:, 0] >= -0.5) & (joints[:, 0] < width - 0.5)
            in_frame &= (joints[:, 1] >= -0.5) & (joints[:, 1] < height - 0.5)
            body, body_in = joints[:_BODY], in_frame[:_BODY]  # the box ignores finger joints
            box = crop_box(body[body_in] if body_in.any() else body, mask, aspect, padding)
            affine = box_affine(box, input_size)
            kp = apply_affine(affine, joints[idx])
            vis = in_frame[idx] & (kp[:, 0] >= -0.5) & (kp[:, 0] < input_size[1] - 0.5)
            vis &= (kp[:, 1] >= -0.5) & (kp[:, 1] < input_size[0] - 0.5)
            if vis.sum() < max(1, min_visible * len(idx)):
                continue
            head = apply_affine(affine, joints[[head_i, neck_i]])
            side = (kp[vis].max(0) - kp[vis].min(0)).max()
            rows["img"].append(crop_image(frames[t], affine, input_size))
            rows["kp"].append(kp.astype(np.float32))
            rows["vis"].append(vis)
            rows["head"].append(HEAD_SCALE * float(np.linalg.norm(head[0] - head[1])))
            rows["bbox"].append(float(side))
            rows["frame"].append(frame_numbers[t])
            rows["person"].append(n)
    if not rows["img"]:
        return _empty(input_size, len(idx), names)
    return PoseCrops(
        np.stack(rows["img"]), np.stack(rows["kp"]), np.stack(rows["vis"]),
        np.asarray(rows["head"], np.float32), np.asarray(rows["bbox"], np.float32),
        np.asarray([video_id] * len(rows["img"])), np.asarray(rows["frame"], np.int64),
        np.asarray(rows["person"], np.int64), names,
    )  # fmt: skip


# --------------------------------------------------------------------------- the synthetic dataset
def read_dataset_index(root: str | Path) -> dict:
    path = Path(root) / "dataset.json"
    if not path.is_file():
        raise DatasetError(f"{path}: no dataset.json (generate one with `anonymask demo` or generate_demo)")
    return json.loads(path.read_text())


def dataset_videos(root: str | Path, split: str | None = "train", protocol: str = "xsub") -> list[dict]:
    """The dataset's video entries of one split (None: all)."""
    doc = read_dataset_index(root)
    videos = doc["videos"]
    if split is None:
        return list(videos)
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train', 'test' or None, got {split!r}")
    missing = [v["video_id"] for v in videos if protocol not in v.get("split", {})]
    if missing:
        raise DatasetError(f"{root}: videos without a {protocol!r} split: {missing[:3]}")
    return [v for v in videos if v["split"][protocol] == split]


def load_pose_crops(
    root: str | Path,
    split: str | None = "train",
    protocol: str = "xsub",
    input_size: tuple[int, int] = (256, 192),
    keypoints: str | Sequence[str] = "mpii16",
    frame_stride: int = 1,
    padding: float = 1.25,
    min_visible: float = 0.5,
    video_ids: Sequence[str] | None = None,
) -> PoseCrops:
    """Crops of every person in every ``frame_stride``-th frame of a split's videos."""
    from anonymask.models.shared.synthetic.generator import load_gt
    from anonymask.storage.video_io import read_frames

    root = Path(root)
    videos = dataset_videos(root, split, protocol)
    if video_ids is not None:
        wanted = set(video_ids)
        videos = [v for v in videos if v["video_id"] in wanted]
    parts = []
    for v in videos:
        gt = load_gt(root / v["gt"])
        frames = read_frames(root / v["path"], step=frame_stride)
        t_idx = np.arange(0, gt["joints2d"].shape[0], frame_stride)[: len(frames)]
        parts.append(
            crops_from_arrays(
                frames, gt["joints2d"][t_idx], gt["valid"].T[t_idx], gt["person_masks"][t_idx], input_size,
                keypoints, padding, min_visible, v["video_id"], t_idx,
            )  # fmt: skip
        )
    if not parts:
        return _empty(input_size, len(smplh_indices(keypoints)), keypoint_names(keypoints))
    return PoseCrops.concat(parts)


def split_public(crops: PoseCrops, fraction: float = 0.2, seed: int = 0) -> tuple[PoseCrops, PoseCrops]:
    """(private, public): whole videos drawn (seeded) until ``fraction`` of the crops is public.

    Whole videos, so no frame of a public video is a near-copy of a private one. At least one video
    stays on each side. The public part stands for data whose owners agreed to its release (in a
    real deployment: the anonymized renders, or a consented set); it trains without any noise.
    """
    if not 0 < fraction < 1:
        raise ValueError(f"public fraction must be in (0, 1), got {fraction}")
    ids = sorted(set(crops.video_ids.tolist()))
    if len(ids) < 2:
        raise ValueError(f"need >= 2 videos to hold some out as public, got {len(ids)}")
    order = np.random.default_rng(seed).permutation(len(ids))
    public: list[str] = []
    count = 0
    for i in order[:-1]:
        if count >= fraction * len(crops):
            break
        public.append(ids[i])
        count += int((crops.video_ids == ids[i]).sum())
    is_pub = np.isin(crops.video_ids, public)
    return crops.subset(np.nonzero(~is_pub)[0]), crops.subset(np.nonzero(is_pub)[0])
