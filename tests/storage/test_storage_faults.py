"""Faults beyond kill -9 (issue 32 item 3): a disk that fills up mid-stage and a store that turns
read-only mid-run, on a real size-limited tmpfs (skipped where it cannot be mounted) with real
processes, plus the same fault injected at the store layer where no mount is possible.

Each run fails the video with one line naming the store and the cause, leaves every finished
array intact (``verify`` clean), and a resume after the fault is gone ends bit-identical to an
uninterrupted run."""

import contextlib
import errno
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

from anonymask.storage.inspect import verify_store
from anonymask.storage.store import DatasetStore
from anonymask.tasks.common import stage_deps

#: the anonymize flow's per-video loop without Prefect: each video's stages in order, a failure is
#: the one line the flow prints. Optional pause <video id>: before that video (no claim held, so
#: no file is open for writing), touch <dir>/ready and wait for <dir>/go while the test changes
#: the filesystem.
DRIVER = r"""
import json, sys, time
from pathlib import Path
from anonymask.config.pipeline import pipeline_config
from anonymask.storage.datasets import get_adapter
from anonymask.storage.store import DatasetStore
from anonymask.tasks.common import ORDER, execute_stage, run_video
from anonymask.tasks.prefect_tasks import failure_message

source, url, pause, sync = sys.argv[1:5]
cfg = pipeline_config("demo", {"pose4d": {"backend": "gt"}, "segment": {"backend": "gt"}})
s = DatasetStore.create(url, "demo", source=source, stages=ORDER, config=cfg)
infos = list(get_adapter("demo", source).records())
s.register_videos(infos)
out = {}
for info in infos:
    now = {"stage": ORDER[0]}
    def run_stage(url, vid, name, config, verify_done):
        now["stage"] = name
        return execute_stage(url, vid, name, config, verify_done)
    if info.video_id == pause:
        (Path(sync) / "ready").touch()
        while not (Path(sync) / "go").exists():
            time.sleep(0.05)
    try:
        res = run_video(url, info.video_id, cfg, run_stage=run_stage)
        out[info.video_id] = "done" if any(r["status"] == "done" for r in res) else "skipped"
    except Exception as e:
        out[info.video_id] = failure_message(now["stage"], e, url)
print(json.dumps(out))
"""


def drive(source, store, pause="", sync=""):
    p = subprocess.Popen([sys.executable, "-c", DRIVER, str(source), str(store), pause, str(sync)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return p


def result(p, timeout=300):
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, err[-3000:]
    assert "Traceback" not in out
    return json.loads(out.strip().splitlines()[-1])


@contextlib.contextmanager
def tmpfs(path: Path, size: str):
    """A size-limited tmpfs at ``path`` (root and mount(8) needed; else the test is skipped)."""
    path.mkdir(parents=True, exist_ok=True)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({p.stderr.strip() or p.returncode})")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def remount(path: Path, opts: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{opts}", str(path)], check=True, capture_output=True)


def assert_finished_intact(url):
    res = verify_store(DatasetStore.open(str(url), mode="r"), deps=stage_deps())
    assert not res.damaged, res.damaged
    assert not list(Path(url).rglob("*.partial")), "temporary files left"


def finished_stages(url):
    """(video, stage) -> finished_at of every done record."""
    return {(e.video_id, st): r.get("finished_at") for e in DatasetStore.open(str(url), mode="r").videos()
            for st, r in e.records().items() if r.get("status") == "done"}


def assert_same_as(url, golden):
    """Every record done, with the golden run's array checksums, and verify clean (so the arrays
    hold exactly those bytes)."""
    got, ref = DatasetStore.open(str(url), mode="r"), DatasetStore.open(golden, mode="r")
    assert verify_store(got, deps=stage_deps()).ok
    for e in ref.videos():
        mine = got.video(e.video_id).records()
        for stage, rec in e.records().items():
            assert mine[stage]["status"] == "done", (e.video_id, stage, mine[stage].get("error"))
            sums = {k: v["checksum"] for k, v in mine[stage]["outputs"].items()}
            assert sums == {k: v["checksum"] for k, v in rec["outputs"].items()}, (e.video_id, stage)


