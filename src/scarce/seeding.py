"""Explicit randomness: every public API takes a ``seed`` and never touches global RNGs."""

from __future__ import annotations

from typing import Union

import numpy as np

SeedLike = Union[int, np.integer, np.random.SeedSequence, np.random.Generator, None]


def as_generator(seed: SeedLike) -> np.random.Generator:
    """A ``numpy.random.Generator`` from an int, ``SeedSequence``, ``Generator`` (returned as is) or None."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or isinstance(seed, (int, np.integer, np.random.SeedSequence)):
        if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed < 0:
            from scarce.errors import ScarceError

            raise ScarceError(f"seed must be a non-negative integer, SeedSequence, Generator or None, got {seed}")
        return np.random.default_rng(seed)
    from scarce.errors import ScarceError

    raise ScarceError(f"seed must be an int, SeedSequence, Generator or None, got {type(seed).__name__}")


def describe_seed(seed: SeedLike) -> object:
    """A JSON-friendly record of the seed for provenance (the int, the entropy, or a description)."""
    if isinstance(seed, (int, np.integer)):
        return int(seed)
    if isinstance(seed, np.random.SeedSequence):
        return {"entropy": str(seed.entropy), "spawn_key": list(seed.spawn_key)}
    if isinstance(seed, np.random.Generator):
        return "generator"
    return None
