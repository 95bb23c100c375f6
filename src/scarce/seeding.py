"""Explicit randomness: every public API takes a ``seed`` and never touches global RNGs."""

from __future__ import annotations

from typing import Union

import numpy as np
from scarce.errors import show

SeedLike = Union[int, np.integer, np.random.SeedSequence, np.random.Generator, None]


def as_generator(seed: SeedLike, name: str = "seed") -> np.random.Generator:
    """A ``numpy.random.Generator`` from an int, ``SeedSequence``, ``Generator`` (returned as is) or None.

    ``name`` is the caller's parameter name (``"random_state"`` for scikit-learn style
    classes), used in the error for anything else: a bool, a negative int, a float, a string.
    """
    from scarce.errors import ScarceError

    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, np.random.SeedSequence):
        # a copy: spawning from the run's generator must not advance the caller's sequence, or the
        # same SeedSequence passed twice would give two different runs under one recorded seed
        return np.random.default_rng(np.random.SeedSequence(
            seed.entropy, spawn_key=seed.spawn_key, pool_size=seed.pool_size,
            n_children_spawned=seed.n_children_spawned))
    if seed is None:
        return np.random.default_rng()
    allowed = "a non-negative integer, SeedSequence, Generator or None"
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise ScarceError(f"{name} must be {allowed}, got {show(seed)} ({type(seed).__name__})")
    if seed < 0:
        raise ScarceError(f"{name} must be {allowed}, got {show(int(seed))}")
    return np.random.default_rng(int(seed))


def describe_seed(seed: SeedLike) -> object:
    """A JSON-friendly record of the seed for provenance (the int, the entropy, or a description)."""
    if isinstance(seed, (int, np.integer)):
        return int(seed)
    if isinstance(seed, np.random.SeedSequence):
        out: dict[str, object] = {"entropy": str(seed.entropy), "spawn_key": [int(k) for k in seed.spawn_key]}
        if seed.n_children_spawned:  # a sequence that already spawned hands its next children on
            out["n_children_spawned"] = int(seed.n_children_spawned)
        return out
    if isinstance(seed, np.random.Generator):
        return "generator"
    return None


def spawn_generators(rng: np.random.Generator, n: int) -> list[np.random.Generator]:
    """``n`` independent child generators of ``rng``.

    ``Generator.spawn`` where the bit generator carries a ``SeedSequence``; a generator without
    one (built on a legacy ``RandomState``'s bit generator) seeds a new sequence from its own
    stream instead, so any generator a caller passes gives reproducible children.
    """
    if getattr(rng.bit_generator, "seed_seq", None) is not None and hasattr(rng.bit_generator.seed_seq, "spawn"):
        try:
            return rng.spawn(n)
        except TypeError:  # a seed_seq that does not implement spawning
            pass
    root = np.random.SeedSequence(rng.integers(0, 2**63, size=4).tolist())
    return [np.random.default_rng(child) for child in root.spawn(n)]
