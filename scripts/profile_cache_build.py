"""Time (and optionally profile) the paper-protocol dry run's cache phase on this machine (issue 31).

    python scripts/profile_cache_build.py --clips 200 --work /tmp/cb --stub
    python scripts/profile_cache_build.py --clips 200 --work /tmp/cb --stub --old 43f5f17

Runs `scripts/paper_protocol_dry_run.py`'s own steps up to the cache: a generated store at 224 px,
20 frames, 6 classes (made once in ``--work``, reused), the MaskDP settings of the ntu preset with
random weights, then ``build_caches`` timed, after removing any cache left in the store.

``--stub``: the MViTv2-S prefix returns seeded random features of its real shape instead of
computing them, so what is timed is what a GPU does not speed up (clip reads, the loader, Python,
cache writes). ``--old REV``: ``build_feature_cache``, ``build_caches`` and
``ClipDataset.__getitem__`` as they were at git revision REV (loaded from ``git show``; with
``--workers 0`` only, since spawned loader workers would import the current code). ``--dump DIR``
saves the train cache's arrays as .npy, to compare two builds. ``--profile`` prints cProfile's top
functions.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import io
import json
import logging
import pstats
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _old_module(rev: str, path: str, name: str):
    src = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    f = Path(tempfile.mkdtemp(prefix="oldcode-")) / f"{name}.py"
    f.write_text(src)
    spec = importlib.util.spec_from_file_location(f"old_{name}", f)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--clips", type=int, default=40)
    p.add_argument("--work", required=True, help="folder for the store (reused between runs)")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--stub", action="store_true", help="random features instead of the prefix's compute")
    p.add_argument("--old", metavar="REV", help="the cache code as it was at this git revision")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--dump", help="save the train cache's arrays here as .npy")
    a = p.parse_args(argv)
    if a.old and a.workers:
        p.error("--old needs --workers 0")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from anonymask.core.compat import ensure_torchvision

    ensure_torchvision()  # a one-off import, before the clock
    import numpy as np
    import torch

    from anonymask.config.training import train_settings
    from anonymask.models.training.action.synthetic import make_synthetic_store

    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    store = str(work / "store.zarr")
    classes = 6
    per_class = max(1, a.clips // classes)
    if not (Path(store) / "zarr.json").exists():
        make_synthetic_store(store, num_classes=classes, videos_per_class={"train": per_class, "test": 1},
                             frames=20, size=(224, 224), seed=0)  # fmt: skip
    shutil.rmtree(Path(store) / "cache", ignore_errors=True)
    if a.stub:
        from anonymask.models.training.action import prefix

        def random_features(self, x, token_keep=None):
            seed = int(x.flatten()[:64].sum().item() * 1000) % 2**31
            return torch.randn(x.shape[0], *self.feature_shape, generator=torch.Generator().manual_seed(seed))

        prefix.FrozenPrefix.__call__ = random_features
    if a.old:
        from anonymask.models.training.action import clips, feature_cache

        feature_cache.build_feature_cache = _old_module(a.old, "models/training/action/feature_cache.py", "feature_cache").build_feature_cache
        clips.ClipDataset.__getitem__ = _old_module(a.old, "models/training/action/clips.py", "clips").ClipDataset.__getitem__
        build_caches = _old_module(a.old, "models/training/action/run.py", "run").build_caches
    else:
        from anonymask.models.training.action.run import build_caches
    settings = train_settings("maskdp", "ntu", overrides={"weights": "random", "frame_stride": 1,
                              "num_workers": a.workers, "eval_every": 0, "compare_accountants": [], "log_every": 10**6})  # fmt: skip
    prof = cProfile.Profile() if a.profile else None
    t0 = time.perf_counter()
    if prof:
        prof.enable()
    keys = build_caches(settings, store)
    if prof:
        prof.disable()
    dt = time.perf_counter() - t0
    n = per_class * classes
    print(json.dumps({"clips": n, "old": a.old, "stub": a.stub, "workers": a.workers, "cache_build_seconds": round(dt, 2),
                      "per_clip_s": round(dt / n, 3),
                      "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)}))  # fmt: skip
    if prof:
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(35)
        print(s.getvalue())
    if a.dump:
        import zarr

        g = zarr.open_group(store, mode="r")["cache"][keys["train"]]
        Path(a.dump).mkdir(parents=True, exist_ok=True)
        for name in g.array_keys():
            np.save(Path(a.dump) / f"{name}.npy", np.asarray(g[name][...]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
