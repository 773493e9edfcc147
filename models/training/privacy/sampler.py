"""Poisson sampling of training batches: the sampling the privacy accountant assumes.

Each step includes every record independently with probability q, so batch sizes vary
(Binomial(N, q)) and an empty batch is a valid step that still spends privacy and still gets
noise. Fixed-size shuffled batches would need a different (weaker) analysis.

A record is what the guarantee protects. When one record owns several samples (a video cut into
several clips), ``groups`` makes the sampler draw RECORDS and take one of their samples at
random: each step then holds at most one sample per record, so the per-sample clip bounds each
record's contribution and epsilon is per record (per video), not per clip.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch.utils.data import Sampler
from torch.utils.data._utils.collate import default_collate


class PoissonBatchSampler(Sampler[list[int]]):
    """Yields ``steps`` index lists, each sample drawn independently with probability ``sample_rate``.

    Give either ``steps`` or ``epochs`` (one epoch = 1/q steps, i.e. N samples in expectation). Pass it to a DataLoader as ``batch_sampler=`` together with
    ``collate_allowing_empty`` so empty steps come through as tensors with a batch dimension of 0.
    Randomness comes from ``generator`` (or a generator seeded with ``seed``; with neither, from
    the OS's entropy, which is what a real private run should use).
    """

    def __init__(
        self,
        num_samples: int,
        sample_rate: float,
        steps: int | None = None,
        epochs: float | None = None,
        generator: torch.Generator | None = None,
        seed: int | None = None,
        groups: Sequence[Sequence[int]] | None = None,
    ) -> None:
        """``groups``: sample indices of each record (then ``num_samples`` must be the number of
        records); each drawn record yields one of its samples, chosen uniformly."""
        if num_samples <= 0:
            raise ValueError(f"num_samples must be > 0, got {num_samples}")
        if groups is not None:
            groups = [list(map(int, g)) for g in groups]
            if len(groups) != num_samples or any(not g for g in groups):
                raise ValueError(f"groups must list {num_samples} non-empty records, got {len(groups)}")
        self.groups = groups
        if not 0 < sample_rate <= 1:
            raise ValueError(f"sample_rate must be in (0, 1], got {sample_rate}")
        if (steps is None) == (epochs is None):
            raise ValueError("give exactly one of steps or epochs")
        self.num_samples = int(num_samples)
        self.sample_rate = float(sample_rate)
        self.steps = int(steps) if steps is not None else epochs_to_steps(epochs, self.sample_rate)
        if self.steps < 0:
            raise ValueError(f"steps must be >= 0, got {self.steps}")
        if generator is None:
            generator = torch.Generator()
            generator.manual_seed(seed if seed is not None else os_seed())
        self.generator = generator

    @property
    def expected_batch_size(self) -> float:
        """q * N: the divisor of every private update (never the realised batch size)."""
        return self.sample_rate * self.num_samples

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Iterator[list[int]]:
        for _ in range(self.steps):
            draws = torch.rand(self.num_samples, generator=self.generator)
            records = torch.nonzero(draws < self.sample_rate).flatten().tolist()
            if self.groups is None:
                yield records
                continue
            picks = torch.rand(len(records), generator=self.generator).tolist()
            yield [self.groups[r][min(int(u * len(self.groups[r])), len(self.groups[r]) - 1)]
                   for r, u in zip(records, picks)]


def record_groups(record_ids: Sequence[str]) -> list[list[int]]:
    """Sample indices grouped by record id, records in order of first appearance."""
    groups: dict[str, list[int]] = {}
    for i, rid in enumerate(record_ids):
        groups.setdefault(rid, []).append(i)
    return list(groups.values())


def os_seed() -> int:
    """A 63-bit seed from the OS's entropy: what every private run's sampling and noise use."""
    return int.from_bytes(os.urandom(8), "little") >> 1


def _empty_like_batch(example: Any) -> Any:
    """A batch of zero samples shaped like a collated batch of ``example`` items."""
    batch = default_collate([example])
    return _truncate(batch)


def _truncate(batch: Any) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch[:0]
    if isinstance(batch, dict):
        return {k: _truncate(v) for k, v in batch.items()}
    if isinstance(batch, tuple | list):
        return type(batch)(_truncate(v) for v in batch)
    return batch


def collate_allowing_empty(
    example: Any, collate_fn: Callable[[Sequence[Any]], Any] = default_collate
) -> Callable[[Sequence[Any]], Any]:
    """Wrap ``collate_fn`` so an empty Poisson batch becomes tensors with batch dimension 0.

    ``example`` is one dataset item (e.g. ``dataset[0]``): only its shapes and dtypes are used.
    """
    empty = _empty_like_batch(example)

    def collate(items: Sequence[Any]) -> Any:
        if len(items) == 0:
            return _truncate(empty)
        return collate_fn(items)

    return collate


def epochs_to_steps(epochs: float, sample_rate: float) -> int:
    """Steps of ``epochs`` passes over the data in expectation (the accountant's step count)."""
    return int(math.floor(epochs / sample_rate + 0.5))
