"""Every setting of an action-training run, typed and checked once: ``TrainSettings``.

One pydantic model is the single statement of what a run can be told: the data (which clips,
which mask), the model, the optimisation, the privacy mechanism and its accounting, FP-DP's psi
and public set, and how the run executes. Unknown names and out-of-range values are refused when
the model is built (``extra="forbid"``), before any work starts, so a typo never reaches a store
or a run folder. The dataset defaults (the paper's recipe per dataset) live in
config/training.py, which builds this model; the trainer reads it directly.

Values that depend on others are resolved by ``resolved()``: ``mask_source="auto"`` (MaskDP: r on
anonymized video, q on raw video = Real*), ``adjacency="auto"`` (the mode's claim: MaskDP
replace-one, the others add/remove), ``fpdp_psi="paper_blur"`` (the paper's blur scaled to
``size``). The run's hash is computed from the resolved model, defaults included, so equivalent
settings hash the same.
"""

from __future__ import annotations

import hashlib
import json
import math
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator


class Mode(StrEnum):
    """Training modes (the trainer's names; the CLI also accepts ``dp`` for ``dpsgd``)."""

    NONPRIVATE = "nonprivate"
    DPSGD = "dpsgd"
    MASKDP = "maskdp"
    FPDP = "fpdp"

    @property
    def private(self) -> bool:
        return self is not Mode.NONPRIVATE


MODE_ALIASES = {"dp": Mode.DPSGD, **{m.value: m for m in Mode}}
PRIVATE_MODES = (Mode.DPSGD, Mode.MASKDP, Mode.FPDP)
#: settings that change how a run executes but not what it computes (left out of the run's hash)
EXECUTION_ONLY = frozenset(
    {"num_workers", "micro_batch", "eval_every", "eval_batch_size", "log_every", "cache_batch_size", "device"}
)

#: most of the training videos FP-DP's ``holdout:<f>`` may use raw and noise-free (docs/RESULTS.md:
#: the subspace needs only ``fpdp_public_size`` clips; a larger holdout only unprotects more people)
from anonymask.core.errors import settings_problems  # noqa: E402
from anonymask.models.training.privacy.fpdp import HOLDOUT_MAX  # noqa: E402

PositiveInt = Annotated[int, Field(ge=1)]
NonNegInt = Annotated[int, Field(ge=0)]
Seed = Annotated[int, Field(ge=0)] | None


def normalize_mode(mode: str | Mode) -> Mode:
    try:
        return MODE_ALIASES[str(mode)]
    except KeyError:
        raise ValueError(f"unknown training mode {mode!r}; choose one of nonprivate, dp, maskdp, fpdp") from None


