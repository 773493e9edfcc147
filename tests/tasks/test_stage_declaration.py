"""A stage is one declaration (issue 29 item 2): a toy stage declared once, with its settings
model, its deps and its run function, is validated, ordered, run, recorded and skipped by the real
per-video machinery; its declaration is removed afterwards, leaving the pipeline as it was."""

import shutil

import numpy as np
import pytest
from pydantic import Field

from anonymask.config.pipeline import pipeline_config
from anonymask.config.stages import (
    STAGE_DECLARATIONS,
    StageDeclaration,
    StageSettings,
    declare_stage,
    remove_stage,
    stage_order,
)
from anonymask.core.errors import SettingsError
from anonymask.storage.store import DatasetStore
from anonymask.tasks.common import ORDER, execute_stage, load_stages, run_video

GT = {"pose4d": {"backend": "gt"}, "segment": {"backend": "gt"}}
#: the execution order before the stages were declared (tasks/common.py's ORDER list)
PIPELINE = ["ingest", "pose4d", "motion", "render", "segment", "inpaint", "merge", "tubelets", "conditions",
            "refine", "reintegrate", "audit"]


class ToySettings(StageSettings):
    scale: int = Field(2, ge=1)


def run_toy(entry, cfg, w):
    """Hole pixels per frame, times ``scale``: reads segment's output, so it must run after it."""
    assert entry.record("segment")["status"] == "done"
    hole = entry.read("person_hole")
    w.write("toy/hole_pixels", hole.reshape(len(hole), -1).sum(1).astype(np.int64) * cfg.scale,
            frame_chunked=False)
    w.metric(toy_frames=len(hole))


@pytest.fixture
def toy_stage():
    decl = declare_stage(StageDeclaration("toy", ToySettings, run=run_toy, deps=("segment", "ingest"),
                                          backend="numpy"))
    yield decl
    remove_stage("toy")


def test_the_order_is_derived_from_the_declarations():
    assert list(ORDER) == stage_order() == PIPELINE
    assert list(load_stages()) == PIPELINE
    from anonymask.tasks import segment

    assert load_stages()["segment"].run is segment.run  # "anonymask.tasks.segment:run", imported


def test_a_stage_declared_once_runs_after_its_deps_and_is_skipped_when_done(toy_stage, tiny_anonymized, tmp_path):
    url = str(tmp_path / "s.zarr")
    shutil.copytree(tiny_anonymized, url)
    vid = DatasetStore.open(url).video_ids()[0]
    assert list(ORDER) == [*PIPELINE, "toy"]
    cfg = pipeline_config("demo", {**GT, "toy": {"scale": 3}})

    res = run_video(url, vid, cfg)
    assert [r["stage"] for r in res] == [*PIPELINE, "toy"]
    assert {r["stage"]: r["status"] for r in res} == {**{s: "skipped" for s in PIPELINE}, "toy": "done"}
    e = DatasetStore.open(url).video(vid)
    rec = e.record("toy")
    assert rec["status"] == "done" and rec["backend"] == "numpy" and rec["deps"] == ["segment", "ingest"]
    hole = e.read("person_hole")
    np.testing.assert_array_equal(e.read("toy/hole_pixels"), hole.reshape(len(hole), -1).sum(1) * 3)
    assert e.read("toy/hole_pixels").any()

    assert {r["stage"]: r["status"] for r in run_video(url, vid, cfg)}["toy"] == "skipped"
    # its settings join its hash: another scale computes it again (and nothing else)
    again = run_video(url, vid, pipeline_config("demo", {**GT, "toy": {"scale": 4}}))
    assert [r["stage"] for r in again if r["status"] == "done"] == ["toy"]


def test_the_declared_stage_settings_are_validated(toy_stage, tmp_path):
    assert pipeline_config("demo", {})["toy"] == {"scale": 2}
    with pytest.raises(SettingsError, match=r"toy: unknown setting 'sclae' \(did you mean 'scale'"):
        pipeline_config("demo", {"toy": {"sclae": 3}})
    with pytest.raises(SettingsError, match="toy: setting 'scale': Input should be greater than or equal to 1"):
        pipeline_config("demo", {"toy": {"scale": 0}})
    url = tmp_path / "never.zarr"  # execute_stage validates before it touches a store
    with pytest.raises(SettingsError, match="sclae"):
        execute_stage(str(url), "v", "toy", {"toy": {"sclae": 3}})
    assert not url.exists()


def test_removing_the_declaration_leaves_the_pipeline_as_it_was():
    declare_stage(StageDeclaration("toy", ToySettings, run=run_toy, deps=("segment",)))
    try:
        assert "toy" in load_stages() and list(ORDER)[-1] == "toy"
        with pytest.raises(ValueError, match="declared already"):
            declare_stage(StageDeclaration("toy", ToySettings, run=run_toy))
    finally:
        remove_stage("toy")
    assert "toy" not in load_stages() and list(ORDER) == PIPELINE
    with pytest.raises(SettingsError, match="unknown pipeline stage 'toy'"):
        pipeline_config("demo", {"toy": {}})


def test_the_order_is_topological_whatever_the_declaration_order():
    """A stage declared before the stage it reads still runs after it; an undeclared dependency
    or a cycle is one SettingsError."""
    declare_stage(StageDeclaration("toy_late", ToySettings, run=run_toy, deps=("toy_early",)))
    try:
        with pytest.raises(SettingsError, match="'toy_late' reads 'toy_early', which is not a declared stage"):
            stage_order()
        declare_stage(StageDeclaration("toy_early", ToySettings, run=run_toy, deps=("ingest",)))
        assert stage_order() == [*PIPELINE, "toy_early", "toy_late"]
        declare_stage(StageDeclaration("toy_early", ToySettings, run=run_toy, deps=("toy_late",)), replace=True)
        with pytest.raises(SettingsError, match="cycle"):
            stage_order()
    finally:
        for name in ("toy_late", "toy_early"):
            STAGE_DECLARATIONS.pop(name, None)
    assert stage_order() == PIPELINE
