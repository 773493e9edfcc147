"""The learned video inpainter (ProPainter architecture from pytorchcv): real loading code, random
weights saved as the state-dict files it reads, never a download."""

import numpy as np
import pytest

from anonymask.core.errors import MissingWeightsError
from anonymask.models.anonymizer.inpaint import get_inpainter

SMALL = dict(hidden_dim=64, num_heads=4, depth=2)


def _save_random(root, raft="small", kwargs=None):
    import torch

    from anonymask.models.anonymizer.inpaint.propainter import build_networks

    torch.manual_seed(0)
    nets = build_networks(raft, kwargs)
    (root / "propainter").mkdir(parents=True)
    for net, name in zip(nets, (f"raft_{raft}.pth", "propainter_rfc.pth", "propainter.pth")):
        torch.save(net.state_dict(), root / "propainter" / name)
    return nets


def test_missing_weights_name_every_file(tmp_path):
    with pytest.raises(MissingWeightsError) as e:
        get_inpainter("propainter", weights=str(tmp_path))
    assert all(f in str(e.value) for f in ("raft_things.pth", "propainter_rfc.pth", "propainter.pth"))


def test_random_weights_load_through_the_real_loader(tmp_path):
    from anonymask.models.anonymizer.inpaint.propainter import load_networks

    saved = _save_random(tmp_path, "small", SMALL)
    loaded = load_networks(tmp_path, "small", "cpu", SMALL)
    for a, b in zip(saved, loaded):
        sa, sb = a.state_dict(), b.state_dict()
        assert sa.keys() == sb.keys() and all(np.array_equal(sa[k].numpy(), sb[k].numpy()) for k in sa)
        assert not b.training


def test_deformable_convolution_runs_on_cpu_torch():
    """ProPainter's flow completion uses torchvision's deform_conv2d; the CPU shim computes it."""
    from anonymask.core.compat import ensure_torchvision

    ensure_torchvision()
    import torch
    import torch.nn.functional as F  # noqa: N812
    from torchvision.ops import deform_conv2d

    torch.manual_seed(0)
    x, w, b = torch.randn(2, 4, 9, 11), torch.randn(6, 2, 3, 3), torch.randn(6)
    zero = torch.zeros(2, 2 * 2 * 9, 9, 11)
    y = deform_conv2d(x, zero, w, b, padding=1, mask=torch.ones(2, 2 * 9, 9, 11))
    assert torch.allclose(y, F.conv2d(x, w, b, padding=1, groups=2), atol=1e-4)
    half = torch.zeros(2, 18, 9, 11)
    half[:, 0::2] = 0.5  # every tap half a pixel down: the mean of two rows
    w1 = torch.randn(3, 4, 3, 3)
    got = deform_conv2d(x, half, w1, padding=1)
    xp = F.pad(x, (0, 0, 0, 1))
    ref = F.conv2d((xp[:, :, :-1] + xp[:, :, 1:]) / 2, w1, padding=1)
    assert torch.allclose(got[:, :, 1:-1], ref[:, :, 1:-1], atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("raft,kwargs", [("small", SMALL), ("things", None)])
def test_inpaints_only_the_hole(tmp_path, raft, kwargs):
    _save_random(tmp_path, raft, kwargs)
    ip = get_inpainter("propainter", weights=str(tmp_path), raft=raft, propainter_kwargs=kwargs, device="cpu",
                       max_side=128)
    rng = np.random.default_rng(0)
    v = rng.integers(0, 255, (5, 96, 128, 3), np.uint8)
    m = np.zeros((5, 96, 128), bool)
    m[:, 20:60, 40:80] = True
    out = ip.inpaint(v, m)
    assert out.shape == v.shape and out.dtype == np.uint8
    assert np.array_equal(out[~m], v[~m])  # outside the hole: the input, bit for bit
    assert (out[m] != v[m]).mean() > 0.5  # inside: the network's output
