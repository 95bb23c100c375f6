"""MCMC kernels for sampling N(0, I) restricted to a level of Subset Simulation."""

import inspect

from scarce.errors import ScarceError, unknown_name_error
from scarce.kernels.adaptation import adapt_scale
from scarce.kernels.base import Kernel, KernelParams
from scarce.kernels.conditional import ConditionalSampling
from scarce.kernels.metropolis import ModifiedMetropolis
from scarce.kernels.surface import ResponseSurfaceSampling

KERNELS: dict[str, type[Kernel]] = {"acs": ConditionalSampling, "mma": ModifiedMetropolis,
                                    "surface": ResponseSurfaceSampling}
"""Kernel classes by registry name: ``acs`` (adaptive conditional sampling), ``mma`` (modified Metropolis),
``surface`` (response-surface sampling)."""


def make_kernel(name: str, **params: object) -> Kernel:
    """A kernel by registry name: ``"acs"``, ``"mma"`` or ``"surface"`` (:data:`KERNELS`)."""
    if not isinstance(name, str) or name not in KERNELS:
        raise unknown_name_error("kernel", str(name), KERNELS)
    cls = KERNELS[name]
    allowed = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ScarceError(f"kernel {name!r} takes no parameter(s) {unknown}; allowed: {', '.join(allowed)}")
    return cls(**params)  # type: ignore[arg-type]


__all__ = ["ConditionalSampling", "Kernel", "KernelParams", "ModifiedMetropolis", "ResponseSurfaceSampling",
           "adapt_scale", "make_kernel", "KERNELS"]
