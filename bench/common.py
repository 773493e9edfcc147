"""What every benchmark shares: the machine it ran on, and NTU-60's size for projections.

Its own module so that the harness, the scaling benchmark, the GPU check and the projections
import it instead of each other.
"""

from __future__ import annotations

import json
import os
import platform
import resource
from pathlib import Path
from typing import Any


def peak_rss_gb() -> float:
    """This process's peak resident memory so far (GiB; ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def emit(result: dict[str, Any], out: str | None) -> None:
    """A benchmark's JSON result on stdout, and into ``out`` when given."""
    text = json.dumps(result, indent=2)
    print(text)
    if out:
        Path(out).write_text(text + "\n")


def machine() -> dict[str, Any]:
    import torch

    info = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    try:
        info["mem_gb"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError):
        pass
    return info


#: NTU RGB+D 60: videos in the dataset
NTU60_VIDEOS = 56_880
#: an assumption, not a measurement: mean frames per NTU-60 video (clips run ~1-10 s at 30 fps;
#: the skeleton files hold at most 300 frames). Replace with the dataset's own mean when you have it.
NTU60_ASSUMED_FRAMES = 90


def ntu60_projection(seconds_per_frame: float, frames_per_video: float = NTU60_ASSUMED_FRAMES,
                     workers: tuple[int, ...] = (1, 8, 32, 128)) -> dict[str, Any]:
    """Hours to anonymize NTU-60 on N workers from a measured cost per frame of one worker.

    Assumes what the measurement cannot show: every worker as fast as the measured one (one video
    per worker, no shared-core contention), perfect scaling over videos (they are independent),
    and store I/O that keeps up. ``seconds_per_frame`` should come from frames at NTU's ingest
    size (640x360 after ``ingest.max_side``)."""
    per_video = float(seconds_per_frame) * float(frames_per_video)
    return {
        "videos": NTU60_VIDEOS, "frames_per_video_assumed": frames_per_video,
        "seconds_per_frame_per_worker": round(float(seconds_per_frame), 4),
        "seconds_per_video_per_worker": round(per_video, 2),
        "hours": {str(n): round(NTU60_VIDEOS * per_video / n / 3600.0, 1) for n in workers},
    }
