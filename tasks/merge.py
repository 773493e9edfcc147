"""Stage ``merge``: avatars composited over the inpainted video -> ``merged`` (x_ddot, the
paper's "Render" variant when no refinement follows)."""

from __future__ import annotations

from typing import Any

from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.tasks.common import stage


@stage("merge", deps=("inpaint", "render"), backend=lambda c: "alpha")
def run(entry: VideoEntry, cfg: dict[str, Any], w: StageWriter) -> None:
    from anonymask.models.compose.merge import merge

    w.write("merged", merge(entry.read("inpainted"), entry.read("render/rgb"), entry.read("render/mask")))
