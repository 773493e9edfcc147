"""The anonymize flow end to end on the tiny synthetic set, through real Prefect and Zarr.

Ground-truth pose and segmentation backends keep it fast and deterministic (the tiny videos are
too small for mediapipe); the mediapipe path runs in the slow tier and in `make demo`.
"""

import json

import numpy as np
import pytest

from anonymask.storage.inspect import status_report, verify_store
from anonymask.storage.store import DatasetStore

GT = {"pose4d": {"backend": "gt"}, "segment": {"backend": "gt"}}


def run(source, store, overrides=None, **kw):
    from anonymask.flows.anonymize import anonymize

    state = anonymize(dataset="demo", source=str(source), store=str(store), overrides=GT if overrides is None else overrides,
                      return_state=True, **kw)
    return state, state.result(raise_on_failure=False)


def finished_at(store_url):
    s = DatasetStore.open(store_url)
    return {(e.video_id, k): r["finished_at"] for e in s.videos() for k, r in e.records().items()}


def test_end_to_end_resume_and_config_change(prefect_api, tiny_copy, tmp_path):
    store = tmp_path / "demo.zarr"
    state, summary = run(tiny_copy, store)
    assert state.is_completed(), state.message
    assert summary["done"] == 3 and summary["failed"] == 0
    s = DatasetStore.open(str(store))
    rep = status_report(s)
    assert all(v["status"] == "done" for v in rep["videos"])
    assert verify_store(s).ok
    public_any = []
    for e in s.videos():
        raw, anon = e.read("raw"), e.read("anonymized")
        gt = e.read("gt/person_mask")
        r = e.read("public_mask")
        m = e.metrics()
        # the person is gone: little of their real appearance survives
        assert m["person_leak"] < 0.15, (e.video_id, m["person_leak"])
        assert np.abs(anon.astype(int) - raw.astype(int))[gt].mean() > 10
        # public pixels are avatar pixels and show the avatar (resampled through its tubelet); on
        # the tiny 64x48 videos the conservative public mask may erode a small avatar away
        assert not (r & ~e.read("render/mask")).any()
        if r.any():
            assert np.abs(anon[r].astype(int) - e.read("render/rgb")[r].astype(int)).mean() < 12
        public_any.append(bool(r.any()))
        assert {"mask_iou", "background_psnr_db", "person_leak"} <= set(m)
    assert any(public_any)
    two = s.video("s01s02_a02_r01")
    assert two.read("render/track_masks_spans").shape[0] == 2  # one avatar per person
    assert len(list(two.group["tubelets"].group_keys())) == 2

    # resume: nothing recomputed
    before = finished_at(str(store))
    state, summary = run(tiny_copy, store)
    assert summary["skipped"] == 3 and summary["done"] == 0
    assert finished_at(str(store)) == before

    # a changed inpaint config recomputes inpaint and everything downstream, nothing upstream
    state, summary = run(tiny_copy, store, overrides={**GT, "inpaint": {"backend": "opencv"}})
    after = finished_at(str(store))
    for (vid, stage), t in before.items():
        changed = after[(vid, stage)] != t
        downstream = stage in ("inpaint", "merge", "tubelets", "conditions", "refine", "reintegrate", "audit")
        assert changed == downstream, (vid, stage)

    # damage found on resume is repaired: the damaged stage and what follows it are recomputed
    vid = "s02_a01_r01"
    e = DatasetStore.open(str(store)).video(vid)
    good = e.read("merged")
    shard = max((p for p in (store / "videos" / vid / "merged" / "c").rglob("*") if p.is_file()),
                key=lambda p: p.stat().st_size)
    shard.unlink()  # a deleted chunk reads back as zeros: only the checksum can tell
    assert not verify_store(DatasetStore.open(str(store))).ok
    before = finished_at(str(store))
    state, summary = run(tiny_copy, store, overrides={**GT, "inpaint": {"backend": "opencv"}})
    assert summary["done"] == 1 and summary["skipped"] == 2 and summary["failed"] == 0
    assert [r["video"] for r in summary["repaired"]] == [vid] and "checksum mismatch" in summary["repaired"][0]["what"]
    after = finished_at(str(store))
    for (v, stage), t in before.items():
        assert (after[(v, stage)] != t) == (v == vid and stage in ("merge", "tubelets", "conditions", "refine",
                                                                     "reintegrate", "audit")), (v, stage)
    assert verify_store(DatasetStore.open(str(store))).ok
    np.testing.assert_array_equal(DatasetStore.open(str(store)).video(vid).read("merged"), good)


