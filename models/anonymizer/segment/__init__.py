"""anonymask.models.anonymizer.segment: person-mask backends + unflicker/grow/feather (pure numpy)."""

from anonymask.models.anonymizer.segment.backends import (
    GroundTruthSegmenter,
    MediapipeSegmenter,
    Segmenter,
    available_segmenters,
    get_segmenter,
)
from anonymask.models.anonymizer.segment.masks import (
    PersonMasks,
    as_alpha,
    as_bool,
    as_full,
    assign_to_tracks,
    build_person_masks,
    feather,
    grow,
    person_mask,
    uint8_scale,
    unflicker,
    union_tracks,
)

__all__ = [
    "GroundTruthSegmenter", "MediapipeSegmenter", "Segmenter", "available_segmenters", "get_segmenter",
    "PersonMasks", "build_person_masks", "as_alpha", "as_bool", "as_full", "assign_to_tracks", "feather", "grow",
    "person_mask", "uint8_scale", "union_tracks", "unflicker",
]
