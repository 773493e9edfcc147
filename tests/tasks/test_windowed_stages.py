"""Bounded memory without changing results: the windowed stages give the same arrays whatever
the window size (here 3 frames: several windows, a short last one, a window boundary inside
every smoothing span) as with the default window that holds the whole tiny video; a one-frame
video goes through every stage."""


import numpy as np
import pytest

from anonymask.config.pipeline import pipeline_config
from anonymask.config.stages import stage_settings
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
    small["tubelets"] = {"window": 3, "open_writers": 1}  # one tubelet per pass over ``merged``
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
    from anonymask.models.shared.synthetic.generator import generate_demo

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
    from anonymask.models.anonymizer.refine.segments import refine_long, segments
    from anonymask.storage.store import VideoInfo

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



def test_a_still_part_is_added_only_to_the_frames_its_person_is_in():
    """The still-person margin is added, frame by frame, to the parts of the still region where
    the frame's own mask is: not to the frames before its person came (on bikes.mp4 a shot's
    first frame got a still cyclist's region with no avatar on it, and the audit failed the video
    for a person erased). Without ``present`` every part goes to every frame of the block."""
    from anonymask.models.anonymizer.segment.still import StillRegions

    prob = np.zeros((10, 20, 30), np.float32)
    prob[:, 2:6, 2:6] = 1.0  # still in all 10 frames
    prob[2:, 10:16, 20:26] = 1.0  # still from frame 2 on (8 of 10: still enough)

    def read(a, b):
        return prob[a:b]

    out = StillRegions(10, 10, 0, 0.5, 0.8, 1, 0.8, 0.3).apply(prob, 0, read, prob >= 0.5)
    assert out[0, 1, 2] > 0.5 and out[0, 6, 3] > 0.5  # the first part, grown by 1 px
    assert out[:2, 9:17, 19:27].max() == 0  # the second person is not there yet
    assert out[2, 9, 20] > 0.5 and out[9, 16, 25] > 0.5  # from their first frame on
    every = StillRegions(10, 10, 0, 0.5, 0.8, 1, 0.8, 0.3).apply(prob, 0, read)
    assert every[0, 10:16, 20:26].min() > 0.5 and every[0, 9, 20] > 0.5

@pytest.mark.slow
def test_pose4d_window_does_not_change_tracks(tmp_path):
    """pose4d (MediaPipe discovery, back-filling, face search) streams ``raw`` in windows; people
    are followed frame by frame, so windows of 5 frames give exactly the arrays of one window."""
    from anonymask.models.shared.synthetic.generator import generate_demo
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
        entry = DatasetStore.open(url).video("s01s02_a02_r01")
        outs[win] = {k: v for k, v in arrays(entry).items() if k.startswith("pose/")}
        # the avatars an average frame shows, as status reports it: the posed tracks' valid frames
        valid = sum(int(v.sum()) for k, v in outs[win].items() if k.endswith("/valid"))
        assert entry.metrics()["avatars_per_frame"] == pytest.approx(valid / 20)
    assert outs[64]["pose/instances"].any()  # someone was found
    assert entry.metrics()["avatars_per_frame"] > 0  # (the window-64 store, the loop's last)
    assert outs[5].keys() == outs[64].keys()
    for k, v in outs[64].items():
        np.testing.assert_array_equal(outs[5][k], v, err_msg=k)


