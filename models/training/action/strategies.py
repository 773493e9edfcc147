"""Gradient strategies: how one training step turns a batch into gradients, per training mode.

A strategy is called as ``strategy(net, params, batch) -> StepResult`` where ``net`` is the
trainable part of the action model (the tail after the frozen prefix, or the whole model when
everything trains), ``params`` maps names of ``net``'s trainable parameters to the parameters,
and ``batch`` a :class:`StepBatch`: the inputs of ``net`` per variant (what the strategy lists in
``variants``), the labels, and the per-sample public-token mask when the mode needs one. The
returned gradients (name -> tensor) are final: the trainer writes them to ``.grad`` and steps the
optimizer. ``sampling`` says which batches the strategy expects: "shuffle" (fixed-size shuffled
batches) or "poisson" (every DP mode; an empty batch is a valid step). DP strategies also take a
PUBLIC batch (MaskDP, FP-DP), which the trainer draws independently of the private one.

Variants (see models/training/action/feature_cache.py): "full" (the clip), "private" (public tokens zeroed),
"public" (private tokens zeroed), "blur_<sigma>" (the clip blurred). When the prefix is frozen
they are prefix features (cached or computed on the fly); when everything trains they are the
clip with a token mask, given as (x, token_keep).

Modes:
- ``nonprivate``: mean cross-entropy, ordinary backward.
- ``dpsgd``, ``maskdp``, ``fpdp``: :class:`PrivateStrategy`, a thin adapter that turns the
  batches' feature variants into the inputs of models/training/privacy/mechanism.py (the one
  implementation of every private step): MaskDP's private batch reads the "private" variant
  (public tokens zeroed) and its public batch the "public" one; FP-DP's private batch reads
  "full" and its public batch the psi variant; the subspace comes from the public set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

Input = tuple[Tensor, Tensor | None]  # (x, token_keep)


@dataclass
class StepBatch:
    """What a strategy sees of one batch (already on the device)."""

    inputs: dict[str, Input]
    y: Tensor
    public_tokens: Tensor | None = None  # (B, N) bool, MaskDP only

    @property
    def size(self) -> int:
        return int(self.y.shape[0])


@dataclass
class StepResult:
    grads: dict[str, Tensor]
    count: int  # realised batch size
    loss_sum: float | None = None  # non-private only: DP modes release nothing but the noisy gradient
    correct: int | None = None
    stats: dict[str, float] = field(default_factory=dict)  # only quantities that are public


def _grads_of(net: nn.Module, params: dict[str, Tensor], loss: Tensor) -> dict[str, Tensor]:
    names = list(params)
    values = torch.autograd.grad(loss, [params[n] for n in names], allow_unused=True)
    return {n: (torch.zeros_like(params[n]) if g is None else g.detach()) for n, g in zip(names, values)}


def _forward(net: nn.Module, inp: Input) -> Tensor:
    x, keep = inp
    return net(x) if keep is None else net(x, token_keep=keep)


class NonPrivate:
    """Plain SGD gradients of the mean cross-entropy; micro-batches bound memory."""

    mode = "nonprivate"
    sampling = "shuffle"
    variants: tuple[str, ...] = ("full",)

    def __init__(self, micro_batch: int | None = None):
        self.micro_batch = micro_batch

    def __call__(self, net: nn.Module, params: dict[str, Tensor], batch: StepBatch) -> StepResult:
        x, keep = batch.inputs["full"]
        n = batch.size
        if n == 0:
            return StepResult({k: torch.zeros_like(p) for k, p in params.items()}, 0)
        step = self.micro_batch or n
        total: dict[str, Tensor] = {}
        loss_sum, correct = 0.0, 0
        for lo in range(0, n, step):
            sl = slice(lo, lo + step)
            logits = _forward(net, (x[sl], None if keep is None else keep[sl]))
            loss = F.cross_entropy(logits.float(), batch.y[sl], reduction="sum")
            g = _grads_of(net, params, loss / n)
            total = g if not total else {k: total[k] + g[k] for k in total}
            loss_sum += float(loss.detach())
            correct += int((logits.argmax(1) == batch.y[sl]).sum())
        return StepResult(total, n, loss_sum, correct)

    def privacy_report(self, **_: Any) -> dict | None:
        return None

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


class PrivateStrategy:
    """Every DP mode: an adapter from the trainer's batches to models/training/privacy/mechanism.py.

    ``private_variants`` / ``public_variants``: the feature variants the private and the public
    batch must carry. The trainer draws the public batch independently of the private one
    (``accounting="sound"``), or passes the private batch itself (``accounting="paper"``: the
    MaskDP paper's Algorithm 2, reproduced on request and reported as not a valid guarantee).
    FP-DP's ``public_set`` = (inputs, labels) of held-out PUBLIC samples for its subspace.
    """

    sampling = "poisson"

    def __init__(
        self,
        mode: str,
        *,
        max_grad_norm: float,
        noise_multiplier: float,
        sample_rate: float,
        num_samples: int,
        public_rate: float | None = None,
        accountant: str = "rdp",
        adjacency: str = "add_remove",
        delta: float = 1e-5,
        noise_seed: int | None = None,
        chunk_size: int | None = None,
        device: torch.device | str = "cpu",
        accounting: str = "sound",
        record: str = "video",
        public_set: tuple[Input, Tensor] | None = None,
        k: int = 16,
        refresh_every: int = 50,
        psi_variant: str | None = None,
        psi: dict | None = None,
        public_weight: float = 1.0,
        mask_policy: str | None = None,
        dataset_fingerprint: str = "",
        not_private_reason: str | None = None,
        fixed_seeds: tuple[str, ...] = (),
        seeds: dict | None = None,
        disclosures: dict | None = None,
        protection: str | None = None,
    ):
        from anonymask.models.training.privacy.accountant import Accountant
        from anonymask.models.training.privacy.mechanism import PrivateStep, mode_spec
        from anonymask.models.training.privacy.sampler import os_seed

        spec = mode_spec(mode)
        self.mode = spec.name
        if accounting not in ("sound", "paper"):
            raise ValueError(f"unknown accounting {accounting!r}; choose sound or paper")
        if accounting == "paper" and spec.public_term is None:
            raise ValueError(f"accounting=paper reproduces the same-batch public term of maskdp/fpdp, not {mode}")
        if spec.public_term == "psi" and not psi_variant:
            raise ValueError(f"mode {mode} needs a psi variant (its public features)")
        if spec.project and public_set is None:
            raise ValueError(f"mode {mode} needs a public set: its subspace comes from public samples only")
        self.q = float(sample_rate)
        self.N = int(num_samples)
        self.expected_batch_size = self.q * self.N
        self.expected_public_batch_size = float(public_rate if public_rate is not None else sample_rate) * self.N
        self.delta = float(delta)
        self.accounting = accounting
        self.record = record
        self.public_set = public_set
        self.psi_variant = psi_variant
        self.psi = psi
        self.mask_policy = mask_policy
        self.dataset_fingerprint = dataset_fingerprint
        self.not_private_reason = not_private_reason
        self.fixed_seeds = tuple(fixed_seeds)
        self.seeds = seeds
        self.protection = protection
        self.disclosures = dict(disclosures or {})
        self.private_variants = ("private",) if spec.public_term == "public_tokens" else ("full",)
        self.public_variants: tuple[str, ...] = {"public_tokens": ("public",), "psi": (psi_variant,), None: ()}[
            spec.public_term
        ]
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(int(noise_seed) if noise_seed is not None else os_seed())
        self.accountant = Accountant(accountant, adjacency)
        self.step_fn = PrivateStep(
            mode, max_grad_norm=max_grad_norm, noise_multiplier=noise_multiplier,
            expected_batch_size=self.expected_batch_size, expected_public_batch_size=self.expected_public_batch_size,
            generator=self.generator, subspace_k=k,
            subspace_refresh=refresh_every, public_weight=public_weight, chunk_size=chunk_size,
            accountant=self.accountant, sample_rate=self.q,
        )  # fmt: skip
        self.C, self.sigma = self.step_fn.C, self.step_fn.sigma
        self.last_parts = None  # StepParts of the last step (tests, diagnostics; never logged)

    @property
    def variants(self) -> tuple[str, ...]:
        return self.private_variants + self.public_variants

    def public_term_text(self) -> str | None:
        spec = self.step_fn.spec
        if spec.public_term is None:
            return None
        what = "public tokens (synthetic patches)" if spec.public_term == "public_tokens" else f"psi(x) = {self.psi_variant}"
        how = (
            f"an independent Poisson batch of the training records (expected size "
            f"{self.expected_public_batch_size:g}), not the private batch"
            if self.accounting == "sound"
            else "the private batch itself (the paper's Algorithm 2)"
        )
        return f"{what}, noise-free, on {how}"

    def _inputs(self, batch: StepBatch, variant: str, weight_from: str | None):
        from anonymask.models.training.privacy.mechanism import Inputs

        x, keep = batch.inputs[variant]
        weights = None
        if weight_from is not None:
            pub = batch.public_tokens
            if pub is None or pub.dtype != torch.bool or pub.shape[0] != batch.size:
                raise ValueError("MaskDP needs per-sample public-token masks (B, N) bool")
            weights = ((~pub) if weight_from == "private" else pub).any(dim=1).to(torch.float32)
        return Inputs(x, batch.y, keep, weights)

    def __call__(
        self, net: nn.Module, params: dict[str, Tensor], batch: StepBatch, public: StepBatch | None = None
    ) -> StepResult:
        from anonymask.models.training.privacy.mechanism import Inputs

        maskdp = self.mode == "maskdp"
        private = self._inputs(batch, self.private_variants[0], "private" if maskdp else None)
        pub_inputs = None
        if self.public_variants:
            if public is None:
                raise ValueError(f"mode {self.mode} needs a public batch")
            pub_inputs = self._inputs(public, self.public_variants[0], "public" if maskdp else None)
        subspace_set = None
        if self.step_fn.needs_subspace_set():
            (sx, skeep), sy = self.public_set
            subspace_set = Inputs(sx, sy, skeep)
        parts = self.step_fn.parts(net, params, private, pub_inputs, subspace_set)
        self.last_parts = parts
        grads = parts.combined(self.expected_batch_size, self.expected_public_batch_size)
        return StepResult(grads, batch.size, stats=dict(parts.stats))

    def privacy_report(self, compare_with: tuple[str, ...] | None = None) -> dict:
        """PrivacyReport dict; ``compare_with`` None = the other accountant family side by side."""
        from anonymask.models.training.privacy.report import PrivacyReport

        rep = PrivacyReport.from_accountant(
            self.mode, self.accountant, self.delta, self.C, accounting=self.accounting, record=self.record,
            public_term=self.public_term_text(), psi=self.psi, mask_policy=self.mask_policy,
            dataset_fingerprint=self.dataset_fingerprint, compare_with=compare_with,
            not_private_reason=self.not_private_reason, fixed_seeds=self.fixed_seeds, seeds=self.seeds,
            disclosures=self.disclosures, protection=self.protection,
        )  # fmt: skip
        return rep.to_dict()

    def epsilon(self) -> float:
        return self.accountant.epsilon(self.delta) if self.accountant.steps else 0.0

    def state_dict(self) -> dict:
        return self.step_fn.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.step_fn.load_state_dict(state)


STRATEGIES = {"nonprivate": NonPrivate, "dpsgd": PrivateStrategy, "maskdp": PrivateStrategy, "fpdp": PrivateStrategy}
