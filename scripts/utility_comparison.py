"""Private action recognition that means something on CPU (issue 12, item 4).

    ANONYMASK_DATA=/tmp/util/data python scripts/utility_comparison.py
    anonymask report $ANONYMASK_DATA/runs/utility --out $ANONYMASK_DATA/report

1. Two synthetic-human datasets from the project's generator, disjoint (other identities, other
   seed): a PRIVATE one and a PUBLIC one. People are placed close to the camera (depth 1.9-2.6 m)
   so that at the training size the avatars cover whole patch-embedding patches: MaskDP has
   public tokens to work with.
2. Both anonymized by the anonymize flow (ground-truth pose and masks: the synthetic data has
   them; renderer, inpainting and merge are the real stages), giving the "Render" variant.
3. Non-private PRE-TRAINING of the whole tiny MViT on the public set only (public data costs no
   privacy), saved as a torchvision state dict.
4. From that initialisation, the paper's fine-tuning (norms of the last two blocks + head) on the
   private set: non-private upper bound and DP-SGD / MaskDP / FP-DP at eps 0.5, 1, 3, 8, seeds 0-2,
   sound defaults (independent public batch; MaskDP under replace-one, the others add/remove).

Seeds are fixed so the table can be reproduced (the reports say the guarantee then holds only
while they stay secret). A rerun skips what is done. ``--quick`` runs a small version.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def anonymize_set(raw: Path, store: str) -> None:
    from anonymask.flows.anonymize import anonymize

    overrides = {"pose4d": {"backend": "gt"}, "segment": {"backend": "gt"}}
    state = anonymize(dataset="synthetic", source=str(raw), store=store, overrides=overrides, return_state=True)
    log(f"anonymize {raw.name}: {state.name}: {state.message}")


def pretrain(store: str, runs: Path, common: dict, epochs: int) -> Path:
    """Non-private training of the whole tiny model on the PUBLIC store; returns the state dict."""
    import torch

    from anonymask.flows.train import train

    out = runs / "public-pretrained.pt"
    if out.is_file():
        return out
    res = train(mode="nonprivate", dataset="synthetic", store=store, variant="render", run_name="public-pretrain",
                runs_dir=str(runs / "pretrain"),
                overrides=dict(common, trainable="all", epochs=epochs, lr=0.05, warmup_epochs=2, seed=0))  # fmt: skip
    log(f"pretraining: top-1 {res['metrics']['top1']:.3f} on the public test split")
    ckpt = torch.load(Path(res["run_dir"]) / "checkpoint.pt", weights_only=False)
    from anonymask.config.training import train_settings
    from anonymask.models.training.action.mvit import ActionModelConfig
    from anonymask.models.training.action.run import build_model

    settings = train_settings("nonprivate", "synthetic", overrides=dict(common, trainable="all"))
    model = build_model(settings, num_classes=ActionModelConfig.from_dict(ckpt["model_config"]).num_classes)
    own = dict(model.named_parameters())
    with torch.no_grad():
        for name, t in ckpt["trainable"].items():
            own[name].copy_(t)
    torch.save(model.net.state_dict(), out)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 3.0, 8.0])
    a = p.parse_args(argv)
    import torch

    from anonymask.flows.train import train
    from anonymask.models.shared.synthetic.generator import generate_dataset

    torch.set_num_threads(2)
    data = Path(os.environ.get("ANONYMASK_DATA", "/tmp/util/data"))
    runs = data / "runs" / "utility"
    runs.mkdir(parents=True, exist_ok=True)
    actions = ("walk", "run", "jump", "kick", "punch", "spinkick", "dance_a", "getup_faceup")
    size = dict(width=128, height=96, frames=24, supersample=1, depth=(1.5, 2.0), max_travel=1.0,
                actions=actions, repetitions=2)  # fmt: skip
    subjects = {"private": 6, "public": 16}
    if a.quick:
        size.update(repetitions=1, actions=actions[:3])
        subjects = {"private": 4, "public": 4}
    sets = {}
    for name, seed in (("private", 0), ("public", 7)):
        raw = data / "raw" / f"util-{name}"
        store = str(data / "stores" / f"util-{name}.zarr")
        if not (raw / "dataset.json").is_file():
            t0 = time.perf_counter()
            generate_dataset(raw, preset="synthetic", seed=seed, n_subjects=subjects[name], **size)
            log(f"generated {name} set in {time.perf_counter() - t0:.0f} s")
        if not Path(store).exists():
            t0 = time.perf_counter()
            anonymize_set(raw, store)
            log(f"anonymized {name} set in {time.perf_counter() - t0:.0f} s")
        sets[name] = store
    common = {"size": [96, 128], "clip_len": 8, "frame_stride": 3, "batch_size": 16, "num_workers": 0,
              "eval_every": 5, "compare_accountants": ["pld"]}  # fmt: skip
    weights = pretrain(sets["public"], runs, common, epochs=6 if a.quick else 30)
    fine = dict(common, weights=str(weights), epochs=5 if a.quick else 20, lr=0.1, warmup_epochs=2)
    plan = [("nonprivate", None)] + [(m, e) for e in a.epsilons for m in ("dp", "maskdp", "fpdp")]
    t_all = time.perf_counter()
    for seed in a.seeds:
        for mode, eps in plan:
            t0 = time.perf_counter()
            overrides = dict(fine, seed=seed, noise_seed=seed, sampling_seed=seed + 50, public_seed=seed + 100)
            res = train(mode=mode, dataset="synthetic", store=sets["private"], epsilon=eps, variant="render",
                        overrides=overrides, runs_dir=str(runs))  # fmt: skip
            log(f"{mode} eps={eps} seed={seed}: top-1 {res['metrics']['top1']:.3f} "
                f"({time.perf_counter() - t0:.0f} s, {time.perf_counter() - t_all:.0f} s in all)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
