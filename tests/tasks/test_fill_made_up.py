"""The inpaint stage's ``fill_made_up`` (hole pixels the fill made up) and the audit reading it."""

import numpy as np

from anonymask.storage.store import DatasetStore


def test_the_made_up_pixels_are_stored_inside_the_hole_and_reach_the_audit(tiny_anonymized):
    from anonymask.tasks.audit import _sampled

    store = DatasetStore.open(tiny_anonymized)
    for vid in store.video_ids():
        e = store.video(vid)
        made, hole = np.asarray(e.array("fill_made_up")), np.asarray(e.array("person_hole")).astype(bool)
        assert made.shape == hole.shape and made.dtype == bool
        assert not (made & ~hole).any()
        m = e.metrics()
        assert m["made_up_share"] == made.sum() / hole.sum()
        assert "audit_on_fill" in m
        items = list(_sampled(e, 4, True))
        assert items and all(np.array_equal(it[4], made[it[0]]) for it in items)
        assert all(it[4] is None for it in _sampled(e, 4, False))  # audit.made_up_fill false: avatars only


def test_the_stage_stores_what_the_backend_made_up(tiny_anonymized):
    """The tiny videos are one window each: the stored map is the backend's own on the same frames
    and holes, and some of the videos have pixels no frame shows without a person."""
    from anonymask.models.anonymizer.inpaint import get_inpainter

    store = DatasetStore.open(tiny_anonymized)
    total = 0
    for vid in store.video_ids():
        e = store.video(vid)
        raw, hole = np.asarray(e.array("raw")), np.asarray(e.array("person_hole"))
        _, made = get_inpainter("temporal_median").fill(raw, hole)
        assert np.array_equal(np.asarray(e.array("fill_made_up")), made), vid
        total += int(made.sum())
    assert total > 0
