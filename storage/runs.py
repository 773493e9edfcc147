"""Run folders of training jobs: the files a run writes, atomically, and the config check.

A run folder (``$ANONYMASK_DATA/runs/<run-name>/``) holds ``config.json`` (the resolved settings
and their hash: a folder belongs to one configuration), ``checkpoint.pt`` (after every epoch),
``metrics.json``, ``privacy.json`` and ``result.md``. Persistence only: what goes into them is
decided by models/training/action/run.py.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

CHECKPOINT = "checkpoint.pt"
METRICS = "metrics.json"
PRIVACY = "privacy.json"
CONFIG = "config.json"
RESULT = "result.md"


def json_safe(value: Any) -> Any:
    """Infinite values as the strings "inf"/"-inf", NaN as null (strict JSON)."""
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def write_json(path: Path, data: Any) -> None:
    """Atomic JSON write (temp file + rename)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(json_safe(data), indent=2, sort_keys=True))
    tmp.replace(path)


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())


def prepare_run_dir(run_dir: Path, settings: dict[str, Any], settings_hash: str, store_url: str) -> None:
    """Create the run folder, or check that an existing one belongs to the same settings."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    cfg_path = run_dir / CONFIG
    if cfg_path.is_file():
        old = read_json(cfg_path)
        if old.get("settings_hash") != settings_hash:
            changed = sorted(k for k in settings if json_safe(settings[k]) != old.get("settings", {}).get(k))
            raise ValueError(
                f"{run_dir}: the run folder holds another configuration (changed: {', '.join(changed)}); "
                "choose another run name or remove the folder"
            )
    write_json(cfg_path, {"settings": settings, "settings_hash": settings_hash, "store": store_url})
