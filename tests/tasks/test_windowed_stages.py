"""Bounded memory without changing results: the windowed stages give the same arrays whatever
the window size (here 3 frames: several windows, a short last one, a window boundary inside
every smoothing span) as with the default window that holds the whole tiny video; a one-frame
video goes through every stage."""


import numpy as np
import pytest

from anonymask.config import pipeline_config
from anonymask.storage.datasets import get_adapter
from anonymask.storage.inspect import verify_store
from anonymask.storage.store import DatasetStore
from anonymask.tasks.common import ORDER, run_video, stage_deps

GT = {"pose4d": {"backend": "gt"}, "segment": {"backend": "gt"}}
WINDOWED = ("render", "segment", "inpaint", "merge", "tubelets", "conditions", "refine", "reintegrate")


def anonymize_all(root, url, overrides):
    cfg = pipeline_config("demo", overrides)
    s = DatasetStore.create(url, "demo", source=str(root), stages=ORDER, config=cfg)
    infos = list(get_adapter("demo", root).records())
    s.register_videos(infos)
    for info in infos:
        run_video(url, info.video_id, cfg)
    return DatasetStore.open(url)


def arrays(entry):
    out = {}

    def walk(g, prefix=""):
        for name, arr in g.arrays():
            out[prefix + name] = np.asarray(arr[...])
        for name, sub in g.groups():
            walk(sub, prefix + name + "/")

    walk(entry.group)
    return out


def test_window_size_does_not_change_any_result(tiny_dataset, tiny_anonymized, tmp_path):
    whole = DatasetStore.open(tiny_anonymized)  # default windows: each tiny video is one window
    small = {**GT, **{s: {"window": 3} for s in WINDOWED}}
    small["segment"] = {**GT["segment"], "window": 3}
    small["refine"] = {"copy_window": 3}
    small["inpaint"] = {"window": 3}  # (context 16: the 8-frame videos stay one median window)
    windowed = anonymize_all(tiny_dataset, str(tmp_path / "b.zarr"), small)
    for vid in whole.video_ids():
        a, b = arrays(whole.video(vid)), arrays(windowed.video(vid))
        assert a.keys() == b.keys()
        assert any(k.startswith("tubelets/") for k in a)
        for k in a:
            np.testing.assert_array_equal(a[k], b[k], err_msg=f"{vid}/{k}")
        assert whole.video(vid).metrics()["person_leak"] == windowed.video(vid).metrics()["person_leak"]


@pytest.fixture(scope="module")
def one_frame_dataset(tmp_path_factory):
    from anonymask.models.synthetic.generator import generate_demo

    root = tmp_path_factory.mktemp("one") / "raw"
    generate_demo(root, preset="tiny", seed=0, frames=1)
    return root


def test_a_one_frame_video_is_anonymized(one_frame_dataset, tmp_path):
    s = anonymize_all(one_frame_dataset, str(tmp_path / "one.zarr"), GT)
    assert verify_store(s, deps=stage_deps()).ok
    for e in s.videos():
        assert all(r["status"] == "done" for r in e.records().values()), e.video_id
        raw, anon, gt = e.read("raw"), e.read("anonymized"), e.read("gt/person_mask")
        assert raw.shape[0] == anon.shape[0] == 1
        assert gt.any()
        assert e.metrics()["person_leak"] < 0.2
        assert np.abs(anon.astype(int) - raw.astype(int))[gt].mean() > 10


