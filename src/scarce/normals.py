r"""Standard normal draws for the engine's latent space, in double or single precision.

Drawing ``u ~ N(0, I_d)`` is most of the engine's own work when ``d`` is large (784 pixels):
every query needs ``d`` fresh normals, at level 0 for the sample itself and in the MCMC steps for
the proposal. numpy's ziggurat costs about 13 ns per normal on the 2-core CI machine, whether
asked for float64 or float32, because it calls the bit generator once per value.

In single precision this module draws the normals by the Box-Muller transform, vectorised over
the batch, from one 64-bit word of the generator per pair:

.. math:: z_1 = r \cos\theta,\quad z_2 = r \sin\theta,\qquad
          r = \sqrt{-2 \log u_1},\quad \theta = 2\pi u_2,

with ``u_1 = (k_1 + 1) / 2^{40}`` from the word's top 40 bits (``k_1`` rounded to float32, that is
to 24 significant bits, which keeps small values exact) and ``u_2 = k_2 / 2^{24}`` from its low
24 bits. ``(z_1, z_2)`` are independent N(0, 1) for exact uniforms (Box and Muller 1958); the
40-bit radius keeps the tails to ``|z| = \sqrt{80 \log 2} = 7.44`` (a tail mass of 1e-13), where a
24-bit uniform, as in float32 Box-Muller generators such as torch's on CPU, stops at 5.77 (8e-9).
It is several times faster than numpy's ziggurat for the 784-dimensional draws of the vision
protocol (the timing is on the documentation's vision benchmark page).

Double precision is numpy's own ``Generator.standard_normal``, so float64 runs are unchanged
draw for draw.

>>> import numpy as np
>>> z = standard_normal(np.random.default_rng(0), (1000, 50), np.float32)
>>> z.shape, z.dtype, bool(abs(z.mean()) < 0.01), bool(abs(z.var() - 1) < 0.02)
((1000, 50), dtype('float32'), True, True)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scarce.errors import ScarceError, show

__all__ = ["DTYPES", "check_dtype", "standard_normal"]

DTYPES = ("float64", "float32")
"""Latent precisions the engine supports."""

_RADIUS_BITS = 40
_ANGLE_BITS = 64 - _RADIUS_BITS
_RADIUS_MASK = (1 << _RADIUS_BITS) - 1
_ANGLE_MASK = (1 << _ANGLE_BITS) - 1
_RADIUS_UNIT = np.float32(2.0**-_RADIUS_BITS)
_ANGLE_UNIT = np.float32(2.0 * np.pi / 2.0**_ANGLE_BITS)


def check_dtype(dtype: Any) -> np.dtype:
    """``dtype`` as a numpy dtype, or a :class:`ScarceError` naming what is allowed."""
    try:
        # np.dtype(None) would be float64, and np.dtype(np.float32(7.5)) float32 (it reads the value's dtype)
        number = isinstance(dtype, np.ndarray) or (isinstance(dtype, np.generic)
                                                   and not isinstance(dtype, (np.str_, np.bytes_)))
        resolved = None if dtype is None or number else np.dtype(dtype)
    except Exception:  # noqa: BLE001 - numpy raises TypeError, ValueError or worse for odd objects
        resolved = None
    if resolved is None or resolved.name not in DTYPES:
        raise ScarceError(f"dtype must be one of {DTYPES}, got {show(dtype)}")
    return resolved


def standard_normal(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any = np.float64) -> np.ndarray:
    """An array of independent N(0, 1) draws of ``shape`` and ``dtype`` (float64 or float32).

    float64 is ``rng.standard_normal(shape)``; float32 is the vectorised Box-Muller transform of
    the module notes, from ``ceil(size / 2)`` 64-bit words of ``rng``'s bit generator.
    """
    if check_dtype(dtype) == np.float64:
        return rng.standard_normal(shape)
    return _box_muller32(rng, shape)


def _box_muller32(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    size = int(np.prod(shape, dtype=np.int64))
    pairs = (size + 1) // 2
    words = rng.bit_generator.random_raw(pairs).view(np.int64)
    # radius: u1 in (0, 1] from the top 40 bits (float32 keeps their magnitude, so the tail
    # reaches sqrt(80 log 2) rather than the 24-bit uniform's sqrt(48 log 2))
    radius = ((words >> _ANGLE_BITS) & _RADIUS_MASK).astype(np.float32)
    radius += np.float32(1.0)
    radius *= _RADIUS_UNIT
    np.log(radius, out=radius)
    radius *= np.float32(-2.0)
    np.sqrt(radius, out=radius)
    words &= _ANGLE_MASK
    angle = words.astype(np.float32)
    angle *= _ANGLE_UNIT
    out = np.empty(2 * pairs, dtype=np.float32)
    np.cos(angle, out=out[:pairs])
    out[:pairs] *= radius
    np.sin(angle, out=out[pairs:])
    out[pairs:] *= radius
    return out[:size].reshape(shape)
