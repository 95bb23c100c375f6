"""The kernel contract, as checks a user runs on their own MCMC kernel.

A kernel (:class:`scarce.kernels.Kernel`) proposes from a move that is reversible with respect
to N(0, I); the chain driver accepts a candidate exactly when it lies in the level.  The two
together must leave N(0, I) restricted to the level invariant, which is what makes Subset
Simulation's level fractions unbiased.  The checks start 1,500 chains from exact draws of
N(0, I) restricted to a half-space in ten dimensions (a kernel that fits its proposal sees
exact draws of a wider half-space first), run six steps and compare the last
states with that distribution (Kolmogorov-Smirnov along the half-space's normal and across
it); seeded, so a check never flakes.  A kernel that drifts its proposals fails them.

>>> from scarce.kernels import ConditionalSampling
>>> from scarce.testing import check_kernel
>>> check_kernel(ConditionalSampling())
[]
"""

from __future__ import annotations

import numpy as np

from scarce.testing._base import Check, rule, run_checks

__all__ = ["check_kernel", "kernel_checks"]

DIM, BETA, N_CHAINS, STEPS = 10, 2.0, 1500, 6
DIRECTION = np.ones(DIM) / np.sqrt(DIM)
#: A p-value below this fails a distribution check (seeded: the same kernel gives the same p).
MIN_PVALUE = 1e-3


def exact_halfspace(n: int, rng: np.random.Generator, beta: float = BETA) -> np.ndarray:
    """Exact draws from N(0, I) restricted to ``{u . DIRECTION >= beta}`` (shape ``(n, DIM)``)."""
    from scipy import stats

    u = rng.standard_normal((n, DIM))
    t = stats.truncnorm.rvs(beta, np.inf, size=n, random_state=rng)
    return u - np.outer(u @ DIRECTION, DIRECTION) + np.outer(t, DIRECTION)


def _along(u: np.ndarray, step: int) -> np.ndarray:
    return u @ DIRECTION


def last_states(kernel, seed: int = 0, dtype: type = np.float64):  # type: ignore[no-untyped-def]
    """Last state of each of ``N_CHAINS`` chains run ``STEPS`` steps in the half-space, and the chain statistics."""
    from scarce.estimators.chains import run_chains

    rng = np.random.default_rng(seed)
    seeds = exact_halfspace(N_CHAINS, rng).astype(dtype)
    # the wider level the seeds came from, the seeds among its points, for a kernel that fits its
    # proposal (Kernel.fit)
    wider = np.concatenate([exact_halfspace(N_CHAINS, np.random.default_rng([seed, 1]), BETA - 1.0).astype(dtype),
                            seeds])
    population, stats_ = run_chains(kernel, seeds, _along(seeds, 0), BETA, N_CHAINS * STEPS, kernel.initial_scale,
                                    _along, rng, sample=(wider, _along(wider, 0)))
    return population.u[:, -1], stats_


def invariance_pvalues(kernel, seed: int = 0, dtype: type = np.float64) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    """KS p-values of the last states along and across the half-space's normal, and the acceptance rate."""
    from scipy import stats

    last, stats_ = last_states(kernel, seed, dtype)
    assert last.dtype == dtype, f"the chains changed the latent precision from {np.dtype(dtype)} to {last.dtype}"
    last = last.astype(np.float64)
    ortho = np.zeros(DIM)
    ortho[0], ortho[1] = 1 / np.sqrt(2), -1 / np.sqrt(2)
    p_along = stats.kstest(last @ DIRECTION, stats.truncnorm(BETA, np.inf).cdf).pvalue
    p_across = stats.kstest(last @ ortho, stats.norm.cdf).pvalue
    return float(p_along), float(p_across), float(stats_.acceptance_rate)


@rule("Chains started in a level keep N(0, I) restricted to it, in float64 and float32, and they move.")
def check_restricted_gaussian_invariant(kernel) -> None:  # type: ignore[no-untyped-def]
    for dtype in (np.float64, np.float32):
        p_along, p_across, acceptance = invariance_pvalues(kernel, dtype=dtype)
        assert acceptance > 0.05, f"acceptance {acceptance:.3f} ({np.dtype(dtype)}): the chains barely move"
        assert min(p_along, p_across) > MIN_PVALUE, (
            f"last states do not follow the restricted Gaussian ({np.dtype(dtype)}): KS p = {p_along:.2e} along "
            f"the level's normal, {p_across:.2e} across it")


@rule("Without a level, one proposal maps N(0, I) samples to N(0, I) samples of the same dtype.")
def check_proposal_keeps_standard_normal(kernel) -> None:  # type: ignore[no-untyped-def]
    from scipy import stats

    for dtype in (np.float64, np.float32):
        rng = np.random.default_rng(1)
        u = rng.standard_normal((4000, DIM)).astype(dtype)
        v = kernel.propose(u, kernel.tune(u[:200], kernel.initial_scale), rng)
        assert v.shape == u.shape and v.dtype == dtype, f"propose returned {v.dtype} {v.shape} for {np.dtype(dtype)} {u.shape}"
        v = v.astype(np.float64)
        for name, x in (("a coordinate", v[:, 0]), ("a diagonal direction", v @ DIRECTION)):
            p = stats.kstest(x, stats.norm.cdf).pvalue
            assert p > MIN_PVALUE, f"proposals are not N(0, I) along {name} ({np.dtype(dtype)}): KS p = {p:.2e}"


@rule("A kernel is stateless: the same generator state gives the same proposals, and u is not modified.")
def check_stateless(kernel) -> None:  # type: ignore[no-untyped-def]
    u = np.random.default_rng(2).standard_normal((50, DIM))
    params = kernel.tune(u, kernel.initial_scale)
    before = u.copy()
    a = kernel.propose(u, params, np.random.default_rng(3))
    np.testing.assert_array_equal(u, before, err_msg="propose modified its input states")
    b = kernel.propose(u, params, np.random.default_rng(3))
    np.testing.assert_array_equal(a, b, err_msg="the same generator state gave different proposals")


def kernel_checks(kernel) -> list[Check]:  # type: ignore[no-untyped-def]
    """The kernel contract's checks, each ``check(kernel)``; for ``pytest.mark.parametrize``."""
    return [check_proposal_keeps_standard_normal, check_stateless, check_restricted_gaussian_invariant]


def check_kernel(kernel) -> list[str]:  # type: ignore[no-untyped-def]
    """Run the kernel contract; raise the first :class:`ContractViolation`; return the rules skipped (none)."""
    return run_checks(kernel, kernel_checks(kernel))
