"""Privacy invariant 1: a public token never covers a real pixel."""

from __future__ import annotations

import itertools

import pytest
import torch

from anonymask.models.training.action.token_masks import public_tokens, token_grid

GEOMETRIES = [
    ((3, 7, 7), (2, 4, 4), (1, 3, 3)),  # MViTv2-S patch embedding
    ((2, 3, 3), (2, 2, 2), (0, 1, 1)),
]


def _brute_force(pixel_public: torch.Tensor, kernel, stride, padding) -> torch.Tensor:
    b, t, h, w = pixel_public.shape
    grid = token_grid((t, h, w), kernel, stride, padding)
    out = torch.zeros(b, *grid, dtype=torch.bool)
    for bi in range(b):
        for ti, hi, wi in itertools.product(*(range(g) for g in grid)):
            lo = [i * s - p for i, s, p in zip((ti, hi, wi), stride, padding)]
            ranges = [
                range(max(lo_, 0), min(lo_ + k, n)) for lo_, k, n in zip(lo, kernel, (t, h, w))
            ]
            covered = [pixel_public[bi, a, c, d] for a in ranges[0] for c in ranges[1] for d in ranges[2]]
            out[bi, ti, hi, wi] = all(bool(v) for v in covered)
    return out.flatten(1)


@pytest.mark.parametrize("kernel,stride,padding", GEOMETRIES)
def test_public_tokens_match_brute_force_receptive_fields(kernel, stride, padding):
    g = torch.Generator().manual_seed(0)
    for density in (0.02, 0.3):
        # mostly-synthetic masks so that some tokens are public at all
        pix = torch.rand(2, 6, 17, 13, generator=g) > density
        pix[:, :, :6, :5] = True  # a fully synthetic corner
        got = public_tokens(pix, kernel, stride, padding)
        want = _brute_force(pix, kernel, stride, padding)
        assert got.shape == want.shape
        assert torch.equal(got, want)
        assert got.any() and not got.all()


def test_public_tokens_ignore_changes_of_real_pixels_through_the_conv():
    kernel, stride, padding = GEOMETRIES[0]
    conv = torch.nn.Conv3d(3, 5, kernel, stride=stride, padding=padding)
    g = torch.Generator().manual_seed(1)
    pix = torch.ones(1, 8, 32, 32, dtype=torch.bool)
    pix[0, 2:5, 10:20, 4:9] = False
    keep = public_tokens(pix, kernel, stride, padding)
    x = torch.rand(1, 3, 8, 32, 32, generator=g)
    x2 = x.clone()
    private = ~pix[:, None].expand_as(x)
    x2[private] = torch.rand(int(private.sum()), generator=g)
    with torch.no_grad():
        y, y2 = conv(x).flatten(2), conv(x2).flatten(2)
    assert torch.equal(y[..., keep[0]], y2[..., keep[0]])
    assert not torch.allclose(y[..., ~keep[0]], y2[..., ~keep[0]])


def test_one_pixel_turning_private_flips_exactly_the_tokens_that_cover_it():
    kernel, stride, padding = GEOMETRIES[0]
    pix = torch.ones(1, 8, 32, 32, dtype=torch.bool)
    assert public_tokens(pix, kernel, stride, padding).all()  # padding counts as public
    pix[0, 3, 14, 21] = False
    keep = public_tokens(pix, kernel, stride, padding)
    want = _brute_force(pix, kernel, stride, padding)
    assert torch.equal(keep, want)
    # frame 3 lies in the patches of t'=1 and t'=2; row 14 in h'=3,4; col 21 in w'=5,6
    assert int((~keep).sum()) == 2 * 2 * 2


def test_accepts_single_clip_and_rejects_bad_shapes():
    pix = torch.ones(4, 16, 16, dtype=torch.bool)
    assert public_tokens(pix, (2, 4, 4), (2, 4, 4), (0, 0, 0)).shape == (1, 2 * 4 * 4)
    with pytest.raises(ValueError):
        public_tokens(torch.ones(16, 16, dtype=torch.bool))
