"""A source is known by its bytes (issue 32 item 4): the corpus moved and re-run in a new process
recomputes nothing and ``status`` shows the new path; a file whose bytes changed recomputes that
video only; a store written with the old (path, size, mtime) identity is upgraded in place."""

import json
import os
import subprocess
import sys

import pytest

from anonymask.storage.store import DatasetStore

#: one "anonymize" over the corpus, stages run directly (no Prefect): prints {video: {stage: status}}.
#: With "legacy", ingest hashes (path, size, mtime) as before content identity, and the store is
#: left as such a run left it (no source_identity attr, no checksum cache).
DRIVER = r"""
import json, sys
from anonymask.config.pipeline import pipeline_config
from anonymask.storage.datasets import get_adapter
from anonymask.storage.store import DatasetStore
from anonymask.tasks.common import ORDER, STAGES, load_stages, run_video

source, url, mode = sys.argv[1:4]
load_stages()
if mode == "legacy":
    import dataclasses
    from anonymask.tasks.identity import legacy_identity
    ing = STAGES["ingest"]
    STAGES["ingest"] = dataclasses.replace(ing, external=lambda e: legacy_identity(e.info.path), prepare=None)
cfg = pipeline_config("demo", {"pose4d": {"backend": "gt"}, "segment": {"backend": "gt"}})
s = DatasetStore.create(url, "demo", source=source, stages=ORDER, config=cfg)
infos = list(get_adapter("demo", source).records())
s.register_videos(infos)
out = {}
for info in infos:
    out[info.video_id] = {r["stage"]: r["status"] for r in run_video(url, info.video_id, cfg)}
    if mode == "legacy":
        e = DatasetStore.open(url).video(info.video_id)
        for k in ("source_identity", "source_checksums"):
            e.group.attrs.pop(k, None)
print(json.dumps(out))
"""


def run(source, store, mode="run"):
    p = subprocess.run([sys.executable, "-c", DRIVER, str(source), str(store), mode],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def finished(store):
    return {e.video_id: {s: r.get("finished_at") for s, r in e.records().items()}
            for e in DatasetStore.open(str(store)).videos()}


def status_text(store):
    p = subprocess.run([sys.executable, "-m", "anonymask.cli", "status", str(store)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


def computed(result):
    return {v: sorted(s for s, st in stages.items() if st != "skipped") for v, stages in result.items()}


def test_moved_corpus_recomputes_nothing_and_a_changed_file_only_its_video(tiny_dataset, tmp_path):
    import shutil

    a, b = tmp_path / "a" / "raw", tmp_path / "b" / "raw"
    shutil.copytree(tiny_dataset, a)
    store = tmp_path / "s.zarr"
    first = run(a, store)
    assert all(set(st.values()) == {"done"} for st in first.values()), first
    before = finished(store)

    b.parent.mkdir()
    os.rename(a, b)  # `mv`: same bytes, new path
    again = run(b, store)
    assert computed(again) == {v: [] for v in first}, again
    assert finished(store) == before
    text = status_text(store)
    assert str(b / "videos") in text and str(a) not in text, text
    for e in DatasetStore.open(str(store)).videos():
        assert e.attrs["source"].startswith(str(b)), e.attrs["source"]

    changed = sorted(first)[0]
    with open(b / "videos" / f"{changed}.mp4", "ab") as f:  # new bytes (trailing data; decodes the same)
        f.write(b"\0" * 8 + b"changed")
    third = run(b, store)
    assert third[changed] == {s: "done" for s in first[changed]}, third
    assert computed(third) == {v: [] for v in first if v != changed} | {changed: sorted(first[changed])}


def test_legacy_store_is_upgraded_in_place_without_recompute(tiny_dataset, tmp_path):
    import shutil

    a, b = tmp_path / "a" / "raw", tmp_path / "b" / "raw"
    shutil.copytree(tiny_dataset, a)
    store = tmp_path / "s.zarr"
    run(a, store, mode="legacy")
    before = finished(store)
    b.parent.mkdir()
    os.rename(a, b)  # an old store, and its corpus moved too: the bytes still match what was ingested
    changed = sorted(before)[0]
    with open(b / "videos" / f"{changed}.mp4", "ab") as f:
        f.write(b"\0" * 8 + b"changed")
    res = run(b, store)
    assert computed(res) == {v: [] for v in before if v != changed} | {changed: sorted(before[changed])}, res
    after = finished(store)
    assert {v: t for v, t in after.items() if v != changed} == {v: t for v, t in before.items() if v != changed}
    for e in DatasetStore.open(str(store)).videos():
        assert e.attrs["source_identity"].startswith("sha256:"), e.video_id


@pytest.mark.parametrize("where", ["symlink"])
def test_symlinked_corpus_shares_the_checksum_cache(tiny_dataset, tmp_path, where):
    """The same file through a link resolves to one cache entry: no second read of its bytes."""
    from anonymask.storage.store import VideoInfo
    from anonymask.tasks.identity import cached_checksum

    s = DatasetStore.create(str(tmp_path / "s.zarr"), "demo")
    src = next((tiny_dataset / "videos").iterdir())
    link = tmp_path / "link.mp4"
    link.symlink_to(src)
    s.register_videos([VideoInfo("v", path=str(link))])
    e = s.video("v")
    assert cached_checksum(e, link) == cached_checksum(e, src)
    assert list(e.attrs["source_checksums"]) == [os.path.realpath(src)]


@pytest.mark.slow
def test_cli_moved_corpus_is_all_skipped(tiny_dataset, tmp_path):
    """The same through `anonymask anonymize` (Prefect flow, one task per stage): 0 done after `mv`."""
    import shutil

    a, b = tmp_path / "a" / "raw", tmp_path / "b" / "raw"
    shutil.copytree(tiny_dataset, a)
    store = tmp_path / "s.zarr"
    env = dict(os.environ, ANONYMASK_LOG_DIR=str(tmp_path / "logs"))

    def anonymize(src):
        p = subprocess.run([sys.executable, "-m", "anonymask.cli", "anonymize", "--dataset", "demo", "--source",
                            str(src), "--store", str(store), "--set", "pose4d.backend=gt", "segment.backend=gt"],
                           capture_output=True, text=True, timeout=600, env=env)
        assert p.returncode == 0, (p.stdout, p.stderr[-3000:])
        return p.stdout.splitlines()[0]

    assert anonymize(a).startswith("anonymize demo: 3 done, 0 skipped")
    before = finished(store)
    b.parent.mkdir()
    os.rename(a, b)
    assert anonymize(b).startswith("anonymize demo: 0 done, 3 skipped"), "moved corpus recomputed"
    assert finished(store) == before
    assert f"source: {b / 'videos'} (3 videos)" in status_text(store)
