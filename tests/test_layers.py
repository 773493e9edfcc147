"""The layers of docs/ARCHITECTURE.md, checked on the source: which folder may import which.

flows -> tasks -> models -> storage, plus a foundation every layer may use (errors, compat,
paths, stopping) that imports nothing of the project. models/ never imports Prefect or anything
above it; storage/ is persistence only and imports no model code; nothing below deploy/ imports
deploy/ or the CLI. Inside models/, the anonymizer and private training are two halves that
never import each other, on a shared ground (body model, geometry, registry, synthetic data), and
every import between model subpackages is one of :data:`MODEL_EDGES`.
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

#: models/ in two halves on a shared ground (modules count as subpackages here)
ANONYMIZER = {"pose", "segment", "inpaint", "render", "compose", "refine", "audit", "skeleton", "stage_settings"}
TRAINING = {"action", "hpe", "privacy"}
SHARED = {"body", "geometry", "align", "metrics", "registry", "shots", "synthetic"}
#: every import allowed between model subpackages (one that is not here fails the test: add it
#: with its reason, or import something else)
MODEL_EDGES = {
    "pose": {"body", "geometry", "align", "registry"},
    "segment": {"registry"},
    "inpaint": {"registry", "segment", "align"},  # segment: mask helpers (as_bool)
    "render": {"body"},
    "compose": {"inpaint", "segment"},
    "refine": {"registry"},
    "audit": {"geometry", "metrics", "pose", "registry"},  # pose: the landmark model as a body detector
    "skeleton": {"body", "pose"},
    "stage_settings": {"registry"},
    "action": {"privacy"},
    "hpe": {"body", "privacy", "synthetic"},
    "privacy": set(),  # self-contained, as Opacus is
    "metrics": {"segment"},
    "synthetic": {"body", "render"},
}


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


def _sub(path: Path) -> str:
    rel = path.relative_to(ROOT / "models").parts
    return rel[0] if len(rel) > 1 else rel[0][: -len(".py")]


def model_violations() -> list[str]:
    found = []
    for path in sorted((ROOT / "models").rglob("*.py")):
        src = _sub(path)
        if src == "__init__":
            continue
        for module in _imports(path):
            if not module.startswith("anonymask.models."):
                continue
            dst = module.split(".")[2]
            if dst == src:
                continue
            rel = str(path.relative_to(ROOT))
            if (src in ANONYMIZER and dst in TRAINING) or (src in TRAINING and dst in ANONYMIZER):
                found.append(f"{rel} imports {module} (the anonymizer and private training never import each other)")
            elif dst not in MODEL_EDGES.get(src, set()):
                found.append(f"{rel} imports {module} (models/{src} may import {sorted(MODEL_EDGES.get(src, ()))})")
    return found


def foundation_violations(paths: list[Path] | None = None) -> list[str]:
    found = []
    for path in paths or [ROOT / "anonymask" / f"{m.split('.')[-1]}.py" for m in FOUNDATION]:
        for imported in _imports(path):
            if imported.startswith("anonymask") and not imported.startswith(FOUNDATION):
                found.append(f"{path.name} imports {imported} (the foundation imports nothing of the project)")
    return found


def test_model_subpackages_import_only_their_declared_edges():
    assert model_violations() == []
    halves = ANONYMIZER | TRAINING | SHARED
    subs = {_sub(p) for p in (ROOT / "models").rglob("*.py")} - {"__init__"}
    assert subs <= halves, f"place {sorted(subs - halves)} in one half or the shared ground"
    assert not (ANONYMIZER & TRAINING) and not (SHARED & (ANONYMIZER | TRAINING))


def test_the_foundation_imports_nothing_of_the_project():
    assert foundation_violations() == []


def test_the_model_and_foundation_rules_can_fail(tmp_path):
    probes = {ROOT / "models" / "privacy" / "_layer_probe_tmp.py": "from anonymask.models.pose import estimate\n",
              ROOT / "models" / "pose" / "_layer_probe_tmp.py": "import anonymask.models.action.run\n"
                                                                   "from anonymask.models.inpaint import aligned\n"}
    for path, text in probes.items():
        path.write_text(text)
    try:
        found = model_violations()
    finally:
        for path in probes:
            path.unlink()
    assert any("privacy/_layer_probe_tmp.py imports anonymask.models.pose" in v for v in found)
    assert any("pose/_layer_probe_tmp.py imports anonymask.models.action.run (the anonymizer and private training"
               in v for v in found)
    assert any("pose/_layer_probe_tmp.py imports anonymask.models.inpaint" in v for v in found)
    errors = tmp_path / "errors.py"  # the foundation's errors module with one import too many
    errors.write_text((ROOT / "anonymask" / "errors.py").read_text() + "\nfrom anonymask.config import parse_overrides\n")
    assert any("errors.py imports anonymask.config" in v for v in foundation_violations([errors]))
