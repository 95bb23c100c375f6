r"""Component-wise modified Metropolis (Au and Beck 2001).

For each component independently, a random-walk step ``xi_k = u_k + w_k`` is
accepted with probability ``min(1, phi(xi_k) / phi(u_k))`` (a one-dimensional
Metropolis step for the standard normal); the resulting candidate is
reversible with respect to N(0, I), and the chain driver accepts it only when it
stays in the level.  In high dimension the candidate almost surely differs from
the current state in many components, which is why acceptance falls with the
dimension; adaptive conditional sampling does not have this problem.
"""

from __future__ import annotations

import numpy as np

from scarce.checks import check_choice, check_flag, check_in_interval
from scarce.kernels.base import Kernel, KernelParams, check_initial_scale

_PROPOSALS = ("uniform", "normal")


class ModifiedMetropolis(Kernel):
    """Au-Beck component-wise modified Metropolis.

    Parameters
    ----------
    initial_scale : float
        Scale of the one-dimensional step at the first level: half-width of the uniform step
        (``proposal="uniform"``), or standard deviation of the normal step.  Au and Beck use 1.
        (The same name as :class:`ConditionalSampling`'s; ``spread`` means the per-component
        spread ``s_k`` of :class:`KernelParams` everywhere.)
    proposal : {"uniform", "normal"}
        Distribution of the symmetric one-dimensional step.
    adapt : bool
        Adapt the scale toward ``target_acceptance`` between MCMC steps (off in the
        classic algorithm).
    target_acceptance : float
        Used only when ``adapt``.
    """

    name = "mma"

    def __init__(
        self,
        initial_scale: float = 1.0,
        proposal: str = "uniform",
        adapt: bool = False,
        target_acceptance: float = 0.3,
    ) -> None:
        self.proposal = check_choice("proposal", proposal, _PROPOSALS)
        self.initial_scale = check_initial_scale("initial_scale", initial_scale)
        self.adapt = check_flag("adapt", adapt)
        self.target_acceptance = check_in_interval("target_acceptance", target_acceptance, 0.0, 1.0, high_open=True)

    def check_settings(self) -> None:
        super().check_settings()
        check_choice(f"{type(self).__name__}.proposal", self.proposal, _PROPOSALS)

    def propose(self, u: np.ndarray, params: KernelParams, rng: np.random.Generator) -> np.ndarray:
        if self.proposal == "uniform":
            step = rng.uniform(-params.scale, params.scale, size=u.shape)
        else:
            step = params.scale * rng.standard_normal(u.shape)
        xi = u + step
        # log(phi(xi) / phi(u)) = (u^2 - xi^2) / 2
        log_ratio = 0.5 * (u * u - xi * xi)
        keep = np.log(rng.random(u.shape)) < log_ratio
        return np.where(keep, xi, u).astype(u.dtype, copy=False)
