"""TinyViT + SimCC: shapes, label smoothing, decoding, loss, weight loading."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from anonymask.core.errors import MissingWeightsError
from anonymask.models.training.hpe.model import (
    PoseModelConfig,
    build_pose_model,
    decode,
    gaussian_targets,
    simcc_loss_fn,
    simcc_targets,
    tiny_config,
)


@pytest.fixture(scope="module")
def tiny_model():
    return build_pose_model(tiny_config(num_keypoints=5), "random", seed=0)


def test_output_shape_and_bins(tiny_model):
    cfg = tiny_model.config
    assert cfg.bins == (128, 128)  # split ratio 2 over a 64x64 input
    out = tiny_model(torch.randn(3, 3, 64, 64))
    assert out.shape == (3, 5, 256)
    lx, ly = tiny_model.split_logits(out)
    assert lx.shape == (3, 5, 128) and ly.shape == (3, 5, 128)
    rect = tiny_config(num_keypoints=2, input_size=(64, 32), split_ratio=1.5)
    assert rect.bins == (48, 96)


@pytest.mark.parametrize("size", [(64, 48), (50, 64), (0, 32)])
def test_input_size_must_be_multiple_of_32(size):
    with pytest.raises(ValueError, match="multiples of 32"):
        PoseModelConfig(backbone="tiny", input_size=size)


def test_batchnorm_statistics_stay_frozen(tiny_model):
    tiny_model.train()
    bns = [m for m in tiny_model.modules() if isinstance(m, nn.BatchNorm2d)]
    assert bns and all(not m.training for m in bns)
    assert any(m.training for m in tiny_model.modules() if not isinstance(m, nn.BatchNorm2d))
    before = bns[0].running_mean.clone()
    tiny_model(torch.randn(2, 3, 64, 64) * 5 + 3)
    assert torch.equal(bns[0].running_mean, before)


@pytest.mark.parametrize("coord", [0.0, 3.2, 17.7, 31.49, 40.6, 63.0])
def test_gaussian_target_sums_to_one_and_peaks_at_the_right_bin(coord):
    s, sigma, bins = 2.0, 2.0, 128
    t = gaussian_targets(torch.tensor([coord], dtype=torch.float64), bins, s, sigma)[0]
    assert math.isclose(float(t.sum()), 1.0, rel_tol=1e-9)
    assert (t >= 0).all()
    assert int(t.argmax()) == int(math.floor(coord * s + 0.5))
    if 5 < coord < 58:  # away from the borders the mean is the exact sub-bin position
        mean = float((t * torch.arange(bins, dtype=torch.float64)).sum())
        assert mean == pytest.approx(coord * s, abs=1e-6)


def test_decoding_inverts_encoding_within_a_bin():
    cfg = tiny_config(num_keypoints=4, split_ratio=2.0)
    gen = torch.Generator().manual_seed(0)
    kp = torch.rand(6, 4, 2, generator=gen) * 63.0
    tx, ty = simcc_targets(kp, cfg)
    logits = torch.cat([tx.log(), ty.log()], dim=-1)
    pred, conf = decode(logits, cfg)
    assert (pred - kp).abs().max() <= 0.5 / cfg.split_ratio + 1e-6
    assert conf.shape == (6, 4) and (conf > 0).all() and (conf <= 1).all()
    inner = (kp > 8).all(-1) & (kp < 56).all(-1)
    soft, _ = decode(logits, cfg, soft=True)
    assert (soft - kp)[inner].abs().max() < 1e-3  # expectation of the Gaussian = exact position


def test_loss_is_zero_at_the_target_and_ignores_unannotated_keypoints():
    cfg = tiny_config(num_keypoints=3)
    loss = simcc_loss_fn(cfg)
    kp = torch.tensor([[[10.0, 20.0], [30.5, 40.25], [50.0, 5.0]]])
    tx, ty = simcc_targets(kp, cfg)
    perfect = torch.cat([tx, ty], dim=-1).clamp_min(1e-12).log()  # finite logits, as a network gives
    target = torch.cat([kp, torch.ones(1, 3, 1)], dim=-1)
    assert float(loss(perfect, target)[0]) == pytest.approx(0.0, abs=1e-5)
    wrong = perfect.roll(shifts=7, dims=-1)
    assert float(loss(wrong, target)[0]) > 0.5
    # an unannotated keypoint contributes nothing, wherever its (meaningless) coordinates are
    target[0, 1, 2] = 0.0
    moved = target.clone()
    moved[0, 1, :2] = torch.tensor([1.0, 60.0])
    assert torch.equal(loss(wrong, target), loss(wrong, moved))
    assert float(loss(wrong, target)[0]) < float(loss(wrong, torch.cat([kp, torch.ones(1, 3, 1)], -1))[0])


def test_backbone_weights_load_from_the_weights_folder(tmp_path, monkeypatch):
    from anonymask.models.training.hpe.model import _timm

    timm = _timm()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(123)
        reference = timm.create_model("tiny_vit_5m_224", pretrained=False)  # with its ImageNet head
    (tmp_path / "hpe").mkdir()
    torch.save(reference.state_dict(), tmp_path / "hpe" / "tiny_vit_5m_224.pth")
    monkeypatch.setenv("ANONYMASK_WEIGHTS", str(tmp_path))
    cfg = PoseModelConfig(input_size=(64, 64), num_keypoints=2, hidden=8)
    model = build_pose_model(cfg, "pretrained")
    assert model.backbone_init == "file:tiny_vit_5m_224.pth"
    ref = reference.state_dict()
    for name, value in model.backbone.state_dict().items():
        assert torch.equal(value, ref[name]), name
    auto = build_pose_model(cfg, "auto")
    assert torch.equal(auto.backbone.patch_embed.conv1.conv.weight, reference.patch_embed.conv1.conv.weight)


def test_missing_weights_raise_only_when_asked_for(tmp_path, monkeypatch):
    monkeypatch.setenv("ANONYMASK_WEIGHTS", str(tmp_path))
    cfg = PoseModelConfig(input_size=(64, 64), num_keypoints=2, hidden=8)
    with pytest.raises(MissingWeightsError, match="tiny_vit_5m_224.pth"):
        build_pose_model(cfg, "pretrained")
    model = build_pose_model(cfg, "auto", seed=3)
    assert model.backbone_init == "random:3"
    with pytest.raises(MissingWeightsError):
        build_pose_model(cfg, str(tmp_path / "nowhere.pth"))
