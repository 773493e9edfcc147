"""Step time of each training mode on the same model and batch (``make bench`` writes it as JSON).

What the private modes cost over a plain step: per-sample gradients (vmap or Opacus hooks), a
second pass for MaskDP's public tokens, FP-DP's blur + public pass + projection, and FP-DP's
subspace refresh (timed on its own, since it runs every K steps only). Timings only: the numbers
are not checked by tests.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence

import torch
from torch import Tensor, nn

from anonymask.models.training.privacy.clipping import (
    cross_entropy_per_sample,
    flatten,
    per_sample_grads,
    trainable_params,
    write_grads,
)
from anonymask.models.training.privacy.dpsgd import OpacusDPSGD, check_opacus_compatible, dpsgd_gradients
from anonymask.models.training.privacy.fpdp import PublicSubspace, gaussian_blur_video
from anonymask.models.training.privacy.mechanism import (
    Inputs,
    PrivateStep,
    private_token_inputs,
    public_token_inputs,
)

MODES = ("nonprivate", "dpsgd", "dpsgd_func", "maskdp", "fpdp")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _device_of(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def _make_stepper(mode: str, model: nn.Module, batch: Mapping[str, Tensor], cfg: dict) -> Callable[[], None]:
    params = trainable_params(model)
    optimizer = torch.optim.SGD(list(params.values()), lr=cfg["lr"])
    x, y = batch["x"], batch["y"]
    gen = torch.Generator(device=x.device).manual_seed(cfg["seed"])
    C, sigma, b_exp = cfg["C"], cfg["sigma"], cfg["expected_batch_size"]

    if mode == "nonprivate":

        def step() -> None:
            optimizer.zero_grad(set_to_none=True)
            cross_entropy_per_sample(model(x), y).mean().backward()
            optimizer.step()

        return step
    if mode == "dpsgd":
        check_opacus_compatible(model)
        engine = OpacusDPSGD(model, optimizer, C, sigma, b_exp, generator=gen)
        return lambda: engine.step(x, y)
    if mode == "dpsgd_func":

        def step() -> None:
            grads = dpsgd_gradients(model, params, x, y, C, sigma, b_exp, gen, chunk_size=cfg["chunk_size"])
            optimizer.zero_grad(set_to_none=True)
            for name, p in params.items():
                p.grad = grads[name]
            optimizer.step()

        return step
    if mode in ("maskdp", "fpdp"):
        # the public term runs on its own batch (drawn independently in training; here the batch
        # rolled by one, the same size); the subspace refresh is timed separately
        step_fn = PrivateStep(
            mode, max_grad_norm=C, noise_multiplier=sigma, expected_batch_size=b_exp, generator=gen,
            subspace_k=cfg["k"], subspace_refresh=10**9, chunk_size=cfg["chunk_size"],
        )  # fmt: skip
        xp, yp = x.roll(1, 0), y.roll(1, 0)
        tokens = batch["public_tokens"]
        subspace_set = Inputs(batch["public_x"], batch["public_y"])

        def step() -> None:
            if mode == "maskdp":
                private = private_token_inputs(x, y, tokens)
                public = public_token_inputs(xp, yp, tokens.roll(1, 0))
            else:
                private, public = Inputs(x, y), Inputs(gaussian_blur_video(xp, cfg["blur_sigma"]), yp)
            grads = step_fn(model, params, private, public, subspace_set)
            optimizer.zero_grad(set_to_none=True)
            write_grads(params, grads)
            optimizer.step()

        return step
    raise ValueError(f"unknown mode {mode!r}; choose from {MODES}")


def _time(step: Callable[[], None], device: torch.device, warmup: int, repeats: int) -> list[float]:
    for _ in range(warmup):
        step()
    _sync(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        _sync(device)
        times.append(time.perf_counter() - start)
    return times


def bench_steps(
    model_factory: Callable[[], nn.Module],
    batch: Mapping[str, Tensor] | Sequence[Tensor],
    modes: Sequence[str] = ("nonprivate", "dpsgd", "maskdp", "fpdp"),
    repeats: int = 5,
    warmup: int = 1,
    C: float = 1.0,
    sigma: float = 1.0,
    expected_batch_size: float | None = None,
    k: int = 8,
    public_fraction: float = 0.5,
    blur_sigma: float = 1.0,
    chunk_size: int | None = None,
    seed: int = 0,
) -> dict:
    """Seconds per training step of each mode, each on a fresh model from ``model_factory``.

    ``batch`` is ``(x, y)`` or a dict with ``x``, ``y`` and optionally ``public_tokens`` (B, N)
    bool (else a random mask with ``public_fraction`` public tokens) and ``public_x``/``public_y``
    (FP-DP's public set; else the first half of the batch stands in, which is fine for timing).
    Returns {"modes": {mode: {"mean_s", "median_s", "min_s", "times_s"}}, "config": ...}; FP-DP
    also reports ``subspace_refresh_s``. A mode the model cannot run (e.g. Opacus on an
    incompatible model) reports {"error": "..."} instead of failing the whole benchmark.
    """
    if not isinstance(batch, Mapping):
        batch = {"x": batch[0], "y": batch[1]}
    batch = dict(batch)
    probe = model_factory()
    device = _device_of(probe)
    x = batch["x"].to(device)
    batch["x"], batch["y"] = x, batch["y"].to(device)
    gen = torch.Generator().manual_seed(seed)
    if "public_tokens" not in batch:
        with torch.no_grad():
            n_tokens = _count_tokens(probe, x)
        batch["public_tokens"] = (torch.rand(x.shape[0], n_tokens, generator=gen) < public_fraction).to(device)
    half = max(1, x.shape[0] // 2)
    batch.setdefault("public_x", x[:half])
    batch.setdefault("public_y", batch["y"][:half])
    cfg = dict(
        C=C, sigma=sigma, expected_batch_size=expected_batch_size or float(x.shape[0]), k=k,
        blur_sigma=blur_sigma, chunk_size=chunk_size, seed=seed, lr=1e-3,
    )  # fmt: skip
    results: dict[str, dict] = {}
    for mode in modes:
        model = model_factory()
        try:
            step = _make_stepper(mode, model, batch, cfg)
        except ValueError as err:
            results[mode] = {"error": str(err)}
            continue
        times = _time(step, device, warmup, repeats)
        entry = {
            "mean_s": statistics.fmean(times),
            "median_s": statistics.median(times),
            "min_s": min(times),
            "times_s": times,
        }
        if mode == "fpdp":
            entry["subspace_refresh_s"] = min(_time(_refresh(model, batch, k), device, 0, max(1, repeats // 2)))
        results[mode] = entry
    return {
        "modes": results,
        "config": {**{key: v for key, v in cfg.items() if key != "lr"}, "batch_size": int(x.shape[0]),
                   "repeats": repeats, "warmup": warmup, "device": str(device)},
    }  # fmt: skip


def _refresh(model: nn.Module, batch: Mapping[str, Tensor], k: int) -> Callable[[], None]:
    subspace = PublicSubspace(k, refresh_every=1)

    def refresh() -> None:
        grads = per_sample_grads(model, batch["public_x"], batch["public_y"])
        subspace.update(flatten(grads, batched=True), 0)

    return refresh


def _count_tokens(model: nn.Module, x: Tensor) -> int:
    """Number of tokens the model makes from a clip: taken from the model if it says, else probed
    with a hook on the module named ``patch_embed``."""
    if hasattr(model, "num_tokens"):
        return int(model.num_tokens)
    embed = getattr(model, "patch_embed", None)
    if embed is None:
        raise ValueError("pass public_tokens: the model has neither num_tokens nor a patch_embed module")
    seen: list[int] = []
    handle = embed.register_forward_hook(lambda _m, _i, out: seen.append(out.flatten(2).shape[-1]))
    try:
        model(x[:1])
    finally:
        handle.remove()
    return seen[0]
