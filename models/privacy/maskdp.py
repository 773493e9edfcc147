"""MaskDP-SGD (Algorithm 2 of Schneider et al.): DP only where the pixels are real.

Per Poisson batch:
- private pass: each sample's loss with its PUBLIC tokens masked out (token_keep = private
  tokens) -> per-sample gradient -> clip to C -> sum -> + N(0, sigma^2 C^2 I);
- public pass: the loss with ONLY public tokens kept -> gradient summed over the batch, with no
  clipping and no noise (it is a function of synthetic pixels only);
- update = (noisy private sum + public sum) / expected batch size (q*N, never the realised size).

A token is public only if its whole receptive patch is synthetic (built by the action model from
the render mask r). A sample with no public token contributes exactly zero public gradient, and
one with no private token exactly zero private gradient (otherwise an all-masked input would still
produce a loss and a gradient from the label alone). Labels enter both passes: as in the paper,
the action label is treated as public; the pixels are what the guarantee protects.
The accountant sees one Poisson-subsampled Gaussian step (q, sigma) per call, as for DP-SGD.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .accountant import Accountant
from .clipping import Grads, LossFn, cross_entropy_per_sample, summed_grads, trainable_params
from .dpsgd import apply_update, check_dp_args, private_noisy_sum


@dataclass
class MaskDPParts:
    """The pieces of one MaskDP step, before normalisation (kept apart so tests can pin each)."""

    private_sum: Grads  # sum of clipped per-sample private gradients
    noise: Grads  # N(0, (sigma C)^2) draw added to private_sum
    public_sum: Grads  # noise-free gradient of the public-token loss
    private_norms: Tensor  # per-sample private gradient norms before clipping

    def combined(self, expected_batch_size: float) -> Grads:
        return {
            n: (self.private_sum[n] + self.noise[n] + self.public_sum[n]) / expected_batch_size
            for n in self.private_sum
        }


def _check_public_tokens(public_tokens: Tensor, batch: int) -> Tensor:
    if public_tokens.dtype != torch.bool:
        raise TypeError(f"public_tokens must be a bool tensor, got {public_tokens.dtype}")
    if public_tokens.dim() != 2 or public_tokens.shape[0] != batch:
        raise ValueError(f"public_tokens must have shape (B={batch}, N), got {tuple(public_tokens.shape)}")
    return public_tokens


def maskdp_parts(
    model: nn.Module,
    params: Mapping[str, Tensor] | None,
    x: Tensor,
    y: Tensor,
    public_tokens: Tensor,
    max_grad_norm: float,
    noise_multiplier: float,
    generator: torch.Generator | None = None,
    loss_fn: LossFn = cross_entropy_per_sample,
    chunk_size: int | None = None,
) -> MaskDPParts:
    """Private (clipped + noised) and public (clean) sums of one MaskDP step."""
    public_tokens = _check_public_tokens(public_tokens, x.shape[0])
    params = dict(params) if params is not None else trainable_params(model)
    private_tokens = ~public_tokens
    has_private = private_tokens.any(dim=1).to(torch.float32)
    release = private_noisy_sum(
        model, params, x, y, max_grad_norm, noise_multiplier, generator,
        token_keep=private_tokens, weights=has_private, loss_fn=loss_fn, chunk_size=chunk_size,
    )  # fmt: skip
    # Only samples that have public tokens enter the public pass (the others contribute exactly 0);
    # which samples those are depends on the token mask alone, never on private pixels.
    rows = public_tokens.any(dim=1).nonzero().flatten()
    public = summed_grads(model, x[rows], y[rows], params, token_keep=public_tokens[rows], loss_fn=loss_fn)
    return MaskDPParts(release.clipped_sum, release.noise, public, release.norms)


def maskdp_gradients(
    model: nn.Module,
    params: Mapping[str, Tensor] | None,
    x: Tensor,
    y: Tensor,
    public_tokens: Tensor,
    C: float,
    sigma: float,
    expected_batch_size: float,
    generator: torch.Generator | None = None,
    loss_fn: LossFn = cross_entropy_per_sample,
    chunk_size: int | None = None,
) -> Grads:
    """MaskDP-SGD gradient (name -> grad) of one Poisson batch; ``public_tokens`` is (B, N) bool."""
    check_dp_args(C, sigma, expected_batch_size)
    parts = maskdp_parts(model, params, x, y, public_tokens, C, sigma, generator, loss_fn, chunk_size)
    return parts.combined(expected_batch_size)


class MaskDPOptimizerStep:
    """Runs one MaskDP step with any torch optimizer: writes ``.grad`` then ``optimizer.step()``.

    ``step(x, y, public_tokens) -> MaskDPParts``. With an ``accountant`` every call records one
    (sample_rate, sigma) step, empty batches included.
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        max_grad_norm: float,
        noise_multiplier: float,
        expected_batch_size: float,
        generator: torch.Generator | None = None,
        params: Mapping[str, Tensor] | None = None,
        loss_fn: LossFn = cross_entropy_per_sample,
        chunk_size: int | None = None,
        accountant: Accountant | None = None,
        sample_rate: float | None = None,
    ) -> None:
        check_dp_args(max_grad_norm, noise_multiplier, expected_batch_size, accountant, sample_rate)
        self.model = model
        self.optimizer = optimizer
        self.params = dict(params) if params is not None else trainable_params(model)
        self.max_grad_norm = max_grad_norm
        self.noise_multiplier = noise_multiplier
        self.expected_batch_size = expected_batch_size
        self.generator = generator
        self.loss_fn = loss_fn
        self.chunk_size = chunk_size
        self.accountant = accountant
        self.sample_rate = sample_rate

    def step(self, x: Tensor, y: Tensor, public_tokens: Tensor) -> MaskDPParts:
        parts = maskdp_parts(
            self.model, self.params, x, y, public_tokens, self.max_grad_norm, self.noise_multiplier,
            self.generator, self.loss_fn, self.chunk_size,
        )  # fmt: skip
        apply_update(self.optimizer, self.params, parts.combined(self.expected_batch_size),
                     self.accountant, self.sample_rate, self.noise_multiplier)
        return parts

    __call__ = step
