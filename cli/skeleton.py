"""Command line for the skeleton anonymization experiment (no Prefect; the flow calls the same code).

    python -m anonymask.cli.skeleton --data synthetic --out runs/skeleton-synthetic
    python -m anonymask.cli.skeleton --data tracks.npz --alphas 0.5,1,3 --betas 10,30 --out DIR

``--data`` is ``synthetic`` (the generator in models/anonymizer/skeleton/synthetic.py) or an
``.npz`` with ``sequences`` (N,T,J,3), ``actions`` (N,), ``subjects`` (N,) and optionally
``genders`` (N,). Writes ``results.json``, ``results.md`` (table), ``tradeoff.png`` and
``anonymizer_best.pt`` (the row picked by the selection rule, loadable with
``models/anonymizer/skeleton/anonymizers.load_anonymizer``).
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import torch

from anonymask.models.anonymizer.skeleton.evaluate import results_table_markdown
from anonymask.models.anonymizer.skeleton.runner import load_npz, run_and_write
from anonymask.models.anonymizer.skeleton.synthetic import make_synthetic_skeletons


def _floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",") if v.strip()]


def load_arrays(source: str, args: argparse.Namespace) -> dict[str, np.ndarray]:
    """The experiment's inputs from ``synthetic`` (sized by the arguments) or an ``.npz`` file."""
    if source == "synthetic":
        return make_synthetic_skeletons(args.subjects, args.actions, args.repetitions, args.frames, seed=args.seed)
    return load_npz(source)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    p = argparse.ArgumentParser(prog="python -m anonymask.cli.skeleton", description=__doc__.split("\n")[0])
    p.add_argument("--data", default="synthetic", help="'synthetic' or an .npz file")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--subjects", type=int, default=8)
    p.add_argument("--actions", type=int, default=4)
    p.add_argument("--repetitions", type=int, default=6)
    p.add_argument("--frames", type=int, default=32, help="synthetic sequence length")
    p.add_argument("--length", type=int, default=32, help="frames per training window")
    p.add_argument("--alphas", type=_floats, default=[1.0, 3.0])
    p.add_argument("--betas", type=_floats, default=[10.0, 30.0])
    p.add_argument("--sigmas", type=_floats, default=[0.02, 0.05, 0.1])
    p.add_argument("--anonymizer", choices=["mlp", "unet"], default="mlp")
    p.add_argument("--epochs", type=int, default=20, help="classifier training epochs")
    p.add_argument("--adv-epochs", type=int, default=40, help="minimax epochs")
    p.add_argument("--lr-anon", type=float, default=3e-3)
    p.add_argument("--lr-priv", type=float, default=1e-3)
    p.add_argument("--test-fraction", type=float, default=0.34)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", help="torch device, e.g. cuda")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: leave as is)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    data = load_arrays(args.data, args)
    results = run_and_write(
        data, args.out, alphas=args.alphas, betas=args.betas, sigmas=args.sigmas, anonymizer=args.anonymizer,
        epochs=args.epochs, adv_epochs=args.adv_epochs, length=args.length, lr_anon=args.lr_anon,
        lr_priv=args.lr_priv, test_fraction=args.test_fraction, seed=args.seed, device=args.device,
    )  # fmt: skip
    print(results_table_markdown(results))
    print(f"wrote {args.out}")
    return results


if __name__ == "__main__":
    main()
