"""Accuracy-vs-epsilon tables (like the MaskDP paper's Tables 1-2) from finished training runs.

Reads every ``<runs_dir>/<run>/metrics.json`` (written by the ``train`` flow; the privacy numbers
come from the run's own privacy report), groups runs by dataset, then by row (training data
variant: Real, Real*, Render, Rend.+Diff) x method, with one column per epsilon and a last
"non-private" column. The column is the epsilon the run's report says it SPENT (the target when
calibrated to it); a run without a valid guarantee never sits in a private column unmarked: a
sigma = 0 run or one whose psi is below the paper's floor goes to "non-private", Real* and the paper's same-batch accounting keep their
nominal epsilon but their method says "not private" / "paper's bound, not valid DP". Several runs in one cell (e.g. seeds) are averaged, with their spread and
count shown. Writes per dataset ``accuracy_<dataset>.csv``, ``.md`` and ``.png`` (matplotlib, Agg)
and ``runs.csv`` listing every run with its achieved epsilon under each accountant.
"""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from anonymask.models.training.action.run import MODE_LABELS

ROW_ORDER = ("Real", "Real*", "Render", "Rend.+Diff")
MODE_ORDER = ("nonprivate", "dpsgd", "maskdp", "fpdp")

METRICS = ("top1", "mean_class_acc", "clip_top1")


def _num(v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, str):
        return math.inf if v == "inf" else float(v)
    return float(v)


def collect_runs(runs_dir: str | Path, include_incomplete: bool = False) -> list[dict[str, Any]]:
    """Metrics of every run folder (sorted by name); incomplete runs are left out by default."""
    runs = []
    for path in sorted(Path(runs_dir).glob("*/metrics.json")):
        m = json.loads(path.read_text())
        if not include_incomplete and not m.get("complete", True):
            continue
        m["target_epsilon"] = _num(m.get("target_epsilon"))
        m["epsilon"] = _num(m.get("epsilon"))
        m["epsilon_other"] = {k: _num(v) for k, v in (m.get("epsilon_other") or {}).items()}
        m["run_dir"] = str(path.parent)
        runs.append(m)
    return runs


def default_metric(dataset: str) -> str:
    """Toyota Smarthome is reported as mean per-class accuracy (its classes are unbalanced)."""
    return "mean_class_acc" if dataset == "tsh" else "top1"


DEFAULT_ADJACENCY = {"maskdp": "replace"}  # others: add_remove


def method_label(m: dict[str, Any]) -> str:
    """The method column: the mode, and what the run's privacy report says about its guarantee."""
    mode = m["mode"]
    label = MODE_LABELS.get(mode, mode)
    if mode == "nonprivate":
        return label
    adjacency = m.get("adjacency")
    if adjacency and m.get("accounting") != "paper" and adjacency != DEFAULT_ADJACENCY.get(mode, "add_remove"):
        label += f" [{adjacency.replace('_', '/')}]"
    if m.get("accounting") == "paper":
        return label + " (paper's bound, not valid DP)"
    if m.get("private") is False:
        if _num(m.get("sigma")) == 0:
            return label + " (sigma=0, not private)"
        if "below the paper's floor" in str(m.get("guarantee") or ""):
            return label + " (psi below floor, not private)"
        return label + " (not private)"
    return label


def epsilon_column(m: dict[str, Any]) -> float:
    """The epsilon a run belongs under: inf for non-private and sigma = 0 runs, else the spent epsilon
    (shown as the target when the run was calibrated to it, i.e. spent within 1% below it)."""
    if m["mode"] == "nonprivate" or _num(m.get("sigma")) == 0:
        return math.inf
    # no guarantee (e.g. psi below the paper's floor): under non-private, never in a budget column;
    # only the paper's own rows (Real*, the paper's accounting) keep their nominal budget, marked
    if m.get("private") is False and m.get("row") != "Real*" and m.get("accounting") != "paper":
        return math.inf
    spent, target = _num(m.get("epsilon")), _num(m.get("target_epsilon"))
    if spent is None or math.isinf(spent):  # Real*: no guarantee; its nominal budget is the target
        return target if target is not None else math.inf
    if target is not None and math.isfinite(target) and 0.99 * target <= spent <= target * (1 + 1e-9):
        return target
    return float(f"{spent:.2g}")


def _row_key(m: dict[str, Any]) -> tuple[int, int, str, str, str]:
    row, mode = m["row"], m["mode"]
    ri = ROW_ORDER.index(row) if row in ROW_ORDER else len(ROW_ORDER)
    mi = MODE_ORDER.index(mode) if mode in MODE_ORDER else len(MODE_ORDER)
    return ri, mi, method_label(m), row, mode


def _eps_label(eps: float) -> str:
    return "non-private" if math.isinf(eps) else f"eps={eps:g}"


