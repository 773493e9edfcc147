"""Per-sample gradients, clipping and Gaussian noise: the three pieces every private mode shares.

Per-sample gradients come from ``torch.func`` (functional_call + vmap + grad), not Opacus hooks:
- it is stateless: nothing accumulates on the parameters, so MaskDP's private and public passes
  (and FP-DP's private, public and public-set passes) can never mix, which is the Opacus pitfall
  (STACK.md: hooks ACCUMULATE ``grad_sample`` across backward calls);
- it works for any module (attention, custom token masking, parameters outside Linear/Conv) with
  no layer whitelist, and per-sample inputs such as ``token_keep`` are simply vmapped;
- only the trainable parameters are differentiated; frozen ones enter as constants.
DP-SGD additionally runs through Opacus (dpsgd.py) and is tested against this path.

Models must not mix samples in a batch (no BatchNorm in train mode): vmap evaluates each sample
as its own batch of one, so such models would silently compute something else.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap

Grads = dict[str, Tensor]
LossFn = Callable[[Tensor, Tensor], Tensor]

#: Added to per-sample norms before dividing (the convention Opacus uses too).
CLIP_EPS = 1e-6


def cross_entropy_per_sample(logits: Tensor, target: Tensor) -> Tensor:
    """Default loss: one value per sample (reduction="none")."""
    return F.cross_entropy(logits, target, reduction="none")


def trainable_params(model: nn.Module) -> dict[str, Tensor]:
    """Name -> parameter for every parameter that requires grad (the DP-trained set)."""
    return {name: p for name, p in model.named_parameters() if p.requires_grad}


def _resolve_params(model: nn.Module, params: Mapping[str, Tensor] | None) -> dict[str, Tensor]:
    params = dict(params) if params is not None else trainable_params(model)
    if not params:
        raise ValueError("no trainable parameters: nothing to differentiate")
    known = dict(model.named_parameters())
    unknown = [n for n in params if n not in known]
    if unknown:
        raise KeyError(f"not parameters of the model: {unknown}")
    return params


def per_sample_grads(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    params: Mapping[str, Tensor] | None = None,
    token_keep: Tensor | None = None,
    weights: Tensor | None = None,
    loss_fn: LossFn = cross_entropy_per_sample,
    chunk_size: int | None = None,
    randomness: str = "different",
) -> Grads:
    """Gradient of each sample's loss (times ``weights[i]`` if given) w.r.t. ``params``.

    Returns name -> tensor of shape (B, *param.shape). ``token_keep`` (B, N) bool is passed to
    the model per sample. ``chunk_size`` bounds vmap's memory on big batches.
    """
    params = _resolve_params(model, params)
    batch = x.shape[0]
    if batch == 0:
        return {n: torch.zeros((0, *p.shape), dtype=p.dtype, device=p.device) for n, p in params.items()}
    frozen = {n: p.detach() for n, p in model.named_parameters() if n not in params}
    buffers = dict(model.named_buffers())
    if weights is None:
        weights = torch.ones(batch, dtype=x.dtype if x.is_floating_point() else torch.float32, device=x.device)

    def sample_loss(p: dict[str, Tensor], xi: Tensor, yi: Tensor, keep_i: Tensor | None, wi: Tensor) -> Tensor:
        kwargs = {} if keep_i is None else {"token_keep": keep_i.unsqueeze(0)}
        logits = functional_call(model, (p, frozen, buffers), (xi.unsqueeze(0),), kwargs)
        return loss_fn(logits, yi.unsqueeze(0)).sum() * wi

    in_dims = (None, 0, 0, None if token_keep is None else 0, 0)
    detached = {n: p.detach() for n, p in params.items()}
    fn = vmap(grad(sample_loss), in_dims=in_dims, randomness=randomness, chunk_size=chunk_size)
    return fn(detached, x, y, token_keep, weights)


def summed_grads(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    params: Mapping[str, Tensor] | None = None,
    token_keep: Tensor | None = None,
    weights: Tensor | None = None,
    loss_fn: LossFn = cross_entropy_per_sample,
) -> Grads:
    """Gradient of sum_i weights[i] * loss_i with one ordinary backward pass (no per-sample work).

    Used for noise-free public gradients. ``torch.autograd.grad`` returns the gradients instead
    of accumulating them into ``.grad``, so this never touches the optimizer's state.
    """
    names = list(_resolve_params(model, params))
    live = dict(model.named_parameters())  # differentiate the model's own leaves, not copies
    if x.shape[0] == 0:
        return {n: torch.zeros_like(live[n]) for n in names}
    kwargs = {} if token_keep is None else {"token_keep": token_keep}
    losses = loss_fn(model(x, **kwargs), y)
    if weights is not None:
        losses = losses * weights
    values = torch.autograd.grad(losses.sum(), [live[n] for n in names], allow_unused=True)
    return {n: (torch.zeros_like(live[n]) if g is None else g.detach()) for n, g in zip(names, values)}


def _rows(g: Tensor) -> Tensor:
    """(B, *shape) -> (B, prod(shape)); works for B = 0 too."""
    return g.reshape(g.shape[0], math.prod(g.shape[1:]))


def per_sample_norms(grads: Mapping[str, Tensor]) -> Tensor:
    """L2 norm of each sample's gradient flattened over ALL parameters (flat clipping)."""
    squares = [_rows(g).pow(2).sum(dim=1) for g in grads.values()]
    return torch.stack(squares, dim=1).sum(dim=1).sqrt()


