"""The feet's wider margin (models/anonymizer/segment/masks.py ``contact_margin``) and its settings."""

from __future__ import annotations

import numpy as np

from anonymask.config.stages import validate_stage
from anonymask.models.anonymizer.segment.masks import build_person_masks, contact_margin, grow


def _person(h: int = 100, top: int = 10, x0: int = 40, width: int = 20, shape=(150, 120)) -> np.ndarray:
    m = np.zeros((1, *shape), bool)
    m[0, top : top + h, x0 : x0 + width] = True
    return m


def test_only_the_lowest_band_gets_the_wider_margin():
    m = _person()  # rows 10..109
    extra = contact_margin(m, 0.15, 0.08, 3, 12)[0]  # 8 px around rows 95..109
    base = grow(m, 3)[0]
    assert extra[109 + 8, 50] and not extra[109 + 9, 50]  # under the sole: 8 px
    assert extra[100, 40 - 8] and not base[100, 40 - 8]  # beside the ankle
    assert not (extra & ~base)[:95 - 8].any()  # nothing new above the band (minus the disk's reach)


def test_margin_scales_with_each_blob_and_is_capped():
    m = _person(h=50) | _person(h=130, top=10, x0=90, width=20, shape=(150, 120))
    extra = contact_margin(m, 0.15, 0.08, 2, 9)[0]
    assert extra[59 + 4, 50] and not extra[59 + 5, 50]  # 50 px tall: 4 px
    assert extra[139 + 9, 100] and not extra[min(149, 139 + 10), 100]  # 130 px tall: 10.4 -> capped at 9


def test_off_and_never_less_than_the_margin_everywhere():
    m = _person()
    assert not contact_margin(m, 0.15, 0.0, 3, 12).any()
    assert not contact_margin(m, 0.0, 0.08, 3, 12).any()
    assert not contact_margin(_person(h=20), 0.15, 0.08, 3, 12).any()  # 1.6 px < 3: the base margin holds


def test_build_person_masks_adds_the_feet_margin_to_the_hole_only_at_the_feet():
    m = _person().astype(np.float32)
    plain = build_person_masks(m, threshold=0.5, window=0, grow_pixels=3, sigma=0.0)
    feet = build_person_masks(m, threshold=0.5, window=0, grow_pixels=3, sigma=0.0, contact=(0.15, 0.08, 12))
    assert (feet.hole >= plain.hole).all()
    new = feet.hole & ~plain.hole
    assert new.any() and np.nonzero(new[0])[0].min() >= 95 - 8


def test_settings_are_typed_with_defaults_and_bounds():
    cfg = validate_stage("segment", {})
    assert cfg["contact_band"] == 0.15 and cfg["contact_frac"] == 0.08 and cfg["contact_max"] == 12
    import pytest

    from anonymask.core.errors import SettingsError

    with pytest.raises(SettingsError):
        validate_stage("segment", {"contact_frac": -0.1})


def test_still_region_takes_in_a_part_the_detector_lost_for_a_while():
    """A still person whose head the detector lost in 4 of 10 frames (someone passed): the head is
    in the mask in 60% of the frames, under the 80% that makes a still core, and joins the still
    region through the core it touches (``static_extend``); a separate blob at 60% does not."""
    from anonymask.models.anonymizer.segment.still import StillRegions

    prob = np.zeros((10, 40, 40), np.float32)
    prob[:, 10:30, 10:16] = 1.0  # the still body, every frame
    prob[:6, 4:10, 10:16] = 1.0  # its head, lost in frames 6..9
    prob[:6, 4:10, 30:36] = 1.0  # something else seen as often, touching no core

    def read(a, b):
        return prob[a:b]

    present = prob >= 0.5
    old = StillRegions(10, 10, 0, 0.5, 0.8, 1, 0.8, 0.3).apply(prob, 0, read, present)
    new = StillRegions(10, 10, 0, 0.5, 0.8, 1, 0.5, 0.3).apply(prob, 0, read, present)
    assert old[8, 4:9, 10:16].max() < 0.5  # without hysteresis the head is shown in frame 8
    assert new[8, 4:10, 10:16].min() > 0.5  # with it, covered
    assert new[8, 4:10, 30:36].max() < 0.5  # the unconnected blob is not still


def test_still_region_does_not_reach_clutter_beyond_its_body():
    """Pixels seen in 60% of the frames that touch a still core but lie farther from it than
    ``static_reach`` x its height (clutter the detector sees now and then) stay out."""
    from anonymask.models.anonymizer.segment.still import StillRegions

    prob = np.zeros((10, 40, 80), np.float32)
    prob[:, 10:30, 10:16] = 1.0  # the still body, 20 px tall: reach 0.3 -> 6 px
    prob[:6, 12:16, 16:70] = 1.0  # a shelf edge touching it, seen in 6 of 10 frames

    def read(a, b):
        return prob[a:b]

    out = StillRegions(10, 10, 0, 0.5, 0.8, 0, 0.5, 0.3).apply(prob, 0, read, prob >= 0.5)
    assert out[8, 12:16, 16:22].min() > 0.5  # next to the body: in
    assert out[8, 12:16, 23:70].max() < 0.5  # beyond the reach: out
