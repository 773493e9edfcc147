"""Stage ``inpaint``: remove every person (the grown mask q) -> ``inpainted`` (x_dot).
Records ``background_psnr_db`` on the ground-truth person pixels vs the clean background."""

from __future__ import annotations

from typing import Any

from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.tasks.common import stage


@stage("inpaint", deps=("ingest", "segment"))
def run(entry: VideoEntry, cfg: dict[str, Any], w: StageWriter) -> None:
    from anonymask.models.inpaint.backends import get_inpainter
    from anonymask.models.metrics import psnr

    params = {k: v for k, v in cfg.items() if k != "backend"}
    x_dot = get_inpainter(cfg.get("backend", "temporal_median"), **params).inpaint(
        entry.read("raw"), entry.read("person_hole")
    )
    w.write("inpainted", x_dot)
    if entry.has_array("gt/background"):
        import numpy as np

        bg = np.broadcast_to(entry.read("gt/background")[None], x_dot.shape)
        w.metric(background_psnr_db=psnr(x_dot, bg, mask=entry.read("gt/person_mask")))
