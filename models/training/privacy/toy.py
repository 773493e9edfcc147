"""A tiny video classifier with the token-masking interface the private trainers expect.

Interface (what the action model in models/training/action implements too):
``model(x, token_keep=None) -> logits`` with x (B, C, T, H, W) and ``token_keep`` an optional
(B, N_tokens) bool tensor; tokens marked False are zeroed right after the patch embedding, so
nothing downstream sees their pixels. The zeroing uses ``torch.where`` (not a multiplication):
a masked token is exactly 0 whatever its pixels hold, even inf/NaN, which is what makes the
public gradient bit-identical under changes of private pixels (privacy invariant 2).

Used by the privacy tests and as the default model of ``bench_steps``; cheap on two CPU cores.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class PositionEmbedding(nn.Module):
    """Learned per-token position vectors. A leaf module on purpose: Opacus' per-sample hooks give
    wrong gradients for parameters held by a module that also has trained submodules."""

    def __init__(self, num_tokens: int, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(0.02 * torch.randn(1, num_tokens, dim))

    def forward(self, tokens: Tensor) -> Tensor:
        return tokens + self.weight


class TinyTokenVideoModel(nn.Module):
    """Conv3d patch embedding -> tokens (+ position) -> residual LayerNorm/Linear blocks -> mean -> head."""

    def __init__(
        self,
        in_channels: int = 3,
        frames: int = 4,
        size: int = 16,
        patch: tuple[int, int, int] = (2, 4, 4),
        dim: int = 16,
        depth: int = 2,
        num_classes: int = 5,
    ) -> None:
        super().__init__()
        if frames % patch[0] or size % patch[1] or size % patch[2]:
            raise ValueError(f"frames {frames} / size {size} must be multiples of the patch {patch}")
        self.grid = (frames // patch[0], size // patch[1], size // patch[2])
        self.num_tokens = self.grid[0] * self.grid[1] * self.grid[2]
        self.patch = patch
        self.patch_embed = nn.Conv3d(in_channels, dim, kernel_size=patch, stride=patch)
        self.pos_embed = PositionEmbedding(self.num_tokens, dim)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim), nn.GELU()) for _ in range(depth)
        )
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def tokens_from_pixel_mask(self, synthetic: Tensor) -> Tensor:
        """(B, T, H, W) bool mask of synthetic pixels -> (B, N) public tokens: a token is public
        only if EVERY pixel of its patch is synthetic (non-overlapping patches here)."""
        pt, ph, pw = self.patch
        b = synthetic.shape[0]
        gt, gh, gw = self.grid
        blocks = synthetic.reshape(b, gt, pt, gh, ph, gw, pw)
        return blocks.all(dim=6).all(dim=4).all(dim=2).reshape(b, self.num_tokens)

    def forward(self, x: Tensor, token_keep: Tensor | None = None) -> Tensor:
        tokens = self.patch_embed(x).flatten(2).transpose(1, 2)  # (B, N, D)
        if token_keep is not None:
            if token_keep.shape != tokens.shape[:2]:
                raise ValueError(f"token_keep has shape {tuple(token_keep.shape)}, tokens {tuple(tokens.shape[:2])}")
            tokens = torch.where(token_keep.unsqueeze(-1), tokens, torch.zeros((), dtype=tokens.dtype))
        h = self.pos_embed(tokens)
        for block in self.blocks:
            h = h + block(h)
        return self.head(self.norm(h.mean(dim=1)))


def tiny_model_factory(seed: int = 0, **kwargs) -> TinyTokenVideoModel:
    """Deterministic tiny model (same weights for the same seed): for tests and benchmarks."""
    gen_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        return TinyTokenVideoModel(**kwargs)
    finally:
        torch.random.set_rng_state(gen_state)
