"""The segment stage's safety margin around people (``segment.grow``, ``auto``)."""

import numpy as np

from anonymask.config.stages import validate_stage
from anonymask.models.anonymizer.segment.margins import margin_pixels


def _boxes(heights):
    """(1, T, 4) boxes of these heights (NaN rows: frames without the person)."""
    b = np.full((1, len(heights), 4), np.nan, np.float32)
    for t, h in enumerate(heights):
        if h is not None:
            b[0, t] = (10, 20, 40, 20 + h)
    return b


def test_the_auto_margin_is_a_share_of_the_peoples_median_height():
    cfg = validate_stage("segment", {})
    assert cfg["grow"] == "auto" and cfg["grow_frac"] == 0.03
    args = (cfg["grow_frac"], cfg["grow_min"], cfg["grow_max"])
    # median of 80, 100, 120 (and a frame without the person): 100 px -> 3 px at 3%
    assert margin_pixels("auto", _boxes([80, 100, None, 120]), *args) == 3
    assert margin_pixels("auto", _boxes([200, 200]), *args) == 6
    # clipped: a small person still gets grow_min, a close-up at most grow_max
    assert margin_pixels("auto", _boxes([20, 30]), *args) == cfg["grow_min"]
    assert margin_pixels("auto", _boxes([900]), *args) == cfg["grow_max"]
    # nobody found: grow_min; a number is used as it is
    assert margin_pixels("auto", None, *args) == cfg["grow_min"]
    assert margin_pixels(5, _boxes([100]), *args) == 5


def test_grow_pixels_resolves_the_stages_typed_settings():
    from anonymask.config.stages import stage_settings
    from anonymask.models.anonymizer.segment.margins import grow_pixels

    assert grow_pixels(stage_settings("segment", {}), _boxes([80, 100, None, 120])) == 3
    assert grow_pixels(stage_settings("segment", {"grow_frac": 0.06}), _boxes([100])) == 6
    assert grow_pixels(stage_settings("segment", {"grow": 5}), _boxes([100])) == 5
