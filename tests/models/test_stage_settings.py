"""Typed pipeline settings and the one backend registry: a typo or a bad value is one clear line
before any work, equivalent settings hash the same, and every backend declares its settings."""

from __future__ import annotations

import copy
import pickle
import shutil
from typing import Annotated

import pytest
from pydantic import Field, ValidationError

from anonymask.config.pipeline import parse_overrides, pipeline_config
from anonymask.config.stages import STAGE_DECLARATIONS, hashed_settings, validate_stage
from anonymask.core import registry
from anonymask.core.errors import SettingsError
from anonymask.storage.hashing import config_hash


def chash(stage, values):
    return config_hash(hashed_settings(stage, validate_stage(stage, values)))


def test_defaults_are_complete_for_every_stage_and_dataset():
    for dataset in ("demo", "sample", "ntu", "tsh", "folder"):
        cfg = pipeline_config(dataset)
        assert set(cfg) == set(STAGE_DECLARATIONS)
        assert cfg["pose4d"]["backend"] == ("ntu-skeleton" if dataset == "ntu" else "mediapipe")
    seg = pipeline_config("demo")["segment"]
    assert seg["threshold"] == 0.5 and seg["grow"] == "auto" and seg["model"] == "selfie"  # backend's own


@pytest.mark.parametrize("kind", sorted(registry.DECLARED_IN))
def test_every_backend_declares_settings_whose_defaults_validate(kind):
    found = registry.backends(kind)
    assert found, kind
    for be in found.values():
        s = be.validate({})
        assert set(dict(s)) == set(be.settings.model_fields)
        with pytest.raises(SettingsError, match="unknown setting 'no_such_setting'"):
            be.validate({"no_such_setting": 1})


@pytest.mark.parametrize("overrides,message", [
    ({"segment": {"gorw": 6}}, "unknown setting 'gorw' (did you mean 'grow'?)"),
    ({"segment": {"threshold": "0.6x"}}, "setting 'threshold': Input should be a valid number, unable to parse string as a number (got '0.6x')"),
    ({"segment": {"threshold": 1.5}}, "setting 'threshold': Input should be less than or equal to 1 (got 1.5)"),
    ({"refine": {"guidance_scale": 5}}, "refine.guidance_scale is a setting of backend 'animatediff', not of the "
                                        "selected backend 'none'"),
    ({"inpaint": {"backend": "propaint"}}, "unknown inpaint backend 'propaint'; available: aligned_median, opencv, "
                                           "propainter, temporal_median (did you mean 'propainter'?)"),
    ({"segmnet": {"grow": 3}}, "unknown pipeline stage 'segmnet' (did you mean 'segment'?)"),
    ({"pose4d": {"detector": "rcn"}}, "unknown person_detector backend 'rcn'"),
    ({"pose4d": {"detector_options": {"num_pose": 2}}}, "unknown setting 'num_pose' (did you mean 'num_poses'?)"),
    ({"audit": {"detectors": ["face", "hogg"]}}, "unknown audit backend 'hogg'"),
    ({"audit": {"detector_options": {"hog": {"pad": 2}}, "detectors": ["face"]}}, "'hog' is not in audit.detectors"),
    ({"ingest": {"max_frames": 0}}, "setting 'max_frames': Input should be greater than or equal to 1 (got 0)"),
    ({"ingest": {"cut_threshold": 2}}, "setting 'cut_threshold': Input should be less than or equal to 1 (got 2)"),
    ({"inpaint": {"moving_camera": "opencvv"}}, "must be 'same' or an inpaint backend (aligned_median, opencv, "
                                                "propainter, temporal_median), got 'opencvv'"),
    ({"segment": 3}, "settings must be key=value pairs"),
    ({"segment": {"unflicker": 2}}, "render.hold_ends (1) is less than segment.unflicker (2)"),
])
def test_a_bad_setting_is_one_line_naming_it(overrides, message):
    with pytest.raises(SettingsError) as err:
        pipeline_config("demo", overrides)
    text = str(err.value)
    assert message in text and "\n" not in text


def test_a_wider_unflicker_is_fine_with_as_many_held_avatar_frames():
    cfg = pipeline_config("demo", {"segment": {"unflicker": 2}, "render": {"hold_ends": 2}})
    assert (cfg["segment"]["unflicker"], cfg["render"]["hold_ends"]) == (2, 2)


def test_backend_settings_reach_the_backend():
    cfg = pipeline_config("demo", {"inpaint": {"backend": "opencv", "method": "ns", "radius": 3},
                                   "audit": {"detector_options": {"hog": {"upscale": 2.0}}}})
    assert cfg["inpaint"] == {"backend": "opencv", "window": 64, "context": 16, "sample_frames": 96,
                              "moving_camera": "aligned_median", "camera_drift": 0.012, "person_free_check": True,
                              "method": "ns", "radius": 3}
    from anonymask.config.stages import stage_backend

    inp = stage_backend("inpaint", cfg["inpaint"])
    assert type(inp).__name__ == "OpenCVInpainter" and inp.radius == 3
    assert cfg["audit"]["detector_options"]["hog"]["upscale"] == 2.0
    assert cfg["audit"]["detector_options"]["face"]["min_score"] == 0.7  # defaults filled per detector
    # every parameter of the refiner is a setting (not 5 of 15), devices excepted
    refine = registry.get_backend("refine", "animatediff").settings.model_fields
    assert {"guidance_scale", "controlnet_scales", "prompt", "negative_prompt", "eta", "weighting"} <= set(refine)
    assert not {"device", "dtype"} & set(refine)
    assert pipeline_config("demo", {"refine": {"backend": "animatediff"}})["refine"]["num_inference_steps"] == 8


