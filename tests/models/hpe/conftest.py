"""Shared fixtures of the pose-model tests: the tiny model config and crops of the tiny dataset."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_crops(tiny_dataset):
    """(train, test) crops, 64x64, 16 MPII-like keypoints, of the generator's tiny preset."""
    from anonymask.models.hpe.data import load_pose_crops

    train = load_pose_crops(tiny_dataset, "train", input_size=(64, 64))
    test = load_pose_crops(tiny_dataset, "test", input_size=(64, 64))
    return train, test
