"""Stage ``merge``: avatars composited over the inpainted video -> ``merged`` (x_ddot, the
paper's "Render" variant when no refinement follows). Per frame, so it runs window by window:
memory is one window whatever the video's length."""

from __future__ import annotations

import numpy as np

from anonymask.config.stages import MergeSettings
from anonymask.storage.store import StageWriter, VideoEntry
from anonymask.storage.windows import frame_windows


# declared in config/stages.py (settings, deps, versions)
def run(entry: VideoEntry, cfg: MergeSettings, w: StageWriter) -> None:
    from anonymask.models.anonymizer.compose.merge import merge

    x_dot, rgb, mask = entry.array("inpainted"), entry.array("render/rgb"), entry.array("render/mask")
    t_len = int(x_dot.shape[0])
    with w.frames("merged", x_dot.shape[1:], np.uint8, t_len) as out:
        for win in frame_windows(t_len, cfg.window):
            out.write(merge(np.asarray(x_dot[win.read]), np.asarray(rgb[win.read]), np.asarray(mask[win.read])))