def test_disk_full_mid_stage_then_resume(tiny_dataset, tiny_anonymized, tmp_path):
    with tmpfs(tmp_path / "mnt", "1600k") as mnt:
        store = mnt / "s.zarr"
        first = result(drive(tiny_dataset, store))
        failed = {v: line for v, line in first.items() if line not in ("done", "skipped")}
        assert failed, first  # the tiny set needs ~2.7 MB: it cannot all fit
        for line in failed.values():
            assert f"{store}: no space left on device" in line and "\n" not in line, line
        assert_finished_intact(store)
        kept = finished_stages(store)
        assert kept, "no stage finished before the disk filled"
        remount(mnt, "size=16m")  # space freed
        again = result(drive(tiny_dataset, store))
        assert set(again.values()) <= {"done", "skipped"}, again
        assert_same_as(store, tiny_anonymized)
        assert {k: v for k, v in finished_stages(store).items() if k in kept} == kept  # not recomputed


def test_store_turns_read_only_mid_run_then_resume(tiny_dataset, tiny_anonymized, tmp_path):
    with tmpfs(tmp_path / "mnt", "64m") as mnt:
        store = mnt / "s.zarr"
        sync = tmp_path / "sync"
        sync.mkdir()
        vids = [v["video_id"] for v in json.loads((tiny_dataset / "dataset.json").read_text())["videos"]]
        p = drive(tiny_dataset, store, pause=vids[1], sync=sync)
        for _ in range(1200):
            if (sync / "ready").exists() or p.poll() is not None:
                break
            subprocess.run(["sleep", "0.1"])
        assert (sync / "ready").exists(), p.communicate()[1][-2000:]
        remount(mnt, "ro")
        (sync / "go").touch()
        first = result(p)
        assert first[vids[0]] == "done", first
        for v in vids[1:]:  # the store went read-only before them: each is one line naming the store
            assert f"{store}: read-only file system" in first[v] and "\n" not in first[v], first
        assert_finished_intact(store)
        # the read-only store still answers status and verify; repair names the store in one line
        st = subprocess.run([sys.executable, "-m", "anonymask.cli", "status", str(store)],
                            capture_output=True, text=True, timeout=120)
        assert st.returncode == 0 and "render" in st.stdout, st.stderr[-2000:]
        remount(mnt, "rw")
        again = result(drive(tiny_dataset, store))
        assert set(again.values()) <= {"done", "skipped"}, again
        assert_same_as(store, tiny_anonymized)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EACCES])
def test_injected_write_fault_fails_the_stage_in_one_line_and_keeps_finished_stages(tiny_dataset, tmp_path,
                                                                                    monkeypatch, code):
    """Where no tmpfs can be mounted (and for permission denied, which root never meets): a
    writer that raises after a few chunks, at the store layer. The stage fails with one line
    naming the store and the cause, its failed record is written, a full disk gets the stage's
    partial arrays back, and the stages before it stay done and verified."""
    import zarr

    from anonymask.config.pipeline import pipeline_config
    from anonymask.core.errors import StoreError
    from anonymask.storage.datasets import get_adapter
    from anonymask.storage.faults import FAULTS
    from anonymask.tasks.common import ORDER, execute_stage

    url = str(tmp_path / "s.zarr")
    cfg = pipeline_config("demo", {"pose4d": {"backend": "gt"}, "segment": {"backend": "gt"}})
    s = DatasetStore.create(url, "demo", source=str(tiny_dataset), stages=ORDER, config=cfg)
    info = next(iter(get_adapter("demo", tiny_dataset).records()))
    s.register_videos([info])
    for name in ORDER[: ORDER.index("render")]:
        execute_stage(url, info.video_id, name, cfg)
    real = zarr.Array.__setitem__
    writes = {"n": 0}

    def full_after_two(self, key, value):
        writes["n"] += 1
        if writes["n"] > 2:
            raise OSError(code, os.strerror(code), f"{url}/videos/x/c/0.{uuid.uuid4().hex}.partial")
        return real(self, key, value)

    monkeypatch.setattr(zarr.Array, "__setitem__", full_after_two)
    with pytest.raises(StoreError) as exc:
        execute_stage(url, info.video_id, "render", cfg)
    monkeypatch.setattr(zarr.Array, "__setitem__", real)
    line = str(exc.value)
    assert line.startswith(f"{url}: {FAULTS[code]} while writing {info.video_id}/render"), line
    e = DatasetStore.open(url).video(info.video_id)
    rec = e.record("render")
    assert rec["status"] == "failed" and FAULTS[code] in rec["error"]
    if code == errno.ENOSPC:
        assert not e.has_array("render/rgb")  # the partial output was freed
    res = verify_store(DatasetStore.open(url, mode="r"), deps=stage_deps())
    assert not res.damaged, res.damaged
    assert all(e.record(n)["status"] == "done" for n in ORDER[: ORDER.index("render")])
    assert execute_stage(url, info.video_id, "render", cfg)["status"] == "done"
    assert np.asarray(e.read("render/rgb")).shape[0] == e.num_frames


