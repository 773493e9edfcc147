"""Which patch-embedding tokens are public (MaskDP-SGD, privacy invariant 1).

A token is the patch embedding convolution applied to one receptive patch: ``kernel`` frames x
rows x columns of the input, placed at ``stride`` steps after ``padding``. The token is PUBLIC only
if every input pixel of its patch is public (synthetic per the render mask ``r``); one real pixel
anywhere in the patch, in any of its frames, makes it private.

Padding: positions of the patch that fall into the convolution's zero padding hold no pixel at
all (real or synthetic), so they count as public. Border tokens are therefore judged only by the
pixels they really cover.

Token order is the model's: the convolution output (T', H', W') flattened row-major, i.e. index
``t * H' * W' + h * W' + w`` (the order of ``ActionModel(x, token_keep=...)``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F


def token_grid(
    clip_shape: Sequence[int], kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int]
) -> tuple[int, int, int]:
    """(T', H', W') of a 3-D convolution over a (T, H, W) input."""
    return tuple(  # type: ignore[return-value]
        (int(n) + 2 * int(p) - int(k)) // int(s) + 1 for n, k, s, p in zip(clip_shape, kernel, stride, padding)
    )


def public_tokens(
    pixel_public: torch.Tensor,
    kernel: Sequence[int] = (3, 7, 7),
    stride: Sequence[int] = (2, 4, 4),
    padding: Sequence[int] = (1, 3, 3),
) -> torch.Tensor:
    """(B,T,H,W) bool pixel mask (True = synthetic) -> (B, N_tokens) bool (True = public token).

    A private pixel marks every token whose patch covers it: a max-pool of the private indicator
    with the convolution's geometry, zero (public) padding.
    """
    if pixel_public.dim() == 3:
        pixel_public = pixel_public.unsqueeze(0)
    if pixel_public.dim() != 4:
        raise ValueError(f"pixel_public must be (B,T,H,W), got {tuple(pixel_public.shape)}")
    private = (~pixel_public.bool()).to(torch.float32).unsqueeze(1)  # (B,1,T,H,W)
    pt, ph, pw = (int(p) for p in padding)
    private = F.pad(private, (pw, pw, ph, ph, pt, pt), value=0.0)
    touched = F.max_pool3d(private, kernel_size=tuple(kernel), stride=tuple(stride))
    return (touched == 0).flatten(1)


def model_public_tokens(model, pixel_public: torch.Tensor) -> torch.Tensor:
    """``public_tokens`` with the geometry of an ``ActionModel``'s patch embedding."""
    return public_tokens(
        pixel_public, kernel=model.patch_kernel, stride=model.patch_stride, padding=model.patch_padding
    )
