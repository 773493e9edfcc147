"""The MViT action model: shapes, trainable sets, token masking, weight loading."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from anonymask.core.errors import MissingWeightsError
from anonymask.models.training.action.mvit import build_action_model, load_torchvision_state_dict
from anonymask.models.training.action.token_masks import model_public_tokens


@pytest.fixture(scope="module")
def tiny():
    return build_action_model(5, arch="tiny", trainable="last_blocks_norm", seed=3)


def _clip(model, b=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, *model.input_shape, generator=g)


def test_forward_shape_and_equals_torchvision_forward(tiny):
    tiny.eval()
    x = _clip(tiny)
    with torch.no_grad():
        y = tiny(x)
        ref = tiny.net(x)
    assert y.shape == (2, 5)
    torch.testing.assert_close(y, ref, rtol=0, atol=1e-6)
    keep_all = torch.ones(2, tiny.num_tokens, dtype=torch.bool)
    with torch.no_grad():
        torch.testing.assert_close(tiny(x, token_keep=keep_all), ref, rtol=0, atol=1e-6)


def test_wrong_input_shapes_are_rejected(tiny):
    with pytest.raises(ValueError, match="expects clips"):
        tiny(torch.zeros(1, 3, 4, 32, 32))
    with pytest.raises(ValueError, match="token_keep"):
        tiny(_clip(tiny, 1), token_keep=torch.ones(1, 7, dtype=torch.bool))


def test_masked_tokens_carry_no_information_from_their_pixels(tiny):
    tiny.eval()
    x = _clip(tiny, 1, seed=1)
    pix = torch.ones(1, *tiny.input_shape[1:], dtype=torch.bool)
    pix[0, :, 8:20, 4:30] = False  # a "real person" region
    keep = model_public_tokens(tiny, pix)
    assert keep.any() and not keep.all()
    x2 = x.clone()
    region = (~pix)[:, None].expand_as(x)
    x2[region] = torch.randn(int(region.sum()))
    with torch.no_grad():
        y, y2 = tiny(x, token_keep=keep), tiny(x2, token_keep=keep)
        full, full2 = tiny(x), tiny(x2)
    assert torch.equal(y, y2)  # the network never saw the changed pixels
    assert not torch.allclose(full, full2)  # ...which it would without the mask
    # changing a public pixel does change the masked output
    x3 = x.clone()
    x3[0, :, :, 0:2, 0:2] += 1.0
    with torch.no_grad():
        assert not torch.allclose(tiny(x3, token_keep=keep), y)


def test_trainable_sets_and_split_points():
    m = build_action_model(5, arch="tiny", trainable="head")
    assert {n for n, _ in m.trainable_named_parameters()} == {"net.head.1.weight", "net.head.1.bias"}
    assert m.num_trainable() == 32 * 5 + 5
    assert m.split_index() == m.stage_count() - 1
    m.set_trainable("last_blocks_norm")
    names = {n for n, _ in m.trainable_named_parameters()}
    assert all(("norm" in n) or n.startswith("net.head") for n in names)
    assert any(n.startswith(f"net.blocks.{m.num_blocks - 2}.") for n in names)
    assert not any(n.startswith(f"net.blocks.{m.num_blocks - 3}.") for n in names)
    assert m.split_index() == 1 + m.num_blocks - 2
    m.set_trainable("all")
    assert m.num_trainable() == sum(p.numel() for p in m.parameters())
    assert m.split_index() == 0


def test_backward_reaches_only_trainable_params_and_prefix_stays_eval(tiny):
    m = build_action_model(5, arch="tiny", stochastic_depth_prob=0.5, seed=1)
    m.train()
    assert all(not mod.training for pm in m.prefix_modules() for mod in pm.modules())
    assert m.net.blocks[-1].training
    loss = m(_clip(m)).logsumexp(1).sum()
    loss.backward()
    for p in m.parameters():
        assert (p.grad is not None) == p.requires_grad


def test_full_mvit_v2_s_default_trainable_set_is_about_50k():
    m = build_action_model(60)  # 16x224x224, random weights
    assert m.num_blocks == 16 and m.token_grid == (8, 56, 56)
    assert abs(sum(p.numel() for p in m.parameters()) - 34_276_284) == 0
    # LayerNorms of blocks 14, 15: norm1, norm2 and the pool-q/k/v norms (head_dim 96) + final norm
    block14 = 2 * 384 + 2 * 768 + 3 * 2 * 96
    block15 = 2 * 768 + 2 * 768 + 3 * 2 * 96
    expected = block14 + block15 + 2 * 768 + (768 * 60 + 60)
    assert m.num_trainable() == expected == 54_204
    assert m.split_index() == 1 + 14
    assert m.stage_thw(15) == (8, 14, 14)


@pytest.mark.slow
def test_mvit_v2_s_matches_torchvision_architecture():
    from anonymask.core.compat import ensure_torchvision

    ensure_torchvision()
    from torchvision.models.video import mvit_v2_s

    m = build_action_model(400)
    ref = mvit_v2_s(weights=None)
    ours = {k: v.shape for k, v in m.net.state_dict().items()}
    theirs = {k: v.shape for k, v in ref.state_dict().items()}
    assert ours == theirs
    m.net.load_state_dict(ref.state_dict())
    m.eval()
    ref.eval()
    x = torch.randn(1, 3, 16, 224, 224)
    with torch.no_grad():
        torch.testing.assert_close(m(x), ref(x), rtol=1e-4, atol=1e-4)


def test_weights_missing_file_raises(tmp_path, monkeypatch):
    monkeypatch.setenv("ANONYMASK_WEIGHTS", str(tmp_path))
    with pytest.raises(MissingWeightsError, match="mvit_v2_s-ae3be167.pth"):
        build_action_model(10, weights="kinetics400")
    with pytest.raises(MissingWeightsError):
        build_action_model(10, arch="tiny", weights=tmp_path / "nope.pth")


def test_weights_load_from_torchvision_format_file_with_a_new_head(tmp_path):
    src = build_action_model(7, arch="tiny", seed=11)
    path = tmp_path / "tiny.pth"
    torch.save(src.net.state_dict(), path)  # torchvision's format: the bare MViT state dict
    same = build_action_model(7, arch="tiny", weights=path, seed=99)
    for (k, a), b in zip(src.net.state_dict().items(), same.net.state_dict().values()):
        assert torch.equal(a, b), k
    other = build_action_model(3, arch="tiny", weights=path, seed=99)
    assert other.net.head[1].weight.shape == (3, 32)
    assert torch.equal(other.net.blocks[0].norm1.weight, src.net.blocks[0].norm1.weight)
    bad = tmp_path / "bad.pth"
    torch.save({"foo": torch.zeros(1)}, bad)
    with pytest.raises(ValueError, match="not an MViT state dict"):
        load_torchvision_state_dict(other, bad)


@pytest.mark.slow
def test_kinetics_file_loads_through_env_folder(tmp_path, monkeypatch):
    ref = build_action_model(400, seed=5)
    (tmp_path / "action").mkdir()
    torch.save(ref.net.state_dict(), tmp_path / "action" / "mvit_v2_s-ae3be167.pth")
    monkeypatch.setenv("ANONYMASK_WEIGHTS", str(tmp_path))
    m = build_action_model(60, weights="kinetics400")
    assert torch.equal(m.net.conv_proj.weight, ref.net.conv_proj.weight)
    assert m.net.head[1].out_features == 60
    assert isinstance(m.net.norm, nn.LayerNorm)
