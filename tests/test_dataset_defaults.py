"""One table of dataset defaults (config/datasets.py) for the pipeline and for training."""

from __future__ import annotations

import pytest

from anonymask.config.datasets import DATASETS, dataset_defaults
from anonymask.storage.datasets import available


def test_every_dataset_adapter_has_a_row():
    assert sorted(DATASETS) == sorted(available())


@pytest.mark.parametrize("dataset", sorted(DATASETS))
def test_every_row_validates_for_both_uses(dataset):
    from anonymask.config.pipeline import pipeline_config
    from anonymask.config.training import train_settings

    cfg = pipeline_config(dataset, {})
    for stage, values in dataset_defaults(dataset).pipeline.items():
        assert {k: cfg[stage][k] for k in values} == values  # the row's values reach the stage
    settings = train_settings("dp", dataset)
    for key, value in dataset_defaults(dataset).training.items():
        got = getattr(settings, key)
        assert (list(got) if isinstance(got, tuple) else got) == value, key


def test_an_unknown_dataset_starts_from_the_own_defaults():
    assert dataset_defaults("no-such-set").pipeline == {} and dataset_defaults("no-such-set").training == {}