def _short_tracks_store(tiny_anonymized, url, starts, frames=32, scale=4, compact=False):
    """A store whose pose tracks are the tiny two-person video's first person (its 8 frames
    repeated, camera scaled up ``scale`` times so frames are big enough to measure), one track
    per entry of ``starts``, each valid on 2 frames only from its start (``compact``: stored over
    those 2 frames, as pose4d stores them); raw is black and the ground-truth person mask empty
    (segment's ``gt`` backend)."""
    import shutil

    from anonymask.models.shared.body.tracks import Camera
    from anonymask.models.shared.body.tracks_io import read_tracks, write_tracks

    src = DatasetStore.open(tiny_anonymized)
    vid = next(v for v in src.video_ids() if src.video(v).read("render/track_masks_spans").shape[0] == 2)
    tracks, cam = read_tracks(src.video(vid), "pose")
    cam = Camera(cam.fx * scale, cam.fy * scale, cam.cx * scale, cam.cy * scale, cam.width * scale,
                 cam.height * scale)
    reps = -(-frames // tracks[0].num_frames)
    base = tracks[0].to_arrays()
    out = []
    for k, s in enumerate(starts):
        arrays = {key: (np.concatenate([v] * reps)[:frames] if v.ndim and v.shape[0] == tracks[0].num_frames else v)
                  for key, v in base.items()}
        valid = np.zeros(frames, bool)
        valid[s : s + 2] = True
        arrays["valid"] = valid
        out.append(type(tracks[0]).from_arrays(k, arrays))
    shutil.rmtree(url, ignore_errors=True)
    s = DatasetStore.create(url, "demo", stages=ORDER)
    from anonymask.storage.store import VideoInfo

    s.register_videos([VideoInfo("v")])
    e = s.video("v")
    h, w = cam.height, cam.width
    with e.stage("ingest", backend="test") as wr:
        wr.write("raw", np.zeros((frames, h, w, 3), np.uint8))
        wr.write("gt/person_mask", np.zeros((frames, h, w), bool))
    e.update_attrs(height=h, width=w, frames=frames)
    with e.stage("pose4d", backend="test") as wr:
        write_tracks(wr, "pose", [t.compact() for t in out] if compact else out, cam)
    return DatasetStore.open(url).video("v")


def test_render_reads_compact_tracks_as_whole_video_ones(tiny_anonymized, tmp_path):
    """pose4d stores each track over its own frames only; render (which reads them so, window by
    window) draws exactly what it draws from the same tracks stored over the whole video."""
    from anonymask.models.shared.body.tracks_io import read_tracks
    from anonymask.tasks import render

    outs = {}
    for compact in (False, True):
        e = _short_tracks_store(tiny_anonymized, str(tmp_path / f"c{compact}.zarr"), [0, 5, 9, 20],
                                compact=compact)
        stored = [int(e.read(f"pose/track_{j}/valid").shape[0]) for j in range(4)]
        assert stored == ([2] * 4 if compact else [32] * 4)
        assert all(t.num_frames == 32 for t in read_tracks(e, "pose")[0])  # whole-video by default
        with e.stage("render", backend="test") as w:
            render.run(e, stage_settings("render", {"window": 4}), w)
        outs[compact] = {k: v for k, v in arrays(DatasetStore.open(str(tmp_path / f"c{compact}.zarr")).video("v"))
                         .items() if k.startswith("render/")}
    assert outs[True]["render/mask"].any()
    assert outs[True].keys() == outs[False].keys()
    for k, v in outs[False].items():
        np.testing.assert_array_equal(outs[True][k], v, err_msg=k)


def _peak(fn) -> int:
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_per_track_arrays_hold_only_their_tracks_frames(tiny_anonymized, tmp_path):
    """Each track is stored over its own frames (its span), and a stage's memory does not grow
    with tracks that are not alive in the window it computes: 16 tracks one after another (one
    alive in every window of 2 frames) cost render and segment what one track costs. The old
    (T, N, H, W) layout held every track in every window (and a whole shard of them)."""
    from anonymask.config.stages import validate_stage
    from anonymask.tasks import render, segment

    peaks = {}
    for n in (1, 16):
        e = _short_tracks_store(tiny_anonymized, str(tmp_path / f"n{n}.zarr"), [2 * k for k in range(n)])
        for name, fn in (("render", render.run), ("segment", segment.run)):
            # render: no held ends (each track's 2 frames only, so one track is alive per window)
            cfg = stage_settings(name, {"window": 2, **({"backend": "gt"} if name == "segment" else {"hold_ends": 0})})

            def go(name=name, fn=fn, cfg=cfg, e=e):
                with e.stage(name, backend="test") as w:
                    fn(e, cfg, w)

            peaks[n, name] = _peak(go)
        e = DatasetStore.open(str(tmp_path / f"n{n}.zarr")).video("v")
        for arr in ("render/track_masks", "person_track_alphas"):
            spans = e.read(f"{arr}_spans")
            assert spans.shape == (n, 2)
            assert not e.has_array(arr)  # no (T, N, H, W) array any more
            for j, (a, b) in enumerate(spans):
                assert e.array(f"{arr}/{j}").shape[0] == b - a
            assert e.read("render/track_masks/0").shape[0] == 2 and e.read("render/track_masks/0").any()
        np.testing.assert_array_equal(e.read("render/track_masks_spans"), [[2 * k, 2 * k + 2] for k in range(n)])
        unflicker = validate_stage("segment", {})["unflicker"]
        assert (e.read("person_track_alphas_spans")[:, 1] - e.read("person_track_alphas_spans")[:, 0]).max() \
            <= 2 + 2 * unflicker
    frame = 192 * 256  # pixels of one frame (the tiny camera scaled 4x)
    old_shard = 32 * 16 * frame  # the old layout: one shard of (32, 16, H, W) bool track masks, 25 MB
    for name in ("render", "segment"):
        # what remains per track is zarr's per-array objects (~0.1-0.3 MB each, measured), not frames
        assert peaks[16, name] - peaks[1, name] < old_shard // 4, (name, peaks)


def test_tubelets_memory_does_not_grow_with_the_tracks(tiny_anonymized, tmp_path):
    """16 tracks are 16 tubelets: ``tubelets`` reads one track at a time and crops
    ``open_writers`` of them per group, so its peak with 16 tracks stays near one track's (all 16
    writers at once held 16 buffers of crops)."""
    from anonymask.tasks import render, segment, tubelets

    frames = 32
    peaks = {}
    for n in (1, 16):
        e = _short_tracks_store(tiny_anonymized, str(tmp_path / f"t{n}.zarr"), [2 * k for k in range(n)],
                                frames=frames)
        for name, fn in (("render", render.run), ("segment", segment.run)):
            with e.stage(name, backend="test") as w:
                fn(e, stage_settings(name, {"backend": "gt"} if name == "segment" else {}), w)
        with e.stage("merge", backend="test") as w:
            w.write("merged", np.zeros((frames, int(e.attrs["height"]), int(e.attrs["width"]), 3), np.uint8))
        cfg = stage_settings("tubelets", {"window": 8, "open_writers": 2, "context": frames})

        def go(cfg=cfg, e=e):
            with e.stage("tubelets", backend="test") as w:
                tubelets.run(e, cfg, w)

        peaks[n] = _peak(go)
        assert tubelets.tubelet_ids(e) == list(range(n))
        # context = the video's length: every tubelet is the whole video, as many crops as the old layout
        assert all(e.array(f"tubelets/{j}/rgb").shape[0] == frames for j in range(n))
    crops = 16 * frames * 128 * 128 * 3  # every tubelet's crops, as 16 open writers buffered them
    assert peaks[16] - peaks[1] < crops // 3, peaks


def _compose_stages(e, overrides):
    """tubelets -> conditions -> refine (none) -> reintegrate on a store with render and segment
    done, ``merged`` and ``inpainted`` set: the arrays they write."""
    from anonymask.tasks import conditions, refine, reintegrate, tubelets

    for name, fn in (("tubelets", tubelets.run), ("conditions", conditions.run), ("refine", refine.run),
                     ("reintegrate", reintegrate.run)):
        with e.stage(name, backend="test") as w:
            fn(e, stage_settings(name, overrides.get(name, {})), w)
    return arrays(e)


def test_a_tubelet_covers_its_persons_frames_not_the_whole_video(tiny_anonymized, tmp_path):
    """Tubelets, their conditions and refined crops hold the frames where their person has a
    pixel plus ``context`` frames either side (``tubelets_spans``), so their cost follows the
    frames people are in, not tracks x video length; what reintegration makes of them (the
    anonymized video and the public mask) is bit-identical to whole-video tubelets, because a
    tubelet is pasted only where its person's alpha is."""
    from anonymask.tasks import render, segment
    from anonymask.tasks.tubelets import alpha_spans, track_alphas

    frames, starts = 48, [0, 12, 30, 44]
    e = _short_tracks_store(tiny_anonymized, str(tmp_path / "s.zarr"), starts, frames=frames)
    for name, fn in (("render", render.run), ("segment", segment.run)):
        with e.stage(name, backend="test") as w:
            fn(e, stage_settings(name, {"backend": "gt"} if name == "segment" else {}), w)
    del e.group["gt"]  # no ground-truth leak metrics here
    rng = np.random.default_rng(0)
    shape = (frames, int(e.attrs["height"]), int(e.attrs["width"]), 3)
    with e.stage("merge", backend="test") as w:
        w.write("merged", rng.integers(0, 256, shape, dtype=np.uint8))
    with e.stage("inpaint", backend="test") as w:
        w.write("inpainted", rng.integers(0, 256, shape, dtype=np.uint8))
    present = np.zeros((len(starts), frames), bool)
    for j, al in track_alphas(e, slice(0, frames), spans=alpha_spans(e)).items():
        present[j] = al.reshape(frames, -1).any(1)
    results = {}
    for context in (0, 3, frames):
        results[context] = _compose_stages(e, {"tubelets": {"context": context, "window": 5}, "conditions": {"window": 5}})
        spans = results[context]["tubelets_spans"]
        for j in range(len(starts)):
            idx = np.flatnonzero(present[j])
            assert tuple(spans[j]) == (max(0, idx[0] - context), min(frames, idx[-1] + 1 + context)), (context, j)
            for k in ("box", "rgb", "cond_depth", "cond_pose", "cond_face", "refined"):
                assert results[context][f"tubelets/{j}/{k}"].shape[0] == spans[j][1] - spans[j][0], (context, j, k)
    assert (results[0]["tubelets_spans"][:, 1] - results[0]["tubelets_spans"][:, 0]).sum() <= present.sum()
    assert (results[frames]["tubelets_spans"] == [0, frames]).all()  # the old layout: whole-video tubelets
    for context in (0, 3):
        for k in ("anonymized", "public_mask"):
            np.testing.assert_array_equal(results[context][k], results[frames][k], err_msg=f"context {context}: {k}")
    # within a tubelet's span its crops do not depend on how far the span reaches
    for j in range(len(starts)):
        s0, e0 = results[0]["tubelets_spans"][j]
        s3, _ = results[3]["tubelets_spans"][j]
        np.testing.assert_array_equal(results[0][f"tubelets/{j}/box"],
                                      results[frames][f"tubelets/{j}/box"][s0:e0], err_msg=f"box {j}")
        assert s3 <= s0


def test_a_tubelet_that_misses_its_persons_frames_fails_reintegration(tiny_anonymized, tmp_path, monkeypatch):
    """A tubelet must hold every frame its person has pixels in; one frame short and reintegration
    fails naming it (instead of leaving that frame's person to the background fill)."""
    from anonymask.tasks import render, segment, tubelets

    frames = 16
    e = _short_tracks_store(tiny_anonymized, str(tmp_path / "m.zarr"), [4], frames=frames)
    for name, fn in (("render", render.run), ("segment", segment.run)):
        with e.stage(name, backend="test") as w:
            fn(e, stage_settings(name, {"backend": "gt"} if name == "segment" else {}), w)
    del e.group["gt"]
    shape = (frames, int(e.attrs["height"]), int(e.attrs["width"]), 3)
    for stage, name in (("merge", "merged"), ("inpaint", "inpainted")):
        with e.stage(stage, backend="test") as w:
            w.write(name, np.zeros(shape, np.uint8))
    whole = tubelets.tubelet_span
    monkeypatch.setattr(tubelets, "tubelet_span", lambda *a: (whole(*a)[0] + 1, whole(*a)[1]))
    with pytest.raises(ValueError, match="tubelet 0 .* misses its person's pixels"):
        _compose_stages(e, {"tubelets": {"context": 0}})


def test_verify_finds_a_lost_per_track_array(tiny_anonymized, tmp_path):
    """Each track's array is an output of its stage: verify names a deleted one (so repair
    recomputes that stage), and the spans array too."""
    import shutil

    url = str(tmp_path / "d.zarr")
    shutil.copytree(tiny_anonymized, url)
    s = DatasetStore.open(url)
    vid = next(v for v in s.video_ids() if s.video(v).read("render/track_masks_spans").shape[0] == 2)
    e = s.video(vid)
    assert verify_store(s, deps=stage_deps()).ok
    del e.group["render/track_masks"]["1"]
    e.array("person_track_alphas_spans")[0, 0] = 5
    res = verify_store(DatasetStore.open(url), deps=stage_deps())
    lines = "\n".join(res.damaged)
    assert "render/track_masks/1" in lines and "(stage render)" in lines, lines
    assert "person_track_alphas_spans" in lines and "(stage segment)" in lines, lines


def _record_from_older_code(tiny_anonymized, url, stage, version_key):
    """A copy of the tiny store whose first video's ``stage`` record carries the hash older code
    gave it (without ``version_key``); returns (entry, cfg)."""
    import shutil

    from anonymask.config.stages import hashed_settings, validate_stage
    from anonymask.storage.hashing import config_hash

    shutil.copytree(tiny_anonymized, url)
    e = DatasetStore.open(url).video(DatasetStore.open(url).video_ids()[0])
    cfg = pipeline_config("demo", GT)
    settings = hashed_settings(stage, validate_stage(stage, cfg.get(stage)))
    assert version_key in settings
    recs = e.records()
    old = {k: v for k, v in settings.items() if k != version_key}
    recs[stage] = dict(recs[stage], config_hash=config_hash(old))
    e.group.attrs["stages"] = recs
    return e, cfg


def test_a_store_of_the_old_layout_is_recomputed(tiny_anonymized, tmp_path):
    """render's record from before the per-track layout (its hash without the layout version)
    is not trusted: render runs again and replaces the old (T, N, H, W) array."""
    from anonymask.tasks.common import execute_stage

    url = str(tmp_path / "o.zarr")
    e, cfg = _record_from_older_code(tiny_anonymized, url, "render", "_layout")
    del e.group["render/track_masks"]
    e.write_array("render/track_masks", np.zeros((e.num_frames, 1, 4, 4), bool))  # the old layout
    assert execute_stage(url, e.video_id, "render", cfg)["status"] == "done"
    e = DatasetStore.open(url).video(e.video_id)
    assert not e.has_array("render/track_masks") and e.has_array("render/track_masks/0")
    assert execute_stage(url, e.video_id, "render", cfg)["status"] == "skipped"


def test_a_pose_computed_before_a_privacy_fix_is_recomputed(tiny_anonymized, tmp_path):
    """pose4d's record from before its privacy version (people the older code left visible) is
    not trusted: pose4d runs again, then is skipped."""
    from anonymask.models.shared.body.tracks_io import read_tracks
    from anonymask.tasks.common import execute_stage

    url = str(tmp_path / "p.zarr")
    e, cfg = _record_from_older_code(tiny_anonymized, url, "pose4d", "_privacy")
    assert execute_stage(url, e.video_id, "pose4d", cfg)["status"] == "done"
    assert execute_stage(url, e.video_id, "pose4d", cfg)["status"] == "skipped"
    e = DatasetStore.open(url).video(e.video_id)
    tracks, _ = read_tracks(e, "pose")
    shown = sum(int(tr.valid.sum()) for tr in tracks) / e.num_frames
    assert shown > 0 and e.metrics()["avatars_per_frame"] == pytest.approx(shown)  # what status shows


def test_segment_does_not_reach_across_a_cut(tiny_anonymized, tmp_path):
    """unflicker (the union over +-1 frame) works within a shot: the frames on either side of a
    cut do not take each other's masks (on bikes.mp4 the last frame before a cut got the next
    shot's person-shaped hole, with no avatar on it: the audit's erased-person finding). Away from
    the cut nothing changes. (The still-person margin is decided per shot too; off here.)"""
    import shutil

    from anonymask.tasks import segment

    url = str(tmp_path / "c.zarr")
    shutil.copytree(tiny_anonymized, url)
    e = DatasetStore.open(url).video(DatasetStore.open(url).video_ids()[0])
    t_len, cut = e.num_frames, e.num_frames // 2
    holes = {}
    for shots in ([[0, cut], [cut, t_len]], None):
        if shots is None:
            del e.group["shots"]
        else:
            e.write_array("shots", np.asarray(shots, np.int32), frame_chunked=False)
        cfg = pipeline_config("demo", {**GT, "segment": {**GT["segment"], "static_grow": 0}})
        with e.stage("segment", backend="test") as w:
            segment.run(e, stage_settings("segment", cfg["segment"]), w)
        holes[shots is not None] = e.read("person_hole")
    split, whole = holes[True], holes[False]
    away = [t for t in range(t_len) if t not in (cut - 1, cut)]
    np.testing.assert_array_equal(split[away], whole[away])
    for t in (cut - 1, cut):  # a strict subset: the other shot's frame no longer adds its mask
        assert not (split[t] & ~whole[t]).any() and (whole[t] & ~split[t]).any(), t


def test_an_avatar_is_on_every_frame_of_its_persons_hole(tiny_anonymized, tmp_path):
    """segment widens a person's hole by ``unflicker`` (1) frames past their track; render holds
    the track's first and last pose that many frames (``render.hold_ends``), so no hole lies
    there without an avatar (with no hold: the audit's erased-person finding that bikes.mp4,
    Sports2D and a Pose2Sim view showed at the frame before a track's first)."""
    from anonymask.models.anonymizer.audit.erased import scan_erased
    from anonymask.storage.tracks import read_spans
    from anonymask.tasks import render, segment

    uncovered = {}
    for hold in (0, 1):
        e = _short_tracks_store(tiny_anonymized, str(tmp_path / f"h{hold}.zarr"), [6], frames=16, compact=True)
        with e.stage("render", backend="test") as w:  # the person: where the unheld avatar is
            render.run(e, stage_settings("render", {"hold_ends": 0}), w)
        e.write_array("gt/person_mask", e.read("render/mask"))
        with e.stage("render", backend="test") as w:
            render.run(e, stage_settings("render", {"hold_ends": hold}), w)
        assert read_spans(e, "render/track_masks").tolist() == ([[5, 9]] if hold else [[6, 8]])
        cfg = pipeline_config("demo", {"segment": {"backend": "gt", "static_grow": 0}})
        with e.stage("segment", backend="test") as w:
            segment.run(e, stage_settings("segment", cfg["segment"]), w)
        hole = e.read("person_hole")
        assert hole[[5, 6, 7, 8]].all(axis=(1, 2)).sum() == 0 and hole[[5, 6, 7, 8]].any(axis=(1, 2)).all()
        uncovered[hold] = sorted({r[0] for r in scan_erased([(0, hole, e.read("render/mask"))]).regions})
    assert uncovered == {0: [5, 8], 1: []}


def test_instance_labels_map_to_posed_tracks():
    """Raw labels (raw track id + 1, 0 = nobody) -> posed track index (-1: nobody or not posed);
    an id past the table (never written by pose4d) takes the table's last entry, as before."""
    from anonymask.models.anonymizer.segment.tracks import lut_map

    labels = np.array([[0, 1, 2], [3, 4, 9]], np.uint16)
    out = lut_map(labels, np.array([2, -1, 0, 1], np.int32))
    assert out.dtype == np.int32
    assert out.tolist() == [[-1, 2, -1], [0, 1, 1]]


def _with_person_boxes(tiny_anonymized, url):
    """A copy of the tiny anonymized store whose first track has the ground-truth person's box in
    every frame (the ground-truth pose backend keeps no boxes): (its video entry, the boxes)."""
    import shutil

    from anonymask.storage.tracks import read_spans

    shutil.copytree(tiny_anonymized, url)
    e = DatasetStore.open(url).video(DatasetStore.open(url).video_ids()[0])
    person = e.read("gt/person_mask")
    n = int(read_spans(e, "render/track_masks").shape[0])
    boxes = np.full((n, len(person), 4), np.nan, np.float32)
    for t, m in enumerate(person):
        ys, xs = np.nonzero(m)
        if len(ys):
            boxes[0, t] = (xs.min(), ys.min(), xs.max() + 1, ys.max() + 1)
    e.write_array("pose/boxes", boxes, frame_chunked=False)
    return e, boxes


def _segment_hole(e, segment_overrides):
    """``person_hole`` after the segment stage re-run on ``e`` with these segment settings."""
    from anonymask.tasks import segment

    cfg = pipeline_config("demo", {**GT, "segment": {**GT["segment"], **segment_overrides}})
    with e.stage("segment", backend="test") as w:
        segment.run(e, stage_settings("segment", cfg["segment"]), w)
    return e.read("person_hole")


def test_a_person_drawn_in_their_box_has_their_whole_box_removed(tiny_anonymized, tmp_path):
    """A neutral avatar in a box (``Kind.FALLBACK_BOX``: seen too briefly to pose, or a fit that
    reached far past the person's box) says nothing about where the body is not: segment removes
    that person's whole box in every frame they have one (``segment.fallback_box_fill``); a posed
    person's hole is their mask, and nothing else changes."""
    from anonymask.models.anonymizer.pose.records import Kind

    e, boxes = _with_person_boxes(tiny_anonymized, str(tmp_path / "k.zarr"))
    holes = {}
    for kind, fill in ((Kind.POSED, True), (Kind.FALLBACK_BOX, True), (Kind.FALLBACK_BOX, False)):
        kinds = np.full(boxes.shape[0], int(Kind.POSED), np.int8)
        kinds[0] = int(kind)
        e.write_array("pose/kinds", kinds, frame_chunked=False)
        holes[(kind, fill)] = _segment_hole(e, {"fallback_box_fill": fill})
    posed, boxed = holes[(Kind.POSED, True)], holes[(Kind.FALLBACK_BOX, True)]
    np.testing.assert_array_equal(holes[(Kind.FALLBACK_BOX, False)], posed)
    assert not (posed & ~boxed).any() and (boxed & ~posed).any()
    for t in np.nonzero(np.isfinite(boxes[0, :, 0]))[0]:
        x0, y0, x1, y1 = (int(round(v)) for v in boxes[0, t])
        inner = boxed[t, max(y0, 0) + 1 : y1 - 1, max(x0, 0) + 1 : x1 - 1]
        assert inner.size and inner.all(), t


def test_the_hands_margin_is_in_the_hole_whatever_the_window(tiny_anonymized, tmp_path):
    """``segment.hand_frac``: a disc of that share of the person's box height around each wrist
    of their avatar (``render/joints2d``) is removed in every frame they have a box; with 0, the
    hole is as before and smaller. With the scene trim (the default) the disc's pixels that show
    the place leave again (scene_trim.py), the same with a window of 3 frames as with the whole video."""
    import math

    from anonymask.tasks.segment import WRISTS

    e, boxes = _with_person_boxes(tiny_anonymized, str(tmp_path / "h.zarr"))
    holes = {(frac, window, trim): _segment_hole(e, {"hand_frac": frac, "window": window, "trim_scene": trim})
             for frac, window, trim in ((0.0, 16, False), (0.25, 16, False), (0.25, 16, True), (0.25, 3, True))}
    off, on = holes[(0.0, 16, False)], holes[(0.25, 16, False)]
    np.testing.assert_array_equal(holes[(0.25, 3, True)], holes[(0.25, 16, True)])
    assert not (holes[(0.25, 16, True)] & ~on).any() and (on & ~holes[(0.25, 16, True)]).any()
    assert not (off & ~on).any() and (on & ~off).any()
    joints = e.read("render/joints2d")
    h, w = on.shape[1:]
    checked = 0
    for t in np.nonzero(np.isfinite(boxes[0, :, 0]))[0]:
        r = math.ceil(0.25 * float(boxes[0, t, 3] - boxes[0, t, 1]))
        for wrist in WRISTS:
            x, y = joints[t, 0, wrist]
            if not (np.isfinite(x) and r < x < w - r - 1 and r < y < h - r - 1):
                continue
            cx, cy = int(round(x)), int(round(y))
            assert on[t, cy, cx - r + 1 : cx + r].all() and on[t, cy - r + 1 : cy + r, cx].all(), t
            checked += 1
    assert checked


def test_the_part_of_a_person_their_mask_cut_is_removed_whatever_the_window(tiny_anonymized, tmp_path):
    """``segment.foreground``: where the person mask leaves out a strip of the person (a limb the
    segmentation cut), the strip's pixels differ from the shot's background and touch the mask,
    so they join the hole, the same with a window of 3 frames as with 16 (the background is taken
    over fixed blocks); with the setting off they stay out."""
    e, boxes = _with_person_boxes(tiny_anonymized, str(tmp_path / "f.zarr"))
    gt = e.read("gt/person_mask").astype(bool)
    cut = np.zeros_like(gt)
    for t in range(2, 6):  # the person's lowest 4 rows (the feet) are not in their mask in frames 2-5
        ys, xs = np.nonzero(gt[t])
        if len(ys):
            cut[t] = gt[t] & (np.arange(gt.shape[1])[:, None] > ys.max() - 4)
    assert cut.sum() > 20 and (gt & ~cut)[2:6].any()
    e.write_array("gt/person_mask", gt & ~cut)
    holes = {(on, window): _segment_hole(e, {"foreground": on, "window": window})
             for on, window in ((False, 16), (True, 16), (True, 3))}
    off, on = holes[(False, 16)], holes[(True, 16)]
    np.testing.assert_array_equal(holes[(True, 3)], on)
    raw, bg = e.read("raw").astype(int), e.read("gt/background").astype(int)
    visible = cut & (np.abs(raw - bg[None]).max(axis=-1) > 25)  # the cut pixels that show the person
    missed_off, missed_on = int((visible & ~off).sum()), int((visible & ~on).sum())
    assert missed_off > 0 and missed_on <= missed_off // 2, (missed_off, missed_on)  # the feet join the hole
    assert not (off & ~on).any()
    # where the person stands in nearly every frame of the block the shot shows no background:
    # nothing is added there (the 8-frame clip's slow walker leaves a few such pixels)
