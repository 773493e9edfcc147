"""Bad run arguments are one line naming the path, found before Prefect or a server starts."""

import os
import subprocess
import sys

import pytest

from anonymask.core.errors import DatasetError, StoreError
from anonymask.storage.preflight import check_run_target


def _unwritable_folder(tmp_path):
    """A folder this process cannot create files in: chmod for a user, a kernel file system for root."""
    if os.geteuid() != 0:
        d = tmp_path / "ro"
        d.mkdir()
        d.chmod(0o500)
        return d
    return "/sys"  # sysfs refuses new entries even to root


def test_each_bad_target_is_named(tiny_dataset, tmp_path):
    store = str(tmp_path / "s.zarr")
    with pytest.raises(DatasetError, match="unknown dataset 'nope'.*known: .*demo"):
        check_run_target("nope", str(tiny_dataset), store)
    with pytest.raises(DatasetError, match="missing: source folder does not exist"):
        check_run_target("demo", str(tmp_path / "missing"), store)
    with pytest.raises(DatasetError, match="dataset.json: source is not a folder"):
        check_run_target("demo", str(tiny_dataset / "dataset.json"), store)
    with pytest.raises(StoreError, match="dataset.json: store path is a file"):
        check_run_target("demo", str(tiny_dataset), str(tiny_dataset / "dataset.json"))
    with pytest.raises(StoreError, match="is a file, not a folder"):
        check_run_target("demo", str(tiny_dataset), str(tiny_dataset / "dataset.json" / "s.zarr"))
    with pytest.raises(StoreError, match="not writable"):
        check_run_target("demo", str(tiny_dataset), f"{_unwritable_folder(tmp_path)}/s.zarr")


def test_good_targets_pass_and_leave_nothing_behind(tiny_dataset, tmp_path):
    check_run_target("demo", str(tiny_dataset), str(tmp_path / "new" / "deeper" / "s.zarr"))
    assert list(tmp_path.iterdir()) == []  # the write probe is removed, no folder is made early
    check_run_target("sample", str(tmp_path / "ignored"), str(tmp_path / "s.zarr"))  # sample reads packages
    check_run_target("demo", str(tiny_dataset), "s3://bucket/s.zarr")  # remote: checked when opened


@pytest.mark.parametrize("args, expect", [
    (["--dataset", "nope"], "unknown dataset 'nope'"),
    (["--dataset", "demo", "--source", "{tmp}/missing"], "source folder does not exist"),
    (["--dataset", "demo", "--store", "{src}/dataset.json"], "store path is a file"),
])
def test_cli_reports_before_any_prefect_server(tiny_dataset, tmp_path, args, expect):
    args = [a.format(tmp=tmp_path, src=tiny_dataset) for a in args]
    if "--source" not in args:
        args += ["--source", str(tiny_dataset)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(tmp_path / "ph"), ANONYMASK_DATA=str(tmp_path / "data"))
    res = subprocess.run([sys.executable, "-m", "anonymask.cli", "anonymize", *args],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [f"anonymask: error: {res.stderr.split('error: ', 1)[1].strip()}"]
    assert expect in res.stderr
    assert "Starting temporary server" not in res.stdout + res.stderr
    assert not (tmp_path / "ph" / "prefect.db").exists()  # Prefect was never prepared nor started
