"""One private training step for every mode: the single implementation the trainers adapt.

Every private mode of the project releases, per step,

    update = R(S + N(0, sigma^2 C^2 I)) / (q N)  +  w * G_pub / (q_pub N)

- S: the sum over the PRIVATE Poisson batch of per-sample gradients clipped to C, computed on
  each sample's private inputs (the whole clip for DP-SGD and FP-DP; the private tokens for
  MaskDP, with weight 0 for a sample that has none);
- R: identity, or the projection onto the top-k eigen-subspace of per-sample gradients of a
  PUBLIC set (PDP-SGD, FP-DP), recomputed every K steps;
- G_pub: the noise-free, unclipped gradient summed over a PUBLIC batch: MaskDP's public tokens,
  or FP-DP's public features psi(x);
- divisors: the EXPECTED batch sizes, never the realised ones.

What makes it a sound DP mechanism (DESIGN.md invariants 3, 4, 5, 8):
- only S touches private data, and S has sensitivity C per record (2C under replace-one);
- the public batch must be drawn INDEPENDENTLY of the private batch (the trainers do so unless
  the paper's behaviour is asked for explicitly): G_pub is then a function of public data and of
  randomness that has nothing to do with which records the private batch holds. Computed on the
  private batch itself (the MaskDP paper's Algorithm 2), G_pub tells an adversary who knows the
  public parts which records were sampled, and subsampling no longer amplifies anything;
- the subspace comes from the public set only.
One accountant step (q, sigma) per call, empty private batches included.

Modes: ``dpsgd`` (S), ``maskdp`` (S on private tokens + G_pub on public tokens), ``fpdp``
(R(S) + G_pub on psi(x)), ``projdp`` (R(S)), ``featdp`` (S + G_pub on psi(x)).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from .accountant import Accountant
from .clipping import (
    Grads,
    LossFn,
    cross_entropy_per_sample,
    flatten,
    per_sample_grads,
    summed_grads,
    unflatten,
)
from .dpsgd import check_dp_args, private_noisy_sum
from .fpdp import PublicSubspace


@dataclass(frozen=True)
class ModeSpec:
    """What a mode's update is made of."""

    name: str
    project: bool  # R = projection onto the public gradient subspace
    public_term: str | None  # None | "public_tokens" (MaskDP) | "psi" (public features)


MODES: dict[str, ModeSpec] = {
    "dpsgd": ModeSpec("dpsgd", project=False, public_term=None),
    "maskdp": ModeSpec("maskdp", project=False, public_term="public_tokens"),
    "fpdp": ModeSpec("fpdp", project=True, public_term="psi"),
    "projdp": ModeSpec("projdp", project=True, public_term=None),
    "featdp": ModeSpec("featdp", project=False, public_term="psi"),
}


def mode_spec(mode: str) -> ModeSpec:
    try:
        return MODES[mode]
    except KeyError:
        raise ValueError(f"unknown private mode {mode!r}; choose one of {tuple(MODES)}") from None


@dataclass
class Inputs:
    """A batch as the trained net sees it: inputs, labels, optional token mask and sample weights.

    ``weights`` (B,) scales each sample's loss; a sample of weight 0 contributes exactly nothing
    (it is dropped before any computation). ``records`` (B,) long: the record (0..R-1) each
    sample belongs to when a record owns several samples; the private sum then clips each
    record's summed gradient once (the clip bounds a record, not a sample).
    """

    x: Tensor
    y: Tensor
    token_keep: Tensor | None = None
    weights: Tensor | None = None
    records: Tensor | None = None

    def __post_init__(self) -> None:
        b = int(self.y.shape[0])
        if int(self.x.shape[0]) != b:
            raise ValueError(f"inputs hold {self.x.shape[0]} samples but {b} labels")
        for name, t in (("token_keep", self.token_keep), ("weights", self.weights), ("records", self.records)):
            if t is not None and int(t.shape[0]) != b:
                raise ValueError(f"{name} has {t.shape[0]} rows for a batch of {b}")
        if self.token_keep is not None and self.token_keep.dtype != torch.bool:
            raise TypeError(f"token_keep must be a bool tensor, got {self.token_keep.dtype}")

    @property
    def size(self) -> int:
        return int(self.y.shape[0])

    def select(self, rows: Tensor) -> Inputs:
        pick = (lambda t: None if t is None else t[rows])  # noqa: E731
        return Inputs(self.x[rows], self.y[rows], pick(self.token_keep), pick(self.weights), pick(self.records))

    def nonzero(self) -> Inputs:
        """The samples with a non-zero weight (all of them when unweighted)."""
        if self.weights is None:
            return self
        return self.select(self.weights.ne(0).nonzero().flatten())


