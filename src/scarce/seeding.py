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
    if seed is None or isinstance(seed, np.random.SeedSequence):
        return np.random.default_rng(seed)
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
        return {"entropy": str(seed.entropy), "spawn_key": list(seed.spawn_key)}
    if isinstance(seed, np.random.Generator):
        return "generator"
    return None
