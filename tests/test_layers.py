"""The layers of docs/ARCHITECTURE.md, checked on the source: which folder may import which.

flows -> tasks -> models -> storage, plus a foundation every layer may use (errors, compat,
paths). models/ never imports Prefect or anything above it; storage/ is persistence only and
imports no model code; nothing below deploy/ imports deploy/ or the CLI.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOUNDATION = ("anonymask.errors", "anonymask.compat", "anonymask.paths", "anonymask.stopping")  # + package root
APP = "app"  # anonymask/*: cli, config, train_config, report, demo, preview, bench

# what each folder may import (besides itself, the foundation and third-party packages)
ALLOWED = {
    "storage": set(),
    "models": {"storage"},
    "tasks": {"models", "storage", "prefect"},
    "flows": {"tasks", "models", "storage", "prefect", APP},
    "deploy": {"flows", "prefect"},
}
#: imports that break a rule today, each with the reason it is still there (keep it empty)
KNOWN: dict[tuple[str, str], str] = {}


def _layer(module: str) -> str | None:
    if module == "anonymask" or module.startswith(FOUNDATION):
        return None
    top = module.split(".")[0]
    if top in ("prefect", "prefect_dask"):
        return "prefect"
    if top != "anonymask":
        return None
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ALLOWED:
        return parts[1]
    return APP


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
    return out


def violations() -> list[str]:
    found = []
    for folder, allowed in ALLOWED.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            for module in _imports(path):
                layer = _layer(module)
                if layer is None or layer == folder or layer in allowed or (rel, module) in KNOWN:
                    continue
                found.append(f"{rel} imports {module} ({folder} may not import {layer})")
    return found


def test_layers_import_only_downwards():
    assert violations() == []


def test_the_rule_can_fail(tmp_path, monkeypatch):
    bad = ROOT / "storage" / "_layer_probe_tmp.py"
    bad.write_text("from anonymask.models.action import run\nimport prefect\n")
    try:
        found = violations()
    finally:
        bad.unlink()
    assert any("_layer_probe_tmp.py imports anonymask.models.action" in v for v in found)
    assert any("_layer_probe_tmp.py imports prefect" in v for v in found)


def test_known_exceptions_still_exist():
    """A fixed exception must leave the list (so the list never hides a new violation)."""
    for rel, module in KNOWN:
        assert module in _imports(ROOT / rel), f"{rel} no longer imports {module}: remove it from KNOWN"
