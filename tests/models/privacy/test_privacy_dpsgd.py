"""DP-SGD: the Opacus path equals the torch.func reference step for step, noise included."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from anonymask.models.training.privacy.accountant import Accountant
from anonymask.models.training.privacy.clipping import summed_grads, trainable_params
from anonymask.models.training.privacy.dpsgd import OpacusDPSGD, check_opacus_compatible, dpsgd_gradients
from anonymask.models.training.privacy.toy import tiny_model_factory


def _snapshot(model):
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def _sgd(model):
    return torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1.0)


def test_opacus_step_equals_reference_including_noise(batch, public_tokens):
    x, y = batch
    keep = ~public_tokens
    keep[1, :3] = True  # every sample keeps a token
    m_opacus, m_ref = tiny_model_factory(0), tiny_model_factory(0)
    engine = OpacusDPSGD(m_opacus, _sgd(m_opacus), 0.5, 1.3, 8.0, generator=torch.Generator().manual_seed(7))
    gen = torch.Generator().manual_seed(7)
    for _ in range(2):  # the second step checks that nothing carried over from the first
        before = _snapshot(m_opacus)
        engine.step(x, y, token_keep=keep)
        ref = dpsgd_gradients(m_ref, None, x, y, 0.5, 1.3, 8.0, gen, token_keep=keep)
        for n, p in m_opacus.named_parameters():
            torch.testing.assert_close(before[n] - p.detach(), ref[n], rtol=1e-4, atol=1e-6)
        with torch.no_grad():  # keep the reference model in lockstep
            for n, p in m_ref.named_parameters():
                p -= ref[n]


def test_opacus_divides_by_expected_not_realised_batch_size(batch):
    x, y = batch
    x, y = x[:3], y[:3]  # realised batch of 3, expected q*N = 8
    model = tiny_model_factory(0)
    before = _snapshot(model)
    plain = summed_grads(tiny_model_factory(0), x, y)
    OpacusDPSGD(model, _sgd(model), 1e9, 0.0, 8.0).step(x, y)
    for n, p in model.named_parameters():
        torch.testing.assert_close(before[n] - p.detach(), plain[n] / 8.0, rtol=1e-4, atol=1e-7)


def test_empty_batch_step_is_noise_over_expected_batch_size(batch):
    x, y = batch
    model = tiny_model_factory(0)
    ledger = Accountant("rdp")
    engine = OpacusDPSGD(
        model, _sgd(model), 2.0, 1.5, 4.0, generator=torch.Generator().manual_seed(0), accountant=ledger, sample_rate=0.01
    )
    before = _snapshot(model)
    engine.step(x[:0], y[:0])
    update = torch.cat([(before[n] - p.detach()).flatten() for n, p in model.named_parameters()])
    assert update.std().item() == pytest.approx(1.5 * 2.0 / 4.0, rel=0.05)
    ref = dpsgd_gradients(tiny_model_factory(0), None, x[:0], y[:0], 2.0, 1.5, 4.0, torch.Generator().manual_seed(0))
    torch.testing.assert_close(update, torch.cat([g.flatten() for g in ref.values()]))
    engine.step(x, y)
    assert ledger.history == [(0.01, 1.5, 2)]


class _RootParamModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(3))
        self.fc = nn.Linear(4, 3)

    def forward(self, x, token_keep=None):
        return self.fc(x) + self.bias


def test_refuses_models_opacus_gets_wrong():
    with pytest.raises(ValueError, match="bias"):
        check_opacus_compatible(_RootParamModel())
    frozen = _RootParamModel()
    frozen.bias.requires_grad_(False)
    check_opacus_compatible(frozen)  # fine once the root parameter is not trained
    check_opacus_compatible(tiny_model_factory(0))


def test_reference_step_validates_arguments(model, batch):
    x, y = batch
    with pytest.raises(ValueError):
        dpsgd_gradients(model, None, x, y, 0.0, 1.0, 8.0)
    with pytest.raises(ValueError):
        dpsgd_gradients(model, None, x, y, 1.0, 1.0, 0.0)
    grads = dpsgd_gradients(model, trainable_params(model), x, y, 1.0, 0.0, 8.0)
    assert set(grads) == set(trainable_params(model))