def test_equivalent_settings_hash_the_same_and_windows_never_change_the_hash():
    assert chash("segment", {}) == chash("segment", {"threshold": 0.5}) == chash("segment", {"threshold": "0.5"})
    assert chash("segment", {"threshold": 0.6}) != chash("segment", {})
    assert chash("render", {"window": 8}) == chash("render", {})
    assert chash("render", {"bank_seed": 1}) != chash("render", {})
    # the options of the chosen backend count; switching backend changes the hash
    assert chash("inpaint", {"radius": 3}) != chash("inpaint", {})
    assert chash("inpaint", {"backend": "opencv"}) != chash("inpaint", {})


def test_parse_overrides_rejects_malformed_items():
    assert parse_overrides(["segment.grow=6", "audit.detectors=[\"face\"]"]) == {
        "segment": {"grow": 6}, "audit": {"detectors": ["face"]}}
    for bad in ("segment.grow", "segment.=3", ".grow=3", "=3"):
        with pytest.raises(SettingsError, match="expected key=value"):
            parse_overrides([bad])
    with pytest.raises(SettingsError, match="unknown pipeline stage 'grow'"):
        pipeline_config("demo", parse_overrides(["grow=6"]))


def test_settings_from_a_signature_with_ranges_defaults_and_runtime():
    def factory(frames, radius: Annotated[int, Field(ge=1)] = 5, method: str = "telea", scale: float = 1.0,
                device: str | None = None):
        return (radius, method, scale, device, frames)

    model = registry.settings_model(factory, "m", runtime=("frames", "device"), defaults={"scale": 2.0})
    assert list(model.model_fields) == ["radius", "method", "scale"]
    assert model().scale == 2.0 and model().radius == 5
    with pytest.raises(ValidationError):
        model(radius=0)  # the range in the signature
    with pytest.raises(TypeError, match="defaults for unknown"):
        registry.settings_model(factory, "m", runtime=("frames",), defaults={"radiu": 1})
    with pytest.raises(TypeError, match="has no default"):
        registry.settings_model(factory, "m", runtime=(), defaults=None)


def test_an_annotation_that_does_not_resolve_is_an_error_not_any():
    def factory(radius: NotImported = 5):  # noqa: F821 - the point of the test
        return radius

    with pytest.raises(TypeError, match="do not resolve"):
        registry.settings_model(factory, "m", runtime=(), defaults=None)


def test_a_window_size_recomputes_nothing_and_a_real_setting_recomputes_its_stage(tiny_anonymized, tmp_path):
    from anonymask.storage.store import DatasetStore
    from anonymask.tasks.common import run_video

    url = str(tmp_path / "g.zarr")
    shutil.copytree(tiny_anonymized, url)
    vid = DatasetStore.open(url).video_ids()[0]
    gt = {"pose4d": {"backend": "gt"}, "segment": {"backend": "gt"}}
    windows = {name: {"window": 5} for name in ("render", "merge", "tubelets", "conditions", "reintegrate")}
    res = run_video(url, vid, pipeline_config("demo", {**gt, **windows}))
    assert {r["status"] for r in res} == {"skipped"}
    res = run_video(url, vid, pipeline_config("demo", {**gt, "tubelets": {"margin": 0.2}}))
    done = [r["stage"] for r in res if r["status"] == "done"]
    assert done == ["tubelets", "conditions", "refine", "reintegrate", "audit"]


def test_typed_settings_are_frozen_attributes_of_the_stage_and_its_backend():
    from anonymask.config.stages import SegmentSettings, stage_settings

    s = stage_settings("segment", {"grow": 6})
    assert isinstance(s, SegmentSettings) and type(s).__name__ == "SegmentSettings[mediapipe]"
    assert s.grow == 6 and s.threshold == 0.5 and s.model == "selfie"  # the stage's and the backend's
    with pytest.raises(ValidationError):
        s.grow = 3
    assert stage_settings("segment", s) is s  # typed settings are not validated again
    assert type(stage_settings("segment", {"backend": "gt"})).__name__ == "SegmentSettings[gt]"
    with pytest.raises(SettingsError, match="grow"):
        stage_settings("segment", {"grow": "big"})
    p4 = stage_settings("pose4d", {})
    assert p4.link.gap == pipeline_config("demo")["pose4d"]["link"]["gap"]  # nested sections typed too


def test_typed_settings_hash_exactly_as_their_validated_dict():
    from anonymask.config.datasets import DATASETS
    from anonymask.config.stages import PipelineSettings

    for dataset in DATASETS:
        cfg = pipeline_config(dataset, {"segment": {"grow": 4}, "inpaint": {"window": 32}})
        typed = PipelineSettings.of(cfg)
        assert typed.to_dict() == cfg
        assert PipelineSettings.of(typed) is typed
        assert copy.deepcopy(typed) == typed and pickle.loads(pickle.dumps(typed)) == typed
        for stage in cfg:
            assert typed[stage] is getattr(typed, stage)
            assert config_hash(hashed_settings(stage, typed[stage].to_dict())) == chash(stage, cfg[stage])
            assert typed[stage].model_dump() == cfg[stage]


def test_execute_stage_hands_the_run_function_typed_settings_without_validating_them(monkeypatch):
    from anonymask.config import stages
    from anonymask.config.stages import PipelineSettings
    from anonymask.tasks import common

    typed = PipelineSettings.of(pipeline_config("demo"))
    monkeypatch.setattr(stages, "validate_stage", lambda *a, **k: pytest.fail("validated again"))
    assert common.stage_settings_of("segment", typed) is typed.segment
