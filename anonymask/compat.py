"""Make torchvision importable on CPU-only torch.

The only torchvision wheel that matches torch 2.13.0 is a CUDA build. On CPU torch its compiled
extension does not load, so importing torchvision fails with
``operator torchvision::nms does not exist`` (and timm, controlnet_aux and parts of transformers
fail with it). Defining the two operators torchvision registers fake kernels for at import
(``nms``, ``qnms``), with a real CPU kernel for ``nms``, lets everything pure-Python work.

Call :func:`ensure_torchvision` before the first ``import torchvision``. It does nothing when the
real operators are present (CUDA torch, or a torchvision built for this torch).
"""

from __future__ import annotations

import torch

_LIB = None


def _has_op(name: str) -> bool:
    try:
        getattr(torch.ops.torchvision, name)
        return True
    except (AttributeError, RuntimeError):
        return False


def _nms_cpu(dets: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    """Greedy non-maximum suppression; indices of kept boxes sorted by decreasing score."""
    if dets.numel() == 0:
        return torch.empty(0, dtype=torch.long, device=dets.device)
    x1, y1, x2, y2 = dets.unbind(1)
    areas = (x2 - x1).clamp(min=0) * (y2 - y1).clamp(min=0)
    order = scores.argsort(descending=True)
    keep = []
    suppressed = torch.zeros(dets.shape[0], dtype=torch.bool)
    for i in order.tolist():
        if suppressed[i]:
            continue
        keep.append(i)
        xx1 = torch.maximum(x1[i], x1)
        yy1 = torch.maximum(y1[i], y1)
        xx2 = torch.minimum(x2[i], x2)
        yy2 = torch.minimum(y2[i], y2)
        inter = (xx2 - xx1).clamp(min=0) * (yy2 - yy1).clamp(min=0)
        iou = inter / (areas[i] + areas - inter).clamp(min=1e-12)
        suppressed |= iou > iou_threshold
    return torch.tensor(keep, dtype=torch.long, device=dets.device)


def ensure_torchvision() -> None:
    """Register CPU ``torchvision::nms`` when the compiled one is missing (idempotent)."""
    global _LIB
    if _LIB is not None or _has_op("nms"):
        return
    lib = torch.library.Library("torchvision", "DEF")
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.impl("nms", _nms_cpu, "CPU")
    # torchvision registers fake kernels for these two at import, unconditionally.
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _LIB = lib
    import torchvision.ops.boxes as boxes  # noqa: PLC0415  (import only after the ops exist)

    # boxes.nms asks the extension whether ops loaded; ours now do, for nms.
    boxes._assert_has_ops = lambda: None
