r"""Input perturbations written as maps from the engine's standard-normal latent space.

Every perturbation of a seed image ``x0`` (pixels in [0, 1]) is ``x = T(u)``,
``u ~ N(0, I_d)`` with ``d`` the number of pixels, so the Subset Simulation kernels only ever
see N(0, I) (DESIGN.md section 2, point 3):

* Gaussian:            :math:`x = \mathrm{clip}(x_0 + \sigma u, 0, 1)`;
* uniform L-infinity:  :math:`x = \mathrm{clip}(x_0 + \varepsilon (2\Phi(u) - 1), 0, 1)`,
  i.e. each pixel is shifted by an independent ``U(-eps, eps)`` (the set-up of Webb et al. 2019
  and Tit et al. 2021).

>>> import numpy as np
>>> noise = GaussianNoise(sigma=0.5)
>>> x = noise.apply(np.full(4, 0.5), np.array([[0.0, 1.0, -1.0, 10.0]]))
>>> x.tolist()
[[0.5, 1.0, 0.0, 1.0]]
>>> UniformNoise(eps=0.2).apply(np.full(2, 0.5), np.array([[0.0, 40.0]])).round(6).tolist()
[[0.5, 0.7]]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
from scipy.special import ndtr

from scarce.checks import check_in_interval
from scarce.errors import ScarceError, unknown_name_error

__all__ = ["GaussianNoise", "Noise", "UniformNoise", "make_noise", "NOISES"]


class Noise(Protocol):
    """A perturbation ``x = apply(x0, u)`` of a flat image ``x0`` by latent ``u ~ N(0, I)``."""

    name: str

    @property
    def scale(self) -> float: ...

    def apply(self, x0: np.ndarray, u: np.ndarray) -> np.ndarray: ...


def _check_pair(x0: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``x0`` flat, in ``u``'s precision (float32 latents give float32 images), and ``u`` checked."""
    u = np.asarray(u)
    dtype = u.dtype if u.dtype in (np.float32, np.float64) else np.float64
    x0 = np.asarray(x0, dtype=dtype).reshape(-1)
    if u.ndim != 2 or u.shape[1] != x0.size:
        raise ScarceError(
            f"u must have shape (n, {x0.size}) to perturb an image of {x0.size} pixels, got {u.shape}"
        )
    return x0, u


@dataclass(frozen=True)
class GaussianNoise:
    """Additive Gaussian noise of standard deviation ``sigma``, clipped to [0, 1]."""

    sigma: float
    name: str = "gaussian"

    def __post_init__(self) -> None:
        check_in_interval("sigma", self.sigma, 0.0, float("inf"), high_open=True)

    @property
    def scale(self) -> float:
        return float(self.sigma)

    def apply(self, x0: np.ndarray, u: np.ndarray) -> np.ndarray:
        x0, u = _check_pair(x0, u)
        x = u * float(self.sigma)  # in place from here: one array, the same values as clip(x0 + sigma*u)
        x += x0
        return np.clip(x, 0.0, 1.0, out=x)


@dataclass(frozen=True)
class UniformNoise:
    """Independent ``U(-eps, eps)`` shifts per pixel (L-infinity ball), clipped to [0, 1]."""

    eps: float
    name: str = "uniform"

    def __post_init__(self) -> None:
        check_in_interval("eps", self.eps, 0.0, float("inf"), high_open=True)

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
        return np.clip(x, 0.0, 1.0, out=x)


NOISES = {"gaussian": GaussianNoise, "uniform": UniformNoise}


def make_noise(name: str, scale: float) -> GaussianNoise | UniformNoise:
    """Build a perturbation by name (``"gaussian"``: sigma; ``"uniform"``: eps)."""
    if name not in NOISES:
        raise unknown_name_error("noise", name, NOISES)
    return NOISES[name](scale)
