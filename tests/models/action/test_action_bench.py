"""bench_epoch runs both paths and reports what make bench records (no timing assertions)."""

from __future__ import annotations

import pytest

from anonymask.bench.action import bench_epoch


@pytest.mark.parametrize("with_cache", [False, True])
def test_bench_epoch_reports_both_paths(with_cache, tmp_path):
    r = bench_epoch(with_cache, mode="maskdp", videos_per_class=2, num_classes=2, batch_size=2, workdir=str(tmp_path))
    assert r["with_cache"] is with_cache and r["clips"] == 4
    assert r["seconds_per_epoch"] > 0 and r["peak_memory_mb"] > 0
    assert (r["cache_build_seconds"] is not None) == with_cache
    assert list(tmp_path.iterdir()) == []  # the temporary store is gone


def test_bench_tail_steps_reports_every_mode_against_dpsgd():
    from anonymask.bench.action import bench_tail_steps

    r = bench_tail_steps(arch="tiny", batch_size=4, num_classes=3, repeats=1, public_fraction=0.5)
    assert set(r["steps"]) == {"nonprivate", "dpsgd", "maskdp", "maskdp_public2", "fpdp", "fpdp_public2",
                               "fpdp_subspace_refresh_8"}  # fmt: skip
    assert r["steps"]["dpsgd"]["ratio_to_dpsgd"] == 1.0
    assert all(s["median_s"] > 0 for s in r["steps"].values()) and r["prefix_forward_per_clip_s"] > 0
    assert r["trainable_params"] > 0 and set(r["cache_speedup_estimate"]) == {"dpsgd", "maskdp"}
