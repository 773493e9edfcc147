"""MViTv2-S video classifier with a token mask right after the patch embedding.

Why a wrapper around torchvision's ``MViT``: MaskDP-SGD needs the network to see only some tokens
(``token_keep``), the frozen-prefix cache needs to cut the network at the first trainable layer,
and fine-tuning under DP trains a small configurable parameter set. The wrapper runs torchvision's
own submodules stage by stage (same numbers as ``MViT.forward``), so Kinetics-400 weights in
torchvision's state-dict format load unchanged.

Token mask: tokens whose ``token_keep`` is False are set to zero right after the patch
embedding convolution (bias included), before the class token is prepended and before any
positional information enters. MViTv2 has no absolute positional embedding (it uses relative
position biases inside attention), so a dropped token reaches the first block as an all-zero
vector: its position stays known (public: positions carry no pixel data), its content is gone.

Frozen parts never train: every module before the split point (the first trainable layer)
always runs in eval mode and without autograd, so the prefix is a pure function of the clip
(what makes the feature cache exact) and stochastic depth/dropout act only in the trainable tail.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from anonymask.core.errors import MissingWeightsError

KINETICS_FILE = "action/mvit_v2_s-ae3be167.pth"
KINETICS_MEAN = (0.45, 0.45, 0.45)
KINETICS_STD = (0.225, 0.225, 0.225)
TRAINABLE_SETS = ("head", "last_blocks_norm", "all")
ARCHS = ("mvit_v2_s", "tiny")


def _import_mvit():
    from anonymask.core.compat import ensure_torchvision

    ensure_torchvision()
    from torchvision.models.video import mvit as tv_mvit  # noqa: PLC0415

    return tv_mvit


@dataclass(frozen=True)
class ActionModelConfig:
    """Everything that defines the network's computation (hashed into cache keys)."""

    num_classes: int
    arch: str = "mvit_v2_s"
    clip_len: int | None = None  # frames; None = the arch's default (16, tiny 8)
    size: tuple[int, int] | None = None  # (H, W); None = the arch's default (224, tiny 32)
    trainable: str = "last_blocks_norm"
    dropout: float = 0.0
    stochastic_depth_prob: float = 0.0
    tiny_blocks: int = 4
    extra: dict[str, Any] = field(default_factory=dict)

    def resolved(self) -> ActionModelConfig:
        if self.arch not in ARCHS:
            raise ValueError(f"unknown action model arch {self.arch!r}; choose one of {ARCHS}")
        if self.trainable not in TRAINABLE_SETS:
            raise ValueError(f"unknown trainable set {self.trainable!r}; choose one of {TRAINABLE_SETS}")
        t_def, s_def = (16, (224, 224)) if self.arch == "mvit_v2_s" else (8, (32, 32))
        size = tuple(int(s) for s in (self.size or s_def))
        return ActionModelConfig(
            num_classes=int(self.num_classes),
            arch=self.arch,
            clip_len=int(self.clip_len or t_def),
            size=size,  # type: ignore[arg-type]
            trainable=self.trainable,
            dropout=float(self.dropout),
            stochastic_depth_prob=float(self.stochastic_depth_prob),
            tiny_blocks=int(self.tiny_blocks),
            extra=dict(self.extra),
        )

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["size"] = list(d["size"]) if d["size"] is not None else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ActionModelConfig:
        d = dict(d)
        if d.get("size") is not None:
            d["size"] = tuple(d["size"])
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


def _tiny_block_setting(tv_mvit, n_blocks: int) -> list:
    """A few small blocks with MViTv2-S's pattern: pooled K/V early, Q-pooling in the second-last."""
    if n_blocks < 2:
        raise ValueError("the tiny MViT needs at least 2 blocks")
    in_ch = [16] * (n_blocks - 1) + [32]
    out_ch = [16] * (n_blocks - 2) + [32, 32]
    return [
        tv_mvit.MSBlockConfig(
            num_heads=1 if i == 0 else 2,
            input_channels=in_ch[i],
            output_channels=out_ch[i],
            kernel_q=[3, 3, 3],
            kernel_kv=[3, 3, 3],
            stride_q=[1, 2, 2] if i == n_blocks - 2 else [1, 1, 1],
            stride_kv=[1, 2, 2] if i < n_blocks - 2 else [1, 1, 1],
        )
        for i in range(n_blocks)
    ]


