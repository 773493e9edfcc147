"""The pose experiment: strategies x privacy modes x epsilons on the synthetic data -> PCKh table.

    python -m anonymask.models.training.hpe.experiment --preset tiny --epochs 5 --epsilons 1 8

builds (or reuses) the synthetic dataset, cuts person crops (xsub split; a few whole train videos
held out as the PUBLIC set), trains one model per (strategy, mode, epsilon) and prints a markdown
table of PCKh@0.5 like the paper's (rows: strategy + mode, columns: epsilon; non-private = inf).

Initial backbone for "frozen" and "finetune": the TinyViT ImageNet file when present
($ANONYMASK_WEIGHTS/hpe/tiny_vit_5m_224.pth); otherwise random, or, with
``--public-pretrain-epochs N``, a backbone trained non-privately on the public crops (public data
costs no privacy), standing in for the missing ImageNet weights. "scratch" always starts random.

Randomness: ``--seed`` fixes only PUBLIC choices (dataset generation, which videos are public,
model init). The private streams (noise, private sampling, the psi batch) come from OS entropy,
as in a real private run, unless ``--private-seed S`` asks for a reproducible table; the three
streams then get pairwise different seeds derived from S (``experiment_seeds``) and the reports
say the guarantee holds only while S stays secret. The record is a video: epsilon is per video.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from anonymask.models.training.privacy.fpdp import HOLDOUT_MAX
from anonymask.models.training.privacy.seeds import stream_seed

from .data import PoseCrops, load_pose_crops, split_public
from .model import PoseModelConfig, build_pose_model
from .train import MODES, HPETrainConfig, train_pose_model

Source = str | Path | tuple[PoseCrops, PoseCrops, PoseCrops]


def load_experiment_data(
    root: str | Path,
    input_size: tuple[int, int],
    keypoints: str = "mpii16",
    frame_stride: int = 1,
    test_frame_stride: int | None = None,
    public_fraction: float = 0.2,
    seed: int = 0,
) -> tuple[PoseCrops, PoseCrops, PoseCrops]:
    """(private train, public, test) crops of a synthetic dataset root (xsub protocol)."""
    train = load_pose_crops(root, "train", "xsub", input_size, keypoints, frame_stride)
    test = load_pose_crops(root, "test", "xsub", input_size, keypoints, test_frame_stride or frame_stride)
    private, public = split_public(train, public_fraction, seed)
    return private, public, test


def experiment_seeds(private_seed: int | None) -> dict[str, int | None]:
    """The trainer's noise / sampling / public seeds for one experiment: all None (OS entropy)
    unless ``private_seed`` is given, then three pairwise different seeds derived from it (one
    per stream; the old code gave noise and sampling the same seed, which made them one stream)."""
    if private_seed is None:
        return {"noise_seed": None, "sampling_seed": None, "public_seed": None}
    return {f"{name}_seed": stream_seed(int(private_seed), name) for name in ("noise", "sampling", "public")}


def _pretrain_on_public(config: PoseModelConfig, public: PoseCrops, epochs: float, base: dict, seed: int) -> dict:
    """Backbone state dict after non-private training on the public crops only."""
    model = build_pose_model(config, "random", seed=seed)
    cfg = HPETrainConfig(**{**base, "strategy": "scratch", "mode": "nonprivate", "epochs": epochs,
                            "noise_multiplier": None, "target_epsilon": None})  # fmt: skip
    train_pose_model(model, public, cfg)
    return {k: v.detach().cpu().clone() for k, v in model.backbone.state_dict().items()}


def run_hpe_experiment(
    source: Source,
    strategies: Sequence[str] = ("frozen", "finetune", "scratch"),
    modes: Sequence[str] = MODES,
    epsilons: Sequence[float] = (1.0, 8.0),
    epochs: float = 10.0,
    *,
    model_config: PoseModelConfig | None = None,
    weights: str = "auto",
    train_overrides: dict[str, Any] | None = None,
    frame_stride: int = 1,
    public_fraction: float = 0.2,
    public_pretrain_epochs: float = 0.0,
    seed: int = 0,
    private_seed: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """One row per (strategy, mode, epsilon); non-private runs once per strategy (epsilon inf).

    ``source``: a synthetic dataset root, or (private, public, test) crops. Each row holds the
    strategy, mode, target and spent epsilon, sigma, q, steps, C, the test metrics (pckh,
    pck_bbox, mean_error_px, loss), seconds, the backbone's initial weights and the set sizes.
    """
    config = model_config or PoseModelConfig()
    if isinstance(source, tuple):
        private, public, test = source
        disclosures = None  # the caller's public crops: not known to come from the training videos
    else:
        if not 0 < public_fraction <= HOLDOUT_MAX:
            raise ValueError(f"public_fraction {public_fraction:g} is above the cap {HOLDOUT_MAX:g}: the public "
                             "videos train raw and noise-free, with no protection")  # fmt: skip
        private, public, test = load_experiment_data(
            source, config.input_size, frame_stride=frame_stride, public_fraction=public_fraction, seed=seed
        )
        ids = sorted(set(public.video_ids.tolist()))
        disclosures = {"unprotected_videos": ids, "unprotected_count": len(ids),
                       "unprotected_source": f"public_fraction:{public_fraction:g}",
                       "unprotected_why": "training videos held out as the public set: used raw and noise-free"}  # fmt: skip
    if private.keypoints.shape[1] != config.num_keypoints:
        raise ValueError(f"crops have {private.keypoints.shape[1]} keypoints, the model config {config.num_keypoints}")
    # private streams from the OS unless private_seed asks for a reproducible table (pairwise different)
    base = {"epochs": float(epochs), "seed": seed, **experiment_seeds(private_seed), **(train_overrides or {})}

    init = build_pose_model(config, weights, seed=seed)
    pretrained_state = {k: v.clone() for k, v in init.backbone.state_dict().items()}
    pretrained_name = init.backbone_init
    if public_pretrain_epochs > 0 and pretrained_name.startswith("random"):
        pretrained_state = _pretrain_on_public(config, public, public_pretrain_epochs, base, seed)
        pretrained_name = f"public-pretrained:{public_pretrain_epochs:g}ep"

    rows: list[dict] = []
    for strategy in strategies:
        for mode in modes:
            for eps in [math.inf] if mode == "nonprivate" else list(epsilons):
                model = build_pose_model(config, "random", seed=seed)
                if strategy != "scratch":
                    model.backbone.load_state_dict(pretrained_state)
                    model.backbone_init = pretrained_name
                cfg = HPETrainConfig(
                    **{**base, "strategy": strategy, "mode": mode, "target_epsilon": None if mode == "nonprivate" else eps}
                )
                result = train_pose_model(model, private, cfg, public=public, test=test, disclosures=disclosures)
                row = result.summary()
                # no private-set size: it is a function of the private data outside the accountant
                row.update({
                    "epsilon_target": eps, "backbone_init": model.backbone_init, "n_public": len(public),
                    "n_test": len(test), "epochs": float(epochs), "private": result.privacy.get("private"),
                    "record": result.privacy.get("record"), "unprotected_videos": (disclosures or {}).get(
                        "unprotected_videos", []),
                })  # fmt: skip
                rows.append(row)
                if progress is not None:
                    progress(
                        f"{strategy:9s} {mode:10s} eps={_fmt_eps(eps):>5s} pckh={row.get('pckh', float('nan')):.3f} "
                        f"sigma={result.sigma:.3f} {row['seconds']:.1f}s"
                    )
    return rows


def _fmt_eps(e: float | str) -> str:
    e = math.inf if e == "inf" else float(e)
    return "inf" if math.isinf(e) else f"{e:g}"


def results_table(rows: Sequence[dict], metric: str = "pckh", percent: bool = True) -> str:
    """Markdown: one line per (strategy, mode), one column per target epsilon (inf last)."""
    eps_values = sorted({float(r["epsilon_target"]) for r in rows})
    keys: list[tuple[str, str]] = []
    cells: dict[tuple[str, str, float], float] = {}
    for r in rows:
        mode = r["mode"] if r.get("private", True) or r["mode"] == "nonprivate" else f"{r['mode']} (not private)"
        key = (r["strategy"], mode)
        if key not in keys:
            keys.append(key)
        cells[(*key, float(r["epsilon_target"]))] = r.get(metric, float("nan"))
    head = "| strategy | mode | " + " | ".join(f"ε={_fmt_eps(e)}" for e in eps_values) + " |"
    lines = [head, "|" + "---|" * (2 + len(eps_values))]
    for s, m in keys:
        vals = []
        for e in eps_values:
            v = cells.get((s, m, e))
            vals.append("" if v is None or v != v else (f"{100 * v:.1f}" if percent else f"{v:.3f}"))
        lines.append(f"| {s} | {m} | " + " | ".join(vals) + " |")
    return "\n".join(lines)


def results_details(rows: Sequence[dict]) -> str:
    """Markdown: every run with its privacy numbers and all metrics."""
    cols = ["strategy", "mode", "epsilon_target", "epsilon", "sigma", "q", "steps", "C", "pckh", "pck_bbox",
            "mean_error_px", "seconds", "backbone_init"]  # fmt: skip
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        out = []
        for c in cols:
            v = r.get(c, "")
            if c in ("epsilon_target", "epsilon"):
                out.append(_fmt_eps(v) if v != "" else "")
            elif isinstance(v, float):
                out.append(f"{v:.3f}" if c != "q" else f"{v:.4f}")
            else:
                out.append(str(v))
        lines.append("| " + " | ".join(out) + " |")
    return "\n".join(lines)


def _json_safe(rows: Sequence[dict]) -> list[dict]:
    out = []
    for r in rows:
        r = copy.copy(r)
        for k, v in r.items():
            if isinstance(v, float) and (math.isinf(v) or v != v):
                r[k] = "inf" if v == math.inf else ("-inf" if v == -math.inf else "nan")
        out.append(r)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m anonymask.models.training.hpe.experiment", description=__doc__.split("\n")[0])
    p.add_argument("--root", help="synthetic dataset root (generated there from --preset when missing)")
    p.add_argument("--preset", default="tiny", choices=("tiny", "demo", "synthetic"))
    p.add_argument("--strategies", nargs="+", default=["frozen", "finetune", "scratch"])
    p.add_argument("--modes", nargs="+", default=list(MODES))
    p.add_argument("--epsilons", nargs="+", type=float, default=[1.0, 8.0])
    p.add_argument("--epochs", type=float, default=10.0)
    p.add_argument("--backbone", default=None, choices=("tiny", "tiny_vit_5m_224"),
                   help="default: tiny for the tiny/demo presets, tiny_vit_5m_224 otherwise")
    p.add_argument("--input-size", nargs=2, type=int, default=None, metavar=("H", "W"))
    p.add_argument("--weights", default="auto", help="auto | pretrained | random | path to a timm state dict")
    p.add_argument("--batch-size", type=float, default=16.0, help="expected (Poisson) batch size, in records (videos)")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--optimizer", default="adam", choices=("adam", "sgd"))
    p.add_argument("--clip", type=float, default=1.0, help="per-sample clip norm C")
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--accountant", default="rdp", choices=("rdp", "pld", "prv"))
    p.add_argument("--k", type=int, default=16, help="public subspace rank")
    p.add_argument("--refresh", type=int, default=10, help="recompute the subspace every K steps")
    p.add_argument("--blur-sigma", type=float, default=None,
                   help="psi: Gaussian blur std in input pixels (default: the paper's, sigma 10 px at 256 px, scaled)")
    p.add_argument("--frame-stride", type=int, default=1)
    p.add_argument("--public-fraction", type=float, default=0.2)
    p.add_argument("--public-pretrain-epochs", type=float, default=0.0)
    p.add_argument("--chunk-size", type=int, default=None, help="vmap chunk for per-sample gradients (memory)")
    p.add_argument("--device", default="auto")
    p.add_argument("--seed", type=int, default=0, help="public choices only: data, public videos, model init")
    p.add_argument("--private-seed", type=int, default=None,
                   help="fix the noise/sampling/psi streams (pairwise different seeds derived from it); "
                        "default: OS entropy, as a private run should")  # fmt: skip
    p.add_argument("--json", help="write the rows here")
    p.add_argument("--markdown", help="write the tables here")
    a = p.parse_args(argv)

    from anonymask.core.paths import data_root

    root = Path(a.root) if a.root else data_root() / "hpe" / a.preset
    if not (root / "dataset.json").is_file():
        from anonymask.models.shared.synthetic.generator import generate_demo

        print(f"generating the {a.preset!r} synthetic dataset in {root} ...", file=sys.stderr)
        generate_demo(root, preset=a.preset, seed=a.seed)
    small = a.preset in ("tiny", "demo")
    backbone = a.backbone or ("tiny" if small else "tiny_vit_5m_224")
    if backbone == "tiny":
        size = tuple(a.input_size or (64, 64))
        config = PoseModelConfig(backbone="tiny", input_size=size, num_keypoints=16, sigma=2.0, hidden=32)
    else:
        size = tuple(a.input_size or (256, 192))
        config = PoseModelConfig(backbone=backbone, input_size=size, num_keypoints=16)
    overrides = {
        "batch_size": a.batch_size, "lr": a.lr, "optimizer": a.optimizer, "max_grad_norm": a.clip, "delta": a.delta,
        "accountant": a.accountant, "subspace_k": a.k, "subspace_refresh": a.refresh, "blur_sigma": a.blur_sigma,
        "device": a.device, "eval_every": 0, "chunk_size": a.chunk_size,
    }  # fmt: skip
    rows = run_hpe_experiment(
        root, a.strategies, a.modes, a.epsilons, a.epochs, model_config=config, weights=a.weights,
        train_overrides=overrides, frame_stride=a.frame_stride, public_fraction=a.public_fraction,
        public_pretrain_epochs=a.public_pretrain_epochs, seed=a.seed, private_seed=a.private_seed,
        progress=lambda s: print(s, file=sys.stderr),
    )  # fmt: skip
    text = (
        f"PCKh@0.5 (%) on the xsub test crops; preset {a.preset}, backbone {backbone} {size[0]}x{size[1]}, "
        f"{a.epochs:g} epochs, C={a.clip}, delta={a.delta}, {a.accountant}; epsilon per video (record = video); "
        f"private streams: {'OS entropy' if a.private_seed is None else 'fixed by --private-seed'}\n\n"
        + results_table(rows) + "\n\n" + results_details(rows) + "\n"
    )  # fmt: skip
    print(text)
    if a.json:
        Path(a.json).write_text(json.dumps(_json_safe(rows), indent=1))
    if a.markdown:
        Path(a.markdown).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
