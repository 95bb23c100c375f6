"""The kernel protocol: a proposal that is reversible with respect to N(0, I).

Every input distribution lives in a standard-normal latent space (documentation,
Concepts: "The estimand"), so a kernel only has to know N(0, I).  A kernel
proposes a candidate ``v`` from the current state ``u`` with a proposal that
satisfies detailed balance for N(0, I); the chain driver then accepts ``v``
exactly when it lies in the current level (:func:`scarce.levels.in_level`).  The
composition leaves N(0, I) restricted to the level invariant.

A kernel is stateless; its tuning lives in :class:`KernelParams`, set once per
level from the seeds (:meth:`Kernel.tune`) and adapted between MCMC steps by the
kernel itself (:meth:`Kernel.adapted`; by default :func:`scarce.kernels.adaptation.adapt_scale`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class KernelParams:
    """Tuning of a kernel for one level.

    Attributes
    ----------
    scale : float
        Global scale adapted toward the target acceptance (aCS ``lambda``;
        Metropolis spread multiplier).
    spread : ndarray, shape (d,)
        Per-component spread of the seeds (aCS) or ones.
    """

    scale: float
    spread: np.ndarray


class Kernel(ABC):
    """An MCMC move in standard-normal space.

    Subclasses implement :meth:`propose`; they may override :meth:`tune`.

    Attributes
    ----------
    initial_scale : float
        Scale at the first level.
    target_acceptance : float
        Acceptance rate the scale is adapted toward.
    adapt : bool
        Whether the scale is adapted between MCMC steps.
    always_moves : bool
        True when a candidate differs from its current state almost surely (aCS), so the chain
        driver need not look for unchanged candidates before evaluating. False (the safe
        default) for kernels that can return the current state (modified Metropolis).
    """

    name: str = "kernel"
    initial_scale: float = 1.0
    target_acceptance: float = 0.44
    adapt: bool = True
    always_moves: bool = False

    def tune(self, seeds: np.ndarray, scale: float) -> KernelParams:
        """Parameters for a level whose chains start at ``seeds`` (shape ``(n_seeds, d)``)."""
        return KernelParams(scale=scale, spread=np.ones(seeds.shape[1]))

    def adapted(self, params: KernelParams, acceptance: float, step: int) -> KernelParams:
        """The parameters for the next MCMC step, given the acceptance rate of this one.

        The default moves the scale toward :attr:`target_acceptance` by
        :func:`scarce.kernels.adaptation.adapt_scale` when :attr:`adapt` is set, and keeps it
        otherwise; a kernel with its own rule overrides this.  Pure: ``params`` is not changed.
        """
        if not self.adapt:
            return params
        from dataclasses import replace

        from scarce.kernels.adaptation import adapt_scale

        return replace(params, scale=adapt_scale(params.scale, acceptance, self.target_acceptance, step))

    @abstractmethod
    def propose(self, u: np.ndarray, params: KernelParams, rng: np.random.Generator) -> np.ndarray:
        """Candidates ``v`` (shape of ``u``) from a proposal reversible with respect to N(0, I)."""

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in sorted(vars(self).items()) if not k.startswith("_"))
        return f"{type(self).__name__}({params})"
