import json

import numpy as np

from anonymask.cli.main import main
from anonymask.storage.inspect import status_report, verify_store
from anonymask.storage.store import DatasetStore, VideoInfo


def build(url):
    s = DatasetStore.create(url, "demo", stages=["ingest", "segment"], overwrite=True)
    s.register_videos([VideoInfo("ok", label=0), VideoInfo("bad", label=1), VideoInfo("new", label=0)])
    x = np.random.default_rng(0).integers(0, 255, (20, 8, 8, 3), dtype=np.uint8)
    for vid in ("ok", "bad"):
        with s.video(vid).stage("ingest", backend="x") as w:
            w.write("raw", x)
            w.metric(mask_iou=0.75)
    with s.video("ok").stage("segment", backend="x") as w:
        w.write("person_mask", x[..., 0] > 100)
    try:
        with s.video("bad").stage("segment", backend="x"):
            raise RuntimeError("no person found in bad.mp4")
    except RuntimeError:
        pass
    return s


def test_status_report_and_cli(tmp_path, capsys):
    url = str(tmp_path / "d.zarr")
    s = build(url)
    rep = status_report(s)
    by = {v["video_id"]: v for v in rep["videos"]}
    assert by["ok"]["status"] == "done"
    assert by["bad"]["status"] == "failed"
    assert "no person found" in by["bad"]["stages"]["segment"]["error"]
    assert by["new"]["status"] == "missing"
    assert by["ok"]["metrics"]["mask_iou"] == 0.75
    assert rep["summary"] == {"done": 1, "failed": 1, "partial": 0, "missing": 1, "videos": 3}

    assert main(["status", url]) == 0
    out = capsys.readouterr().out
    assert "failed: bad / segment: RuntimeError: no person found" in out
    assert main(["status", url, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["videos"][0]["video_id"] == "bad"


def test_verify_detects_damage(tmp_path, capsys):
    url = str(tmp_path / "d.zarr")
    s = build(url)
    res = verify_store(s)
    assert res.ok and res.checked_arrays == 3
    assert any("bad/segment: failed" in x for x in res.incomplete)
    assert main(["verify", url]) == 0

    # overwrite data behind the record's back: checksum must catch it
    arr = s.video("ok").array("raw")
    arr[0, 0, 0, 0] = (int(arr[0, 0, 0, 0]) + 1) % 256
    res = verify_store(DatasetStore.open(url))
    assert not res.ok and "checksum mismatch" in res.damaged[0]
    assert main(["verify", url]) == 1
    assert "DAMAGED" in capsys.readouterr().out

    # a missing array and a reshaped one
    s2 = DatasetStore.open(url)
    del s2.video("ok").group["person_mask"]
    s2.video("bad").write_array("raw", np.zeros((3, 8, 8, 3), np.uint8))
    res = verify_store(DatasetStore.open(url))
    joined = "\n".join(res.damaged)
    assert "person_mask (stage segment): array missing" in joined
    assert "shape [3, 8, 8, 3]" in joined


def test_status_shows_how_many_people_pose4d_replaced_and_how(tmp_path, capsys):
    url = str(tmp_path / "d.zarr")
    s = build(url)
    with s.video("new").stage("ingest", backend="x") as w:  # the metrics pose4d records, on any stage here
        w.write("raw", np.zeros((2, 8, 8, 3), np.uint8))
        w.metric(tracks=3, unconfirmed_tracks=1.0, face_tracks=1.0, linked_tracks=0.0, begun_on_someone=1.0,
                 verify_rejected=2.0)
    assert main(["status", url]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.split()}
    assert "3 (1 box, 1 face, 1 found twice, 2 not people)" in rows["new"]  # linked 0 is not shown
    assert "people" in rows["video"] and "people: avatars pose4d made" in out
    with s.video("ok").stage("ingest", backend="x") as w:
        w.write("raw", np.zeros((2, 8, 8, 3), np.uint8))
        w.metric(tracks=2, exposure_gain=2.17, shots_brightened=1.0, avatars_per_frame=7.96, second_dropped=4.0,
                 second_parts=1.0, detections_overruled=1.0)
    assert main(["status", url]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.split()}
    assert "2 (4 stretches nobody in, 1 yielded to someone, 1 overruled at a border, dim: seen x2.2, 8.0 a frame)" in rows["ok"]
    assert "(dim" not in rows["new"] and "overruled" not in rows["new"]
    assert "stretches nobody in" not in rows["new"] and "stretches nobody in: parts of tracks" in out
    assert "a frame" not in rows["new"] and "a frame: avatars an average frame shows" in out
