"""Learned video inpainting for GPU users: ProPainter (Zhou et al., ICCV 2023), weights local only.

The architecture comes from the ``pytorchcv`` package (MIT; its ``propainter*`` and ``raft``
modules are a re-implementation of ProPainter's three networks and of its streaming driver):

1. RAFT optical flow between neighbouring frames (``raft_things``, or ``raft_small``),
2. the recurrent flow-completion network (flows inside the hole completed),
3. flow-guided image propagation, then ProPainter's sparse video transformer.

``inpaint(video, mask)`` runs the whole chain through ``pytorchcv``'s streaming iterator (memory
bounded by its windows) at a size that is a multiple of 8 (``max_side`` caps the long side, as the
paper runs at 432x240), resizes back and copies only hole pixels: outside the hole the output is the
input frame bit for bit, as with every inpainter here. Hole pixels come from the networks, which see
the frames with the hole blanked out: they never copy a real pixel from inside the hole.

Weights: ``$ANONYMASK_WEIGHTS/propainter/{raft_things.pth, propainter_rfc.pth, propainter.pth}``,
``torch.save(state_dict)`` of ``pytorchcv``'s modules (:data:`FILES`). A missing file raises
:class:`MissingWeightsError`; ``pretrained=True`` (a download) is never used.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import cv2
import numpy as np
from pydantic import Field

from anonymask.core.errors import MissingWeightsError
from anonymask.core.registry import register
from anonymask.models.anonymizer.inpaint.backends import _check, _paste

SUBDIR = "propainter"
FILES = {"raft": "raft_things.pth", "rfc": "propainter_rfc.pth", "propainter": "propainter.pth"}
HINT = ("pytorchcv's ProPainter weights (pytorchcv.models.raft.raft_things, propainter_rfc.propainter_rfc, "
        "propainter.propainter, pretrained=True on a machine with internet), saved as state dicts")


def weight_paths(root: str | os.PathLike | None = None, raft: str = "things") -> dict[str, Path]:
    from anonymask.core.paths import weights_root

    base = Path(root) if root is not None else weights_root()
    names = dict(FILES, raft=f"raft_{raft}.pth")
    if base is None:
        raise MissingWeightsError("ProPainter (inpaint.backend=propainter)", [f"{SUBDIR}/{n}" for n in names.values()],
                                  "ANONYMASK_WEIGHTS is not set; " + HINT)
    paths = {k: base / SUBDIR / n for k, n in names.items()}
    missing = [f"{SUBDIR}/{p.name}" for p in paths.values() if not p.is_file()]
    if missing:
        raise MissingWeightsError("ProPainter (inpaint.backend=propainter)", missing, HINT)
    return paths


def build_networks(raft: str = "things", propainter_kwargs: dict | None = None):
    """The three networks with the architecture the weight files were saved from."""
    from anonymask.core.compat import ensure_torchvision

    ensure_torchvision()  # torchvision ops (deform_conv2d) on CPU-only torch
    from pytorchcv.models.propainter import propainter
    from pytorchcv.models.propainter_rfc import propainter_rfc
    from pytorchcv.models.raft import raft_small, raft_things

    # the streaming driver feeds frames in [-1, 1] and asks for 20 flow iterations
    flow = (raft_things if raft == "things" else raft_small)(in_normalize=False, iters=20)
    return flow, propainter_rfc(), propainter(**(propainter_kwargs or {}))


def load_networks(root: str | os.PathLike | None = None, raft: str = "things", device: str = "cpu",
                  propainter_kwargs: dict | None = None):
    """(RAFT, flow completion, ProPainter) in eval mode from the local state-dict files."""
    import torch

    paths = weight_paths(root, raft)
    nets = build_networks(raft, propainter_kwargs)
    for net, key in zip(nets, ("raft", "rfc", "propainter")):
        net.load_state_dict(torch.load(paths[key], map_location="cpu", weights_only=True))
        net.eval().to(device)
        for p in net.parameters():
            p.requires_grad = False
    return nets


@register("inpaint", "propainter", weights=SUBDIR, check=lambda s: weight_paths(s["weights"], s["raft"]),
          summary="ProPainter: flow completion + propagation + video transformer (GPU)")
class ProPainterInpainter:
    """See the module docstring. ``window``/``stride``/``step``: the streaming driver's sizes."""

    def __init__(
        self,
        weights: str | None = None,
        raft: str = "things",
        device: str | None = None,
        max_side: Annotated[int, Field(ge=128)] = 640,
        window: Annotated[int, Field(ge=2)] = 80,
        stride: Annotated[int, Field(ge=1)] = 5,
        step: Annotated[int, Field(ge=1)] = 10,
        propainter_kwargs: dict | None = None,
    ):
        import torch

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.nets = load_networks(weights, raft, self.device, propainter_kwargs)
        self.max_side = int(max_side)
        self.window, self.stride, self.step = int(window), int(stride), int(step)

    def _size(self, h: int, w: int) -> tuple[int, int]:
        """Processing size: long side <= ``max_side``, short side >= 128 (RAFT's correlation
        pyramid needs it), both multiples of 8."""
        s = min(1.0, self.max_side / max(h, w))
        s = max(s, 128.0 / min(h, w))
        return int(np.ceil(h * s / 8)) * 8, int(np.ceil(w * s / 8)) * 8

    def inpaint(self, video: np.ndarray, mask: np.ndarray) -> np.ndarray:
        import torch
        from pytorchcv.models.propainter_stream import ProPainterIterator, TensorSequencer

        video, hole = _check(video, mask)
        t_len, h, w = hole.shape
        if not hole.any():
            return video.copy()
        ph, pw = self._size(h, w)
        frames = np.stack([cv2.resize(f, (pw, ph), interpolation=cv2.INTER_AREA) for f in video])
        masks = np.stack([cv2.resize(m.view(np.uint8), (pw, ph), interpolation=cv2.INTER_NEAREST) for m in hole])
        masks = np.maximum(masks, np.stack([cv2.dilate(m, np.ones((3, 3), np.uint8)) for m in masks]))
        x = torch.from_numpy(frames).permute(0, 3, 1, 2).float().div(127.5).sub(1.0).to(self.device)
        m = torch.from_numpy(masks[:, None].astype(np.float32)).to(self.device)
        raft, rfc, pp = self.nets
        it = ProPainterIterator(frames=TensorSequencer(x), masks=TensorSequencer(m), raft_model=raft, pprfc_model=rfc,
                                pp_model=pp, use_cuda=self.device.startswith("cuda"),
                                pp_window_size=min(self.window, max(2 * self.stride + 2, t_len)),
                                pp_stride=self.stride, step=min(self.step, t_len))
        with torch.inference_mode():
            out = torch.cat([chunk.float().cpu() for chunk in it])[:t_len]
        out = (out + 1.0) * 127.5  # the driver returns frames in [-1, 1]
        filled = out.clamp(0, 255).round().to(torch.uint8).permute(0, 2, 3, 1).numpy()
        filled = np.stack([cv2.resize(f, (w, h), interpolation=cv2.INTER_LINEAR) for f in filled])
        res = video.copy()
        for t in range(t_len):
            res[t] = _paste(video[t : t + 1], hole[t : t + 1], filled[t])[0]
        return res
