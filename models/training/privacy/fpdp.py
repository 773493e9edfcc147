"""The two pieces Feature-Projective DP (Sivangi et al.) adds to DP-SGD: psi and the subspace.

- psi, the public feature map: a Gaussian blur of every frame (the paper's choice; the anonymized
  video is another natural one). FP-DP treats psi(x) of every record as PUBLIC, so the guarantee
  covers only what psi removes. A blur that is too weak makes that claim empty: ``check_psi_blur``
  enforces a floor, the paper's blur (25x25 kernel, sigma 10 px on 256-px crops) scaled to the
  input's shorter side, unless the caller overrides it explicitly (and the report says so).
- ``PublicSubspace``: the top-k eigen-subspace of per-sample gradients of a small PUBLIC set;
  projecting the noisy private sum on it is post-processing (no privacy cost) and removes the
  noise outside k dimensions.
The step that combines them with clipping and noise is models/training/privacy/mechanism.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor

from .clipping import flatten

#: The paper's psi: Gaussian blur with sigma 10 px (25x25 kernel) on 256-px inputs.
PAPER_BLUR_SIGMA_PX = 10.0
PAPER_BLUR_REFERENCE_PX = 256


#: the largest fraction of the TRAINING videos that may be held out as FP-DP's public set. Those
#: videos train raw and noise-free, with no protection at all; the subspace needs only a few dozen
#: samples (fpdp_public_size, 64 by default), so a larger holdout buys nothing but exposure. 0.2
#: still leaves the tiny synthetic sets (5-10 training videos) one or two public videos.
HOLDOUT_MAX = 0.2


def blur_floor(size: tuple[int, int]) -> float:
    """Weakest blur sigma (px) accepted as psi at input size (H, W): the paper's, scaled."""
    return PAPER_BLUR_SIGMA_PX * min(int(size[0]), int(size[1])) / PAPER_BLUR_REFERENCE_PX


def check_psi_blur(sigma: float, size: tuple[int, int], allow_weaker: bool = False) -> dict:
    """Validate a blur psi; returns its description for the privacy report.

    Below the floor (e.g. ``blur_0.001``, whose kernel is [0, 1, 0]: the identity) the public
    features ARE the private pixels. That is refused unless ``allow_weaker``; then the report says
    the blur is below the paper's.
    """
    sigma = float(sigma)
    if not (sigma > 0 and math.isfinite(sigma)):
        raise ValueError(f"psi blur sigma must be a finite number > 0, got {sigma}")
    floor = blur_floor(size)
    below = sigma < floor
    if below and not allow_weaker:
        raise ValueError(
            f"psi blur sigma {sigma:g} px is weaker than the paper's (sigma 10 px at 256 px = {floor:.3g} px "
            f"at {size[0]}x{size[1]}): the 'public' features would carry the private detail. Use a sigma "
            f">= {floor:.3g}, or set fpdp_psi_allow_weak=true to run it anyway (the report will say so)"
        )
    return {
        "kind": "gaussian_blur",
        "sigma_px": sigma,
        "input_size": [int(size[0]), int(size[1])],
        "floor_px": round(floor, 6),
        "below_paper_floor": below,
    }


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
