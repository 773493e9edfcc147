"""The epsilon sweep of docs/RESULTS.md ("Private action recognition"): every mode on the
synthetic action store, at eps 1 / 3 / 8, under the sound defaults, plus the rows that show what
the settings change (MaskDP under add/remove, the paper's same-batch accounting).

    ANONYMASK_DATA=/tmp/amtrain/data python scripts/sweep_action_privacy.py
    anonymask report $ANONYMASK_DATA/runs/blobs --out $ANONYMASK_DATA/report

Seeds are fixed (noise, sampling, public batch) so the table can be reproduced; the reports say
that the guarantee then holds only while those seeds stay secret. A rerun skips finished runs.
"""

from __future__ import annotations

import os
import sys
import time

import torch


def main() -> int:
    from anonymask.flows.train import train
    from anonymask.models.training.action.synthetic import make_synthetic_store

    torch.set_num_threads(1)
    data = os.environ.get("ANONYMASK_DATA", "/tmp/amtrain/data")
    store = f"{data}/stores/blobs.zarr"
    runs_dir = f"{data}/runs/blobs"
    if not os.path.exists(store):
        make_synthetic_store(store, num_classes=6, videos_per_class={"train": 20, "test": 15}, frames=20,
                             size=(32, 32), seed=0)  # fmt: skip
    common = {"size": [32, 32], "frame_stride": 2, "epochs": 20, "batch_size": 24, "lr": 0.1, "eval_every": 5}
    plan = []  # (mode, epsilon, variant, seed, extra settings)
    for variant in ("render", "real"):
        plan.append(("nonprivate", None, variant, 0, {}))
        for eps in (1.0, 3.0, 8.0):
            for mode in ("dp", "maskdp", "fpdp"):
                plan.append((mode, eps, variant, 0, {}))
    for eps in (1.0, 3.0, 8.0):
        plan.append(("maskdp", eps, "render", 0, {"adjacency": "add_remove"}))
        plan.append(("maskdp", eps, "render", 0, {"accounting": "paper"}))
        for mode in ("dp", "maskdp"):
            plan.append((mode, eps, "render", 1, {}))
    t0 = time.perf_counter()
    for i, (mode, eps, variant, seed, extra) in enumerate(plan, 1):
        overrides = dict(common, seed=seed, noise_seed=seed, sampling_seed=seed + 50, public_seed=seed + 100, **extra)
        state = train(mode=mode, dataset="synthetic", store=store, epsilon=eps, variant=variant,
                      overrides=overrides, runs_dir=runs_dir, return_state=True)  # fmt: skip
        print(f"[{i}/{len(plan)}] {mode} eps={eps} {variant} seed={seed} {extra}: {state.name} "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
