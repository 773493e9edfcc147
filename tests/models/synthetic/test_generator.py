"""The generated dataset: layout, ground truth consistent with the video, determinism."""

from __future__ import annotations

import json
import re

import av
import numpy as np
import pytest
from scipy.ndimage import binary_dilation, binary_erosion

from anonymask.models.shared.body.model import get_body_model
from anonymask.models.shared.body.tracks import JOINT_INDEX as J
from anonymask.models.shared.body.tracks import Camera
from anonymask.models.shared.synthetic.generator import (
    DEMO_PRESET,
    GT_KEYS,
    PRESETS,
    TINY_PRESET,
    generate_dataset,
    gt_tracks,
    load_gt,
    plan_videos,
)


def _decode(path) -> np.ndarray:
    with av.open(str(path)) as c:
        return np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])


@pytest.fixture(scope="module")
def doc(tiny_dataset):
    return json.loads((tiny_dataset / "dataset.json").read_text())


def test_layout_and_manifest(tiny_dataset, doc):
    assert doc["name"] == "demo" and doc["preset"] == "tiny" and doc["classes"] == ["walk", "punch_other"]
    assert doc["fps"] == TINY_PRESET.fps and doc["size"] == [TINY_PRESET.width, TINY_PRESET.height]
    assert [s["name"] for s in doc["subjects"]] == ["s01", "s02"]
    assert doc["splits"]["xsub"] == {"train": ["s01"], "test": ["s02"]}
    ids = [v["video_id"] for v in doc["videos"]]
    assert sorted(ids) == ["s01_a01_r01", "s01s02_a02_r01", "s02_a01_r01"]
    for v in doc["videos"]:
        assert re.fullmatch(r"(s\d\d)+_a\d\d_r\d\d", v["video_id"])
        assert (tiny_dataset / v["path"]).is_file() and (tiny_dataset / v["gt"]).is_file()
        assert doc["classes"][v["label"]] == v["action"]
        assert v["split"]["xsub"] == ("train" if v["subjects"][0] == "s01" else "test")
    assert sorted(p.name for p in (tiny_dataset / "videos").iterdir()) == sorted(f"{i}.mp4" for i in ids)


def test_ground_truth_matches_the_video(tiny_dataset, doc):
    for v in doc["videos"]:
        gt = load_gt(tiny_dataset / v["gt"])
        assert set(GT_KEYS) <= set(gt)
        video = _decode(tiny_dataset / v["path"])
        t, h, w, _ = video.shape
        n = len(v["subjects"])
        assert (t, h, w) == (TINY_PRESET.frames, TINY_PRESET.height, TINY_PRESET.width)
        assert gt["person_masks"].shape == (t, n, h, w) and gt["mask"].shape == (t, h, w)
        assert gt["joints3d"].shape == (t, n, 52, 3) and gt["joints2d"].shape == (t, n, 52, 2)
        assert gt["body_pose"].shape == (n, t, 63) and gt["betas"].shape == (n, 10)
        assert gt["background"].shape == (h, w, 3) and gt["background"].dtype == np.uint8
        assert list(gt["genders"]) == v["genders"] and int(gt["label"]) == v["label"]
        assert [f"s{s:02d}" for s in gt["subject_ids"]] == v["subjects"]
        # masks: per-person masks are disjoint, their union is the mask, covered by alpha
        assert np.all(gt["person_masks"].sum(axis=1) <= 1)
        np.testing.assert_array_equal(gt["person_masks"].any(axis=1), gt["mask"])
        assert np.all(gt["alpha"][gt["mask"]] >= 128) and np.all(~gt["mask"][gt["alpha"] == 0])
        assert gt["person_masks"].reshape(t, n, -1).any(axis=(0, 2)).all()  # everyone is seen
        # the video differs from the clean background where (and only where) people are
        diff = np.abs(video.astype(int) - gt["background"][None].astype(int)).max(axis=-1)
        inside = binary_erosion(gt["mask"], iterations=1, structure=np.ones((1, 3, 3)))
        outside = ~binary_dilation(gt["alpha"] > 0, iterations=2, structure=np.ones((1, 3, 3)))
        assert np.median(diff[outside]) <= 6
        assert inside.sum() > 0 and diff[inside].mean() > 3 * diff[outside].mean() + 10