def test_failures_are_isolated_and_reported(prefect_api, tiny_copy, tmp_path, capsys):
    """Through the CLI: exit 1 when some videos failed, each printed once with stage and reason,
    no traceback on the console, the traceback in the run's log file; exit 2 when nothing can run."""
    from anonymask.cli.main import main

    meta = json.loads((tiny_copy / "dataset.json").read_text())
    (tiny_copy / "videos" / "broken.mp4").write_text("this is not a video")
    (tiny_copy / "videos" / "empty.mp4").write_bytes(b"")
    for vid in ("broken", "empty"):
        entry = dict(meta["videos"][0], video_id=vid, path=f"videos/{vid}.mp4")
        meta["videos"].append(entry)
    (tiny_copy / "dataset.json").write_text(json.dumps(meta))
    store = tmp_path / "f.zarr"
    logs = tmp_path / "logs"
    args = ["anonymize", "--dataset", "demo", "--source", str(tiny_copy), "--store", str(store),
            "--log-dir", str(logs), "--set", "pose4d.backend=gt", "segment.backend=gt"]
    assert main(args) == 1  # some failed
    cap = capsys.readouterr()
    out = cap.out.splitlines()
    assert out[0].startswith("anonymize demo: 3 done, 0 skipped (already complete), 2 failed of 5 videos")
    failed = [line for line in out if line.startswith("FAILED")]
    assert len(failed) == 2
    assert any(line.startswith("FAILED  broken  ingest: ") and "broken.mp4" in line for line in failed)
    assert any(line.startswith("FAILED  empty  ingest: ") and "empty.mp4: file is empty (0 bytes)" in line
               for line in failed)
    assert "Traceback" not in cap.out and "Traceback" not in cap.err
    log = [line for line in out if line.startswith("log: ")][0][5:]
    text = open(log).read()
    assert "Traceback (most recent call last)" in text and "InvalidVideoError" in text
    rep = {v["video_id"]: v for v in status_report(DatasetStore.open(str(store)))["videos"]}
    assert "broken.mp4" in rep["broken"]["stages"]["ingest"]["error"]
    assert rep["s01_a01_r01"]["status"] == "done"
    # a rerun retries only the failed ones
    before = finished_at(str(store))
    state, summary = run(tiny_copy, store)
    assert summary["failed"] == 2 and summary["skipped"] == 3
    assert {f["video"]: f["stage"] for f in summary["failures"]} == {"broken": "ingest", "empty": "ingest"}
    after = finished_at(str(store))
    assert all(after[k] == v for k, v in before.items() if k[0].startswith("s0"))
    # could not run at all: a dataset folder that does not exist, found before the flow starts
    assert main(["anonymize", "--dataset", "demo", "--source", str(tmp_path / "nowhere"), "--store",
                 str(tmp_path / "n.zarr"), "--log-dir", str(logs)]) == 2
    err = capsys.readouterr().err
    assert f"anonymask: error: {tmp_path / 'nowhere'}: source folder does not exist" in err and "Traceback" not in err


def test_the_flow_applies_its_presets(prefect_api, tiny_copy, tmp_path):
    """``presets`` reach the settings inside the flow (a deployment run passes them as a parameter):
    an unknown one fails the run in one line before any store exists; the yolo preset's discovery
    settings under the ground-truth pose backend are refused as any such --set would be."""
    store = tmp_path / "p.zarr"
    state, _ = run(tiny_copy, store, presets=["nope"])
    assert state.is_failed() and "no such preset" in state.message and not store.exists()
    state, _ = run(tiny_copy, store, presets=["yolo"])
    assert state.is_failed() and "pose4d.detector is a setting of backend 'mediapipe'" in state.message
    assert not store.exists()


@pytest.mark.slow
@pytest.mark.parametrize("presets", [[], ["yolo"]])
def test_mediapipe_path_on_demo_video(prefect_api, tmp_path, presets):
    """The offline default backends (mediapipe pose + segmentation) on one demo-size video, alone
    and with the yolo preset (the opt-in whole-body detector in discovery, verification and audit)."""
    from anonymask.models.shared.synthetic.generator import generate_demo

    root = tmp_path / "raw"
    generate_demo(root, preset="demo", seed=0)
    store = tmp_path / "d.zarr"
    state, summary = run(root, store, overrides={}, video_ids=["s01_a01_r01"], presets=presets)
    assert summary["done"] == 1, state.message
    e = DatasetStore.open(str(store)).video("s01_a01_r01")
    m = e.metrics()
    assert m["mpjpe_mm"] < 200 and m["mask_iou"] > 0.3 and m["person_leak"] < 0.1
    if presets:
        assert e.records()["audit"]["config"]["detectors"] == ["face", "yolo"]