class TrainSettings(BaseModel):
    """One training run. Field docs: the comments; ranges are enforced."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)

    mode: Mode = Mode.NONPRIVATE
    dataset: str = "demo"
    # data
    protocol: str = "xsub"
    train_split: str = "train"
    eval_split: str = "test"
    variant: Literal["real", "render", "rend_diff"] = "render"  # the rows of the paper's tables
    # r | q | none | auto (maskdp: q on real = "Real*", r otherwise; other modes: none)
    mask_source: Literal["r", "q", "none", "auto"] | None = "auto"
    q_threshold: Annotated[int, Field(ge=0, le=254)] = 0
    clip_len: PositiveInt = 16
    frame_stride: PositiveInt = 2
    size: tuple[PositiveInt, PositiveInt] = (224, 224)
    clips_per_video: PositiveInt = 1
    eval_clips_per_video: PositiveInt = 1
    # model
    arch: Literal["mvit_v2_s", "tiny"] = "mvit_v2_s"
    weights: str = "kinetics400"  # kinetics400 | random | path of a torchvision state dict
    trainable: str = "last_blocks_norm"
    tiny_blocks: PositiveInt = 4
    model_seed: NonNegInt = 0
    # optimisation (the paper's)
    epochs: NonNegInt = 150
    batch_size: PositiveInt = 128  # expected batch size under Poisson sampling (every DP mode)
    # expected size of MaskDP's / FP-DP's independent public batch (None: batch_size, as in the
    # papers). Smaller = a cheaper public pass and a noisier public term; privacy is unaffected.
    public_batch_size: PositiveInt | None = None
    lr: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.01
    momentum: Annotated[float, Field(ge=0, lt=1)] = 0.9
    weight_decay: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.0
    warmup_epochs: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 20.0
    min_lr_ratio: Annotated[float, Field(ge=0, le=1)] = 0.0
    seed: NonNegInt = 0
    # privacy
    epsilon: Annotated[float, Field(gt=0)] = 8.0  # target epsilon of the DP modes (inf for nonprivate)
    delta: Annotated[float, Field(gt=0, lt=1)] = 1e-5
    max_grad_norm: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 1.0
    noise_multiplier: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None  # None: calibrated
    accountant: Literal["rdp", "pld", "prv"] = "rdp"  # as in the paper; the tight one is reported beside it
    compare_accountants: tuple[Literal["rdp", "pld", "prv"], ...] = ("pld",)
    # what neighbouring datasets differ in: auto = the mode's claim (maskdp: replace one record's
    # private tokens, the paper's Definition 2; dp and fpdp: add/remove one record's private part)
    adjacency: Literal["auto", "add_remove", "replace"] = "auto"
    # sound: MaskDP's / FP-DP's public term on a batch drawn independently of the private one;
    # paper: on the private batch itself with Theorem 1 (reproduces the paper; NOT a valid guarantee)
    accounting: Literal["sound", "paper"] = "sound"
    noise_seed: Seed = None  # None: OS entropy (real runs); fix only for reproducible experiments
    sampling_seed: Seed = None
    public_seed: Seed = None
    # FP-DP
    fpdp_k: PositiveInt = 16
    fpdp_refresh_every: PositiveInt = 50
    # psi: paper_blur (the paper's blur, sigma 10 px at 256 px, scaled to `size`), blur_<sigma>
    # (at least that strong unless fpdp_psi_allow_weak), or public (synthetic tokens only)
    fpdp_psi: str = "paper_blur"
    fpdp_psi_allow_weak: bool = False
    fpdp_public_weight: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 1.0
    # holdout:<fraction of train videos, at most HOLDOUT_MAX; used raw, disclosed by id> | split:<split name>
    fpdp_public: str = "holdout:0.1"
    fpdp_public_size: PositiveInt = 64
    # execution
    feature_cache: bool = True  # frozen-prefix features cached in the store (trainable != all)
    cache_dtype: Literal["float32", "float16"] = "float32"  # float16: half the disk/IO, ~5e-4 rel. rounding
    cache_batch_size: PositiveInt = 16
    num_workers: NonNegInt = 4
    micro_batch: PositiveInt | None = None  # bounds memory: micro-batches (non-private) / vmap chunks (DP)
    eval_every: NonNegInt = 10
    eval_batch_size: PositiveInt | None = None
    device: str | None = None  # None: cuda when present, else cpu
    amp: bool = True  # bf16 autocast on CUDA (ignored on CPU)
    log_every: PositiveInt = 10

    # ------------------------------------------------------------------ field checks
    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, v: Any) -> Mode:
        return normalize_mode(v)

    @field_validator("size", mode="before")
    @classmethod
    def _size(cls, v: Any) -> Any:
        return (v, v) if isinstance(v, int) else v

    @field_validator("compare_accountants", mode="before")
    @classmethod
    def _accountants(cls, v: Any) -> Any:
        if isinstance(v, str):
            return tuple(a for a in v.split(",") if a)
        return v

    @field_validator("mask_source", mode="before")
    @classmethod
    def _mask_source(cls, v: Any) -> Any:
        return "none" if v in (None, "") else v

    @field_validator("fpdp_psi")
    @classmethod
    def _psi(cls, v: str) -> str:
        if v in ("paper_blur", "public"):
            return v
        if v.startswith("blur_"):
            try:
                sigma = float(v[5:])
            except ValueError:
                sigma = math.nan
            if math.isfinite(sigma) and sigma > 0:
                return v
        raise ValueError("expected paper_blur, blur_<sigma> (sigma > 0, e.g. blur_8.75) or public")

    @field_validator("fpdp_public")
    @classmethod
    def _public(cls, v: str) -> str:
        kind, _, arg = v.partition(":")
        if kind == "holdout":
            try:
                frac = float(arg or 0.1)
            except ValueError:
                frac = math.nan
            if 0 < frac <= HOLDOUT_MAX:
                return v
            if 0 < frac < 1:
                raise ValueError(
                    f"holdout fraction {frac:g} is above the cap {HOLDOUT_MAX:g}: those videos train raw and "
                    "noise-free, with no protection; the subspace needs only fpdp_public_size clips"
                )
        elif kind == "split" and arg:
            return v
        raise ValueError(f"expected holdout:<fraction in (0, {HOLDOUT_MAX:g}]> or split:<split name>")

    @model_validator(mode="after")
    def _consistent(self) -> TrainSettings:
        if self.accounting == "paper" and self.mode not in (Mode.MASKDP, Mode.FPDP):
            raise ValueError(f"accounting=paper reproduces MaskDP's / FP-DP's same-batch public term, not {self.mode}")
        if self.accounting == "paper" and self.public_batch_size not in (None, self.batch_size):
            raise ValueError("accounting=paper uses the private batch as the public one: public_batch_size must be unset")
        if self.variant == "real" and self.mask_source == "r":
            raise ValueError("variant real has no synthetic pixels: use mask_source q (Real*) or none")
        if self.variant != "real" and self.mask_source == "q":
            raise ValueError(f"mask_source q (Real*: the person public) applies to variant real only, not {self.variant}")
        if self.mode == Mode.MASKDP and self.mask_source == "none":
            raise ValueError("maskdp needs a pixel mask: mask_source r (anonymized video) or q (raw video, Real*)")
        if self.fpdp_public.startswith("split:") and self.fpdp_public[6:] == self.train_split:
            raise ValueError("FP-DP's public split must differ from the private training split")
        # DESIGN.md invariant 12: nothing derived from private data leaves outside the accountant
        if self.mode.private and self.eval_split == self.train_split:
            raise ValueError(
                f"eval_split={self.eval_split} is the private training split: its metrics (per-class accuracy) "
                "would be released outside the accountant; evaluate a private run on another split"
            )
        if self.mode == Mode.FPDP and self.fpdp_public.startswith("split:") and self.fpdp_public[6:] == self.eval_split:
            raise ValueError(
                f"fpdp_public={self.fpdp_public} estimates the subspace from the evaluation split: the test set "
                "would shape the model; use a holdout or a third split"
            )
        adjacency = self.adjacency if self.adjacency != "auto" else ("replace" if self.mode == Mode.MASKDP else "add_remove")
        if self.mode.private and self.accountant == "prv" and adjacency == "replace" and self.accounting == "sound":
            raise ValueError(
                "accountant=prv has no replace-one adjacency (MaskDP's default); use accountant=rdp or pld, "
                "or adjacency=add_remove"
            )
        from anonymask.models.training.privacy.seeds import check_fixed_seeds

        check_fixed_seeds({"noise": self.noise_seed, "sampling": self.sampling_seed, "public": self.public_seed})
        return self

    # ------------------------------------------------------------------ derived values
    def resolved(self) -> TrainSettings:
        """The same settings with every ``auto`` value decided (idempotent)."""
        s = self.model_copy()
        if s.mask_source == "auto":
            s.mask_source = ("q" if s.variant == "real" else "r") if s.mode == Mode.MASKDP else "none"
        if s.mode == Mode.FPDP and s.fpdp_psi == "public" and s.mask_source == "none":
            s.mask_source = "q" if s.variant == "real" else "r"
        if s.adjacency == "auto":
            s.adjacency = "replace" if s.mode == Mode.MASKDP else "add_remove"
        if s.mode == Mode.FPDP:
            s.fpdp_psi = resolve_psi(s.fpdp_psi, s.size)
        if s.mode == Mode.NONPRIVATE:
            s.epsilon = math.inf
        return TrainSettings.model_validate(s.model_dump())

    @property
    def mask(self) -> str | None:
        """The pixel-mask source as the data layer takes it (None for none)."""
        return None if self.mask_source in ("none", "auto") else self.mask_source

    @property
    def target_epsilon(self) -> float | None:
        return None if self.mode == Mode.NONPRIVATE else float(self.epsilon)

    def train_variants(self) -> tuple[str, ...]:
        """Prefix-feature variants the mode's gradient strategy reads."""
        if self.mode == Mode.MASKDP:
            return ("private", "public")
        if self.mode == Mode.FPDP:
            return ("full", self.fpdp_psi)
        return ("full",)

    def to_json_dict(self) -> dict[str, Any]:
        """JSON-safe dict (inf as the string "inf"), as written to a run's config.json."""
        out = self.model_dump(mode="json")
        return {k: ("inf" if isinstance(v, float) and math.isinf(v) else v) for k, v in out.items()}

    def run_hash(self) -> str:
        """Short hash of everything that determines the result (execution-only settings left out)."""
        core = {k: v for k, v in self.resolved().to_json_dict().items() if k not in EXECUTION_ONLY}
        return hashlib.sha256(json.dumps(core, sort_keys=True).encode()).hexdigest()[:8]


def resolve_psi(psi: str, size: tuple[int, int] | list[int]) -> str:
    """``paper_blur`` -> ``blur_<sigma>`` with the paper's blur scaled to ``size`` (3 decimals,
    rounded up so it never falls below the floor); other names unchanged."""
    if psi != "paper_blur":
        return psi
    from anonymask.models.training.privacy.fpdp import blur_floor

    return f"blur_{math.ceil(blur_floor(tuple(size)) * 1000) / 1000:g}"


def settings_error(err: ValidationError) -> str:
    """One line per problem: ``setting 'lr': Input should be greater than or equal to 0 (got -1)``."""
    return settings_problems(err.errors(), TrainSettings.model_fields)
