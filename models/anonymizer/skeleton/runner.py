"""The skeleton anonymization experiment's files: its inputs from an ``.npz``, its results written out.

Shared by the command line (cli/skeleton.py) and the ``train-skeleton-anon`` flow, so both read
and write the same files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from anonymask.core.errors import DatasetError
from anonymask.models.anonymizer.skeleton.anonymizers import save_anonymizer
from anonymask.models.anonymizer.skeleton.evaluate import (
    ClassifierConfig,
    plot_tradeoff,
    results_table_markdown,
    run_skeleton_experiment,
    select_best,
)


def load_npz(path: str | Path) -> dict[str, np.ndarray]:
    """The experiment's inputs from an ``.npz`` with sequences, actions, subjects (and genders)."""
    path = Path(path)
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


