"""DP-SGD: per-sample clip to C, sum, add N(0, sigma^2 C^2 I), divide by the EXPECTED batch size.

Two implementations of the same step:
- ``OpacusDPSGD``: Opacus' ``GradSampleModule`` + ``DPOptimizer`` fed by our
  ``PoissonBatchSampler``. We do not call ``PrivacyEngine.make_private``: it derives the sampling
  rate as 1/len(loader) and the divisor as int(N * rate) (truncated), so both drift from the
  configured q and from q*N. Here q comes from the config and the divisor is exactly q*N.
- ``dpsgd_gradients``: the same step written with torch.func (clipping.py); the reference the
  Opacus path is tested against, and what MaskDP-SGD reduces to when every token is private.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .accountant import Accountant
from .clipping import (
    Grads,
    LossFn,
    clip_per_sample,
    cross_entropy_per_sample,
    gaussian_noise_like,
    per_sample_grads,
    sum_by_record,
    sum_over_batch,
)


@dataclass
class NoisySum:
    """The private release of one step, before normalisation: clipped sum + noise."""

    clipped_sum: Grads
    noise: Grads
    norms: Tensor  # per-sample gradient norms BEFORE clipping (diagnostics only; never logged per sample)

    def released(self) -> Grads:
        return {n: self.clipped_sum[n] + self.noise[n] for n in self.clipped_sum}


def check_dp_args(
    max_grad_norm: float,
    noise_multiplier: float,
    expected_batch_size: float,
    accountant: Accountant | None = None,
    sample_rate: float | None = None,
) -> None:
    if accountant is not None and sample_rate is None:
        raise ValueError("an accountant needs the sampling rate q of every step")
    if not max_grad_norm > 0:
        raise ValueError(f"clip norm C must be > 0, got {max_grad_norm}")
    if noise_multiplier < 0:
        raise ValueError(f"noise multiplier sigma must be >= 0, got {noise_multiplier}")
    if not expected_batch_size > 0:
        raise ValueError(f"expected batch size (q*N) must be > 0, got {expected_batch_size}")


def record_step(accountant: Accountant | None, sample_rate: float | None, noise_multiplier: float) -> None:
    """One Poisson-subsampled Gaussian step in the ledger (empty batches count too)."""
    if accountant is not None:
        accountant.step(sample_rate, noise_multiplier)


def private_noisy_sum(
    model: nn.Module,
    params: Mapping[str, Tensor] | None,
    x: Tensor,
    y: Tensor,
    max_grad_norm: float,
    noise_multiplier: float,
    generator: torch.Generator | None = None,
    token_keep: Tensor | None = None,
    weights: Tensor | None = None,
    loss_fn: LossFn = cross_entropy_per_sample,
    chunk_size: int | None = None,
    records: Tensor | None = None,
) -> NoisySum:
    """Per-sample grads -> flat clip to C -> sum -> + N(0, (sigma C)^2). Empty batches get noise too.

    ``records`` (B,): the record (0..R-1) each sample belongs to; the samples of one record are
    summed first and the record's gradient is clipped once (``norms`` are then per record).
    """
    per = per_sample_grads(model, x, y, params, token_keep=token_keep, weights=weights, loss_fn=loss_fn, chunk_size=chunk_size)
    if records is not None:
        per = sum_by_record(per, records)
    clipped, norms = clip_per_sample(per, max_grad_norm)
    total = sum_over_batch(clipped)
    std = noise_multiplier * max_grad_norm if noise_multiplier > 0 else 0.0
    return NoisySum(total, gaussian_noise_like(total, std, generator), norms)


def dpsgd_gradients(
    model: nn.Module,
    params: Mapping[str, Tensor] | None,
    x: Tensor,
    y: Tensor,
    max_grad_norm: float,
    noise_multiplier: float,
    expected_batch_size: float,
    generator: torch.Generator | None = None,
    token_keep: Tensor | None = None,
    loss_fn: LossFn = cross_entropy_per_sample,
    chunk_size: int | None = None,
) -> Grads:
    """Reference DP-SGD gradient (name -> grad) of one Poisson batch."""
    check_dp_args(max_grad_norm, noise_multiplier, expected_batch_size)
    release = private_noisy_sum(
        model, params, x, y, max_grad_norm, noise_multiplier, generator, token_keep, None, loss_fn, chunk_size
    )
    return {n: g / expected_batch_size for n, g in release.released().items()}


def check_opacus_compatible(model: nn.Module) -> None:
    """Refuse models Opacus would get silently wrong.

    A trainable parameter held directly by a module that also has trained submodules (e.g. a
    position embedding on the root module) makes Opacus re-run that module's forward for its
    per-sample gradient, which re-fires the submodules' hooks and corrupts THEIR per-sample
    gradients (measured: errors of order 1 on a toy model, no warning). Put such parameters in
    a leaf module, or use ``dpsgd_gradients`` (torch.func), which has no such restriction.
    """
    bad = []
    for name, module in model.named_modules():
        own = [n for n, p in module.named_parameters(recurse=False) if p.requires_grad]
        if not own:
            continue
        trained_below = any(
            child is not module and any(p.requires_grad for p in child.parameters(recurse=False))
            for child in module.modules()
        )
        if trained_below:
            bad.extend(f"{name}.{n}" if name else n for n in own)
    if bad:
        raise ValueError(
            f"Opacus per-sample gradients would be wrong for this model: trainable parameter(s) {bad} "
            "sit on a module whose submodules are trained too; move them into a leaf module or use "
            "dpsgd_gradients (torch.func)"
        )


class OpacusDPSGD:
    """DP-SGD through Opacus, one call per Poisson batch: ``step(x, y, token_keep=None) -> loss``.

    ``optimizer`` must hold exactly the trainable parameters of ``model``. Per-sample gradients
    come from hooks (``force_functorch=False``) or Opacus' functorch path; gradient accumulation
    across backward passes is forbidden, so two passes can never be mixed into one step.
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        max_grad_norm: float,
        noise_multiplier: float,
        expected_batch_size: float,
        generator: torch.Generator | None = None,
        loss_fn: LossFn = cross_entropy_per_sample,
        force_functorch: bool = False,
        accountant: Accountant | None = None,
        sample_rate: float | None = None,
    ) -> None:
        from opacus import GradSampleModule
        from opacus.optimizers import DPOptimizer

        check_dp_args(max_grad_norm, noise_multiplier, expected_batch_size, accountant, sample_rate)
        check_opacus_compatible(model)
        self.module = GradSampleModule(model, batch_first=True, loss_reduction="sum", force_functorch=force_functorch)
        self.module.forbid_grad_accumulation()
        # loss_reduction="mean" on the optimizer = divide the noisy sum by expected_batch_size;
        # the per-sample gradients themselves come from a SUM loss (no 1/B scaling inside).
        self.optimizer = DPOptimizer(
            optimizer,
            noise_multiplier=noise_multiplier,
            max_grad_norm=max_grad_norm,
            expected_batch_size=expected_batch_size,
            loss_reduction="mean",
            generator=generator,
        )
        self.loss_fn = loss_fn
        self.accountant = accountant
        self.sample_rate = sample_rate
        self.noise_multiplier = noise_multiplier

    @property
    def params(self) -> list[nn.Parameter]:
        return self.optimizer.params

    def step(self, x: Tensor, y: Tensor, token_keep: Tensor | None = None) -> float:
        self.optimizer.zero_grad(set_to_none=True)
        if x.shape[0] == 0:  # an empty Poisson batch is a valid step: noise only
            for p in self.params:
                p.grad_sample = torch.zeros((0, *p.shape), dtype=p.dtype, device=p.device)
            loss_value = 0.0
        else:
            kwargs = {} if token_keep is None else {"token_keep": token_keep}
            with warnings.catch_warnings():  # inputs never require grad here; torch warns about hooks
                warnings.filterwarnings("ignore", message="Full backward hook is firing")
                loss = self.loss_fn(self.module(x, **kwargs), y).sum()
                loss.backward()
            loss_value = float(loss.detach())
        self.optimizer.step()
        record_step(self.accountant, self.sample_rate, self.noise_multiplier)
        return loss_value

    def close(self) -> nn.Module:
        """Remove Opacus' hooks; returns the plain model (its parameters were trained in place)."""
        model = self.module._module
        self.module._close()
        return model
