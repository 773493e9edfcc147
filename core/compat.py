"""Make torchvision importable on CPU-only torch.

The only torchvision wheel that matches torch 2.13.0 is a CUDA build. On CPU torch its compiled
extension does not load, so importing torchvision fails with
``operator torchvision::nms does not exist`` (and timm, controlnet_aux and parts of transformers
fail with it). Defining the two operators torchvision registers fake kernels for at import
(``nms``, ``qnms``), with a real CPU kernel for ``nms``, lets everything pure-Python work; a CPU
kernel for ``deform_conv2d`` (plain torch) is registered too, for models that use deformable
convolutions (ProPainter's flow completion).

Call :func:`ensure_torchvision` before the first ``import torchvision``. It does nothing when the
real operators are present (a torchvision built for this torch); on a GPU build of torch it imports
torchvision first, so the real operators load before ours could be defined.
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


def _deform_conv2d_cpu(inp: torch.Tensor, weight: torch.Tensor, offset: torch.Tensor, mask: torch.Tensor,
                       bias: torch.Tensor, stride_h: int, stride_w: int, pad_h: int, pad_w: int, dil_h: int,
                       dil_w: int, groups: int, offset_groups: int, use_mask: bool) -> torch.Tensor:
    """Modulated deformable convolution (torchvision's ``deform_conv2d`` semantics) in plain torch:
    each kernel tap samples the input bilinearly at its offset position (zero outside the image,
    ``grid_sample`` with ``align_corners=True`` is the same interpolation), optionally scaled by the
    mask, then one grouped matrix product with the weights."""
    import torch.nn.functional as F  # noqa: N812

    b, c, h, w = inp.shape
    c_out, c_g, kh, kw = weight.shape
    ho, wo = offset.shape[-2:]
    k, g = kh * kw, int(offset_groups)
    dev, dt = inp.device, inp.dtype
    ky = (torch.arange(kh, device=dev, dtype=dt) * dil_h).repeat_interleave(kw)
    kx = (torch.arange(kw, device=dev, dtype=dt) * dil_w).repeat(kh)
    base_y = (torch.arange(ho, device=dev, dtype=dt) * stride_h - pad_h)[None, :, None] + ky[:, None, None]
    base_x = (torch.arange(wo, device=dev, dtype=dt) * stride_w - pad_w)[None, None, :] + kx[:, None, None]
    off = offset.view(b, g, k, 2, ho, wo)
    py = base_y[None, None] + off[:, :, :, 0]
    px = base_x[None, None] + off[:, :, :, 1]
    grid = torch.stack([2 * px / max(w - 1, 1) - 1, 2 * py / max(h - 1, 1) - 1], dim=-1)
    cols = F.grid_sample(inp.reshape(b * g, c // g, h, w), grid.reshape(b * g, k * ho, wo, 2), mode="bilinear",
                         padding_mode="zeros", align_corners=True).view(b, g, c // g, k, ho, wo)
    if use_mask:
        cols = cols * mask.view(b, g, 1, k, ho, wo)
    cols = cols.reshape(b, groups, (c // groups) * k, ho * wo)
    out = torch.einsum("gok,bgkn->bgon", weight.reshape(groups, c_out // groups, c_g * k), cols)
    return out.reshape(b, c_out, ho, wo) + bias.view(1, -1, 1, 1)


def ensure_torchvision() -> None:
    """Register CPU ``torchvision::nms`` when the compiled one is missing (idempotent)."""
    global _LIB
    if _LIB is not None or _has_op("nms"):
        return
    if torch.version.cuda is not None or getattr(torch.version, "hip", None) is not None:
        # A GPU build of torch: its torchvision's compiled operators load with it, and ours defined
        # first would clash with their registration. Import it first; ours only if its ops are absent.
        try:
            import torchvision  # noqa: F401, PLC0415
        except Exception:  # a mismatched torchvision: fall through to the CPU kernels
            pass
        if _has_op("nms"):
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
    if not _has_op("deform_conv2d"):  # ProPainter's flow completion (models/anonymizer/inpaint/propainter.py)
        lib.define("deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, "
                   "SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, "
                   "SymInt dilation_w, SymInt groups, SymInt offset_groups, bool use_mask) -> Tensor")
        lib.impl("deform_conv2d", _deform_conv2d_cpu, "CPU")
        import torchvision.ops.deform_conv as deform  # noqa: PLC0415

        deform._assert_has_ops = lambda: None
