"""The NTU-60 projection of the throughput benchmark: arithmetic on a measured per-frame cost,
with its assumptions in the output (the numbers in docs/BENCHMARKS.md come from it)."""

import pytest

from anonymask.bench import NTU60_VIDEOS, ntu60_projection


def test_projection_is_videos_times_frames_times_cost_over_workers():
    p = ntu60_projection(0.5, frames_per_video=100, workers=(1, 10))
    assert p["videos"] == NTU60_VIDEOS == 56_880
    assert p["seconds_per_video_per_worker"] == 50.0
    assert p["hours"]["1"] == pytest.approx(56_880 * 50 / 3600, abs=0.05)
    assert p["hours"]["10"] == pytest.approx(p["hours"]["1"] / 10, abs=0.05)
    assert p["frames_per_video_assumed"] == 100
