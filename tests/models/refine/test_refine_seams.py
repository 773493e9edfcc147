"""The refinement benchmark's seam measurement (bench/refine.py: --seam, --static)."""

import numpy as np

from anonymask.bench import refine as bench
from anonymask.models.anonymizer.refine.windows import window_schedule


def test_seam_report_finds_a_jump_between_non_overlapping_windows():
    video = np.zeros((40, 4, 4, 3), np.uint8)
    video[16:] = 10  # a jump between frames 15 and 16: the edge of the first window
    video += np.arange(40, dtype=np.uint8)[:, None, None, None] % 2  # a little change everywhere
    hard = bench.seam_report(video, window_schedule(40, 16, 16, (1,)))
    assert hard["seam_pairs"] == [15] and hard["edge_pairs"] == [15, 23, 31]
    assert hard["edge_over_inside"][0] > 5 and hard["inside_median_mad"] == 1.0
    blended = bench.seam_report(video, window_schedule(40, 16, 8, (1, 2)))
    assert blended["seam_pairs"] == [] and 15 in blended["edge_pairs"]


def test_static_run_gives_every_frame_the_same_start(tiny_weights):
    """Shared noise and a repeated frame: without a temporal model's influence all frames would be
    equal; the run records seams for its windows on the latents and on the output."""
    latents = []
    video = np.repeat(np.random.default_rng(0).integers(0, 256, (1, 32, 32, 3), np.uint8), 20, axis=0)
    with bench.frame_shared_noise(), bench.capture_final_latents(latents):
        result = bench.bench_refine(tiny_weights, steps=1, device="cpu", repeats=1, warmup=False, video=video,
                                    guidance_scale=1.0, stride=16, window_dilations=(1,), keep_output=True)
    out = result.pop("output_array")
    assert out.shape == (20, 32, 32, 3) and result["output"]["shape"] == [20, 32, 32, 3]
    assert result["peak_rss_gb"] > 0 and result["windows_per_step"] == 2
    assert len(latents) == 1 and latents[0].shape[2] == 20
    report = bench.seam_report(latents[0][0].transpose(0, 1).numpy(), window_schedule(20, 16, 16, (1,)))
    assert report["seam_pairs"] == [] and report["edge_pairs"] == [3, 15]  # windows 0-15 and 4-19
