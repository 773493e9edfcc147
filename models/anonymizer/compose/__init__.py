"""anonymask.models.anonymizer.compose: merge, tubelet boxes/crops/pastes, reintegration and the public mask."""

from anonymask.models.anonymizer.compose.merge import blend, merge
from anonymask.models.anonymizer.compose.reintegrate import public_mask, reintegrate
from anonymask.models.anonymizer.compose.tubelets import (
    crop_tubelet,
    mask_extents,
    paste_frame,
    paste_tubelet,
    points_to_crop,
    tubelet_boxes,
)

__all__ = [
    "blend", "merge", "public_mask", "reintegrate", "crop_tubelet", "mask_extents", "paste_frame",
    "paste_tubelet", "points_to_crop", "tubelet_boxes",
]