def private_token_inputs(x: Tensor, y: Tensor, public_tokens: Tensor) -> Inputs:
    """MaskDP's private pass: public tokens masked out; samples without private tokens weigh 0."""
    _check_public_tokens(public_tokens, x.shape[0])
    private = ~public_tokens
    return Inputs(x, y, private, private.any(dim=1).to(torch.float32))


def public_token_inputs(x: Tensor, y: Tensor, public_tokens: Tensor) -> Inputs:
    """MaskDP's public pass: only public tokens kept; samples without public tokens weigh 0."""
    _check_public_tokens(public_tokens, x.shape[0])
    return Inputs(x, y, public_tokens, public_tokens.any(dim=1).to(torch.float32))


def _check_public_tokens(public_tokens: Tensor, batch: int) -> None:
    if public_tokens.dtype != torch.bool:
        raise TypeError(f"public_tokens must be a bool tensor, got {public_tokens.dtype}")
    if public_tokens.dim() != 2 or public_tokens.shape[0] != batch:
        raise ValueError(f"public_tokens must have shape (B={batch}, N), got {tuple(public_tokens.shape)}")


@dataclass
class StepParts:
    """One step's pieces before normalisation (kept apart so tests can pin each one)."""

    private_sum: Grads  # S: clipped per-sample private gradients, summed
    noise: Grads  # the N(0, (sigma C)^2) draw
    released: Grads  # R(S + noise)
    public_sum: Grads  # G_pub (already times the public weight), zeros for modes without one
    private_norms: Tensor  # per-sample norms before clipping (diagnostics; never released)
    public_count: int = 0  # samples that entered G_pub
    refreshed: bool = False  # whether the subspace was recomputed in this step
    stats: dict[str, float] = field(default_factory=dict)

    def combined(self, expected_batch_size: float, expected_public_batch_size: float | None = None) -> Grads:
        pub = expected_public_batch_size or expected_batch_size
        return {n: self.released[n] / expected_batch_size + self.public_sum[n] / pub for n in self.released}


