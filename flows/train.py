"""Flow ``train``: fine-tune the action model on a dataset store, privately or not.

Order: resolve the settings (paper defaults per dataset + overrides, sigma calibrated for the
target epsilon inside the trainer) -> build or reuse the frozen-prefix feature cache -> fit from
the run's checkpoint (resumes an interrupted run) -> evaluate the final checkpoint -> write
metrics, privacy report and a markdown summary. Every output lives in the run folder
``$ANONYMASK_DATA/runs/<run-name>/`` (see tasks/train.py); rerunning with the same settings
skips what is done.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger

from anonymask.config.training import default_run_name, settings_hash, train_settings
from anonymask.storage.runs import prepare_run_dir
from anonymask.tasks.train import build_cache_task, evaluate_task, fit_task, report_task


def default_runs_dir() -> Path:
    from anonymask.core.paths import data_root

    return data_root() / "runs"


@flow(name="train", flow_run_name="{mode}-{dataset}", persist_result=False)
def train(
    mode: str = "nonprivate",
    dataset: str = "demo",
    store: str | None = None,
    epsilon: float | None = None,
    variant: str | None = None,
    mask_source: str | None = None,
    overrides: dict[str, Any] | None = None,
    run_name: str | None = None,
    runs_dir: str | None = None,
    until_epoch: int | None = None,
    progress_bar: bool = False,
) -> dict[str, Any]:
    """Train ``mode`` (nonprivate, dp, maskdp, fpdp) on ``dataset``'s store.

    ``variant``: real | render | rend_diff (default: the dataset's); ``mask_source``: r | q | none |
    auto (MaskDP on ``real`` uses q: the paper's Real* row); ``overrides``: any field of
    ``TrainSettings`` (models/training/action/settings.py), checked before any work; ``until_epoch``: stop after that epoch (the schedule stays the full
    run's; a later call continues). Returns the metrics and the run folder.
    """
    from anonymask.core.paths import default_store

    logger = get_run_logger()
    settings = train_settings(mode, dataset, epsilon=epsilon, variant=variant, mask_source=mask_source,
                              overrides=overrides)  # fmt: skip
    store_url = store or str(default_store(dataset))
    name = run_name or default_run_name(settings)
    run_dir = Path(runs_dir) if runs_dir else default_runs_dir()
    run_dir = run_dir / name
    prepare_run_dir(run_dir, settings.to_json_dict(), settings_hash(settings), store_url)
    logger.info("run %s: %s on %s (%s), store %s", name, settings.mode.value, dataset, settings.variant, store_url)

    caches = build_cache_task(settings, store_url)
    fit = fit_task(settings, store_url, str(run_dir), caches, until_epoch=until_epoch, progress_bar=progress_bar)
    metrics = evaluate_task(settings, store_url, str(run_dir), caches, fit)
    report_task(str(run_dir), metrics)
    logger.info("run %s: top-1 %s, mean per-class %s, epsilon %s", name, metrics["top1"],
                metrics["mean_class_acc"], metrics["epsilon"])  # fmt: skip
    return {"run_dir": str(run_dir), "run": name, "fit": fit, "metrics": metrics}
