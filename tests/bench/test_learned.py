"""bench/learned.py at a tiny size: random weights in the real formats, the real loaders, real frames."""

import json

import numpy as np
import pytest

SMALL = dict(hidden_dim=64, num_heads=4, depth=2)


def test_person_hole_is_the_grown_boxes():
    from anonymask.bench.learned import person_hole

    hole = person_hole((2, 100, 100, 3), [[np.array([10.0, 20.0, 30.0, 60.0])], []], grow=0.1)
    assert hole[0, 16:64, 8:32].all() and hole[0].sum() == 48 * 24 and not hole[1].any()


@pytest.mark.slow
def test_bench_learned_runs_every_backend_at_a_tiny_size(tmp_path, pose2sim_frames):
    from anonymask.bench.learned import bench_learned, build_random_learned_weights

    root = build_random_learned_weights(tmp_path / "w", raft="small", propainter_kwargs=SMALL)
    assert {p.name for p in (root / "torchvision").iterdir()} >= {"fcos_resnet50_fpn_coco-99b0c9b7.pth"}
    clip = pose2sim_frames(n=3, height=128)
    result = bench_learned(root, clip, frames=3, rcnn={"min_size": 128, "max_people": 3},
                           fcos={"min_size": 128, "upscale_below": 0, "max_people": 3},
                           propainter={"raft": "small", "propainter_kwargs": SMALL, "max_side": 128})
    json.dumps(result)  # JSON-ready
    assert result["rcnn"]["boxes_inside_frame"] and result["rcnn"]["masks_match_regions"]
    assert 0 < max(result["rcnn"]["people_per_frame"]) <= 3
    assert result["fcos"]["boxes_inside_frame"] and result["fcos"]["all_body_and_scored"]
    pp = result["propainter"]
    assert pp["output_shape"] == list(clip.shape) and pp["outside_hole_bit_identical"] and pp["hole_fraction"] > 0
