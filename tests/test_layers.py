"""The house of docs/ARCHITECTURE.md, checked on the source: which folder may import which.

Every top folder installs as ``anonymask.<folder>``. From the top down: cli (commands) and bench
(benchmarks) -> deploy -> flows -> tasks -> config -> models -> storage -> core. core imports
nothing of the project; only cli, bench, deploy, flows and tasks import Prefect. Inside models/,
the anonymizer and private training are two folders that never import each other, on a shared
ground that imports neither, and every import between model subpackages is one of
:data:`MODEL_EDGES`. Each rule has a probe below that shows it can fail.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PUBLIC = "anonymask"  # the package root: anonymask/__init__.py and the public dataset API (anonymask/data.py)

# what each folder may import (besides itself and third-party packages)
ALLOWED = {
    "core": set(),
    "storage": {"core"},
    "models": {"storage", "core"},
    "config": {"models", "storage", "core"},
    "tasks": {"config", "models", "storage", "core", "prefect"},
    "flows": {"tasks", "config", "models", "storage", "core", "prefect"},
    "deploy": {"flows", "config", "core", "prefect"},
    "bench": {"flows", "tasks", "config", "models", "storage", "core", "prefect", PUBLIC},
    "cli": {"bench", "deploy", "flows", "tasks", "config", "models", "storage", "core", "prefect", PUBLIC},
    PUBLIC: {"models", "storage", "core"},
}
#: imports that break a rule today, each with the reason it is still there (keep it empty)
KNOWN: dict[tuple[str, str], str] = {}

HALVES = ("anonymizer", "training", "shared")
#: every import allowed between model subpackages (one that is not here fails the test: add it
#: with its reason, or import something else)
MODEL_EDGES = {
    # anonymizer
    "pose": {"body", "geometry", "align", "metrics"},  # metrics: pose4d's MPJPE against the ground truth
    "segment": set(),
    "inpaint": {"segment", "align"},  # segment: mask helpers (as_bool)
    "compose": {"inpaint", "segment"},
    "refine": set(),
    "audit": {"geometry", "metrics", "pose"},  # pose: the landmark model as a body detector
    "skeleton": {"body", "pose"},
    "metrics": {"segment", "body"},  # body: the skeleton's joints (avatar joint error)
    # training
    "action": {"privacy"},
    "hpe": {"body", "privacy", "synthetic"},
    "privacy": set(),  # self-contained, as Opacus is
    # shared ground
    "body": set(),
    "render": {"body"},
    "synthetic": {"body", "render"},
    "geometry": set(),
    "align": set(),
    "shots": set(),
    "frames": set(),  # frames scaled to a working size (ingest, scripts)
}


def _layer(module: str) -> str | None:
    top = module.split(".")[0]
    if top in ("prefect", "prefect_dask"):
        return "prefect"
    if top != "anonymask":
        return None
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ALLOWED:
        return parts[1]
    return PUBLIC


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from anonymask import data` imports a module; the root's constants (__version__,
            # PIPELINE_VERSION) belong to no layer: the root's __init__ imports nothing
            out += [node.module] + [f"{node.module}.{a.name}" for a in node.names
                                    if node.module == "anonymask" and a.name.islower() and not a.name.startswith("_")]
    return [m for m in out if m != "anonymask"]


def _folder_files(folder: str) -> list[Path]:
    base = ROOT / folder
    return sorted(base.rglob("*.py"))


def violations() -> list[str]:
    found = []
    for folder, allowed in ALLOWED.items():
        for path in _folder_files(folder):
            rel = str(path.relative_to(ROOT))
            for module in _imports(path):
                layer = _layer(module)
                if layer is None or layer == folder or layer in allowed or (rel, module) in KNOWN:
                    continue
                found.append(f"{rel} imports {module} ({folder} may not import {layer})")
    return found


def test_every_source_folder_has_a_layer():
    """A new top folder of Python code must be placed in the house before it can be imported."""
    tops = {p.relative_to(ROOT).parts[0] for p in ROOT.rglob("*.py")
            if not p.relative_to(ROOT).parts[0].startswith(".")} - {"tests", "scripts", "setup.py"}  # fmt: skip
    assert tops <= set(ALLOWED), f"place {sorted(tops - set(ALLOWED))} in ALLOWED"


def test_layers_import_only_downwards():
    assert violations() == []


def test_the_rule_can_fail():
    probes = {
        ROOT / "storage" / "_layer_probe_tmp.py": "from anonymask.models.training.action import run\nimport prefect\n",
        ROOT / "core" / "_layer_probe_tmp.py": "from anonymask.storage import store\n",
        ROOT / "config" / "_layer_probe_tmp.py": "from anonymask.tasks import common\n",
        ROOT / "models" / "shared" / "_layer_probe_tmp.py": "from anonymask.config import stages\n",
        ROOT / "flows" / "_layer_probe_tmp.py": "from anonymask.cli import main\n",
        ROOT / "anonymask" / "_layer_probe_tmp.py": "from anonymask.tasks import common\n",
    }
    for path, text in probes.items():
        path.write_text(text)
    try:
        found = violations()
    finally:
        for path in probes:
            path.unlink()
    for needle in ("storage/_layer_probe_tmp.py imports anonymask.models.training.action",
                   "storage/_layer_probe_tmp.py imports prefect", "core/_layer_probe_tmp.py imports anonymask.storage",
                   "config/_layer_probe_tmp.py imports anonymask.tasks",
                   "models/shared/_layer_probe_tmp.py imports anonymask.config",
                   "flows/_layer_probe_tmp.py imports anonymask.cli",
                   "anonymask/_layer_probe_tmp.py imports anonymask.tasks"):  # fmt: skip
        assert any(needle in v for v in found), needle


def test_known_exceptions_still_exist():
    """A fixed exception must leave the list (so the list never hides a new violation)."""
    for rel, module in KNOWN:
        assert module in _imports(ROOT / rel), f"{rel} no longer imports {module}: remove it from KNOWN"


def _where(path: Path) -> tuple[str, str]:
    """(half, subpackage) of a file under models/: models/<half>/<sub>/... or models/<half>/<sub>.py."""
    rel = path.relative_to(ROOT / "models").parts
    if len(rel) < 2:
        return "", ""
    sub = rel[1] if len(rel) > 2 else rel[1][: -len(".py")]
    return rel[0], sub


def model_violations() -> list[str]:
    found = []
    for path in _folder_files("models"):
        half, src = _where(path)
        if src in ("", "__init__"):
            continue
        for module in _imports(path):
            parts = module.split(".")
            if parts[:2] != ["anonymask", "models"] or len(parts) < 4:
                continue
            dst_half, dst = parts[2], parts[3]
            if dst == src:
                continue
            rel = str(path.relative_to(ROOT))
            if {half, dst_half} == {"anonymizer", "training"}:
                found.append(f"{rel} imports {module} (the anonymizer and private training never import each other)")
            elif half == "shared" and dst_half != "shared":
                found.append(f"{rel} imports {module} (the shared ground imports neither half)")
            elif dst not in MODEL_EDGES.get(src, set()):
                found.append(f"{rel} imports {module} (models/{half}/{src} may import {sorted(MODEL_EDGES.get(src, ()))})")
    return found


def test_models_are_two_halves_on_a_shared_ground():
    """Every file of models/ lives in one of the halves, and every subpackage has declared edges."""
    halves = {p.relative_to(ROOT / "models").parts[0] for p in (ROOT / "models").iterdir() if p.is_dir()}
    assert halves - {"__pycache__"} == set(HALVES)
    subs = {_where(p)[1] for p in _folder_files("models")} - {"", "__init__"}
    assert subs == set(MODEL_EDGES), f"declare {sorted(subs - set(MODEL_EDGES))} / drop {sorted(set(MODEL_EDGES) - subs)}"


def test_model_subpackages_import_only_their_declared_edges():
    assert model_violations() == []


def test_the_model_rules_can_fail():
    probes = {
        ROOT / "models" / "training" / "privacy" / "_layer_probe_tmp.py":
            "from anonymask.models.anonymizer.pose import estimate\n",
        ROOT / "models" / "anonymizer" / "pose" / "_layer_probe_tmp.py":
            "import anonymask.models.training.action.run\nfrom anonymask.models.anonymizer.inpaint import aligned\n",
        ROOT / "models" / "shared" / "body" / "_layer_probe_tmp.py": "from anonymask.models.anonymizer.segment import masks\n",
    }  # fmt: skip
    for path, text in probes.items():
        path.write_text(text)
    try:
        found = model_violations()
    finally:
        for path in probes:
            path.unlink()
    assert any("privacy/_layer_probe_tmp.py imports anonymask.models.anonymizer.pose (the anonymizer and private"
               in v for v in found)  # fmt: skip
    assert any("pose/_layer_probe_tmp.py imports anonymask.models.training.action.run" in v for v in found)
    assert any("pose/_layer_probe_tmp.py imports anonymask.models.anonymizer.inpaint" in v for v in found)
    assert any("body/_layer_probe_tmp.py imports anonymask.models.anonymizer.segment (the shared ground" in v for v in found)


def test_every_package_folder_is_installed():
    """pyproject lists every package (a folder with __init__.py) under its installed name; one it
    misses imports from a checkout but not from an install."""
    import tomllib

    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    installed_as = {folder: name for name, folder in tool["package-dir"].items()}
    found = set()
    for folder, name in installed_as.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            found.add(".".join([name, *init.parent.relative_to(ROOT / folder).parts]))
    assert found == set(tool["packages"]), (sorted(found - set(tool["packages"])), sorted(set(tool["packages"]) - found))
