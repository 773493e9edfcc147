"""Gradient strategies: how one training step turns a batch into gradients, per training mode.

A strategy is called as ``strategy(net, params, batch) -> StepResult`` where ``net`` is the
trainable part of the action model (the tail after the frozen prefix, or the whole model when
everything trains), ``params`` maps names of ``net``'s trainable parameters to the parameters,
and ``batch`` a :class:`StepBatch`: the inputs of ``net`` per variant (what the strategy lists in
``variants``), the labels, and the per-sample public-token mask when the mode needs one. The
returned gradients (name -> tensor) are final: the trainer writes them to ``.grad`` and steps the
optimizer. ``sampling`` says which batches the strategy expects: "shuffle" (fixed-size shuffled
batches) or "poisson" (every DP mode; an empty batch is a valid step).

Variants (see storage/feature_cache.py): "full" (the clip), "private" (public tokens zeroed),
"public" (private tokens zeroed), "blur_<sigma>" (the clip blurred). When the prefix is frozen
they are prefix features (cached or computed on the fly); when everything trains they are the
clip with a token mask, given as (x, token_keep).

Modes:
- ``nonprivate``: mean cross-entropy, ordinary backward.
- ``dpsgd``: per-sample clip to C, sum, + N(0, sigma^2 C^2), / (q N)  (models/privacy/dpsgd.py).
- ``maskdp``: clipped + noised private-token gradients, noise-free public-token gradients
  (Algorithm 2, models/privacy/maskdp.py), composed here from the same primitives so the
  private and public passes can read different cached feature variants.
- ``fpdp``: private raw gradients clipped + noised + projected on a subspace from a PUBLIC set,
  plus the noise-free gradient on public features psi(x) (models/privacy/fpdp.py).

Every DP strategy records one Poisson-subsampled Gaussian step (q, sigma) per call in its
accountant, empty batches included, and divides by the expected batch size q*N.
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


class _DPBase:
    """Shared by the DP modes: C, sigma, q, N, accountant, a seeded noise generator."""

    sampling = "poisson"
    mode = "dp"

    def __init__(
        self,
        *,
        max_grad_norm: float,
        noise_multiplier: float,
        sample_rate: float,
        num_samples: int,
        accountant: str = "rdp",
        delta: float = 1e-5,
        noise_seed: int | None = None,
        chunk_size: int | None = None,
        device: torch.device | str = "cpu",
        mask_policy: str | None = None,
        dataset_fingerprint: str = "",
    ):
        from anonymask.models.privacy.accountant import Accountant
        from anonymask.models.privacy.dpsgd import check_dp_args

        self.C = float(max_grad_norm)
        self.sigma = float(noise_multiplier)
        self.q = float(sample_rate)
        self.N = int(num_samples)
        self.expected_batch_size = self.q * self.N
        check_dp_args(self.C, self.sigma, self.expected_batch_size)
        self.delta = float(delta)
        self.accountant = Accountant(accountant)
        self.chunk_size = chunk_size
        self.mask_policy = mask_policy
        self.dataset_fingerprint = dataset_fingerprint
        self.generator = torch.Generator(device=device)
        if noise_seed is None:  # a real private run: noise from the OS's entropy
            import os

            noise_seed = int.from_bytes(os.urandom(8), "little") >> 1
        self.generator.manual_seed(int(noise_seed))

    def _account(self) -> None:
        self.accountant.step(self.q, self.sigma)

    def privacy_report(self, compare_with: tuple[str, ...] | None = None) -> dict:
        """PrivacyReport dict; ``compare_with`` None = the other accountant family side by side."""
        from anonymask.models.privacy.report import PrivacyReport

        rep = PrivacyReport.from_accountant(
            self.mode, self.accountant, self.delta, self.C, mask_policy=self.mask_policy,
            dataset_fingerprint=self.dataset_fingerprint, compare_with=compare_with,
        )  # fmt: skip
        return rep.to_dict()

    def epsilon(self) -> float:
        return self.accountant.epsilon(self.delta) if self.accountant.steps else 0.0

    def state_dict(self) -> dict:
        return {"accountant": self.accountant.state_dict(), "generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.accountant.load_state_dict(state["accountant"])
        self.generator.set_state(state["generator"])


class DPSGD(_DPBase):
    """DP-SGD on the full clip (torch.func per-sample gradients, models/privacy/dpsgd.py)."""

    mode = "dpsgd"
    variants = ("full",)

    def __call__(self, net: nn.Module, params: dict[str, Tensor], batch: StepBatch) -> StepResult:
        from anonymask.models.privacy.dpsgd import private_noisy_sum

        x, keep = batch.inputs["full"]
        rel = private_noisy_sum(
            net, params, x, batch.y, self.C, self.sigma, self.generator, token_keep=keep, chunk_size=self.chunk_size
        )
        self._account()
        grads = {n: g / self.expected_batch_size for n, g in rel.released().items()}
        return StepResult(grads, batch.size)


class MaskDP(_DPBase):
    """MaskDP-SGD: private pass on the 'private' variant, public pass on the 'public' variant.

    Same composition as models/privacy/maskdp.py (``maskdp_parts``): samples without private
    tokens weigh 0 in the private pass; only samples with public tokens enter the public pass
    (which samples those are depends on the token mask alone).
    """

    mode = "maskdp"
    variants = ("private", "public")

    def __call__(self, net: nn.Module, params: dict[str, Tensor], batch: StepBatch) -> StepResult:
        from anonymask.models.privacy.clipping import summed_grads
        from anonymask.models.privacy.dpsgd import private_noisy_sum

        pub = batch.public_tokens
        if pub is None or pub.dtype != torch.bool or pub.shape[0] != batch.size:
            raise ValueError("MaskDP needs per-sample public-token masks (B, N) bool")
        xp, kp = batch.inputs["private"]
        xq, kq = batch.inputs["public"]
        has_private = (~pub).any(dim=1).to(torch.float32)
        rel = private_noisy_sum(
            net, params, xp, batch.y, self.C, self.sigma, self.generator,
            token_keep=kp, weights=has_private, chunk_size=self.chunk_size,
        )  # fmt: skip
        rows = pub.any(dim=1).nonzero().flatten()
        public = summed_grads(net, xq[rows], batch.y[rows], params, token_keep=None if kq is None else kq[rows])
        self._account()
        released = rel.released()
        grads = {n: (released[n] + public[n]) / self.expected_batch_size for n in released}
        return StepResult(grads, batch.size)


class FPDP(_DPBase):
    """FP-DP: private 'full' gradients projected on a public subspace + noise-free psi gradients.

    ``psi_variant``: the public features' variant ("blur_<sigma>" as in the paper, or "public":
    synthetic tokens only). ``public_set`` = (inputs, labels) of PUBLIC samples, in the same
    representation as ``net``'s inputs; the subspace is computed from them only and refreshed
    every ``refresh_every`` steps.
    """

    mode = "fpdp"

    def __init__(
        self,
        *,
        public_set: tuple[Input, Tensor],
        k: int = 16,
        refresh_every: int = 50,
        psi_variant: str = "blur_1",
        public_weight: float = 1.0,
        **kw: Any,
    ):
        super().__init__(**kw)
        from anonymask.models.privacy.fpdp import PublicSubspace

        self.subspace = PublicSubspace(k, refresh_every)
        self.public_set = public_set
        self.psi_variant = psi_variant
        self.public_weight = float(public_weight)
        self.variants = ("full", psi_variant)
        self.steps_done = 0

    def __call__(self, net: nn.Module, params: dict[str, Tensor], batch: StepBatch) -> StepResult:
        from anonymask.models.privacy.clipping import flatten, per_sample_grads, summed_grads, unflatten
        from anonymask.models.privacy.dpsgd import private_noisy_sum

        (pub_x, pub_keep), pub_y = self.public_set
        refreshed = self.subspace.due(self.steps_done)
        if refreshed:
            g = per_sample_grads(net, pub_x, pub_y, params, token_keep=pub_keep, chunk_size=self.chunk_size)
            self.subspace.update(flatten(g, batched=True), self.steps_done)
        x, keep = batch.inputs["full"]
        rel = private_noisy_sum(
            net, params, x, batch.y, self.C, self.sigma, self.generator, token_keep=keep, chunk_size=self.chunk_size
        )
        projected = unflatten(self.subspace.project(flatten(rel.released())), rel.clipped_sum)
        xs, ks = batch.inputs[self.psi_variant]
        public = summed_grads(net, xs, batch.y, params, token_keep=ks)
        self._account()
        self.steps_done += 1
        grads = {
            n: (projected[n] + self.public_weight * public[n]) / self.expected_batch_size for n in projected
        }
        return StepResult(grads, batch.size, stats={"subspace_refreshed": float(refreshed)})

    def state_dict(self) -> dict:
        return dict(super().state_dict(), subspace=self.subspace.state_dict(), steps_done=self.steps_done)

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.subspace.load_state_dict(state["subspace"])
        self.steps_done = int(state["steps_done"])


STRATEGIES = {"nonprivate": NonPrivate, "dpsgd": DPSGD, "maskdp": MaskDP, "fpdp": FPDP}
