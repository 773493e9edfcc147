"""Shared fixtures of the pose-model tests: the tiny model config and crops of the tiny dataset."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_crops(tiny_dataset):
    """(train, test) crops, 64x64, 16 MPII-like keypoints, of the generator's tiny preset."""
    from anonymask.models.training.hpe.data import load_pose_crops

    train = load_pose_crops(tiny_dataset, "train", input_size=(64, 64))
    test = load_pose_crops(tiny_dataset, "test", input_size=(64, 64))
    return train, test


def pseudo_videos(crops, per_video: int = 2):
    """The same crops relabelled as videos of ``per_video`` crops each: many records from the tiny
    set, so record-level sampling has something to sample (the crops themselves are unchanged)."""
    import numpy as np

    out = crops.subset(np.arange(len(crops)))
    out.video_ids = np.asarray([f"v{i // per_video:03d}" for i in range(len(crops))])
    return out


@pytest.fixture(scope="session")
def tiny_records(tiny_crops):
    """(train, test) with the train crops as 12 pseudo-videos of 2 crops."""
    train, test = tiny_crops
    return pseudo_videos(train, 2), test
