"""Stage ``refine``: ``none`` keeps the render (the paper's "Render" variant); ``animatediff``
refines each tubelet with AnimateDiff + depth/pose/face ControlNets (weights from
ANONYMASK_WEIGHTS) -> ``tubelets/<j>/refined``."""

from __future__ import annotations

from typing import Any

from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.tasks.common import stage
from anonymask.tasks.tubelets import tubelet_ids

_REFINERS: dict[tuple, Any] = {}


def get_refiner(cfg: dict[str, Any]):
    """One refiner (pipeline on the device) per worker process and config."""
    from anonymask.models.refine.animatediff import AnimateDiffRefiner

    key = tuple(sorted((k, str(v)) for k, v in cfg.items() if k != "seed"))
    if key not in _REFINERS:
        _REFINERS[key] = AnimateDiffRefiner(
            weights_root=cfg.get("weights"), num_inference_steps=int(cfg.get("steps", 8)),
            strength=float(cfg.get("strength", 0.6)), window=int(cfg.get("window", 16)),
            stride=int(cfg.get("stride", 8)),
        )
    return _REFINERS[key]


@stage("refine", deps=("tubelets", "conditions"))
def run(entry: VideoEntry, cfg: dict[str, Any], w: StageWriter) -> None:
    backend = cfg.get("backend", "none")
    if backend not in ("none", "animatediff"):
        raise ValueError(f"unknown refine backend {backend!r} (none, animatediff)")
    refiner = get_refiner(cfg) if backend == "animatediff" else None
    for j in tubelet_ids(entry):
        rgb = entry.read(f"tubelets/{j}/rgb")
        if refiner is None:
            w.write(f"tubelets/{j}/refined", rgb)
            continue
        conds = {k: entry.read(f"tubelets/{j}/cond_{k}") for k in ("depth", "pose", "face")}
        w.write(f"tubelets/{j}/refined", refiner.refine(rgb, conds, seed=int(cfg.get("seed", 0))))
