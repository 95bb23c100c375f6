r"""Input perturbations written as maps from the engine's standard-normal latent space.

Every perturbation of a seed input ``x0`` is ``x = T(u)``, ``u ~ N(0, I_d)``, so the Subset
Simulation kernels only ever see N(0, I) (documentation, Concepts: "The estimand"). With ``[a, b]`` the
value range inputs are clipped to (``[0, 1]`` for images by default; ``low=-inf, high=inf``
for none) and ``d`` the number of input values:

* Gaussian:            :math:`x = \mathrm{clip}(x_0 + \sigma u, a, b)`;
* uniform L-infinity:  :math:`x = \mathrm{clip}(x_0 + \varepsilon (2\Phi(u) - 1), a, b)`,
  i.e. each value is shifted by an independent ``U(-eps, eps)`` (the set-up of Webb et al. 2019
  and Tit et al. 2021);
* a user transform ``x = f(x0, u)`` (:class:`CustomNoise`) with its own latent dimension, e.g.
  one brightness shift for the whole image (``d = 1``).

>>> import numpy as np
>>> noise = GaussianNoise(sigma=0.5)
>>> x = noise.apply(np.full(4, 0.5), np.array([[0.0, 1.0, -1.0, 10.0]]))
>>> x.tolist()
[[0.5, 1.0, 0.0, 1.0]]
>>> UniformNoise(eps=0.2).apply(np.full(2, 0.5), np.array([[0.0, 40.0]])).round(6).tolist()
[[0.5, 0.7]]
>>> GaussianNoise(sigma=0.5, low=-1.0, high=1.0).apply(np.zeros(2), np.array([[-4.0, 1.0]])).tolist()
[[-1.0, 0.5]]
>>> shift = CustomNoise(lambda x0, u: x0 + 0.1 * u[:, :1, None], shape=(1, 2), latent_dim=1)
>>> shift.apply(np.zeros(2), np.array([[2.0]])).tolist()
[[0.2, 0.2]]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import math

import numpy as np
from scipy.special import ndtr

from scarce.checks import as_real_array, check_in_interval, check_positive_int, check_shape
from scarce.errors import ScarceError, unknown_name_error

__all__ = ["CustomNoise", "GaussianNoise", "Noise", "UniformNoise", "make_noise", "NOISES"]


class Noise(Protocol):
    """A perturbation ``x = apply(x0, u)`` of a flat input ``x0`` by latent ``u ~ N(0, I)``.

    ``low`` and ``high`` bound the values it produces (a seed outside them is refused); a noise
    with a ``latent_dim`` attribute draws ``u`` of that width instead of ``x0.size``.
    """

    name: str

    @property
    def scale(self) -> float: ...

    def apply(self, x0: np.ndarray, u: np.ndarray) -> np.ndarray: ...


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _check_pair(x0: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``x0`` flat, in ``u``'s precision (float32 latents give float32 images), and ``u`` checked."""
    u = np.asarray(u)
    dtype = u.dtype if u.dtype in _FLOATS else np.float64
    x0 = np.asarray(x0, dtype=dtype).reshape(-1)
    if u.ndim != 2 or u.shape[1] != x0.size:
        raise ScarceError(
            f"u must have shape (n, {x0.size}) to perturb an image of {x0.size} pixels, got {u.shape}"
        )
    return x0, u


def _check_range(low: float, high: float) -> None:
    """``low < high``, neither NaN (either may be infinite: no clipping on that side)."""
    if isinstance(low, bool) or isinstance(high, bool) or not isinstance(low, (int, float, np.floating, np.integer)) \
            or not isinstance(high, (int, float, np.floating, np.integer)) or math.isnan(low) or math.isnan(high) \
            or not low < high:
        raise ScarceError(f"the value range (low, high) must be two numbers with low < high (either may be "
                          f"infinite: no clipping on that side), got low={low!r}, high={high!r}")


def _clip(x: np.ndarray, low: float, high: float) -> np.ndarray:
    """``clip(x, low, high)`` in place, as ``min(max(x, low), high)`` with the ufuncs themselves
    (the values of :func:`numpy.clip` up to the sign of a zero at a bound, without its dispatch);
    an infinite side is not clipped."""
    if not math.isinf(low):
        np.maximum(x, low, out=x)
    if not math.isinf(high):
        np.minimum(x, high, out=x)
    return x


