"""The three random streams of a private run, kept independent: noise, private sampling, public sampling.

Why: a private step's guarantee assumes the Gaussian noise, the private Poisson draw and the
public (psi / public-token) batch are independent. Two of them seeded alike become one stream:
on CPU torch's mt19937 then hands a record's Poisson uniform to the Box-Muller radius of one noise
coordinate (that coordinate is small exactly when the record was sampled), and a public batch
drawn with the private batch's seed IS the private batch. So:

- by default every stream is seeded from the OS (``secrets``), never from a config value;
- a fixed seed (reproducible experiments only) must be given explicitly per stream, and fixed
  seeds must be pairwise different, or the run is refused;
- each stream's generator seed is derived from (its seed, its stream name) through numpy's
  SeedSequence, so even equal inputs could not give equal streams (defence in depth).

``SEED_DERIVATION`` names this scheme in every privacy report so ``anonymask privacy audit`` can
check it. Seed VALUES are never written to a published output (they must stay secret).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping

import numpy as np

STREAMS = ("noise", "sampling", "public")
SEED_DERIVATION = "seedsequence(seed, stream)-v1"
#: the action trainer's scheme: noise seeded as given, each epoch's sampling and public draws from
#: sha256(seed, stream name, epoch); stream-separated too
ACTION_DERIVATION = "noise:seed; sampling,public:sha256(seed, stream, epoch)-v1"
#: schemes that keep the three streams independent (``anonymask privacy audit`` accepts these)
INDEPENDENT_DERIVATIONS = (SEED_DERIVATION, ACTION_DERIVATION)


class SeedError(ValueError):
    """Fixed seeds that would make two private streams one."""


def check_fixed_seeds(seeds: Mapping[str, int | None]) -> tuple[str, ...]:
    """Names of the fixed seeds; refuses fixed seeds that are equal (or not non-negative ints)."""
    fixed = {name: seed for name, seed in seeds.items() if seed is not None}
    for name, seed in fixed.items():
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise SeedError(f"{name}_seed must be an int >= 0 or None (OS entropy), got {seed!r}")
    names = sorted(fixed)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if int(fixed[a]) == int(fixed[b]):
                raise SeedError(
                    f"{a}_seed and {b}_seed are both {fixed[a]}: the {a} and {b} streams must be independent. "
                    "Leave them unset (OS entropy, what a private run should do) or give pairwise different seeds"
                )
    return tuple(f"{n}_seed" for n in names)


def stream_seed(seed: int, stream: str) -> int:
    """63-bit generator seed of ``stream`` derived from ``seed`` (SeedSequence, stream-separated)."""
    if stream not in STREAMS:
        raise ValueError(f"unknown stream {stream!r}; choose one of {STREAMS}")
    tag = STREAMS.index(stream) + 1
    words = np.random.SeedSequence([int(seed), 0x5EED, tag]).generate_state(2, dtype=np.uint32)
    return (int(words[0]) | (int(words[1]) << 32)) >> 1


def resolve_streams(noise_seed: int | None, sampling_seed: int | None, public_seed: int | None) -> dict[str, int]:
    """Generator seed of each stream: derived from the fixed seed, or from fresh OS entropy."""
    given = {"noise": noise_seed, "sampling": sampling_seed, "public": public_seed}
    check_fixed_seeds(given)
    return {name: stream_seed(seed if seed is not None else secrets.randbits(63), name) for name, seed in given.items()}


def seeds_record(noise_seed: int | None, sampling_seed: int | None, public_seed: int | None,
                 derivation: str = SEED_DERIVATION) -> dict:  # fmt: skip
    """What a privacy report states about the streams (never the seed values)."""
    given = {"noise": noise_seed, "sampling": sampling_seed, "public": public_seed}
    fixed = check_fixed_seeds(given)
    return {
        "derivation": derivation,
        "source": {name: ("fixed" if seed is not None else "os_entropy") for name, seed in given.items()},
        "fixed": list(fixed),
        "fixed_pairwise_distinct": True,  # check_fixed_seeds refused otherwise
    }