def accuracy_table(runs: list[dict[str, Any]], metric: str) -> dict[str, Any]:
    """{"columns": [eps...], "rows": [{"row", "mode", "method", "cells": {eps: (mean, std, n)}}]} of
    one dataset's runs (non-private runs sit in the inf column; see ``epsilon_column``)."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose one of {METRICS}")
    cells: dict[tuple, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    columns: set[float] = set()
    for m in runs:
        eps = epsilon_column(m)
        value = m.get(metric)
        if value is None or eps is None:
            continue
        columns.add(eps)
        cells[_row_key(m)][eps].append(float(value))
    cols = sorted(columns)
    rows = []
    for key in sorted(cells):
        out = {}
        for eps, vals in cells[key].items():
            mean = sum(vals) / len(vals)
            std = math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else 0.0
            out[eps] = (mean, std, len(vals))
        rows.append({"row": key[3], "mode": key[4], "method": key[2], "cells": out})
    return {"columns": cols, "rows": rows, "metric": metric}


def _cell_text(cell: tuple[float, float, int] | None) -> str:
    if cell is None:
        return "-"
    mean, std, n = cell
    return f"{100 * mean:.1f}" + (f" ± {100 * std:.1f} (n={n})" if n > 1 else "")


def table_markdown(dataset: str, table: dict[str, Any]) -> str:
    cols = table["columns"]
    head = ["data", "method"] + [_eps_label(e) for e in cols]
    lines = [
        f"Accuracy (%) on {dataset}, metric {table['metric']}",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for r in table["rows"]:
        vals = [_cell_text(r["cells"].get(e)) for e in cols]
        lines.append("| " + " | ".join([r["row"], r["method"], *vals]) + " |")
    return "\n".join(lines) + "\n"


def write_table_csv(path: Path, table: dict[str, Any]) -> None:
    cols = table["columns"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["data", "method", *[_eps_label(e) for e in cols], *[f"n@{_eps_label(e)}" for e in cols]])
        for r in table["rows"]:
            cells = [r["cells"].get(e) for e in cols]
            w.writerow([r["row"], r["method"],
                        *["" if c is None else f"{c[0]:.6f}" for c in cells],
                        *["" if c is None else c[2] for c in cells]])  # fmt: skip


def write_runs_csv(path: Path, runs: list[dict[str, Any]]) -> None:
    others = sorted({k for m in runs for k in m["epsilon_other"]})
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["run", "dataset", "data", "mode", "method", "seed", "target_epsilon", "epsilon", "private",
                    "accountant", "adjacency", "accounting", *[f"epsilon_{k}" for k in others], "delta", "sigma",
                    "epochs", "steps", "top1", "mean_class_acc", "clip_top1", "guarantee"])  # fmt: skip
        for m in runs:
            w.writerow([m["run"], m["dataset"], m["row"], m["mode"], method_label(m), m.get("seed"),
                        m["target_epsilon"], m["epsilon"], m.get("private"), m.get("accountant"),
                        m.get("adjacency"), m.get("accounting"), *[m["epsilon_other"].get(k, "") for k in others],
                        m.get("delta"), m.get("sigma"), m.get("epochs"), m.get("steps"), m.get("top1"),
                        m.get("mean_class_acc"), m.get("clip_top1"), m.get("guarantee")])  # fmt: skip


def plot_table(path: Path, dataset: str, table: dict[str, Any]) -> None:
    """Accuracy vs target epsilon (log x); non-private runs as dashed horizontal lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker  # noqa: F401  (NullFormatter for the log axis' minor ticks)

    colors = {"dpsgd": "tab:blue", "maskdp": "tab:red", "fpdp": "tab:green", "nonprivate": "black"}
    markers = {"Real": "o", "Real*": "*", "Render": "s", "Rend.+Diff": "^"}
    finite = [e for e in table["columns"] if not math.isinf(e)]
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    for r in table["rows"]:
        label = f"{r['row']} / {r['method']}"
        if r["mode"] == "nonprivate":
            cell = r["cells"].get(math.inf)
            if cell is not None:
                ax.axhline(100 * cell[0], color="gray", ls="--", lw=1)
                ax.annotate(f"{label} {100 * cell[0]:.1f}", (finite[0] if finite else 1.0, 100 * cell[0]),
                            fontsize=7, color="gray", va="bottom")  # fmt: skip
            continue
        xs = [e for e in finite if e in r["cells"]]
        ys = [100 * r["cells"][e][0] for e in xs]
        errs = [100 * r["cells"][e][1] for e in xs]
        style = ":" if r["row"] == "Real*" else "--" if "paper" in r["method"] else "-." if "[" in r["method"] else "-"
        ax.errorbar(xs, ys, yerr=errs, marker=markers.get(r["row"], "x"), color=colors.get(r["mode"]),
                    ls=style, capsize=2, label=label)  # fmt: skip
    if finite:
        ax.set_xscale("log")
        ax.set_xticks(finite)
        ax.set_xticklabels([f"{e:g}" for e in finite])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("epsilon (spent)")
    ax.set_ylabel(f"{table['metric']} (%)")
    ax.set_title(f"{dataset}: accuracy vs privacy budget")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_report(
    runs_dir: str | Path, out_dir: str | Path, metric: str = "auto", include_incomplete: bool = False
) -> dict[str, Any]:
    """Tables, plots and the run list of every dataset found; returns the written paths."""
    runs = collect_runs(runs_dir, include_incomplete)
    if not runs:
        raise FileNotFoundError(f"{runs_dir}: no finished training run (no */metrics.json)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Any] = {"runs": len(runs), "datasets": {}}
    write_runs_csv(out / "runs.csv", runs)
    written["runs_csv"] = str(out / "runs.csv")
    for dataset in sorted({m["dataset"] for m in runs}):
        mine = [m for m in runs if m["dataset"] == dataset]
        table = accuracy_table(mine, default_metric(dataset) if metric == "auto" else metric)
        stem = out / f"accuracy_{dataset}"
        md = table_markdown(dataset, table)
        stem.with_suffix(".md").write_text(md)
        write_table_csv(stem.with_suffix(".csv"), table)
        plot_table(stem.with_suffix(".png"), dataset, table)
        written["datasets"][dataset] = {
            "markdown": str(stem.with_suffix(".md")),
            "csv": str(stem.with_suffix(".csv")),
            "plot": str(stem.with_suffix(".png")),
            "table": md,
        }
    return written