@dataclass(frozen=True)
class GaussianNoise:
    """Additive Gaussian noise of standard deviation ``sigma``, clipped to ``[low, high]``."""

    sigma: float
    name: str = "gaussian"
    low: float = 0.0
    high: float = 1.0

    def __post_init__(self) -> None:
        check_in_interval("sigma", self.sigma, 0.0, float("inf"), high_open=True)
        _check_range(self.low, self.high)

    @property
    def scale(self) -> float:
        return float(self.sigma)

    def apply(self, x0: np.ndarray, u: np.ndarray) -> np.ndarray:
        x0, u = _check_pair(x0, u)
        x = u * float(self.sigma)  # in place from here: one array, the same values as clip(x0 + sigma*u)
        x += x0
        return _clip(x, self.low, self.high)


@dataclass(frozen=True)
class UniformNoise:
    """Independent ``U(-eps, eps)`` shifts per value (L-infinity ball), clipped to ``[low, high]``."""

    eps: float
    name: str = "uniform"
    low: float = 0.0
    high: float = 1.0

    def __post_init__(self) -> None:
        check_in_interval("eps", self.eps, 0.0, float("inf"), high_open=True)
        _check_range(self.low, self.high)

    @property
    def scale(self) -> float:
        return float(self.eps)

    def apply(self, x0: np.ndarray, u: np.ndarray) -> np.ndarray:
        x0, u = _check_pair(x0, u)
        x = ndtr(u)  # in place from here: the same values as clip(x0 + eps*(2*ndtr(u) - 1))
        x *= 2.0
        x -= 1.0
        x *= float(self.eps)
        x += x0
        return _clip(x, self.low, self.high)


@dataclass(frozen=True)
class CustomNoise:
    """A user transform ``x = fn(x0, u)`` from latent ``u ~ N(0, I_latent_dim)``.

    ``fn`` receives the seed in its own ``shape`` and ``u`` of shape ``(n, latent_dim)``, and
    returns ``n`` inputs of that shape (or flat); the engine sees only ``u``, so any
    perturbation written as a map from standard normals works (brightness, blur strength,
    a low-dimensional nuisance). ``low``/``high`` only check the seed; ``fn`` clips if it must.
    """

    fn: Callable[[np.ndarray, np.ndarray], Any]
    shape: tuple[int, ...]
    latent_dim: int
    name: str = "custom"
    low: float = -math.inf
    high: float = math.inf

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise ScarceError(f"noise must be 'gaussian', 'uniform' or a callable fn(x0, u), got {self.fn!r}")
        check_positive_int("latent_dim", self.latent_dim)
        object.__setattr__(self, "shape", _check_shape(self.shape))
        _check_range(self.low, self.high)

    @property
    def scale(self) -> float:
        return math.nan

    def apply(self, x0: np.ndarray, u: np.ndarray) -> np.ndarray:
        u = np.asarray(u, dtype=np.float64)
        if u.ndim != 2 or u.shape[1] != self.latent_dim:
            raise ScarceError(f"u must have shape (n, {self.latent_dim}) for latent_dim={self.latent_dim}, got {u.shape}")
        x0 = np.array(x0, dtype=np.float64)  # a copy: fn may edit its seed without editing the caller's
        if x0.size != math.prod(self.shape):
            raise ScarceError(f"the seed has {x0.size} values and the noise's shape {self.shape} holds "
                              f"{math.prod(self.shape)}: shape must be the shape of x0")
        n = u.shape[0]
        x = as_real_array(self.fn(x0.reshape(self.shape), u), "the noise function's output",
                          f"{n} inputs, an array of shape {(n, *self.shape)} or ({n}, {x0.size})")
        if x.shape not in ((n, *self.shape), (n, x0.size)):
            raise ScarceError(f"the noise function returned shape {x.shape} for {n} latent draws; expected "
                              f"{(n, *self.shape)} or ({n}, {x0.size}): {n} inputs of x0's shape, or flat")
        return x.reshape(n, -1)


def _check_shape(shape: Any) -> tuple[int, ...]:
    """``shape`` as a tuple of positive ints (a single int as one axis), or a ScarceError naming it."""
    return check_shape("shape", shape, "the shape of x0, a non-empty tuple of positive integers such as (3, 32, 32)",
                       one_int=True)


NOISES = {"gaussian": GaussianNoise, "uniform": UniformNoise}


def make_noise(name: str, scale: float, low: float = 0.0, high: float = 1.0) -> GaussianNoise | UniformNoise:
    """Build a perturbation by name (``"gaussian"``: sigma; ``"uniform"``: eps), clipped to ``[low, high]``."""
    if name not in NOISES:
        raise unknown_name_error("noise", name, NOISES)
    return NOISES[name](scale, low=low, high=high)
