"""Cut an ActionModel at its first trainable layer: a frozen prefix and a trainable tail.

With a frozen prefix and no augmentation, the prefix's output is a pure function of the clip
(and of the token mask applied at the patch embedding), so it can be computed once and cached;
each epoch then runs only the tail. ``tail(prefix(x, keep))`` equals ``model(x, keep)``.

The prefix output at a block boundary is the token tensor (B, 1+N, C) whose token grid (T,H,W)
MViT blocks carry alongside; that grid is fixed by the model config and the split point, so the
tail knows it statically and only the tensor is cached. At the head split (only the head trains)
the feature is the normalised class token (B, C).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from anonymask.models.training.action.mvit import ActionModel


def feature_shape(model: ActionModel, split: int | None = None) -> tuple[int, ...]:
    """Per-clip shape of the features entering stage ``split`` (default: the model's split point)."""
    split = model.split_index() if split is None else split
    nb = model.num_blocks
    if split <= 0:
        return model.input_shape
    if split <= nb:
        thw = model.stage_thw(split)
        return (1 + math.prod(thw), int(model.net.blocks[split - 1].norm1.normalized_shape[0]))
    width = int(model.net.norm.normalized_shape[0])
    return (1 + math.prod(model.stage_thw(nb + 1)), width) if split == nb + 1 else (width,)


class FrozenPrefix:
    """``prefix(x, token_keep=None) -> features`` at the split point; no autograd, eval mode."""

    def __init__(self, model: ActionModel, split: int | None = None):
        self.model = model
        self.split = model.split_index() if split is None else int(split)
        if self.split <= 0:
            raise ValueError("the whole model is trainable: there is no frozen prefix to cache")
        if self.split > model.split_index():
            raise ValueError(f"split {self.split} lies past the first trainable layer ({model.split_index()})")

    @property
    def feature_shape(self) -> tuple[int, ...]:
        return feature_shape(self.model, self.split)

    @torch.no_grad()
    def __call__(self, x: torch.Tensor, token_keep: torch.Tensor | None = None) -> torch.Tensor:
        modes = [(m, m.training) for m in self.model.stage_modules(0, self.split)]
        for m, _ in modes:
            m.eval()
        try:
            return self.model.run_stages(x, 0, self.split, token_keep)
        finally:
            for m, was in modes:
                m.train(was)


class TrainableTail(nn.Module):
    """``tail(features) -> logits``: the stages from the split point on, sharing the model's modules.

    Only the tail's modules are registered (its ``parameters()`` are the model's tail parameters,
    the same tensors), so per-sample-gradient wrappers see exactly the trainable part.
    """

    def __init__(self, model: ActionModel, split: int | None = None):
        super().__init__()
        object.__setattr__(self, "_model", model)  # not a submodule: keep the prefix out
        self.split = model.split_index() if split is None else int(split)
        nb = model.num_blocks
        self.blocks = nn.ModuleList(list(model.net.blocks)[max(self.split - 1, 0) :])
        self.norm = model.net.norm if self.split <= nb + 1 else None
        self.head = model.net.head

    @property
    def model(self) -> ActionModel:
        return self._model

    def forward(self, x: torch.Tensor, token_keep: torch.Tensor | None = None) -> torch.Tensor:
        if token_keep is not None:
            raise ValueError(
                "cached features already carry their token mask (pick the 'private'/'public' variant); "
                "token_keep applies to video input only"
            )
        return self._model.run_stages(x, self.split, self._model.stage_count())
