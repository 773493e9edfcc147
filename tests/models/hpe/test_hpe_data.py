"""Person crops: image and keypoints go through the same map; splits follow the dataset."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from anonymask.models.shared.body.tracks import JOINT_INDEX
from anonymask.models.training.hpe.data import (
    KEYPOINT_SETS,
    PoseCropDataset,
    crops_from_arrays,
    keypoint_names,
    smplh_indices,
    split_public,
)
from anonymask.models.training.hpe.metrics import HEAD_SCALE


def _blob_frame(h: int, w: int, centres: list[tuple[float, float]]) -> np.ndarray:
    """One Gaussian blob per colour channel at each centre (pixel-centre coordinates)."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    frame = np.zeros((h, w, 3), np.float64)
    for c, (x, y) in enumerate(centres):
        frame[..., c] = 255 * np.exp(-((xx - x) ** 2 + (yy - y) ** 2) / (2 * 2.5**2))
    return frame.round().astype(np.uint8)


def _centroid(channel: np.ndarray) -> np.ndarray:
    w = channel.astype(np.float64)
    w = np.where(w > 0.2 * w.max(), w, 0.0)
    yy, xx = np.mgrid[0 : w.shape[0], 0 : w.shape[1]]
    return np.array([(w * xx).sum() / w.sum(), (w * yy).sum() / w.sum()])


def _skeleton(h: int, w: int, rng) -> np.ndarray:
    joints = np.zeros((52, 2))
    joints[:, 0] = rng.uniform(0.35 * w, 0.65 * w, 52)
    joints[:, 1] = rng.uniform(0.2 * h, 0.85 * h, 52)
    return joints


def test_keypoints_follow_the_image_through_the_crop():
    h, w = 120, 160
    rng = np.random.default_rng(1)
    joints = _skeleton(h, w, rng)
    wrist, knee = JOINT_INDEX["left_wrist"], JOINT_INDEX["right_knee"]
    joints[wrist] = (62.3, 47.8)
    joints[knee] = (91.6, 88.1)
    frame = _blob_frame(h, w, [tuple(joints[wrist]), tuple(joints[knee])])
    crops = crops_from_arrays(
        frame[None], joints[None, None], np.ones((1, 1), bool), None, (64, 64), ["left_wrist", "right_knee"]
    )
    assert len(crops) == 1 and crops.images.shape == (1, 64, 64, 3)
    for c in range(2):  # the blob's centre in the crop is where the keypoint was mapped
        assert np.abs(_centroid(crops.images[0, :, :, c]) - crops.keypoints[0, c]).max() < 0.35
    assert crops.visible.all()
    # aspect ratio: a 64x32 (H x W) input keeps the same geometry
    tall = crops_from_arrays(
        frame[None], joints[None, None], np.ones((1, 1), bool), None, (64, 32), ["left_wrist", "right_knee"]
    )
    assert np.abs(_centroid(tall.images[0, :, :, 0]) - tall.keypoints[0, 0]).max() < 0.35


def test_visibility_head_size_and_skipped_people():
    h, w = 96, 128
    rng = np.random.default_rng(2)
    joints = np.stack([_skeleton(h, w, rng), _skeleton(h, w, rng)])  # two people
    joints[0, JOINT_INDEX["right_ankle"]] = (40.0, h + 30.0)  # below the frame
    valid = np.array([[True, False]])  # the second person is absent
    frame = rng.integers(0, 255, (h, w, 3), dtype=np.uint8)
    crops = crops_from_arrays(frame[None], joints[None], valid, None, (64, 64), "mpii16", video_id="v")
    assert len(crops) == 1 and crops.persons.tolist() == [0] and crops.video_ids.tolist() == ["v"]
    names = keypoint_names("mpii16")
    assert len(names) == 16 and names[9] == "head_top"
    vis = dict(zip(names, crops.visible[0]))
    assert not vis["right_ankle"] and sum(vis.values()) == 15
    inside = crops.keypoints[0][crops.visible[0]]
    assert (inside >= -0.5).all() and (inside < 63.5).all()
    scale = 64 / (np.ptp(joints[0, :22, 1][joints[0, :22, 1] < h]) * 1.25)  # crop scale from the joints' height
    head = HEAD_SCALE * np.linalg.norm(joints[0, JOINT_INDEX["head"]] - joints[0, JOINT_INDEX["neck"]])
    assert crops.head_size[0] == pytest.approx(head * scale, rel=1e-4)


def test_keypoint_sets_map_to_smplh_joints():
    for name, pairs in KEYPOINT_SETS.items():
        idx = smplh_indices(name)
        assert len(idx) == len(pairs) == len(set(idx)), name
        assert idx.max() < 22  # body joints only
    with pytest.raises(ValueError):
        smplh_indices(["not_a_joint"])


def test_crops_of_the_synthetic_dataset_follow_the_xsub_split(tiny_dataset, tiny_crops):
    train, test = tiny_crops
    doc = json.loads((tiny_dataset / "dataset.json").read_text())
    split = {v["video_id"]: v["split"]["xsub"] for v in doc["videos"]}
    assert len(train) > 0 and len(test) > 0
    assert {split[v] for v in train.video_ids} == {"train"}
    assert {split[v] for v in test.video_ids} == {"test"}
    assert (train.head_size > 0).all() and (train.bbox_size > 0).all()
    assert train.visible.mean() > 0.8
    # every crop's annotated keypoints lie in the crop, and the person is not tiny in it
    assert (train.bbox_size > 20).all()
    private, public = split_public(train, 0.3, seed=0)
    assert len(private) + len(public) == len(train) and len(public) > 0 and len(private) > 0
    assert not set(private.video_ids) & set(public.video_ids)


def test_dataset_items_are_normalised_images_and_targets(tiny_crops):
    train, _ = tiny_crops
    ds = PoseCropDataset(train)
    x, y = ds[0]
    assert x.shape == (3, 64, 64) and x.dtype == torch.float32
    assert y.shape == (16, 3)
    assert torch.equal(y[:, :2], torch.from_numpy(train.keypoints[0]))
    assert torch.equal(y[:, 2], torch.from_numpy(train.visible[0]).float())
    xs, ys = train.tensors()
    assert torch.allclose(xs[0], x) and torch.equal(ys[0], y)
    assert -3 < float(x.min()) < float(x.max()) < 3  # ImageNet-normalised, not 0..255
