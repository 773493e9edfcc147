"""Real footage out of the store (issue 30 item 4): Sports2D's demo and a Pose2Sim view, an audio
track muxed in by the test, capped to a few frames, anonymized with the default backends, exported.
Slow (the default backends on real frames): ``pytest -m slow tests/export/test_export_real.py``."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import av
import numpy as np
import pytest
from export_helpers import audio_packets, remux_with_audio

from anonymask.storage.export import ExportOptions, export_store, read_manifest, verify_export
from anonymask.storage.store import DatasetStore
from anonymask.storage.video_io import VideoStream

pytestmark = pytest.mark.slow
FRAMES = 24
SOURCES = {"sports2d/demo.mp4": ("Sports2D", "Demo/demo.mp4"),
           "pose2sim/cam02.mp4": ("Pose2Sim", "Demo_MultiPerson/videos/cam02.mp4")}


def _package_file(module: str, rel: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{module} is not installed")
    p = Path(list(spec.submodule_search_locations)[0]) / rel
    if not p.is_file():
        pytest.skip(f"{p} missing")
    return p


def test_real_footage_export_keeps_frames_fps_and_audio(tmp_path):
    from anonymask.config.pipeline import pipeline_config
    from anonymask.storage.datasets import get_adapter
    from anonymask.tasks.common import ORDER, run_video

    root = tmp_path / "raw"
    for rel, (module, path) in SOURCES.items():
        dst = root / rel
        dst.parent.mkdir(parents=True)
        remux_with_audio(_package_file(module, path), dst)
    url = str(tmp_path / "real.zarr")
    cfg = pipeline_config("folder", {"ingest": {"max_frames": FRAMES, "max_side": 320}})
    store = DatasetStore.create(url, "folder", source=str(root), stages=ORDER, config=cfg)
    infos = list(get_adapter("folder", root).records())
    store.register_videos(infos)
    for info in infos:
        run_video(url, info.video_id, cfg)
    out = tmp_path / "out"
    res = export_store(url, out, ExportOptions(lossless=True))
    _, lines = read_manifest(out)
    assert sorted(lines) == sorted(i.video_id for i in infos) and not res["errors"]
    assert res["written"], f"nothing exported: {res['excluded']}"
    for vid, line in lines.items():
        e = DatasetStore.open(url, mode="r").video(vid)
        if line["status"] != "exported":  # the audit failed: listed with its reason, no file
            assert line["reason"] and not (out / line["path"]).exists()
            continue
        src = Path(e.info.path)
        assert line["path"] == src.relative_to(root).as_posix()
        dst = out / line["path"]
        with VideoStream(dst) as vs:
            got = np.concatenate(list(vs.batches(16)))
        np.testing.assert_array_equal(got, e.read("anonymized"))
        assert len(got) == FRAMES == line["frames"] and line["frame_cap"] == FRAMES
        with av.open(str(dst)) as c, av.open(str(src)) as s:
            assert float(c.streams.video[0].average_rate) == pytest.approx(float(s.streams.video[0].average_rate),
                                                                           rel=1e-3)
            a = s.streams.audio[0]
            src_pkts = [(bytes(p), p.pts) for p in s.demux(a) if p.size]
        end = FRAMES / line["fps"]
        kept = [b for b, pts in src_pkts if pts * a.time_base < end]
        assert audio_packets(dst) == kept  # the source's packets up to the last exported frame
    assert verify_export(out)["ok"]
    assert export_store(url, out, ExportOptions(lossless=True))["written"] == []
    shutil.rmtree(out)