def clip_per_sample(grads: Mapping[str, Tensor], max_norm: float) -> tuple[Grads, Tensor]:
    """Scale each sample's gradient by min(1, C / (norm + 1e-6)); returns (clipped, norms).

    ``max_norm=inf`` leaves gradients unchanged (for tests and non-private reference runs).
    """
    if max_norm <= 0:
        raise ValueError(f"clip norm C must be > 0, got {max_norm}")
    norms = per_sample_norms(grads)
    factor = (max_norm / (norms + CLIP_EPS)).clamp(max=1.0)
    clipped = {n: g * factor.view(-1, *([1] * (g.dim() - 1))).to(g.dtype) for n, g in grads.items()}
    return clipped, norms


def sum_by_record(grads: Mapping[str, Tensor], records: Tensor) -> Grads:
    """(B, ...) per-sample gradients -> (R, ...) per-record sums, ``records`` (B,) in 0..R-1.

    Why: when a record (a video) owns several samples (its frames), the unit the clip must bound
    is the record, so its samples' gradients are added BEFORE clipping, never clipped one by one.
    """
    records = records.to(torch.long)
    count = int(records.max()) + 1 if records.numel() else 0
    out = {}
    for n, g in grads.items():
        acc = torch.zeros((count, *g.shape[1:]), dtype=g.dtype, device=g.device)
        out[n] = acc.index_add_(0, records.to(g.device), g)
    return out


def sum_over_batch(grads: Mapping[str, Tensor]) -> Grads:
    return {n: g.sum(dim=0) for n, g in grads.items()}


def gaussian_noise_like(
    reference: Mapping[str, Tensor] | Tensor, std: float, generator: torch.Generator | None = None
) -> Grads | Tensor:
    """N(0, std^2) noise shaped like ``reference`` (a tensor or a name -> tensor dict).

    Draws one ``torch.normal`` per tensor in the dict's order, the same draws Opacus' optimizer
    makes with the same generator, so the two implementations can be compared exactly.
    """
    if std < 0:
        raise ValueError(f"noise std must be >= 0, got {std}")

    def draw(t: Tensor) -> Tensor:
        if std == 0:
            return torch.zeros_like(t)
        return torch.normal(mean=0.0, std=std, size=t.shape, device=t.device, generator=generator).to(t.dtype)

    if isinstance(reference, Tensor):
        return draw(reference)
    return {n: draw(t) for n, t in reference.items()}


def flatten(grads: Mapping[str, Tensor], batched: bool = False) -> Tensor:
    """Concatenate a gradient dict into one vector (or one row per sample if ``batched``)."""
    if batched:
        return torch.cat([_rows(g) for g in grads.values()], dim=1)
    return torch.cat([g.reshape(-1) for g in grads.values()])


def unflatten(vector: Tensor, like: Mapping[str, Tensor]) -> Grads:
    """Inverse of ``flatten`` (unbatched) using the shapes of ``like``."""
    needed = sum(ref.numel() for ref in like.values())
    if vector.numel() != needed:
        raise ValueError(f"vector has {vector.numel()} entries, parameters need {needed}")
    out, offset = {}, 0
    for name, ref in like.items():
        out[name] = vector[offset : offset + ref.numel()].view_as(ref)
        offset += ref.numel()
    return out


def write_grads(params: Mapping[str, Tensor], grads: Mapping[str, Tensor]) -> None:
    """Set ``p.grad`` of each parameter to its (already private) gradient, replacing what was there."""
    for name, p in params.items():
        p.grad = grads[name].detach().to(p.dtype).clone()
