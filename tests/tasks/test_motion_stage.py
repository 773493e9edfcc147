"""The optional motion stage: off by default (tracks untouched), on with a trained anonymizer."""

import numpy as np
import pytest
import torch

from anonymask.config.pipeline import pipeline_config
from anonymask.core.errors import AnonymaskError
from anonymask.models.anonymizer.skeleton.anonymizers import ResidualMLPAnonymizer, save_anonymizer
from anonymask.models.anonymizer.skeleton.pipeline_stage import anonymize_tracks
from anonymask.models.shared.body.model import get_body_model
from anonymask.models.shared.body.tracks import Camera, SMPLHTrack, upright_orient
from anonymask.models.shared.body.tracks_io import read_tracks, write_tracks
from anonymask.storage.store import DatasetStore, VideoInfo
from anonymask.tasks.common import execute_stage
from anonymask.tasks.motion import motion_prefix


def walking_track(t_len=10):
    body = get_body_model()
    tr = SMPLHTrack.rest(0, t_len)
    tr.global_orient[:] = upright_orient(0.3)
    for t in range(t_len):
        tr.body_pose[t, 0] = 0.4 * np.sin(t / 2)
        tr.body_pose[t, 3] = -0.4 * np.sin(t / 2)
    tr.transl[:] = body.transl_for(tr.betas, [0.0, 0.2, 4.0])
    return tr


def checkpoint(tmp_path, scale=0.0):
    torch.manual_seed(0)
    m = ResidualMLPAnonymizer(22, hidden=32, layers=2)
    if scale:
        with torch.no_grad():
            for p in m.parameters():
                p.add_(scale * torch.randn_like(p))
    return save_anonymizer(tmp_path / "anon.pt", {"anonymizer_state": m.state_dict(), "anonymizer_config": m.config})


def test_disabled_stage_leaves_tracks_untouched(tmp_path):
    s = DatasetStore.create(str(tmp_path / "s.zarr"), "demo", overwrite=True)
    s.register_videos([VideoInfo("v")])
    e = s.video("v")
    cam = Camera.from_fov(64, 48)
    with e.stage("pose4d", backend="gt") as w:
        write_tracks(w, "pose", [walking_track()], cam)
    cfg = pipeline_config("demo")
    assert cfg["motion"]["enabled"] is False
    assert execute_stage(s.url, "v", "motion", cfg)["status"] == "done"
    e = DatasetStore.open(s.url).video("v")
    assert e.record("motion")["status"] == "done"
    assert motion_prefix(e) == "pose" and not e.has_array("motion/track_ids")


def test_enabled_near_identity_anonymizer_keeps_the_motion(tmp_path):
    tr, cam = walking_track(), Camera.from_fov(160, 120)
    body = get_body_model()
    new, metrics = anonymize_tracks([tr], cam, str(checkpoint(tmp_path)))
    j0 = body.pose_track(tr).joints[:, :22]
    j1 = body.pose_track(new[0]).joints[:, :22]
    assert metrics["motion_joint_shift_mm"] < 1.0  # anonymizer initialised near identity
    assert np.linalg.norm(j0 - j1, axis=-1).mean() < 0.03  # re-fitted SMPL-H follows the joints
    np.testing.assert_array_equal(new[0].valid, tr.valid)


def test_enabled_anonymizer_changes_motion_and_stage_writes_it(tmp_path):
    ckpt = checkpoint(tmp_path, scale=0.05)
    s = DatasetStore.create(str(tmp_path / "s.zarr"), "demo", overwrite=True)
    s.register_videos([VideoInfo("v")])
    e = s.video("v")
    cam = Camera.from_fov(160, 120)
    with e.stage("pose4d", backend="gt") as w:
        write_tracks(w, "pose", [walking_track()], cam)
    cfg = pipeline_config("demo", {"motion": {"enabled": True, "checkpoint": str(ckpt)}})
    execute_stage(s.url, "v", "motion", cfg)
    e = DatasetStore.open(s.url).video("v")  # attrs are read when a group is opened
    assert motion_prefix(e) == "motion"
    assert e.metrics()["motion_joint_shift_mm"] > 5.0
    moved, _ = read_tracks(e, "motion")
    orig, _ = read_tracks(e, "pose")
    assert not np.allclose(moved[0].body_pose, orig[0].body_pose)


def test_enabled_without_checkpoint_is_a_clear_error():
    with pytest.raises(AnonymaskError, match="motion.checkpoint"):
        anonymize_tracks([walking_track()], Camera.from_fov(64, 48), None)
