"""A missing weight file stops a run before any video is touched, with one line naming the file;
the offline defaults need no weights."""

import pytest

from anonymask.config.pipeline import pipeline_config
from anonymask.config.stages import check_weights
from anonymask.core.errors import MissingWeightsError

CASES = [
    ({"audit": {"detectors": ["face", "hog", "fcos"]}}, ["torchvision/fcos_resnet50_fpn_coco-99b0c9b7.pth"]),
    ({"pose4d": {"detector": "rcnn"}}, ["torchvision/keypointrcnn_resnet50_fpn_coco-fc266e95.pth",
                                        "torchvision/maskrcnn_resnet50_fpn_coco-bf2d0c1e.pth"]),
    ({"pose4d": {"detector": "rcnn", "detector_options": {"masks": False}}},
     ["torchvision/keypointrcnn_resnet50_fpn_coco-fc266e95.pth"]),
    ({"inpaint": {"backend": "propainter"}}, ["propainter/raft_things.pth", "propainter/propainter_rfc.pth",
                                              "propainter/propainter.pth"]),
]


def test_offline_defaults_need_no_weights(monkeypatch):
    monkeypatch.delenv("ANONYMASK_WEIGHTS", raising=False)
    check_weights(pipeline_config("demo", {}))


@pytest.mark.parametrize("overrides,files", CASES, ids=["fcos", "rcnn", "rcnn-no-masks", "propainter"])
def test_each_missing_file_is_named_and_present_files_pass(overrides, files, tmp_path, monkeypatch):
    monkeypatch.setenv("ANONYMASK_WEIGHTS", str(tmp_path))
    cfg = pipeline_config("demo", overrides)
    with pytest.raises(MissingWeightsError) as e:
        check_weights(cfg)
    for f in files:
        assert f.split("/")[-1] in str(e.value)
    for f in files[:-1]:  # all but one present: the last one is still named, alone
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_bytes(b"")
    with pytest.raises(MissingWeightsError) as e:
        check_weights(cfg)
    assert files[-1].split("/")[-1] in str(e.value) and all(f.split("/")[-1] not in str(e.value) for f in files[:-1])
    (tmp_path / files[-1]).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / files[-1]).write_bytes(b"")
    check_weights(cfg)  # the check looks at files only; loading them is the backends' own tests


def test_animatediff_refine_weights_are_checked_too(tmp_path, monkeypatch):
    monkeypatch.setenv("ANONYMASK_WEIGHTS", str(tmp_path))
    with pytest.raises(MissingWeightsError, match="refine/sd15"):
        check_weights(pipeline_config("demo", {"refine": {"backend": "animatediff"}}))


def test_cli_stops_before_any_work_with_one_line(tmp_path, monkeypatch, capsys):
    from anonymask.cli.main import main

    monkeypatch.setenv("ANONYMASK_WEIGHTS", str(tmp_path / "weights"))
    store = tmp_path / "s.zarr"
    rc = main(["anonymize", "--dataset", "demo", "--source", str(tmp_path), "--store", str(store),
               "--set", 'audit.detectors=["face","hog","fcos"]'])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "fcos_resnet50_fpn_coco-99b0c9b7.pth" in err[0]
    assert not store.exists()