def test_repair_of_a_read_only_store_is_one_line(tiny_anonymized, tmp_path):
    """``verify`` reads a read-only store; ``verify --repair`` says in one line that it cannot
    write it (before it marks anything), not a traceback from the first lock file."""
    import shutil

    with tmpfs(tmp_path / "mnt", "64m") as mnt:
        store = mnt / "s.zarr"
        shutil.copytree(tiny_anonymized, store)
        chunk = next(p for p in (store / "videos").rglob("merged/c/**/*") if p.is_file())
        chunk.write_bytes(b"garbage")
        remount(mnt, "ro")
        cli = [sys.executable, "-m", "anonymask.cli", "verify", str(store)]
        v = subprocess.run(cli, capture_output=True, text=True, timeout=120)
        assert v.returncode == 1 and "DAMAGED" in v.stdout, (v.stdout, v.stderr[-2000:])
        r = subprocess.run([*cli, "--repair"], capture_output=True, text=True, timeout=300)
        assert r.returncode == 2, (r.stdout, r.stderr[-2000:])
        assert "Traceback" not in r.stdout + r.stderr
        assert f"anonymask: error: {store}: store folder is not writable (read-only file system)" in r.stderr


def test_permission_denied_source_is_one_line_naming_the_file(tiny_dataset, tmp_path, monkeypatch):
    """A source this user may not read (root reads everything, so the denial is injected where
    the file is opened): the checksum gives up quietly and ingest fails naming the file."""
    import builtins

    import av

    from anonymask.config.pipeline import pipeline_config
    from anonymask.core.errors import InvalidVideoError
    from anonymask.storage.datasets import get_adapter
    from anonymask.tasks.common import ORDER, execute_stage

    url = str(tmp_path / "s.zarr")
    cfg = pipeline_config("demo", {"pose4d": {"backend": "gt"}, "segment": {"backend": "gt"}})
    s = DatasetStore.create(url, "demo", source=str(tiny_dataset), stages=ORDER, config=cfg)
    info = next(iter(get_adapter("demo", tiny_dataset).records()))
    s.register_videos([info])
    src = os.path.realpath(info.path)

    def deny(real):
        def opener(p, *a, **k):
            if isinstance(p, (str, os.PathLike)) and os.path.realpath(str(p)) == src:
                raise PermissionError(errno.EACCES, "Permission denied", str(p))
            return real(p, *a, **k)
        return opener

    monkeypatch.setattr(builtins, "open", deny(builtins.open))
    monkeypatch.setattr(av, "open", deny(av.open))
    with pytest.raises(InvalidVideoError) as exc:
        execute_stage(url, info.video_id, "ingest", cfg)
    assert str(exc.value) == f"{info.path}: cannot be read (permission denied)"