def test_ground_truth_is_geometrically_consistent(tiny_dataset, doc):
    for v in doc["videos"]:
        gt = load_gt(tiny_dataset / v["gt"])
        cam = Camera.from_array(gt["camera"])
        np.testing.assert_allclose(gt["joints2d"], cam.project(gt["joints3d"]), atol=1e-3)
        for k, track in enumerate(gt_tracks(gt)):
            assert track.gender == v["genders"][k]
            posed = get_body_model(track.gender).pose_track(track)
            np.testing.assert_allclose(posed.joints, gt["joints3d"][:, k], atol=1e-4)
            # on the ground plane (n.p + d = height above it): the lowest mesh point over the
            # clip touches it, the head is well above it
            n, d = gt["ground"][:3], gt["ground"][3]
            assert (posed.vertices @ n + d).min() == pytest.approx(0.0, abs=0.02)
            assert np.all(posed.joints[:, J["head"]] @ n + d > 1.0)
            # in view: depth 2-10 m, the pelvis projects into the frame
            assert np.all((gt["joints3d"][:, k, 0, 2] > 2.0) & (gt["joints3d"][:, k, 0, 2] < 10.0))
            uv = gt["joints2d"][:, k, 0]
            assert np.all((uv >= 0) & (uv <= [cam.width - 1, cam.height - 1]))


def test_same_seed_same_bytes_other_seed_differs(tmp_path):
    small = dict(preset="tiny", actions=("walk",), frames=3, width=32, height=24)
    a = generate_dataset(tmp_path / "a", seed=3, **small)
    b = generate_dataset(tmp_path / "b", seed=3, **small)
    c = generate_dataset(tmp_path / "c", seed=4, **small)
    names = sorted(p.name for p in (a / "gt").iterdir())
    assert names and names == sorted(p.name for p in (b / "gt").iterdir())
    for name in names:
        ga, gb = load_gt(a / "gt" / name), load_gt(b / "gt" / name)
        for k in ga:
            assert ga[k].tobytes() == gb[k].tobytes(), k
        assert (a / "gt" / name).read_bytes() == (b / "gt" / name).read_bytes()
    gc = load_gt(c / "gt" / names[0])
    assert not np.array_equal(gc["body_pose"], load_gt(a / "gt" / names[0])["body_pose"])


def test_plans_and_presets():
    plans = plan_videos(DEMO_PRESET, seed=0)
    assert 6 <= len(plans) <= 8
    assert any(len(p.subjects) == 2 for p in plans)
    assert {p.split["xsub"] for p in plans} == {"train", "test"}
    for p in plans:  # pairs never mix the train and test subjects
        assert len({"train" if s <= 2 else "test" for s in p.subjects}) == 1
    assert len({p.background for p in plans}) >= 5
    assert plan_videos(DEMO_PRESET, seed=0) == plans
    full = plan_videos(PRESETS["synthetic"], seed=0)
    assert len(full) > 100 and len({p.video_id for p in full}) == len(full)
    with pytest.raises(ValueError, match="even"):
        generate_dataset("/nonexistent/never", preset="tiny", width=33)
    with pytest.raises(ValueError, match="background"):
        generate_dataset("/nonexistent/never", preset="tiny", backgrounds=("astronaut",))


def test_a_video_rendered_into_files_equals_one_rendered_in_memory(tmp_path):
    """generate_dataset keeps a video's frames, masks and alpha in files while it writes them (a
    5-minute two-person clip did not fit in 24 GiB): the same arrays as in memory, files mapped,
    and the scratch folder gone once the dataset is written."""
    from dataclasses import replace

    from anonymask.models.shared.synthetic.generator import action_spec, make_identities, render_video

    p = replace(TINY_PRESET, frames=4, width=48, height=32)
    plan = plan_videos(p, seed=1)[0]
    ids = {i.subject_id: i for i in make_identities(p.n_subjects, 1)}
    classes = [action_spec(a).name for a in p.actions]
    frames, gt = render_video(plan, ids, p, 1, classes)
    f2, gt2 = render_video(plan, ids, p, 1, classes, scratch=tmp_path / "scratch")
    assert isinstance(f2, np.memmap) and isinstance(gt2["person_masks"], np.memmap)
    assert (tmp_path / "scratch" / "frames.npy").is_file()
    assert np.array_equal(frames, f2) and gt.keys() == gt2.keys()
    assert all(np.array_equal(gt[k], gt2[k]) for k in gt)
    root = generate_dataset(tmp_path / "d", preset="tiny", actions=("walk",), frames=3, width=32, height=24)
    assert not (root / ".scratch").exists() and any((root / "gt").iterdir())