def _mvit_v2_s_block_setting(tv_mvit) -> list:
    """MViTv2-S's 16 blocks (Li et al. 2022, Table 1 "S"), written as its rule.

    Four scale stages begin at blocks 0, 1, 3 and 14 (channels 96, 192, 384, 768; heads 1, 2, 4, 8).
    A stage's first block pools Q with stride (1,2,2) and widens the channels from the previous
    stage's (``proj_after_attn``); K/V are pooled towards a fixed 7x7 grid, i.e. stride (1,8,8) in
    the first stage, divided by every Q stride since.
    """
    stage_starts, dims, heads = (0, 1, 3, 14), (96, 192, 384, 768), (1, 2, 4, 8)
    settings, kv = [], 8
    for i in range(16):
        stage = max(j for j, s in enumerate(stage_starts) if s <= i)
        pool_q = i in stage_starts[1:]
        if pool_q:
            kv = max(kv // 2, 1)
        settings.append(
            tv_mvit.MSBlockConfig(
                num_heads=heads[stage],
                input_channels=dims[stage - 1] if pool_q else dims[stage],
                output_channels=dims[stage],
                kernel_q=[3, 3, 3],
                kernel_kv=[3, 3, 3],
                stride_q=[1, 2, 2] if pool_q else [1, 1, 1],
                stride_kv=[1, kv, kv],
            )
        )
    return settings


def _build_mvit(cfg: ActionModelConfig) -> nn.Module:
    tv_mvit = _import_mvit()
    common = dict(
        spatial_size=tuple(cfg.size),
        temporal_size=cfg.clip_len,
        num_classes=cfg.num_classes,
        dropout=cfg.dropout,
        stochastic_depth_prob=cfg.stochastic_depth_prob,
    )
    if cfg.arch == "mvit_v2_s":
        blocks = _mvit_v2_s_block_setting(tv_mvit)
    else:
        blocks = _tiny_block_setting(tv_mvit, cfg.tiny_blocks)
    return tv_mvit.MViT(
        block_setting=blocks,
        residual_pool=True,
        residual_with_cls_embed=False,
        rel_pos_embed=True,
        proj_after_attn=True,
        **common,
    )


def kinetics_weights_path() -> Path:
    from anonymask.core.paths import weights_root

    root = weights_root()
    return root / KINETICS_FILE if root else Path(KINETICS_FILE)


class ActionModel(nn.Module):
    """``model(x, token_keep=None) -> logits`` over clips ``x`` (B,3,T,H,W), normalised float."""

    def __init__(self, config: ActionModelConfig, weights_id: str = "random"):
        super().__init__()
        self.config = config.resolved()
        self.weights_id = weights_id
        self.net = _build_mvit(self.config)
        conv = self.net.conv_proj
        self.patch_kernel = tuple(int(k) for k in conv.kernel_size)
        self.patch_stride = tuple(int(s) for s in conv.stride)
        self.patch_padding = tuple(int(p) for p in conv.padding)
        self.set_trainable(self.config.trainable)

    # ------------------------------------------------------------------ geometry
    @property
    def input_shape(self) -> tuple[int, int, int, int]:
        """(C, T, H, W) the network was built for."""
        return (3, self.config.clip_len, *self.config.size)  # type: ignore[misc]

    @property
    def token_grid(self) -> tuple[int, int, int]:
        """(T', H', W') of the patch embedding output; tokens are flattened in this order."""
        pe = self.net.pos_encoding
        return (int(pe.temporal_size), int(pe.spatial_size[0]), int(pe.spatial_size[1]))

    @property
    def num_tokens(self) -> int:
        t, h, w = self.token_grid
        return t * h * w

    @property
    def num_blocks(self) -> int:
        return len(self.net.blocks)

    # ------------------------------------------------------------------ trainable set
    def trainable_modules(self, which: str) -> list[nn.Module]:
        net = self.net
        if which == "all":
            return [net]
        if which == "head":
            return [net.head]
        if which == "last_blocks_norm":
            mods: list[nn.Module] = []
            for block in list(net.blocks)[-2:]:
                mods += [m for m in block.modules() if isinstance(m, nn.LayerNorm | nn.BatchNorm1d)]
            return [*mods, net.norm, net.head]
        raise ValueError(f"unknown trainable set {which!r}; choose one of {TRAINABLE_SETS}")

    def set_trainable(self, which: str) -> None:
        """Freeze everything, then unfreeze the named set (its split point moves with it)."""
        for p in self.parameters():
            p.requires_grad_(False)
        for m in self.trainable_modules(which):
            for p in m.parameters():
                p.requires_grad_(True)
        self.trainable_set = which
        self._split = self._find_split()

    def trainable_named_parameters(self) -> list[tuple[str, nn.Parameter]]:
        return [(n, p) for n, p in self.named_parameters() if p.requires_grad]

    def trainable_parameters(self) -> list[nn.Parameter]:
        return [p for _, p in self.trainable_named_parameters()]

    def num_trainable(self) -> int:
        return sum(p.numel() for p in self.trainable_parameters())

    # ------------------------------------------------------------------ split point
    def split_index(self) -> int:
        """Stage index of the first trainable layer (fixed by :meth:`set_trainable`).

        Stages: 0 = patch embedding (input: the video); 1+k = block k (input: tokens before
        block k); ``num_blocks+1`` = final norm (input: tokens after the last block);
        ``num_blocks+2`` = head (input: the normalised class token). Computed once, so that
        functional calls (torch.func, per-sample gradients) with swapped parameters see the same
        split.
        """
        return self._split

    def _find_split(self) -> int:
        net = self.net
        stages: list[nn.Module] = [nn.ModuleList([net.conv_proj, net.pos_encoding]), *net.blocks, net.norm, net.head]
        for i, stage in enumerate(stages):
            if any(p.requires_grad for p in stage.parameters()):
                return i
        return len(stages) - 1

    def stage_count(self) -> int:
        return self.num_blocks + 3

    def train(self, mode: bool = True) -> ActionModel:
        super().train(mode)
        if mode:
            for m in self.prefix_modules():
                m.eval()
        return self

    def stage_modules(self, start: int, stop: int) -> list[nn.Module]:
        """Modules of stages ``start`` .. ``stop-1`` (see :meth:`split_index` for the numbering)."""
        net = self.net
        stages: list[list[nn.Module]] = [[net.conv_proj, net.pos_encoding]]
        stages += [[b] for b in net.blocks] + [[net.norm], [net.head]]
        return [m for s in stages[start:stop] for m in s]

    def prefix_modules(self) -> list[nn.Module]:
        """Modules of the frozen prefix (everything before the split point)."""
        return self.stage_modules(0, self.split_index())

    # ------------------------------------------------------------------ stages
    def embed(self, x: torch.Tensor, token_keep: torch.Tensor | None = None) -> torch.Tensor:
        """Patch embedding (+ token mask) and class token: (B,3,T,H,W) -> (B, 1+N, C)."""
        if x.dim() != 5 or tuple(x.shape[1:]) != self.input_shape:
            raise ValueError(
                f"action model expects clips of shape (B, {', '.join(map(str, self.input_shape))}), "
                f"got {tuple(x.shape)}"
            )
        z = self.net.conv_proj(x)
        if token_keep is not None:
            b = z.shape[0]
            if token_keep.shape != (b, self.num_tokens):
                raise ValueError(
                    f"token_keep must be (B, N_tokens)=({b}, {self.num_tokens}), got {tuple(token_keep.shape)}"
                )
            # exact zeros (not a product): nothing of a dropped patch, not even inf/NaN, survives
            z = z.masked_fill(~token_keep.reshape(b, 1, *self.token_grid).bool(), 0.0)
        z = z.flatten(2).transpose(1, 2)
        return self.net.pos_encoding(z)

    def stage_thw(self, stage: int) -> tuple[int, int, int]:
        """Token grid (T,H,W) entering ``stage`` (for block stages and the final norm)."""
        thw = self.token_grid
        for block in list(self.net.blocks)[: max(0, min(stage, self.num_blocks + 1) - 1)]:
            pool = block.attn.pool_q.pool if block.attn.pool_q is not None else None
            if pool is not None:
                thw = tuple(  # type: ignore[assignment]
                    (a + 2 * p - k) // s + 1
                    for a, k, s, p in zip(thw, pool.kernel_size, pool.stride, pool.padding)
                )
        return thw  # type: ignore[return-value]

    def run_stages(
        self, x: torch.Tensor, start: int, stop: int, token_keep: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Run stages ``start`` .. ``stop-1`` on the input of stage ``start``."""
        nb = self.num_blocks
        if start == 0 and stop > 0:
            x = self.embed(x, token_keep)
        elif token_keep is not None:
            raise ValueError("token_keep applies at the patch embedding; this input is already past it")
        thw = self.stage_thw(max(start, 1))
        for k in range(max(start, 1), min(stop, nb + 1)):
            x, thw = self.net.blocks[k - 1](x, thw)
        if start <= nb + 1 < stop:
            x = self.net.norm(x)[:, 0]
        if start <= nb + 2 < stop:
            x = self.net.head(x)
        return x

    def forward(self, x: torch.Tensor, token_keep: torch.Tensor | None = None) -> torch.Tensor:
        split = self.split_index()
        if split > 0:
            with torch.no_grad():
                feats = self.run_stages(x, 0, split, token_keep)
            return self.run_stages(feats, split, self.stage_count())
        return self.run_stages(x, 0, self.stage_count(), token_keep)

    def prefix_hash(self) -> str:
        """Content hash of the frozen prefix's parameters and buffers (what cached features depend on)."""
        items = [(f"{i}.{k}", t) for i, m in enumerate(self.prefix_modules()) for k, t in m.state_dict().items()]
        return _hash_tensors(items)

    def frozen_hash(self) -> str:
        """Content hash of every frozen parameter and buffer (a checkpoint resumes only onto these)."""
        trainable = {n for n, _ in self.trainable_named_parameters()}
        return _hash_tensors([(k, t) for k, t in self.state_dict().items() if k not in trainable])


def _hash_tensors(items: list[tuple[str, torch.Tensor]]) -> str:
    h = hashlib.blake2b(digest_size=16)
    for name, t in sorted(items, key=lambda kv: kv[0]):
        h.update(name.encode())
        h.update(str(tuple(t.shape)).encode())
        h.update(t.detach().cpu().contiguous().float().numpy().tobytes())
    return h.hexdigest()


def load_torchvision_state_dict(model: ActionModel, path: str | os.PathLike) -> None:
    """Load torchvision-format MViT weights; the head is kept only if its class count matches."""
    path = Path(path)
    if not path.is_file():
        raise MissingWeightsError(
            "action model (MViTv2-S Kinetics-400)",
            [str(path)],
            hint="torchvision's mvit_v2_s-ae3be167.pth goes in $ANONYMASK_WEIGHTS/action/",
        )
    state = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    own = model.net.state_dict()
    head_keys = [k for k in state if k.startswith("head.")]
    if any(k in own and own[k].shape != state[k].shape for k in head_keys):
        for k in head_keys:
            state.pop(k)
    missing, unexpected = model.net.load_state_dict(state, strict=False)
    bad_missing = [k for k in missing if not k.startswith("head.")]
    if bad_missing or unexpected:
        raise ValueError(
            f"{path}: not an MViT state dict for arch {model.config.arch!r} "
            f"(missing {bad_missing[:5]}, unexpected {list(unexpected)[:5]})"
        )


def build_action_model(
    num_classes: int,
    *,
    arch: str = "mvit_v2_s",
    weights: str | os.PathLike = "random",
    trainable: str = "last_blocks_norm",
    clip_len: int | None = None,
    size: tuple[int, int] | None = None,
    dropout: float = 0.0,
    stochastic_depth_prob: float = 0.0,
    seed: int = 0,
    tiny_blocks: int = 4,
) -> ActionModel:
    """Build the classifier with a new head of ``num_classes``.

    ``weights``: "random" (seeded init, for tests and from-scratch runs), "kinetics400" (torchvision's
    file ``$ANONYMASK_WEIGHTS/action/mvit_v2_s-ae3be167.pth``; MissingWeightsError when absent), or
    a path to a torchvision-format state dict.
    """
    cfg = ActionModelConfig(
        num_classes=num_classes,
        arch=arch,
        clip_len=clip_len,
        size=size,
        trainable=trainable,
        dropout=dropout,
        stochastic_depth_prob=stochastic_depth_prob,
        tiny_blocks=tiny_blocks,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        weights_s = str(weights)
        if weights_s == "kinetics400":
            path = kinetics_weights_path()
            if arch != "mvit_v2_s":
                raise ValueError("Kinetics-400 weights exist for arch 'mvit_v2_s' only")
            if not path.is_file():
                raise MissingWeightsError(
                    "action model (MViTv2-S Kinetics-400)",
                    [str(path)],
                    hint="torchvision's mvit_v2_s-ae3be167.pth goes in $ANONYMASK_WEIGHTS/action/",
                )
            model = ActionModel(cfg, weights_id=f"file:{path.name}")
            load_torchvision_state_dict(model, path)
        elif weights_s == "random":
            model = ActionModel(cfg, weights_id=f"random:{seed}")
        else:
            model = ActionModel(cfg, weights_id=f"file:{Path(weights_s).name}")
            load_torchvision_state_dict(model, weights_s)
    return model
