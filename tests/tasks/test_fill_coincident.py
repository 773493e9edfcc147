"""The inpaint stage's ``fill_coincident`` on synthetic data: hole pixels whose fill is the same
when the video's people are replaced by the clean background (a fill the person did not cause)."""

import shutil

import numpy as np

from anonymask.config.pipeline import pipeline_config
from anonymask.storage.store import DatasetStore


def _copy(tiny_anonymized, tmp_path) -> tuple[str, str]:
    """A private copy of the anonymized tiny store and its first video's id."""
    url = str(tmp_path / "c.zarr")
    shutil.copytree(tiny_anonymized, url)
    return url, DatasetStore.open(url).video_ids()[0]


def _cfg(**inpaint) -> dict:
    """The tiny store's settings (ground-truth pose and masks) with these inpaint settings."""
    return pipeline_config("demo", {"pose4d": {"backend": "gt"}, "segment": {"backend": "gt"}, "inpaint": inpaint})


def test_with_exact_masks_no_fill_is_caused_by_the_person(tiny_anonymized):
    """Ground-truth masks (grown) hold every person pixel in the hole, so the fill never sees a
    person: the same fill either way, in every hole pixel of every video, and the audit's
    ground-truth check passes with nothing to excuse where nothing is shown."""
    store = DatasetStore.open(tiny_anonymized)
    for vid in store.video_ids():
        e = store.video(vid)
        same, hole = np.asarray(e.array("fill_coincident")), np.asarray(e.array("person_hole")).astype(bool)
        assert same.shape == hole.shape and same.dtype == bool
        assert not (same & ~hole).any()  # only hole pixels can be excused
        assert np.array_equal(same, hole), vid
        m = e.metrics()
        assert m["fill_coincident_share"] == 1.0
        assert m["audit_gt_leak"] <= m["real_leak"] + 1e-9 and "audit_gt_coincident" in m


def test_a_fill_made_from_a_person_the_mask_missed_is_not_excused(tiny_anonymized, tmp_path):
    """The same video with the mask shrunk so that a person is partly uncovered in its frames:
    the temporal median then fills from their pixels, and those fills are not coincident."""
    from anonymask.tasks.common import execute_stage

    url, vid = _copy(tiny_anonymized, tmp_path)
    e = DatasetStore.open(url).video(vid)
    cfg = _cfg(min_support=1, grow_unseen=0)
    hole = np.asarray(e.array("person_hole")).astype(bool)
    person = e.read("gt/person_mask").astype(bool)
    # every other frame shows the person outside the hole: their pixels become fill sources
    missed = person.copy()
    missed[1::2] = False
    e.array("person_hole")[...] = hole & ~(person & ~missed)
    execute_stage(url, vid, "inpaint", cfg)
    e = DatasetStore.open(url).video(vid)
    same, hole = np.asarray(e.array("fill_coincident")), np.asarray(e.array("person_hole")).astype(bool)
    assert same.sum() < hole.sum()  # some fills came from the person
    assert e.metrics()["fill_coincident_share"] < 1.0


def test_without_the_person_free_check_nothing_is_excused(tiny_anonymized, tmp_path):
    """``inpaint.person_free_check: false`` (the bench: a cost only synthetic data pays) writes no
    ``fill_coincident``, and the audit then counts every pixel that looks shown."""
    from anonymask.tasks.common import execute_stage

    url, vid = _copy(tiny_anonymized, tmp_path)
    cfg = _cfg(person_free_check=False)
    for s in ("inpaint", "merge", "tubelets", "conditions", "refine", "reintegrate", "audit"):
        execute_stage(url, vid, s, cfg)
    e = DatasetStore.open(url).video(vid)
    assert not e.has_array("fill_coincident") and "fill_coincident_share" not in e.metrics()
    assert e.metrics()["audit_gt_coincident"] == 0.0


def test_a_video_too_long_to_hold_its_person_free_fill_is_checked_from_disk(tiny_anonymized, tmp_path,
                                                                            monkeypatch):
    """The person-free fill waits for the real one in memory up to ``PERSON_FREE_MAX_BYTES`` of
    frames, past it in a temporary file (the 5-minute synthetic video): the same map either way,
    and no file is left behind."""
    import tempfile

    from anonymask.tasks import inpaint
    from anonymask.tasks.common import execute_stage

    url, vid = _copy(tiny_anonymized, tmp_path)
    execute_stage(url, vid, "inpaint", _cfg(min_support=4))  # a changed setting: the stage runs again
    in_memory = np.asarray(DatasetStore.open(url).video(vid).array("fill_coincident"))
    url2, _ = _copy(tiny_anonymized, tmp_path / "disk")
    monkeypatch.setattr(inpaint, "PERSON_FREE_MAX_BYTES", 1000)
    spill = tmp_path / "spill"
    spill.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spill))
    execute_stage(url2, vid, "inpaint", _cfg(min_support=4))
    on_disk = np.asarray(DatasetStore.open(url2).video(vid).array("fill_coincident"))
    assert np.array_equal(on_disk, in_memory) and in_memory.any()
    assert list(spill.iterdir()) == []
