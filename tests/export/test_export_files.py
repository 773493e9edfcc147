"""`anonymask export` / `verify-export` (issue 30): files, audio, manifest, resume, atomic writes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import av
import numpy as np
import pytest
from export_helpers import SILENT, audio_duration, audio_packets

from anonymask.cli.main import main
from anonymask.storage.export import (
    MANIFEST,
    README,
    ExportOptions,
    export_store,
    read_manifest,
    verify_export,
)
from anonymask.storage.store import DatasetStore
from anonymask.storage.video_io import VideoStream, display_rotation


def decode(path) -> np.ndarray:
    with VideoStream(path) as vs:
        return np.concatenate(list(vs.batches(16)))


def test_export_keeps_layout_fps_frames_audio(audio_store, tmp_path):
    url, root = audio_store
    out = tmp_path / "out"
    res = export_store(url, out)
    store = DatasetStore.open(url, mode="r")
    assert sorted(res["written"]) == store.video_ids() and not res["excluded"] and not res["errors"]
    header, lines = read_manifest(out)
    assert header["project_version"] and header["dataset"] == "demo" and "settings_hash" in header
    for e in store.videos():
        line = lines[e.video_id]
        src = Path(e.info.path)
        assert line["path"] == f"videos/{src.stem}.mp4"  # the input's folder layout and name
        dst = out / line["path"]
        with av.open(str(dst)) as c:
            v = c.streams.video[0]
            assert v.codec_context.name == "h264"
            assert float(v.average_rate) == pytest.approx(e.attrs["fps"])
        got, stored = decode(dst), e.read("anonymized")
        assert got.shape == stored.shape and line["frames"] == len(stored)
        psnr = 10 * np.log10(255.0**2 / np.mean((got.astype(np.float64) - stored) ** 2))
        assert psnr > 32, f"{e.video_id}: {psnr:.1f} dB, more than the codec's error"
        if e.video_id == SILENT:
            assert line["audio"] is None and audio_packets(dst) == []
        else:  # copied packet for packet: same bytes, same duration as the source's track
            assert audio_packets(dst) == audio_packets(src) != []
            assert audio_duration(dst) == pytest.approx(audio_duration(src), abs=1e-6)
            assert line["audio"]["codec"] == "aac" and line["audio"]["copied"]
        assert line["label"] == e.info.label and line["split"] == e.info.split
        assert line["store_checksum"] == e.record("reintegrate")["outputs"]["anonymized"]["checksum"]
        assert line["audit"]["audit_passed"] == 1.0 and line["audit_margin"]["value"] > 1
        assert line["anonymize"]["stages"]["audit"]["backend"] and line["anonymize"]["settings_hash"]
        assert line["files"][0]["sha256"] == __import__("hashlib").sha256(dst.read_bytes()).hexdigest()
    assert "Not exported: none." in (out / README).read_text()
    assert verify_export(out)["ok"]


def test_capped_ingest_fps_counts_only_kept_frames(audio_store):
    """ingest.max_frames: the frame decoded past the cap is not kept, so its timestamp must not
    stretch the span the fps is measured over (Pose2Sim's 60 fps came out 57.5 at 24 frames)."""
    _, root = audio_store
    src = root / "videos" / f"{SILENT}.mp4"
    for cap in (3, 5, None):
        with VideoStream(src) as vs:
            n = sum(len(b) for b in vs.batches(2, max_frames=cap))
        assert n == (cap or 8) and vs.report.fps == pytest.approx(15.0), cap


def test_lossless_and_masks_decode_exactly(audio_store, tmp_path):
    url, _ = audio_store
    out = tmp_path / "out"
    export_store(url, out, ExportOptions(lossless=True, with_masks="video"), videos=[SILENT])
    _, lines = read_manifest(out)
    assert list(lines) == [SILENT]
    e = DatasetStore.open(url, mode="r").video(SILENT)
    np.testing.assert_array_equal(decode(out / lines[SILENT]["path"]), e.read("anonymized"))
    mask = decode(out / lines[SILENT]["files"][1]["path"])
    np.testing.assert_array_equal(mask[..., 0], np.where(e.read("public_mask").astype(bool), 255, 0))
    out2 = tmp_path / "png"
    export_store(url, out2, ExportOptions(with_masks="png"), videos=[SILENT])
    import cv2

    pngs = sorted((out2 / "videos" / f"{SILENT}.mask").glob("*.png"))
    assert len(pngs) == e.num_frames
    np.testing.assert_array_equal(cv2.imread(str(pngs[3]), cv2.IMREAD_GRAYSCALE),
                                  np.where(e.read("public_mask")[3].astype(bool), 255, 0))
    assert verify_export(out)["ok"] and verify_export(out2)["ok"]


def test_rotation_kept_as_display_matrix(store_copy, tmp_path):
    url, _ = store_copy
    e = DatasetStore.open(url).video(SILENT)
    e.update_attrs(rotation=90)  # as ingest records a portrait phone video (frames stored upright)
    out = tmp_path / "out"
    export_store(url, out, ExportOptions(lossless=True), videos=[SILENT])
    dst = out / read_manifest(out)[1][SILENT]["path"]
    with av.open(str(dst)) as c:
        assert display_rotation(next(c.decode(video=0))) == 90
    np.testing.assert_array_equal(decode(dst), e.read("anonymized"))  # shown as stored


def test_failed_audit_is_never_exported_and_listed(store_copy, tmp_path):
    url, _ = store_copy
    out = tmp_path / "out"
    export_store(url, out)
    store = DatasetStore.open(url)
    bad = store.video_ids()[0]
    e = store.video(bad)
    path = out / read_manifest(out)[1][bad]["path"]
    assert path.exists()
    e.write_record("audit", dict(e.record("audit"), status="failed", error="AuditError: a face at frames 3-5"))
    res = export_store(url, out)
    assert bad in res["excluded"] and not path.exists()  # the file an earlier export wrote goes too
    line = read_manifest(out)[1][bad]
    assert line["status"] == "excluded" and "audit failed" in line["reason"] and line["files"] == []
    assert f"{bad}: audit failed" in (out / README).read_text()
    other = store.video_ids()[1]
    e2 = store.video(other)
    e2.write_record("refine", dict(e2.record("refine"), status="stale", stale_reason="damaged"))
    res = export_store(url, out)
    assert "not done: stage refine is stale" in res["excluded"][other]
    assert verify_export(out)["ok"]


def test_second_export_writes_nothing_and_stale_is_rewritten(store_copy, tmp_path):
    url, _ = store_copy
    out = tmp_path / "out"
    first = export_store(url, out)
    files = sorted(p for p in out.rglob("*.mp4")) + [out / MANIFEST, out / README]
    before = {p: p.stat().st_mtime_ns for p in files}
    second = export_store(url, out)
    assert second["written"] == [] and sorted(second["unchanged"]) == sorted(first["written"])
    assert {p: p.stat().st_mtime_ns for p in files} == before
    # the store's result changed (a rerun of reintegrate): only that video is rewritten
    store = DatasetStore.open(url)
    vid = store.video_ids()[0]
    e = store.video(vid)
    rec = e.record("reintegrate")
    rec["outputs"]["anonymized"]["checksum"] = "0" * 64
    e.write_record("reintegrate", rec)
    # a damaged file is rewritten too
    victim = out / read_manifest(out)[1][store.video_ids()[1]]["path"]
    victim.write_bytes(victim.read_bytes()[:-10])
    third = export_store(url, out)
    assert sorted(third["written"]) == sorted([vid, store.video_ids()[1]])
    assert third["unchanged"] == [store.video_ids()[2]]
    assert verify_export(out)["ok"]


KILL_SCRIPT = """
import sys, time
from pathlib import Path
from anonymask.storage import export

orig = export.ExportWriter.write
def slow(self, frames):
    orig(self, frames)
    Path(sys.argv[3]).write_text("writing")
    time.sleep(120)
export.ExportWriter.write = slow
export.export_store(sys.argv[1], sys.argv[2])
"""


def test_kill_9_leaves_no_partial_file_and_rerun_completes(audio_store, tmp_path):
    url, _ = audio_store
    out, marker = tmp_path / "out", tmp_path / "marker"
    script = tmp_path / "kill_me.py"
    script.write_text(KILL_SCRIPT)
    proc = subprocess.Popen([sys.executable, str(script), url, str(out), str(marker)])
    try:
        deadline = time.time() + 120
        while not marker.exists():
            assert proc.poll() is None and time.time() < deadline, "export did not start writing"
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    finals = [p for p in out.rglob("*.mp4") if not p.name.startswith(".")]
    parts = list(out.rglob(".*.part"))
    assert finals == [] and parts, (finals, parts)  # the half file exists, only under its temp name
    res = export_store(url, out)
    assert res["partials_removed"] and len(res["written"]) == 3
    assert list(out.rglob(".*.part")) == [] and verify_export(out)["ok"]


def test_cli_export_and_verify_export_names_the_bad_file(audio_store, tmp_path, capsys):
    url, _ = audio_store
    out = tmp_path / "out"
    assert main(["export", url, "--out", str(out), "--videos", SILENT]) == 0
    assert "written" in capsys.readouterr().out
    assert main(["verify-export", str(out)]) == 0
    assert "OK" in capsys.readouterr().out
    target = out / f"videos/{SILENT}.mp4"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    assert main(["verify-export", str(out)]) == 1
    assert f"videos/{SILENT}.mp4: content differs" in capsys.readouterr().out
    (out / "extra.mp4").write_bytes(b"x")
    assert main(["verify-export", str(out)]) == 1
    assert "extra.mp4: not in the manifest" in capsys.readouterr().out
    assert main(["export", url + "-nope", "--out", str(tmp_path / "o2")]) == 2
    assert capsys.readouterr().err.startswith("anonymask: error:")
    assert main(["verify-export", str(tmp_path)]) == 2
    assert main(["export", url, "--out", str(out), "--videos", "nope"]) == 2


def test_manifest_is_json_lines_with_a_header(audio_store, tmp_path):
    url, _ = audio_store
    out = tmp_path / "out"
    export_store(url, out, videos=[SILENT])
    rows = [json.loads(line) for line in (out / MANIFEST).read_text().splitlines()]
    assert rows[0]["kind"] == "export" and rows[0]["classes"] == DatasetStore.open(url, mode="r").classes
    assert [r["video_id"] for r in rows[1:]] == [SILENT]
    shutil.rmtree(out)
