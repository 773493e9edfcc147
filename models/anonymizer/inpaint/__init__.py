"""anonymask.models.anonymizer.inpaint: background inpainting backends (pure numpy/OpenCV)."""

from anonymask.models.anonymizer.inpaint.backends import (
    Inpainter,
    OpenCVInpainter,
    TemporalMedianInpainter,
    available_inpainters,
    get_inpainter,
    masked_temporal_median,
)

__all__ = [
    "Inpainter", "OpenCVInpainter", "TemporalMedianInpainter", "available_inpainters", "get_inpainter",
    "masked_temporal_median",
]
