"""Backends of the ``refine`` and ``conditions`` stages.

refine:
- ``none``: the rendered avatar crops as they are (the paper's "Render" variant, offline);
- ``animatediff``: :class:`~anonymask.models.anonymizer.refine.animatediff.AnimateDiffRefiner` (SD 1.5 +
  AnimateDiff + depth/pose/face ControlNets, weights from ``$ANONYMASK_WEIGHTS/refine``); every
  parameter of the refiner is a setting. The pipeline refines with fewer steps and more strength
  than the class's defaults (8 steps, strength 0.6: the avatar render is already close).

conditions:
- ``render``: depth, OpenPose skeleton and face points computed exactly from the avatar render.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from anonymask.core.registry import declare, register


@register("refine", "none")
class KeepRender:
    """The rendered avatar crops unchanged."""

    def refine(self, frames: np.ndarray, conditions: Mapping[str, np.ndarray], seed: int = 0) -> np.ndarray:
        return np.asarray(frames)


declare("refine", "animatediff", "anonymask.models.anonymizer.refine.animatediff:AnimateDiffRefiner",
        summary="AnimateDiff + ControlNets (depth, pose, face) on each tubelet", weights="refine",
        check="anonymask.models.anonymizer.refine.weights:check_refine_settings",
        runtime=("device", "dtype"), defaults={"num_inference_steps": 8, "strength": 0.6})


@register("conditions", "render")
class RenderConditions:
    """ControlNet conditions computed exactly from the avatar render (tasks/conditions.py)."""
