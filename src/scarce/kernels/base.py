"""The kernel protocol: a proposal that is reversible with respect to N(0, I), or one with its Hastings factor.

Every input distribution lives in a standard-normal latent space (documentation,
Concepts: "The estimand"), so a kernel only has to know N(0, I).  A kernel
proposes a candidate ``v`` from the current state ``u`` with a proposal that
satisfies detailed balance for N(0, I); the chain driver then accepts ``v``
exactly when it lies in the current level (:func:`scarce.levels.in_level`).  The
composition leaves N(0, I) restricted to the level invariant.

A kernel whose proposal ``q`` is not reversible with respect to N(0, I) returns, from
:meth:`Kernel.propose_weighted`, the log of its Metropolis-Hastings factor
``log [phi(v) q(u | v) / (phi(u) q(v | u))]`` for each candidate; the driver then accepts a
candidate when it lies in the level and a uniform draw ``U`` has ``log U`` below that factor,
which is Metropolis-Hastings for N(0, I) restricted to the level.  Such a kernel may fit its
proposal to the points of the level the seeds were taken from (:meth:`Kernel.fit`).

A kernel is stateless; its tuning lives in :class:`KernelParams`, set once per
level from the seeds (:meth:`Kernel.tune`) and adapted between MCMC steps by the
kernel itself (:meth:`Kernel.adapted`; by default :func:`scarce.kernels.adaptation.adapt_scale`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np


#: Largest ``initial_scale`` a kernel takes (its constructor and :meth:`Kernel.check_settings` check it).
MAX_INITIAL_SCALE = 1e6
#: Smallest ``initial_scale`` a kernel takes: a first step of a ten-thousandth of the level's spread
#: leaves the chains where they started, and the adaptation needs more steps than a level has to
#: recover, so the run's samples would be copies of their seeds under a CoV that cannot see it.
MIN_INITIAL_SCALE = 1e-4


def check_initial_scale(name: str, value: object) -> float:
    """``value`` as a float in ``[MIN_INITIAL_SCALE, MAX_INITIAL_SCALE]``, or an error naming ``name`` and why."""
    from scarce.checks import check_in_interval
    from scarce.errors import ScarceError

    try:
        return check_in_interval(name, value, MIN_INITIAL_SCALE, MAX_INITIAL_SCALE, low_open=False)
    except ScarceError as error:
        small = isinstance(value, (int, float)) and not isinstance(value, bool) and value < MIN_INITIAL_SCALE
        if not small:  # too large, NaN or not a number: the range says it all
            raise
        raise ScarceError(f"{error} (a smaller first step leaves the chains at their seeds, and the run's CoV "
                          "cannot see it)") from None


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

    def fit(self, params: KernelParams, seeds: np.ndarray, u: np.ndarray, score: np.ndarray,
            threshold: float) -> KernelParams:
        """Parameters fitted to a sample of the level the seeds were taken from; the default keeps ``params``.

        ``seeds`` (shape ``(n_chains, d)``) are the chains' first states, in the order of the rows
        :meth:`propose_weighted` will receive (the running chains are always a leading slice of
        them); ``u`` (shape ``(n, d)``) and ``score`` (effective scores, ``+inf`` for failures) are
        the points of the previous level, the seeds among them, and ``threshold`` is the boundary of
        the level the chains move in. The drivers call it once per level, after :meth:`tune`,
        through :meth:`refit`; a kernel that learns nothing from the points need not override it.
        Pure: ``params`` is not changed.
        """
        return params

    def refit(self, previous: KernelParams | None, params: KernelParams, seeds: np.ndarray, u: np.ndarray,
              score: np.ndarray, threshold: float) -> KernelParams:
        """:meth:`fit`, given the parameters the chains of the previous level ended with (None: none fitted).

        What the drivers call: a kernel whose fit can carry over from one level to the next
        (:class:`~scarce.kernels.ResponseSurfaceSampling` reuses a surface while it still orders
        the new points) overrides this; the default is :meth:`fit`, ignoring ``previous``.
        ``previous`` comes from the same run only, so a run stays a function of its seed.
        """
        return self.fit(params, seeds, u, score, threshold)

    def can_fit(self, n_points: int, dim: int) -> bool:
        """Whether :meth:`fit` could learn from ``n_points`` points in ``dim`` dimensions.

        Drivers gather (and copy) a level's points for :meth:`fit` only when this holds; a kernel
        that needs a minimum of points per dimension says so here, so that a level too small for
        it costs nothing. The default: whether the kernel overrides :meth:`fit` at all.
        """
        return type(self).fit is not Kernel.fit

    def propose_weighted(
        self, u: np.ndarray, params: KernelParams, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Candidates and the log of their Metropolis-Hastings factors (None: reversible, no factor).

        The default is :meth:`propose` with no factor, so a reversible kernel's chains draw no
        extra uniform numbers.  A factor of ``-inf`` rejects its candidate without a model call.
        """
        return self.propose(u, params, rng), None

    def draws_ahead(self, params: KernelParams, n_chains: int, n_steps: int, dim: int, dtype: np.dtype,
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray] | None:
        """A level's candidates drawn before its steps, when they do not depend on the states (None: step by step).

        An independence sampler draws its candidate ``v`` from a proposal ``q`` that ignores the
        current state ``u``; its Metropolis-Hastings factor is then ``w(v) / w(u)`` with
        ``w = phi / q`` (Tierney 1994). Such a kernel may return ``n_steps`` candidates for each of
        ``n_chains`` chains at once, shape ``(n_steps, n_chains, dim)`` in ``dtype``, with
        ``log w`` of each, shape ``(n_steps, n_chains)`` (``-inf``: never accepted); the driver then
        asks :meth:`state_log_weights` for the states it starts from and keeps each chain's
        ``log w`` as it moves. The steps are run as before, one batched model call each, so the
        chains have the law they would have step by step (the random numbers come in another
        order); only the per-step work of the proposal is done in one pass over a block of steps
        (:data:`scarce.estimators.chains.DRAW_AHEAD_VALUES`). The default, None, proposes step by step
        (:meth:`propose_weighted`). The candidates are drawn with the level's first parameters.
        """
        return None

    def state_log_weights(self, params: KernelParams, u: np.ndarray) -> np.ndarray:
        """``log w`` of the states ``u`` (rows: chains) for :meth:`draws_ahead`; ``-inf`` (or NaN) is never moved."""
        from scarce.errors import ScarceError

        raise ScarceError(f"{type(self).__name__}.draws_ahead returned candidates, so {type(self).__name__} must "
                          f"override state_log_weights (log w of the states the chains start from)")

    def check_settings(self) -> None:
        """Check the settings again, as the estimators do before a run: an attribute set after construction counts.

        A :class:`~scarce.errors.ScarceError` names the attribute, its value and what is allowed:
        ``initial_scale`` in [:data:`MIN_INITIAL_SCALE`, :data:`MAX_INITIAL_SCALE`], ``target_acceptance`` in (0, 1), ``adapt`` and
        ``always_moves`` True or False. A kernel with settings of its own extends this.
        """
        from scarce.checks import check_flag, check_in_interval

        name = type(self).__name__
        check_initial_scale(f"{name}.initial_scale", self.initial_scale)
        check_in_interval(f"{name}.target_acceptance", self.target_acceptance, 0.0, 1.0, high_open=True)
        check_flag(f"{name}.adapt", self.adapt)
        check_flag(f"{name}.always_moves", self.always_moves)

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in sorted(vars(self).items()) if not k.startswith("_"))
        return f"{type(self).__name__}({params})"
