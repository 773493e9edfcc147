"""A tiny store whose sources carry an audio track (muxed in by the test), fully anonymized with
the ground-truth backends (stages run directly, no Prefect): once per session."""

from __future__ import annotations

import shutil

import pytest
from export_helpers import SILENT, remux_with_audio


@pytest.fixture(scope="session")
def audio_store(tiny_dataset, tmp_path_factory):
    """(store url, source root): the tiny set, two of its videos with an audio track, anonymized."""
    from anonymask.config.pipeline import pipeline_config
    from anonymask.storage.datasets import get_adapter
    from anonymask.storage.store import DatasetStore
    from anonymask.tasks.common import ORDER, run_video

    base = tmp_path_factory.mktemp("export_src")
    root = base / "raw"
    shutil.copytree(tiny_dataset, root)
    for p in sorted((root / "videos").glob("*.mp4")):
        if p.stem != SILENT:
            tmp = p.with_name("tmp_" + p.name)
            remux_with_audio(p, tmp)
            tmp.replace(p)
    url = str(base / "a.zarr")
    cfg = pipeline_config("demo", {"pose4d": {"backend": "gt"}, "segment": {"backend": "gt"}})
    s = DatasetStore.create(url, "demo", source=str(root), stages=ORDER, config=cfg)
    infos = list(get_adapter("demo", root).records())
    s.register_videos(infos)
    for info in infos:
        run_video(url, info.video_id, cfg)
    for e in DatasetStore.open(url, mode="r").videos():
        assert e.record("audit")["status"] == "done", e.video_id
    return url, root


@pytest.fixture
def store_copy(audio_store, tmp_path):
    """A private copy of the audio store (the sources stay shared and unchanged)."""
    url, root = audio_store
    dst = tmp_path / "a.zarr"
    shutil.copytree(url, dst)
    return str(dst), root
