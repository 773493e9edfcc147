"""Named presets (config/presets.py): settings that only work together, under the user's --set."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from anonymask.config import presets as presets_mod
from anonymask.config.datasets import DATASETS
from anonymask.config.pipeline import parse_overrides, pipeline_config
from anonymask.config.presets import PRESETS, Preset, get_preset, with_presets
from anonymask.core.errors import SettingsError


def _get(cfg, dotted):
    for part in dotted.split("."):
        cfg = cfg[part]
    return cfg


@pytest.mark.parametrize("name", sorted(PRESETS))
@pytest.mark.parametrize("dataset", sorted(DATASETS))
def test_every_preset_validates_and_reaches_its_settings(name, dataset):
    p = get_preset(name)
    plain = pipeline_config(dataset, {})
    backend = p.overrides.get("pose4d", {}).get("backend", "mediapipe")
    if "pose4d" in p.overrides and plain["pose4d"]["backend"] != backend:
        # NTU's pose comes from its Kinect skeletons: a discovery preset is refused, in one line
        with pytest.raises(SettingsError, match="not of the selected backend"):
            pipeline_config(dataset, with_presets([name], {}))
        cfg = pipeline_config(dataset, with_presets([name], {"pose4d": {"backend": backend}}))
    else:
        cfg = pipeline_config(dataset, with_presets([name], {}))
    for key in p.keys:
        assert _get(cfg, key) == _get(p.overrides, key), key
    # a preset that sets a value the defaults already have would be noise
    assert any(_get(plain, key) != _get(cfg, key) for key in p.keys)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_a_preset_says_why_and_on_what_terms(name):
    p = get_preset(name)
    assert p.summary and p.measured
    if any("yolo" in str(_get(p.overrides, k)) for k in p.keys):  # AGPL weights: the preset must say so
        assert "AGPL" in p.terms


def test_set_wins_over_a_preset_and_the_rest_stays():
    over = with_presets(["yolo"], parse_overrides(["inpaint.source_margin=1", "segment.grow_frac=0.05"]))
    cfg = pipeline_config("demo", over)
    assert cfg["inpaint"]["source_margin"] == 1
    assert cfg["segment"]["grow_frac"] == 0.05
    assert cfg["pose4d"]["detector"] == "yolo"
    assert with_presets([], {"a": {"b": 1}}) == {"a": {"b": 1}}
    assert with_presets(None, None) == {}


def test_an_unknown_preset_names_the_known_ones():
    with pytest.raises(SettingsError, match=r"'nope'.*known: .*yolo"):
        with_presets(["nope"], {})


def test_two_presets_that_disagree_are_refused(monkeypatch):
    other = Preset(name="narrow", summary="s", overrides={"inpaint": {"source_margin": 1}}, measured="m")
    same = Preset(name="wide", summary="s", overrides={"inpaint": {"source_margin": 3}}, measured="m")
    monkeypatch.setitem(presets_mod.PRESETS, "narrow", other)
    monkeypatch.setitem(presets_mod.PRESETS, "wide", same)
    with pytest.raises(SettingsError, match="inpaint.source_margin"):
        with_presets(["yolo", "narrow"], {})
    # agreeing on a key is fine; the later one's other keys are added
    assert with_presets(["yolo", "wide"], {})["inpaint"]["source_margin"] == 3


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "anonymask.cli", *args], capture_output=True, text=True, timeout=120)


def test_cli_lists_shows_and_refuses_presets(tmp_path):
    r = _cli("config", "presets")
    assert r.returncode == 0 and "yolo:" in r.stdout and "AGPL" in r.stdout and "pose4d.detector='yolo'" in r.stdout
    r = _cli("config", "show", "--dataset", "tsh", "--preset", "yolo", "--set", "inpaint.source_margin=2")
    assert r.returncode == 0, r.stderr
    cfg = json.loads(r.stdout)
    assert cfg["pose4d"]["detector"] == "yolo" and cfg["inpaint"]["source_margin"] == 2
    assert cfg["audit"]["detectors"] == ["face", "yolo"]
    # a bad preset stops anonymize before Prefect, a server or a store: one line, exit 2
    store = tmp_path / "s.zarr"
    r = _cli("anonymize", "--dataset", "demo", "--source", str(tmp_path), "--store", str(store), "--preset", "nope")
    assert r.returncode == 2 and "no such preset" in r.stderr and "Traceback" not in r.stderr
    assert not store.exists()
