"""Hard cases of the synthetic generator: deterministic, with ground truth that means what it says."""

from dataclasses import replace

import numpy as np
import pytest

from anonymask.models.shared.synthetic.generator import DEMO_PRESET, load_gt
from anonymask.models.shared.synthetic.hard import HARD_CASES, generate_hard_cases, render_case

SMALL = replace(DEMO_PRESET, width=96, height=72, frames=6, supersample=1)


def _case(name):
    return next(c for c in HARD_CASES if c.name == name)


def test_same_seed_same_video_and_occluder_hides_the_person_not_the_background():
    a = render_case(_case("occluded"), SMALL, seed=3)
    b = render_case(_case("occluded"), SMALL, seed=3)
    assert np.array_equal(a[1], b[1]) and np.array_equal(a[2]["person_masks"], b[2]["person_masks"])
    gt = a[2]
    assert gt["person_masks"].shape == (6, 1, 72, 96)
    # without the counter the same walker shows more pixels: the counter hides them
    bare = render_case(replace(_case("occluded"), occluder=None), SMALL, seed=3)[2]
    assert gt["person_masks"].sum() < 0.9 * bare["person_masks"].sum()
    # the counter belongs to the clean background, not to any person
    counter = np.abs(gt["background"].astype(int) - bare["background"].astype(int)).max(-1) > 30
    assert counter.sum() > 100 and not (gt["mask"] & counter[None]).any()


def test_closeup_fills_the_frame_and_far_person_is_small():
    gt = render_case(_case("closeup"), SMALL, seed=0)[2]
    assert gt["mask"].mean() > 0.2 and gt["mask"][:, -1].mean() > 0.5  # shoulders to the bottom edge
    far = render_case(_case("far"), SMALL, seed=0)[2]
    sizes = far["person_masks"].sum(axis=(0, 2, 3)) / SMALL.frames
    assert sizes[0] < 0.15 * sizes[1]  # the far one is a few pixels next to the near one


def test_enter_leave_is_absent_at_both_ends(tmp_path):
    case = _case("enter_leave")
    video_id, frames, gt, _, p = render_case(case, replace(DEMO_PRESET, width=96, height=72, supersample=1), seed=0)
    valid = gt["valid"][0]
    assert len(valid) == 64 and valid[len(valid) // 2] and not valid[0] and not valid[-1]


@pytest.mark.slow
def test_generate_writes_a_dataset_the_demo_adapter_reads(tmp_path):
    from anonymask.storage.datasets import get_adapter

    root = generate_hard_cases(tmp_path / "hard", cases=("static", "three"), width=96, height=72, frames=4,
                               supersample=1)
    recs = list(get_adapter("demo", root).records())
    assert [r.video_id for r in recs] == ["hard_static", "hard_three"]
    assert [r.extra["people"] for r in recs] == [2, 3]
    assert load_gt(recs[1].extra["gt"])["person_masks"].shape[1] == 3