def test_windowed_refine_segments_cover_and_fade(tmp_path):
    """refine's long-video path: segments overlap, every frame is written once, in order; with an
    identity refiner the output equals the input (the cross-fade of equal frames is exact)."""
    from anonymask.storage.store import VideoInfo
    from anonymask.tasks.refine import refine_long, segments

    assert segments(10, 16, 4) == [(0, 10)]
    segs = segments(100, 32, 8)
    assert segs[0][0] == 0 and segs[-1][1] == 100
    assert all(b[0] < a[1] for a, b in zip(segs, segs[1:]))  # neighbours overlap

    class Identity:
        def __init__(self):
            self.calls = []

        def refine(self, frames, conds, seed=0):
            self.calls.append(len(frames))
            return frames.copy()

    class Shift(Identity):
        def refine(self, frames, conds, seed=0):
            self.calls.append(len(frames))
            return np.full_like(frames, 10 * len(self.calls))

    s = DatasetStore.create(str(tmp_path / "r.zarr"), "demo")
    s.register_videos([VideoInfo("v")])
    e = s.video("v")
    rgb = np.random.default_rng(0).integers(0, 255, (100, 8, 8, 3), dtype=np.uint8)
    e.write_array("rgb", rgb)
    conds = {"depth": e.array("rgb")}
    for refiner, name in ((Identity(), "same"), (Shift(), "shift")):
        with e.stage(name, backend="x") as w:
            with w.frames(name, (8, 8, 3), np.uint8, 100) as out:
                refine_long(refiner, e.array("rgb"), conds, 0, 32, 8, out)
        assert max(refiner.calls) <= 32 and len(refiner.calls) == len(segs)
    np.testing.assert_array_equal(e.read("same"), rgb)
    shifted = e.read("shift")[:, 0, 0, 0].astype(int)
    assert shifted[0] == 10 and shifted[-1] == 10 * len(segs)
    assert np.all(np.diff(shifted) >= 0)  # fades monotonically from one segment to the next


def test_segment_still_regions_do_not_depend_on_the_window(tiny_anonymized, tmp_path):
    """segment's "someone stands still" margin is decided per fixed block of frames, not per read
    window: blocks of 4 frames read through windows of 3 (each window straddles a block boundary
    and its unflicker context reaches into the next block) give the masks of one whole window."""
    import shutil

    from anonymask.tasks.common import execute_stage

    outs = {}
    for win in (3, 64):
        url = str(tmp_path / f"w{win}.zarr")
        shutil.copytree(tiny_anonymized, url)
        cfg = pipeline_config("demo", {**GT, "segment": {**GT["segment"], "window": win, "static_window": 4,
                                                         "static_frac": 0.5, "static_grow": 3}})
        s = DatasetStore.open(url)
        for vid in s.video_ids():
            execute_stage(url, vid, "segment", cfg)
        outs[win] = {vid: {k: v for k, v in arrays(s.video(vid)).items() if k.startswith("person_")}
                     for vid in s.video_ids()}
    grown = 0
    for vid, a in outs[64].items():
        for k, v in a.items():
            np.testing.assert_array_equal(outs[3][vid][k], v, err_msg=f"{vid}/{k}")
        grown += int(a["person_hole"].sum())
    base = DatasetStore.open(tiny_anonymized)
    assert grown > sum(int(base.video(v).read("person_hole").sum()) for v in base.video_ids())  # blocks mattered


@pytest.mark.slow
def test_pose4d_window_does_not_change_tracks(tmp_path):
    """pose4d (MediaPipe discovery, back-filling, face search) streams ``raw`` in windows; people
    are followed frame by frame, so windows of 5 frames give exactly the arrays of one window."""
    from anonymask.models.synthetic.generator import generate_demo
    from anonymask.tasks.common import execute_stage

    root = tmp_path / "raw"
    generate_demo(root, preset="tiny", seed=0, width=256, height=192, frames=20, supersample=1)
    outs = {}
    for win in (5, 64):
        cfg = pipeline_config("demo", {"pose4d": {"window": win}})
        url = str(tmp_path / f"w{win}.zarr")
        s = DatasetStore.create(url, "demo", source=str(root), stages=ORDER, config=cfg)
        s.register_videos([i for i in get_adapter("demo", root).records() if i.video_id == "s01s02_a02_r01"])
        for name in ("ingest", "pose4d"):
            execute_stage(url, "s01s02_a02_r01", name, cfg)
        outs[win] = {k: v for k, v in arrays(DatasetStore.open(url).video("s01s02_a02_r01")).items()
                     if k.startswith("pose/")}
    assert outs[64]["pose/instances"].any()  # someone was found
    assert outs[5].keys() == outs[64].keys()
    for k, v in outs[64].items():
        np.testing.assert_array_equal(outs[5][k], v, err_msg=k)
