"""Flow ``train-skeleton-anon``: adversarial skeleton anonymizer + its evaluation (issue: motion).

Data: ``source="store"`` uses the pose tracks in the dataset's store (ground-truth tracks on the
synthetic data), ``"toy"`` the skeleton test bed of models/anonymizer/skeleton/synthetic.py, or an ``.npz``
with sequences/actions/subjects[/genders]. Writes results.json, results.md, tradeoff.png and
anonymizer_best.pt (enable it in the pipeline with ``motion.enabled=true
motion.checkpoint=<that file>``) under ``$ANONYMASK_DATA/runs/skeleton-anon-<dataset>/``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NONE


def _floats(text: str | list[float]) -> list[float]:
    return [float(v) for v in text.split(",") if v.strip()] if isinstance(text, str) else [float(v) for v in text]


@task(name="export-skeletons", cache_policy=NONE, persist_result=False)
def export_task(source: str, store_url: str, out: str, length: int) -> str:
    import numpy as np

    path = Path(out) / "skeletons.npz"
    if source == "store":
        from anonymask.models.anonymizer.skeleton.export import export_skeletons

        data = export_skeletons(store_url, length=length)
    elif source == "toy":
        from anonymask.models.anonymizer.skeleton.synthetic import make_synthetic_skeletons

        data = make_synthetic_skeletons(8, 4, 6, length, seed=0)
    else:
        return source
    Path(out).mkdir(parents=True, exist_ok=True)
    np.savez(path, **{k: v for k, v in data.items() if k != "video_ids"})
    return str(path)


@task(name="adversarial-training", cache_policy=NONE, persist_result=False)
def experiment_task(npz: str, out: str, options: dict[str, Any]) -> list[dict[str, Any]]:
    from anonymask.models.anonymizer.skeleton.runner import load_npz, run_and_write

    results = run_and_write(load_npz(npz), out, log=get_run_logger().info, **options)
    return [{k: v for k, v in r.items() if k != "anonymizer_state"} for r in results]


@flow(name="train-skeleton-anon", persist_result=False)
def train_skeleton_anon(
    dataset: str = "synthetic",
    source: str = "store",
    store: str | None = None,
    out: str | None = None,
    length: int = 32,
    alphas: str = "1,3",
    betas: str = "10,30",
    epochs: int = 20,
    adv_epochs: int = 40,
    anonymizer: str = "mlp",
    device: str = "cpu",
) -> dict[str, Any]:
    from anonymask.core.paths import data_root, default_store
    from anonymask.models.anonymizer.skeleton.evaluate import results_table_markdown, select_best

    logger = get_run_logger()
    store_url = store or str(default_store(dataset))
    out_dir = out or str(data_root() / "runs" / f"skeleton-anon-{dataset}")
    npz = export_task(source, store_url, out_dir, length)
    options = dict(alphas=_floats(alphas), betas=_floats(betas), epochs=epochs, adv_epochs=adv_epochs,
                   anonymizer=anonymizer, length=length, device=device)  # fmt: skip
    results = experiment_task(npz, out_dir, options)
    table = results_table_markdown(results)
    create_markdown_artifact(key=f"skeleton-anon-{dataset}".lower().replace("_", "-"), markdown=table)
    best = select_best(results)
    logger.info("selected: %s", json.dumps({k: best.get(k) for k in ("method", "alpha", "beta", "action_acc", "reid_acc")}))
    return {"out": out_dir, "best": {k: v for k, v in best.items() if isinstance(v, (int, float, str))}}
