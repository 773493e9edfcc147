"""Refinement stage ("Rend.+Diff"): rendered avatar crops made realistic by video diffusion.

- ``conditions``: ControlNet condition images (depth, OpenPose, MediaPipe face) from the render.
- ``animatediff``: :class:`AnimateDiffRefiner` (SD 1.5 + AnimateDiff + three ControlNets).
- ``windows``: temporal windows and per-frame averaging for crops longer than 16 frames.
- ``weights``: the local weights layout under ``$ANONYMASK_WEIGHTS/refine`` and its error.
- ``tiny`` / ``bench``: random weights in the real layout for tests and benchmarks.

Nothing heavy is imported here: diffusers and transformers load only when a refiner is built.
"""
