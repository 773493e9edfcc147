"""Where the offline pipeline's time goes: cProfile of every stage after ingest on the pipeline
bench's videos (the generator's tiny preset at 640x480, 48 frames, three videos; the bench's own
settings, bench/harness.py ``_pipeline``).

    python scripts/profile_pipeline.py --out pipeline.prof      # then: python -m pstats pipeline.prof

Prints each stage's seconds per video; cProfile sees only the main thread, so landmark-model
calls made on worker threads show as lock waits there (count the calls by caller instead).
"""

from __future__ import annotations

import argparse
import cProfile
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="cProfile stats file")
    ap.add_argument("--frames", type=int, default=48)
    args = ap.parse_args()
    from anonymask.config.pipeline import pipeline_config
    from anonymask.models.shared.synthetic.generator import generate_demo
    from anonymask.storage.datasets import get_adapter
    from anonymask.storage.store import DatasetStore
    from anonymask.tasks.common import ORDER, execute_stage

    with tempfile.TemporaryDirectory() as d:
        root = generate_demo(Path(d) / "raw", preset="tiny", seed=0, width=640, height=480, frames=args.frames)
        infos = list(get_adapter("demo", root).records())
        url = str(Path(d) / "b.zarr")
        DatasetStore.create(url, "demo", stages=list(ORDER)).register_videos(infos)
        cfg = pipeline_config("bench-640", {"ingest": {"max_side": 640}, "inpaint": {"person_free_check": False}})
        for info in infos:
            execute_stage(url, info.video_id, "ingest", cfg)
        prof = cProfile.Profile()
        t_all = time.perf_counter()
        prof.enable()
        for info in infos:
            for stage in list(ORDER)[1:]:
                t0 = time.perf_counter()
                try:
                    execute_stage(url, info.video_id, stage, cfg)
                except Exception as e:  # the audit may fail a video: keep profiling the others
                    print(f"{info.video_id} {stage}: {type(e).__name__}: {e}")
                print(f"{info.video_id} {stage} {time.perf_counter() - t0:.2f} s", flush=True)
        prof.disable()
        print(f"total {time.perf_counter() - t_all:.1f} s")
        prof.dump_stats(args.out)


if __name__ == "__main__":
    main()
