"""The audit's margin: each check's limit / observed value, the tightest named, shown by status for
passed and failed audits alike, and on the same side of 1 as the verdict."""

import shutil

import pytest

from anonymask.config.pipeline import pipeline_config
from anonymask.core.errors import AuditError
from anonymask.models.anonymizer.audit.margin import HEADROOM_CAP, audit_margin, headroom
from anonymask.storage.inspect import format_status_table, status_report
from anonymask.storage.store import DatasetStore


def test_headroom_reads_the_same_way_for_every_check():
    assert headroom(0.001, 0.0005) == pytest.approx(2.0)
    assert headroom(0.001, 0.004) == pytest.approx(0.25)
    assert headroom(2, 0) == HEADROOM_CAP
    m = audit_margin(detector_frames={"face": 1}, frames_needed={"face": 2, "body": 3}, gt=(0.0004, 0.001),
                     erased=(0.3, 0.5))
    assert m.checks == pytest.approx({"face": 2.0, "body": HEADROOM_CAP, "gt_leak": 2.5, "erased": 0.5 / 0.3})
    assert m.tightest == ("erased", pytest.approx(0.5 / 0.3))
    failing = audit_margin(detector_frames={"face": 3}, frames_needed={"face": 2})
    assert failing.tightest == ("face", pytest.approx(2 / 3))  # 3 frames where 2 fail: below 1


def _cfg(**audit):
    return pipeline_config("demo", {"pose4d": {"backend": "gt"}, "segment": {"backend": "gt"}, "audit": audit})


def test_status_shows_each_videos_margin_on_the_side_of_its_verdict(tiny_anonymized, tmp_path):
    from anonymask.tasks.common import execute_stage

    url = str(tmp_path / "c.zarr")
    shutil.copytree(tiny_anonymized, url)
    store = DatasetStore.open(url)
    vid = store.video_ids()[0]
    DatasetStore.open(url).video(vid).mark_stale(["audit"], "recorded before margins")
    execute_stage(url, vid, "audit", _cfg())
    passed = status_report(DatasetStore.open(url, mode="r"))
    row = next(r for r in passed["videos"] if r["video_id"] == vid)
    assert row["stages"]["audit"]["status"] == "done"
    assert row["audit_margin"]["value"] > 1.0
    assert set(row["audit_margin"]["checks"]) >= {"face", "body", "gt_leak", "erased"}
    # the same video with a quarter of its frames showing the real person: the audit fails and its
    # margin is below 1, by the measured leak
    e = DatasetStore.open(url).video(vid)
    out = e.array("anonymized")
    k = out.shape[0] // 4
    out[:k] = e.read("raw", slice(0, k))
    e.array("render/mask")[:k] = False  # no avatar there either: the person is what the output shows
    e.mark_stale(["audit"], "the output was changed by the test")
    with pytest.raises(AuditError):
        execute_stage(url, vid, "audit", _cfg(max_gt_leak=0.001))
    failed = status_report(DatasetStore.open(url, mode="r"))
    row = next(r for r in failed["videos"] if r["video_id"] == vid)
    assert row["stages"]["audit"]["status"] == "failed"
    rec = DatasetStore.open(url).video(vid).record("audit")["metrics"]
    assert row["audit_margin"]["checks"]["gt_leak"] == pytest.approx(0.001 / rec["audit_gt_leak"], rel=1e-3)
    assert row["audit_margin"]["value"] < 1.0
    table = format_status_table(failed)
    check = row["audit_margin"]["check"]
    assert f"{row['audit_margin']['value']:.2f}x {check}" in table and "audit margin" in table
