"""Feature-Projective DP (Sivangi et al.): public features + gradient-subspace projection.

Loss per sample = l_priv(raw x) + l_pub(psi(x)), psi a public feature map (Gaussian blur by
default, as in the paper; callers may pass other public features such as the anonymized video).
- The raw-pixel gradient is private: per-sample clip to C, sum, + N(0, sigma^2 C^2 I), then
  PROJECTED onto the top-k eigen-subspace of per-sample gradients of a small PUBLIC set. The
  projection is post-processing of the noisy release (no privacy cost) and removes the noise
  outside k dimensions.
- The subspace comes from public samples only (never private ones) and is recomputed every K
  steps at the current parameters.
- The psi-feature gradient is public: summed over the batch, no clipping, no noise.
- update = (projected noisy private sum + public sum) / expected batch size.
As in MaskDP, labels are treated as public; the accountant sees one (q, sigma) step per call.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .accountant import Accountant
from .clipping import (
    Grads,
    LossFn,
    cross_entropy_per_sample,
    flatten,
    per_sample_grads,
    summed_grads,
    trainable_params,
    unflatten,
)
from .dpsgd import apply_update, check_dp_args, private_noisy_sum


def _gaussian_kernel(sigma: float, radius: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    offsets = torch.arange(-radius, radius + 1, dtype=torch.float64)
    kernel = torch.exp(-0.5 * (offsets / sigma) ** 2)
    return (kernel / kernel.sum()).to(dtype=dtype, device=device)


def gaussian_blur_video(x: Tensor, sigma: float, radius: int | None = None) -> Tensor:
    """Spatial Gaussian blur of every frame of a (B, C, T, H, W) video (separable, reflect edges).

    Frames are blurred independently (no temporal mixing). ``sigma <= 0`` returns the input as
    float. Integer videos are converted to float32 first.
    """
    if x.dim() != 5:
        raise ValueError(f"expected a (B, C, T, H, W) video, got shape {tuple(x.shape)}")
    x = x if x.is_floating_point() else x.float()
    if sigma <= 0:
        return x
    b, c, t, h, w = x.shape
    radius = int(math.ceil(3 * sigma)) if radius is None else int(radius)
    radius = max(0, min(radius, h - 1, w - 1))
    if radius == 0:
        return x
    kernel = _gaussian_kernel(sigma, radius, x.dtype, x.device)
    frames = x.permute(0, 2, 1, 3, 4).reshape(b * t * c, 1, h, w)
    frames = F.conv2d(F.pad(frames, (radius, radius, 0, 0), mode="reflect"), kernel.view(1, 1, 1, -1))
    frames = F.conv2d(F.pad(frames, (0, 0, radius, radius), mode="reflect"), kernel.view(1, 1, -1, 1))
    return frames.reshape(b, t, c, h, w).permute(0, 2, 1, 3, 4).contiguous()


class PublicSubspace:
    """Top-k eigenvectors of the uncentred second moment (1/m) G^T G of PUBLIC per-sample gradients.

    Computed by a thin SVD of G (m x d): the right singular vectors are those eigenvectors and
    s^2/m their eigenvalues. Directions with numerically zero singular values are dropped, so the
    basis never holds arbitrary vectors when the public set has rank < k.
    """

    def __init__(self, k: int, refresh_every: int) -> None:
        if k <= 0:
            raise ValueError(f"k must be > 0, got {k}")
        if refresh_every <= 0:
            raise ValueError(f"refresh_every must be > 0, got {refresh_every}")
        self.k = int(k)
        self.refresh_every = int(refresh_every)
        self.basis: Tensor | None = None  # (d, k') orthonormal columns
        self.eigenvalues: Tensor | None = None
        self.last_update: int | None = None

    def due(self, step: int) -> bool:
        return self.basis is None or self.last_update is None or step - self.last_update >= self.refresh_every

    def update(self, public_per_sample_grads: Tensor | Mapping[str, Tensor], step: int | None = None) -> Tensor:
        grads = public_per_sample_grads
        matrix = flatten(grads, batched=True) if isinstance(grads, Mapping) else grads
        if matrix.dim() != 2 or matrix.shape[0] == 0:
            raise ValueError(f"need an (m>0, d) matrix of public per-sample gradients, got {tuple(matrix.shape)}")
        matrix = matrix.detach()
        _, s, vh = torch.linalg.svd(matrix, full_matrices=False)
        tiny = s.max() * max(matrix.shape) * torch.finfo(matrix.dtype).eps if s.numel() else 0.0
        keep = min(self.k, int((s > tiny).sum()))
        if keep == 0:
            raise ValueError("public gradients are all zero: no subspace to project on")
        self.basis = vh[:keep].T.contiguous()
        self.eigenvalues = s[:keep] ** 2 / matrix.shape[0]
        self.last_update = step if step is not None else (self.last_update or 0)
        return self.basis

    def project(self, vec: Tensor) -> Tensor:
        if self.basis is None:
            raise RuntimeError("PublicSubspace.project called before update()")
        basis = self.basis.to(dtype=vec.dtype, device=vec.device)
        return basis @ (basis.T @ vec)

    def state_dict(self) -> dict:
        return {
            "k": self.k,
            "refresh_every": self.refresh_every,
            "basis": self.basis,
            "eigenvalues": self.eigenvalues,
            "last_update": self.last_update,
        }

    def load_state_dict(self, state: dict) -> None:
        self.k, self.refresh_every = int(state["k"]), int(state["refresh_every"])
        self.basis, self.eigenvalues, self.last_update = state["basis"], state["eigenvalues"], state["last_update"]


@dataclass
class FPDPParts:
    """One FP-DP step before normalisation (kept apart so tests can pin each piece)."""

    private_sum: Grads  # clipped per-sample private gradients, summed
    noise: Grads  # the N(0, (sigma C)^2) draw
    projected: Grads  # projection of (private_sum + noise) onto the public subspace
    public_sum: Grads  # noise-free gradient of l_pub on the public features
    private_norms: Tensor
    refreshed: bool  # whether the subspace was recomputed in this step

    def combined(self, expected_batch_size: float) -> Grads:
        return {n: (self.projected[n] + self.public_sum[n]) / expected_batch_size for n in self.projected}


def fpdp_parts(
    model: nn.Module,
    params: Mapping[str, Tensor] | None,
    x: Tensor,
    y: Tensor,
    max_grad_norm: float,
    noise_multiplier: float,
    subspace: PublicSubspace,
    public_x: Tensor | None = None,
    public_y: Tensor | None = None,
    step: int = 0,
    generator: torch.Generator | None = None,
    psi: Callable[[Tensor], Tensor] | None = None,
    public_features: Tensor | None = None,
    blur_sigma: float = 1.0,
    public_weight: float = 1.0,
    loss_fn: LossFn = cross_entropy_per_sample,
    chunk_size: int | None = None,
) -> FPDPParts:
    """Pieces of one FP-DP step. The subspace is refreshed (if due) from ``public_x/public_y`` ONLY."""
    params = dict(params) if params is not None else trainable_params(model)
    refreshed = subspace.due(step)
    if refreshed:
        if public_x is None or public_y is None or public_x.shape[0] == 0:
            raise ValueError("the public subspace is due for a refresh: pass a non-empty public set")
        public_set_grads = per_sample_grads(model, public_x, public_y, params, loss_fn=loss_fn, chunk_size=chunk_size)
        subspace.update(flatten(public_set_grads, batched=True), step)
    release = private_noisy_sum(
        model, params, x, y, max_grad_norm, noise_multiplier, generator, loss_fn=loss_fn, chunk_size=chunk_size
    )
    projected = unflatten(subspace.project(flatten(release.released())), release.clipped_sum)
    if public_features is None:
        public_features = psi(x) if psi is not None else gaussian_blur_video(x, blur_sigma)
    public = summed_grads(model, public_features, y, params, loss_fn=loss_fn)
    if public_weight != 1.0:
        public = {n: public_weight * g for n, g in public.items()}
    return FPDPParts(release.clipped_sum, release.noise, projected, public, release.norms, refreshed)


def fpdp_gradients(
    model: nn.Module,
    params: Mapping[str, Tensor] | None,
    x: Tensor,
    y: Tensor,
    C: float,
    sigma: float,
    expected_batch_size: float,
    subspace: PublicSubspace,
    public_x: Tensor | None = None,
    public_y: Tensor | None = None,
    step: int = 0,
    generator: torch.Generator | None = None,
    psi: Callable[[Tensor], Tensor] | None = None,
    public_features: Tensor | None = None,
    blur_sigma: float = 1.0,
    public_weight: float = 1.0,
    loss_fn: LossFn = cross_entropy_per_sample,
    chunk_size: int | None = None,
) -> Grads:
    """FP-DP gradient (name -> grad) of one Poisson batch."""
    check_dp_args(C, sigma, expected_batch_size)
    parts = fpdp_parts(
        model, params, x, y, C, sigma, subspace, public_x, public_y, step, generator, psi,
        public_features, blur_sigma, public_weight, loss_fn, chunk_size,
    )  # fmt: skip
    return parts.combined(expected_batch_size)


class FPDPOptimizerStep:
    """One FP-DP step with any torch optimizer; counts steps to refresh the subspace every K.

    ``step(x, y, public_features=None) -> FPDPParts``; the public set is fixed at construction.
    """

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        max_grad_norm: float,
        noise_multiplier: float,
        expected_batch_size: float,
        subspace: PublicSubspace,
        public_x: Tensor,
        public_y: Tensor,
        generator: torch.Generator | None = None,
        params: Mapping[str, Tensor] | None = None,
        psi: Callable[[Tensor], Tensor] | None = None,
        blur_sigma: float = 1.0,
        public_weight: float = 1.0,
        loss_fn: LossFn = cross_entropy_per_sample,
        chunk_size: int | None = None,
        accountant: Accountant | None = None,
        sample_rate: float | None = None,
    ) -> None:
        check_dp_args(max_grad_norm, noise_multiplier, expected_batch_size, accountant, sample_rate)
        self.model, self.optimizer, self.subspace = model, optimizer, subspace
        self.params = dict(params) if params is not None else trainable_params(model)
        self.max_grad_norm, self.noise_multiplier = max_grad_norm, noise_multiplier
        self.expected_batch_size = expected_batch_size
        self.public_x, self.public_y = public_x, public_y
        self.generator, self.psi, self.blur_sigma, self.public_weight = generator, psi, blur_sigma, public_weight
        self.loss_fn, self.chunk_size = loss_fn, chunk_size
        self.accountant, self.sample_rate = accountant, sample_rate
        self.steps_done = 0

    def step(self, x: Tensor, y: Tensor, public_features: Tensor | None = None) -> FPDPParts:
        parts = fpdp_parts(
            self.model, self.params, x, y, self.max_grad_norm, self.noise_multiplier, self.subspace,
            self.public_x, self.public_y, self.steps_done, self.generator, self.psi, public_features,
            self.blur_sigma, self.public_weight, self.loss_fn, self.chunk_size,
        )  # fmt: skip
        apply_update(self.optimizer, self.params, parts.combined(self.expected_batch_size),
                     self.accountant, self.sample_rate, self.noise_multiplier)
        self.steps_done += 1
        return parts

    __call__ = step