class PrivateStep:
    """``PrivateStep(mode, ...)(net, params, private, public=None, subspace_set=None) -> grads``.

    ``net``: the trained module (``net(x, token_keep=...)``); ``params``: name -> its trainable
    parameters. ``private``: the private Poisson batch's inputs. ``public``: the public batch
    (modes with a public term; drawn independently of the private batch for a sound guarantee).
    ``subspace_set``: public samples for the subspace, needed when ``needs_subspace_set()``.
    ``expected_public_batch_size`` divides G_pub (default: the private one, q*N).
    """

    def __init__(
        self,
        mode: str,
        *,
        max_grad_norm: float,
        noise_multiplier: float,
        expected_batch_size: float,
        expected_public_batch_size: float | None = None,
        generator: torch.Generator | None = None,
        subspace_k: int = 16,
        subspace_refresh: int = 50,
        public_weight: float = 1.0,
        loss_fn: LossFn = cross_entropy_per_sample,
        chunk_size: int | None = None,
        accountant: Accountant | None = None,
        sample_rate: float | None = None,
    ) -> None:
        self.spec = mode_spec(mode)
        self.mode = self.spec.name
        check_dp_args(max_grad_norm, noise_multiplier, expected_batch_size, accountant, sample_rate)
        if expected_public_batch_size is not None and not expected_public_batch_size > 0:
            raise ValueError(f"expected public batch size must be > 0, got {expected_public_batch_size}")
        if not public_weight >= 0:
            raise ValueError(f"public_weight must be >= 0, got {public_weight}")
        self.C = float(max_grad_norm)
        self.sigma = float(noise_multiplier)
        self.expected_batch_size = float(expected_batch_size)
        self.expected_public_batch_size = (
            float(expected_public_batch_size) if expected_public_batch_size is not None else None
        )
        self.generator = generator
        self.subspace = PublicSubspace(subspace_k, subspace_refresh) if self.spec.project else None
        self.public_weight = float(public_weight)
        self.loss_fn = loss_fn
        self.chunk_size = chunk_size
        self.accountant = accountant
        self.sample_rate = sample_rate
        self.steps_done = 0

    @property
    def needs_public_batch(self) -> bool:
        return self.spec.public_term is not None

    def needs_subspace_set(self) -> bool:
        return self.subspace is not None and self.subspace.due(self.steps_done)

    def parts(
        self,
        net: nn.Module,
        params: Mapping[str, Tensor],
        private: Inputs,
        public: Inputs | None = None,
        subspace_set: Inputs | None = None,
    ) -> StepParts:
        params = dict(params)
        if self.needs_public_batch and public is None:
            raise ValueError(f"mode {self.mode!r} needs a public batch ({self.spec.public_term})")
        if not self.needs_public_batch and public is not None:
            raise ValueError(f"mode {self.mode!r} has no public term: do not pass a public batch")
        refreshed = self.needs_subspace_set()
        if refreshed:
            if subspace_set is None or subspace_set.size == 0:
                raise ValueError("the public subspace is due for a refresh: pass a non-empty public subspace_set")
            g = per_sample_grads(
                net, subspace_set.x, subspace_set.y, params, token_keep=subspace_set.token_keep,
                loss_fn=self.loss_fn, chunk_size=self.chunk_size,
            )  # fmt: skip
            self.subspace.update(flatten(g, batched=True), self.steps_done)
        release = private_noisy_sum(
            net, params, private.x, private.y, self.C, self.sigma, self.generator,
            token_keep=private.token_keep, weights=private.weights, loss_fn=self.loss_fn, chunk_size=self.chunk_size,
            records=private.records,
        )  # fmt: skip
        released = release.released()
        if self.subspace is not None:
            released = unflatten(self.subspace.project(flatten(released)), release.clipped_sum)
        public_sum, public_count = {n: torch.zeros_like(p) for n, p in params.items()}, 0
        if public is not None:
            rows = public.nonzero()
            public_count = rows.size
            if rows.size:
                public_sum = summed_grads(
                    net, rows.x, rows.y, params, token_keep=rows.token_keep, weights=rows.weights, loss_fn=self.loss_fn
                )
                if self.public_weight != 1.0:
                    public_sum = {n: self.public_weight * g for n, g in public_sum.items()}
        if self.accountant is not None:
            self.accountant.step(self.sample_rate, self.sigma)
        self.steps_done += 1
        return StepParts(release.clipped_sum, release.noise, released, public_sum, release.norms, public_count,
                         refreshed, {"subspace_refreshed": float(refreshed)} if self.subspace is not None else {})

    def __call__(
        self,
        net: nn.Module,
        params: Mapping[str, Tensor],
        private: Inputs,
        public: Inputs | None = None,
        subspace_set: Inputs | None = None,
    ) -> Grads:
        parts = self.parts(net, params, private, public, subspace_set)
        return parts.combined(self.expected_batch_size, self.expected_public_batch_size)

    def state_dict(self) -> dict:
        state: dict = {"steps_done": self.steps_done}
        if self.generator is not None:
            state["generator"] = self.generator.get_state()
        if self.subspace is not None:
            state["subspace"] = self.subspace.state_dict()
        if self.accountant is not None:
            state["accountant"] = self.accountant.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        self.steps_done = int(state["steps_done"])
        if self.generator is not None and "generator" in state:
            self.generator.set_state(state["generator"])
        if self.subspace is not None and "subspace" in state:
            self.subspace.load_state_dict(state["subspace"])
        if self.accountant is not None and "accountant" in state:
            self.accountant.load_state_dict(state["accountant"])
