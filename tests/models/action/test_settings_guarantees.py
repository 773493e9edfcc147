"""Settings that would void a guarantee quietly are refused when the settings are built (issue 28
item 3), before any store or run folder is touched; a sigma = 0 run is named for what it is."""

from __future__ import annotations

import pytest

from anonymask.config.training import default_run_name, train_settings
from anonymask.core.errors import SettingsError
from anonymask.models.training.action.settings import HOLDOUT_MAX


def _s(mode="fpdp", **overrides):
    return train_settings(mode, "synthetic", epsilon=8.0, overrides=overrides)


@pytest.mark.parametrize("mode", ["dp", "maskdp", "fpdp"])
def test_a_private_run_never_evaluates_on_its_training_split(mode):
    with pytest.raises(SettingsError, match="private training split"):
        _s(mode, eval_split="train")
    _s("nonprivate", eval_split="train")  # no guarantee to void
    _s(mode)  # the default (test) is fine


def test_the_public_subspace_never_comes_from_the_evaluation_split():
    with pytest.raises(SettingsError, match="evaluation split"):
        _s("fpdp", fpdp_public="split:test")
    _s("fpdp", fpdp_public="split:extra")


def test_prv_with_replace_adjacency_is_refused_at_validation():
    with pytest.raises(SettingsError, match="prv"):
        _s("maskdp", accountant="prv")  # maskdp's claim is replace-one
    with pytest.raises(SettingsError, match="prv"):
        _s("dp", accountant="prv", adjacency="replace")
    _s("maskdp", accountant="prv", adjacency="add_remove")
    _s("dp", accountant="prv")


def test_the_holdout_is_capped():
    _s("fpdp", fpdp_public=f"holdout:{HOLDOUT_MAX}")
    for frac in (HOLDOUT_MAX + 0.01, 0.99):
        with pytest.raises(SettingsError, match="above the cap"):
            _s("fpdp", fpdp_public=f"holdout:{frac}")


def test_fixed_seeds_are_pairwise_different():
    with pytest.raises(SettingsError, match="must be independent"):
        _s("dp", noise_seed=0, sampling_seed=0)
    with pytest.raises(SettingsError, match="must be independent"):
        _s("fpdp", sampling_seed=4, public_seed=4)
    _s("dp", noise_seed=0, sampling_seed=1, public_seed=2)


def test_a_sigma0_run_is_named_sigma0_not_by_its_target():
    name = default_run_name(_s("dp", noise_multiplier=0.0))
    assert "-sigma0-" in name and "eps8" not in name
    assert "-eps8-" in default_run_name(_s("dp"))
