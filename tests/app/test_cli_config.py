"""`anonymask config show`: the effective settings, validated, one line on a bad one."""

import json

from anonymask.cli.main import main


def test_config_show_train_prints_resolved_settings(capsys):
    assert main(["config", "show", "--train", "maskdp", "--dataset", "ntu", "--set", "epochs=20"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["mode"] == "maskdp" and shown["epochs"] == 20 and shown["delta"] == 1e-6
    assert shown["adjacency"] == "replace" and shown["mask_source"] == "r"  # "auto" decided


def test_config_show_rejects_a_typo_in_one_line(capsys):
    assert main(["config", "show", "--train", "dp", "--dataset", "ntu", "--set", "epohs=20"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown setting 'epohs'" in err[0]


def test_config_show_pipeline(capsys):
    assert main(["config", "show", "--dataset", "demo"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert "ingest" in shown and "segment" in shown


def test_config_show_pipeline_is_validated_and_complete(capsys):
    assert main(["config", "show", "--dataset", "sample", "--set", "inpaint.backend=opencv", "inpaint.radius=3"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["inpaint"] == {"backend": "opencv", "window": 64, "context": 16, "sample_frames": 96,
                                "moving_camera": "aligned_median", "camera_drift": 0.012, "person_free_check": True,
                                "method": "telea", "radius": 3}
    assert shown["ingest"]["max_side"] == 480  # the dataset's default over the stage's


def test_anonymize_with_a_bad_setting_fails_in_one_line_before_touching_the_store(capsys, tmp_path):
    store = tmp_path / "s.zarr"
    for bad, says in ((["segment.gorw=6"], "did you mean 'grow'?"), (["segment.threshold=0.6x"], "setting 'threshold': Input should be a valid number, unable to parse string as a number (got '0.6x')"),
                      (["refine.guidance_scale=5"], "not of the selected backend 'none'"),
                      (["segment.threshold"], "expected key=value")):
        assert main(["anonymize", "--dataset", "demo", "--store", str(store), "--set", *bad]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0], err
    assert not store.exists()


def test_config_backends_lists_every_backend_with_its_settings(capsys):
    assert main(["config", "backends"]) == 0
    out = capsys.readouterr().out
    for line in ("pose4d.mediapipe  (offline)", "person_detector.rcnn  (weights: $ANONYMASK_WEIGHTS/torchvision)",
                 "inpaint.propainter  (weights: $ANONYMASK_WEIGHTS/propainter)", "refine.animatediff", "audit.hog",
                 "    guidance_scale = 7.5"):
        assert line in out
    assert main(["config", "backends", "nope"]) == 2


def test_anonymize_with_an_unknown_video_id_fails_in_one_line_before_any_work(capsys, tmp_path, tiny_dataset):
    store = tmp_path / "s.zarr"
    args = ["anonymize", "--dataset", "demo", "--source", str(tiny_dataset), "--store", str(store)]
    assert main([*args, "--videos", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown video id(s) for demo: nope (the dataset has 3 videos" in err[0], err
    assert not store.exists()
