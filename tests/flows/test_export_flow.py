"""The ``export`` flow (issue 30 item 1) through real Prefect: same files and manifest as the CLI,
a table artifact, a rerun writes nothing; and the ``export/<dataset>`` deployments."""

from __future__ import annotations

from anonymask.storage.export import read_manifest, verify_export
from anonymask.storage.store import DatasetStore


def test_export_flow_writes_verifiable_files_and_reruns_idempotently(prefect_api, tiny_anonymized, tmp_path):
    from anonymask.flows.export import export

    out = tmp_path / "out"
    state = export(dataset="demo", store=tiny_anonymized, out=str(out), lossless=True, return_state=True)
    assert state.is_completed(), state.message
    res = state.result()
    ids = DatasetStore.open(tiny_anonymized, mode="r").video_ids()
    assert sorted(res["written"]) == ids and not res["excluded"]
    assert sorted(read_manifest(out)[1]) == ids and verify_export(out)["ok"]
    again = export(dataset="demo", store=tiny_anonymized, out=str(out), lossless=True)
    assert again["written"] == [] and sorted(again["unchanged"]) == ids


def test_export_deployment_per_anonymized_dataset():
    from anonymask.deploy.deployments import ANONYMIZE_DATASETS, all_deployments, export_deployments

    deps = export_deployments()
    assert [d.name for d in deps] == ANONYMIZE_DATASETS
    assert all(d.flow_name == "export" and d.parameters == {"dataset": d.name} for d in deps)
    assert {("export", d.name) for d in deps} <= {(d.flow_name, d.name) for d in all_deployments()}


def test_anonymize_with_export_to_exports_after_its_videos(prefect_api, tiny_dataset, tmp_path):
    """The deployment step after anonymize: the same run, then its publishable videos as files."""
    from anonymask.flows.anonymize import anonymize

    out, store = tmp_path / "exported", str(tmp_path / "s.zarr")
    summary = anonymize(dataset="demo", source=str(tiny_dataset), store=store, limit=1,
                        overrides={"pose4d": {"backend": "gt"}, "segment": {"backend": "gt"}}, export_to=str(out))
    assert summary["done"] == 1 and summary["export"]["written"] == 1 and summary["export"]["out"] == str(out)
    header, rows = read_manifest(out)
    assert list(rows) == DatasetStore.open(store, mode="r").video_ids() and verify_export(out)["ok"]
