"""Command line for the skeleton anonymization experiment (no Prefect; the flow calls the same code).

    python -m anonymask.models.skeleton.cli --data synthetic --out runs/skeleton-synthetic
    python -m anonymask.models.skeleton.cli --data tracks.npz --alphas 0.5,1,3 --betas 10,30 --out DIR

``--data`` is ``synthetic`` (the generator in :mod:`.synthetic`) or an ``.npz`` with ``sequences``
(N,T,J,3), ``actions`` (N,), ``subjects`` (N,) and optionally ``genders`` (N,). Writes
``results.json``, ``results.md`` (table), ``tradeoff.png`` and ``anonymizer_best.pt`` (the row
picked by the selection rule, loadable with :func:`~.anonymizers.load_anonymizer`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from anonymask.errors import DatasetError
from anonymask.models.skeleton.anonymizers import save_anonymizer
from anonymask.models.skeleton.evaluate import (
    ClassifierConfig,
    plot_tradeoff,
    results_table_markdown,
    run_skeleton_experiment,
    select_best,
)
from anonymask.models.skeleton.synthetic import make_synthetic_skeletons


def _floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",") if v.strip()]


def load_arrays(source: str, args: argparse.Namespace) -> dict[str, np.ndarray]:
    """The experiment's inputs from ``synthetic`` or an ``.npz`` file."""
    if source == "synthetic":
        return make_synthetic_skeletons(
            args.subjects, args.actions, args.repetitions, args.frames, seed=args.seed
        )
    path = Path(source)
    if not path.is_file():
        raise DatasetError(f"{path}: data file not found")
    with np.load(path, allow_pickle=False) as npz:
        missing = [k for k in ("sequences", "actions", "subjects") if k not in npz.files]
        if missing:
            raise DatasetError(f"{path}: missing array(s) {', '.join(missing)}")
        data = {k: npz[k] for k in npz.files}
    n = len(data["sequences"])
    for k in ("actions", "subjects", "genders"):
        if k in data and len(data[k]) != n:
            raise DatasetError(f"{path}: {k} has {len(data[k])} entries for {n} sequences")
    return data


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "anonymizer_state"}


def run_and_write(
    data: dict[str, np.ndarray],
    out: str | Path,
    *,
    alphas: list[float] = (1.0, 3.0),
    betas: list[float] = (10.0, 30.0),
    sigmas: list[float] = (0.02, 0.05, 0.1),
    anonymizer: str = "mlp",
    epochs: int = 20,
    adv_epochs: int = 40,
    length: int = 32,
    lr_anon: float = 3e-3,
    lr_priv: float = 1e-3,
    test_fraction: float = 0.34,
    seed: int = 0,
    device: str = "cpu",
    log=print,
) -> list[dict[str, Any]]:
    """Run the experiment on ``data`` and write results.json/.md, tradeoff.png, anonymizer_best.pt."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    results = run_skeleton_experiment(
        data["sequences"], data["actions"], data["subjects"], data.get("genders"),
        alphas=list(alphas), betas=list(betas), sigmas=list(sigmas), epochs=epochs, adv_epochs=adv_epochs,
        seed=seed, length=length, test_fraction=test_fraction, anonymizer=anonymizer, lr_anon=lr_anon,
        lr_priv=lr_priv, classifier=ClassifierConfig(epochs=epochs), keep_states=True, log=log, device=device,
    )  # fmt: skip
    (out / "results.json").write_text(json.dumps([_jsonable(r) for r in results], indent=2))
    (out / "results.md").write_text(results_table_markdown(results))
    plot_tradeoff(results, out / "tradeoff.png")
    if any(r["method"] == "adversarial" for r in results):
        save_anonymizer(out / "anonymizer_best.pt", select_best(results))
    return results


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    p = argparse.ArgumentParser(prog="python -m anonymask.models.skeleton.cli", description=__doc__.split("\n")[0])
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
