"""The NTU-60 projection of the throughput benchmark: arithmetic on a measured per-frame cost,
with its assumptions in the output (the numbers in docs/BENCHMARKS.md come from it)."""

import pytest

from anonymask.bench.common import NTU60_VIDEOS, ntu60_projection


def test_projection_is_videos_times_frames_times_cost_over_workers():
    p = ntu60_projection(0.5, frames_per_video=100, workers=(1, 10))
    assert p["videos"] == NTU60_VIDEOS == 56_880
    assert p["seconds_per_video_per_worker"] == 50.0
    assert p["hours"]["1"] == pytest.approx(56_880 * 50 / 3600, abs=0.05)
    assert p["hours"]["10"] == pytest.approx(p["hours"]["1"] / 10, abs=0.05)
    assert p["frames_per_video_assumed"] == 100


def test_dataset_projections_are_the_stated_arithmetic_on_the_recorded_measurements():
    """anonymask.bench.projection (issue 31 item 3): its GPU inputs are the recorded gpu-check's, the
    anonymize hours on this machine are ntu60_projection's, and training = cache + epochs x epoch."""
    import json
    from pathlib import Path

    from anonymask.bench import projection as P

    rec = json.loads((Path(__file__).parents[2] / "docs/results/gpu/2026-11-26.json").read_text())
    mv = rec["sections"]["mvit"]
    assert P.MEASURED["gpu_prefix_clips_per_s"] == mv["prefix_clips_per_s"]
    names = {"nonprivate": "nonprivate", "dp": "dpsgd", "maskdp": "maskdp", "fpdp": "fpdp"}
    assert P.MEASURED["gpu_step_s_batch128"] == {k: mv["step_seconds"][v] for k, v in names.items()}
    assert P.MEASURED["gpu_refine_s_per_frame_default"] == rec["sections"]["refine"]["projected_seconds_per_frame_default"]

    p = P.projections()
    ntu = p["datasets"]["ntu60"]
    assert ntu["anonymize_hours"]["render"]["this_machine"] == pytest.approx(
        ntu60_projection(1 / 2.56)["hours"]["1"], abs=0.1)
    assert ntu["anonymize_hours"]["rend_diff"]["this_machine"] is None  # not measured on CPU: not budgeted
    # one GPU, MaskDP: 2 variants x 40,320 train + 16,560 eval clips at 254.2 clips/s; 150 epochs of
    # 40,320 clips at 0.2774 s per 128
    t = ntu["training_hours"]["maskdp"]["gpu1"]
    cache = (2 * 40_320 + 16_560) / 254.2
    epoch = 40_320 * 0.2774 / 128
    assert t["cache_h"] == pytest.approx(cache / 3600, abs=1e-3)
    assert t["total_h"] == pytest.approx((cache + 150 * epoch) / 3600, abs=0.01)
    assert ntu["training_hours"]["maskdp"]["gpu8"]["total_h"] == pytest.approx(t["total_h"] / 8, abs=0.01)
    ucf = p["datasets"]["ucf101"]["training_hours"]["dp"]["this_machine"]
    assert ucf["total_h"] == pytest.approx(ucf["cache_h"] + 300 * ucf["epoch_h"], rel=1e-3)
    # the implied FLOP rates agree between prefix and tail on each device (a consistency check)
    r = P.flop_rates()
    assert 0.8 < r["cpu_prefix_gflops_per_core"] / r["cpu_dp_step_gflops_per_core"] < 1.25
    assert 0.8 < r["gpu_prefix_tflops"] / r["gpu_dp_step_tflops"] < 1.25
    assert "| NTU-60 | anonymize, Rend.+Diff | not budgeted |" in P.markdown(p)
