"""MCMC kernels for sampling N(0, I) restricted to a level ``{score >= threshold}``."""

from scarce.errors import unknown_name_error
from scarce.kernels.adaptation import adapt_scale
from scarce.kernels.base import Kernel, KernelParams
from scarce.kernels.conditional import ConditionalSampling
from scarce.kernels.metropolis import ModifiedMetropolis

KERNELS: dict[str, type[Kernel]] = {"acs": ConditionalSampling, "mma": ModifiedMetropolis}


def make_kernel(name: str, **params: object) -> Kernel:
    """A kernel by registry name: ``"acs"`` (adaptive conditional sampling) or ``"mma"`` (modified Metropolis)."""
    if name not in KERNELS:
        raise unknown_name_error("kernel", name, KERNELS)
    return KERNELS[name](**params)  # type: ignore[arg-type]


__all__ = ["ConditionalSampling", "Kernel", "KernelParams", "ModifiedMetropolis", "adapt_scale", "make_kernel", "KERNELS"]
