"""Per-video claims between real processes: exclusive, named holder, released by kill -9,
re-entrant in one thread; two processes running the same video compute each stage once; a stage
whose inputs change under it is never recorded done."""

import json
import multiprocessing as mp
import os
import signal
import time

import pytest

from anonymask.core.errors import InputsChangedError, VideoBusyError
from anonymask.storage.claims import claim_video, video_holder
from anonymask.storage.inspect import verify_store
from anonymask.storage.store import DatasetStore, VideoInfo

GT = {"pose4d": {"backend": "gt"}, "segment": {"backend": "gt"}}


def _hold(url, vid, ready, seconds):
    with claim_video(url, vid):
        open(ready, "w").write(str(os.getpid()))
        time.sleep(seconds)


def _wait_for(path, timeout=60.0):
    t0 = time.monotonic()
    while not os.path.exists(path):
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(path)
        time.sleep(0.05)


@pytest.mark.parametrize("trial", [0, pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)])
def test_claim_is_exclusive_names_its_holder_and_dies_with_it(tmp_path, trial):
    url = str(tmp_path / "s.zarr")
    DatasetStore.create(url, "demo").register_videos([VideoInfo("v"), VideoInfo("w")])
    ready = str(tmp_path / "ready")
    p = mp.get_context("spawn").Process(target=_hold, args=(url, "v", ready, 120))
    p.start()
    try:
        _wait_for(ready)
        pid = int(open(ready).read())
        with pytest.raises(VideoBusyError, match=f"video 'v' .* is being processed by pid {pid}"):
            with claim_video(url, "v"):
                pass
        assert video_holder(url, "v")["pid"] == pid
        with claim_video(url, "w"):  # other videos stay free
            pass
        t0 = time.monotonic()
        with pytest.raises(VideoBusyError):
            with claim_video(url, "v", wait=0.3):
                pass
        assert time.monotonic() - t0 >= 0.3
        os.kill(p.pid, signal.SIGKILL)  # a crashed run never leaves its claim behind
        p.join(10)
        with claim_video(url, "v", wait=5):
            assert video_holder(url, "v") is not None  # held by us now
        assert video_holder(url, "v") is None
    finally:
        if p.is_alive():
            p.kill()


def test_claims_are_reentrant_in_one_thread(tmp_path):
    url = str(tmp_path / "s.zarr")
    DatasetStore.create(url, "demo").register_videos([VideoInfo("v")])
    with claim_video(url, "v"):
        with claim_video(url, "v"):
            pass
        assert video_holder(url, "v")["pid"] == os.getpid()  # still held after the inner block
    assert video_holder(url, "v") is None


def _run_trials(urls, vid, me, tmp):
    """In each store in turn: wait until the other process is ready too, then run every stage."""
    from anonymask.config.pipeline import pipeline_config
    from anonymask.tasks.common import run_video

    cfg = pipeline_config("demo", GT)
    for k, url in enumerate(urls):
        open(os.path.join(tmp, f"ready{me}_{k}"), "w").close()
        _wait_for(os.path.join(tmp, f"ready{1 - me}_{k}"))
        res = run_video(url, vid, cfg, wait=True)
        with open(os.path.join(tmp, f"out{me}_{k}.json"), "w") as f:
            json.dump({r["stage"]: r["status"] for r in res}, f)


@pytest.fixture(scope="module")
def tiny_store_template(tiny_dataset, tmp_path_factory):
    """An empty registered store over the tiny set (copied per trial)."""
    from anonymask.config.pipeline import pipeline_config
    from anonymask.storage.datasets import get_adapter
    from anonymask.tasks.common import ORDER

    url = str(tmp_path_factory.mktemp("claims") / "s.zarr")
    ad = get_adapter("demo", tiny_dataset)
    s = DatasetStore.create(url, "demo", source=str(tiny_dataset), stages=ORDER, config=pipeline_config("demo", GT))
    s.register_videos(list(ad.records()))
    return url


@pytest.mark.parametrize("trials", [1, pytest.param(5, marks=pytest.mark.slow)])
def test_two_processes_on_one_video_compute_each_stage_once(tiny_store_template, tmp_path, trials):
    """Both processes start on the same video at the same moment, ``trials`` stores in a row."""
    import shutil

    urls = []
    for k in range(trials):
        urls.append(str(tmp_path / f"s{k}.zarr"))
        shutil.copytree(tiny_store_template, urls[-1])
    vid = "s01s02_a02_r01"  # the two-person video
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_run_trials, args=(urls, vid, me, str(tmp_path))) for me in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
        assert p.exitcode == 0
    for k, url in enumerate(urls):
        results = [json.load(open(tmp_path / f"out{me}_{k}.json")) for me in range(2)]
        for stage in results[0]:
            statuses = sorted(r[stage] for r in results)
            assert statuses == ["done", "skipped"], (k, stage, statuses)  # computed once, found once
        s = DatasetStore.open(url)
        assert all(r["status"] == "done" for r in s.video(vid).records().values())
        assert verify_store(s, video_ids=[vid]).ok


def test_a_stage_whose_inputs_change_under_it_is_not_recorded_done(tiny_store_template, tmp_path, monkeypatch):
    import dataclasses
    import shutil

    from anonymask.config.pipeline import pipeline_config
    from anonymask.tasks import common

    url = str(tmp_path / "s.zarr")
    shutil.copytree(tiny_store_template, url)
    vid = "s01_a01_r01"
    cfg = pipeline_config("demo", GT)
    for name in common.ORDER[: common.ORDER.index("merge")]:
        common.execute_stage(url, vid, name, cfg)
    stages = common.load_stages()
    real = stages["merge"]

    def run_while_inpaint_changes(entry, c, w):
        real.run(entry, c, w)
        # meanwhile another writer (one that ignores claims) replaced the inpainted result
        other = DatasetStore.open(url).video(vid)
        rec = other.record("inpaint")
        rec["outputs"]["inpainted"]["checksum"] = "0" * 32
        other.write_record("inpaint", rec)

    monkeypatch.setitem(stages, "merge", dataclasses.replace(real, run=run_while_inpaint_changes))
    with pytest.raises(InputsChangedError, match="inputs changed while it ran"):
        common.execute_stage(url, vid, "merge", cfg)
    rec = DatasetStore.open(url).video(vid).record("merge")
    assert rec["status"] == "failed" and "upstream result changed" in rec["error"]


def test_a_video_past_its_time_budget_fails_and_keeps_what_it_finished(tiny_store_template, tmp_path):
    import shutil

    from anonymask.config.pipeline import pipeline_config
    from anonymask.core.errors import VideoTimeoutError
    from anonymask.tasks.common import run_video

    url = str(tmp_path / "s.zarr")
    shutil.copytree(tiny_store_template, url)
    cfg = pipeline_config("demo", GT)
    with pytest.raises(VideoTimeoutError, match="time budget of 1e-06 s spent after stage ingest"):
        run_video(url, "s01_a01_r01", cfg, time_budget_s=1e-6)
    recs = DatasetStore.open(url).video("s01_a01_r01").records()
    assert recs["ingest"]["status"] == "done" and "pose4d" not in recs
    res = run_video(url, "s01_a01_r01", cfg)  # a rerun without the budget resumes
    assert res[0]["status"] == "skipped" and all(r["status"] == "done" for r in res[1:])
