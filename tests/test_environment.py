"""The ANONYMASK_* environment variables: one typed object reads them (core/environment.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from anonymask.core.environment import Environment, describe, environment, variable
from anonymask.core.errors import SettingsError

ROOT = Path(__file__).resolve().parents[1]
CODE = ("core", "storage", "models", "config", "tasks", "flows", "deploy", "cli", "bench", "anonymask")
#: a read of the environment: os.environ.get(...), os.environ[...], os.getenv(...), ``X in os.environ``
READ = re.compile(r"(environ\.get\(|environ\[|getenv\()\s*([^,)\]]+)")


def environment_reads(paths: list[Path]) -> list[str]:
    """Reads of an ANONYMASK_* variable outside core/environment.py: by literal, or by a constant
    holding one (``THREADS_ENV = variable("cpu_threads")`` is such a constant)."""
    found = []
    for path in paths:
        if path == ROOT / "core" / "environment.py":
            continue
        text = path.read_text()
        constants = set(re.findall(r"^\s*([A-Z_]+)\s*=\s*(?:\"ANONYMASK_|variable\()", text, flags=re.M))
        for m in READ.finditer(text):
            arg = m.group(2).strip()
            if "ANONYMASK_" in arg or arg in constants:
                line = text.count("\n", 0, m.start()) + 1
                found.append(f"{path.relative_to(ROOT)}:{line} reads {arg} (read it through core/environment.py)")
    return found


def _code_files() -> list[Path]:
    return [p for folder in CODE for p in sorted((ROOT / folder).rglob("*.py"))]


def test_only_the_environment_object_reads_anonymask_variables():
    assert environment_reads(_code_files()) == []


def test_the_source_rule_can_fail(tmp_path):
    probe = ROOT / "storage" / "_env_probe_tmp.py"
    probe.write_text('import os\nA = os.environ.get("ANONYMASK_DATA")\nMY_ENV = "ANONYMASK_X"\nB = os.getenv(MY_ENV)\n')
    try:
        found = environment_reads([probe])
    finally:
        probe.unlink()
    assert len(found) == 2 and "ANONYMASK_DATA" in found[0] and "MY_ENV" in found[1]


def test_defaults_when_unset_or_empty(monkeypatch, tmp_path):
    for name, _ in describe():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ANONYMASK_WEIGHTS", "")  # empty counts as unset
    env = environment()
    assert env.data == (tmp_path / "data").resolve()
    assert env.weights is None and env.log_dir is None and env.cpu_threads is None and env.api_lost_s is None
    assert env.max_video_side == 8192 and env.render_aa == "auto" and env.run_id == ""


def test_values_are_typed(monkeypatch, tmp_path):
    monkeypatch.setenv("ANONYMASK_DATA", str(tmp_path / "d"))
    monkeypatch.setenv("ANONYMASK_CPU_THREADS", "3")
    monkeypatch.setenv("ANONYMASK_RENDER_AA", "1")
    monkeypatch.setenv("ANONYMASK_API_LOST_S", "2.5")
    env = environment()
    assert env.data == tmp_path / "d" and env.cpu_threads == 3 and env.render_aa == "on" and env.api_lost_s == 2.5
    # the readers see it: the data root and the landmark model's thread count
    from anonymask.core.paths import data_root
    from anonymask.models.anonymizer.pose.roi import cpu_threads

    assert data_root() == tmp_path / "d" and cpu_threads() == 3


@pytest.mark.parametrize("name, value, needle", [
    ("ANONYMASK_CPU_THREADS", "0", "at least 1"), ("ANONYMASK_MAX_VIDEO_SIDE", "big", "invalid literal"),
    ("ANONYMASK_RENDER_AA", "maybe", "auto, on or off"), ("ANONYMASK_API_LOST_S", "-1", "above 0"),
])  # fmt: skip
def test_a_bad_value_names_the_variable(monkeypatch, name, value, needle):
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=f"{name}={value!r}: .*{needle}"):
        environment()


def test_every_variable_has_a_reason():
    rows = describe()
    assert [name for name, _ in rows] == [variable(f) for f in Environment.__dataclass_fields__]
    assert all(len(reason) > 20 for _, reason in rows), rows


def test_the_architecture_doc_lists_every_variable():
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    assert [name for name, _ in describe() if f"| `{name}` |" not in doc] == []
