"""Contract: every kernel leaves N(0, I) restricted to a level invariant.

Chains start from exact samples of the restricted Gaussian; after the MCMC
steps, the last state of each chain (independent across chains) must still
follow it.  A Kolmogorov-Smirnov test checks the distribution of the score and
of a coordinate orthogonal to it.  Seeded, so it never flakes; a meta-test shows
the check rejects a kernel that is not reversible.
"""

import numpy as np
import pytest
from scipy import stats

from scarce.estimators.chains import run_chains
from scarce.kernels import KERNELS, ConditionalSampling, Kernel, ModifiedMetropolis, make_kernel

KERNEL_VARIANTS = {
    **{name: cls() for name, cls in KERNELS.items()},
    "acs_seed_spread": ConditionalSampling(spread="seeds"),
    "acs_fixed": ConditionalSampling(adapt=False),
    "mma_normal": ModifiedMetropolis(proposal="normal"),
    "mma_adaptive": ModifiedMetropolis(adapt=True),
}

DIM, BETA, N_CHAINS, STEPS = 10, 2.0, 1500, 6
DIRECTION = np.ones(DIM) / np.sqrt(DIM)


def exact_halfspace(n, rng):
    """Exact draws from N(0, I) restricted to {u . DIRECTION >= BETA}."""
    u = rng.standard_normal((n, DIM))
    t = stats.truncnorm.rvs(BETA, np.inf, size=n, random_state=rng)
    return u - np.outer(u @ DIRECTION, DIRECTION) + np.outer(t, DIRECTION)


def evaluate(u, step):
    return u @ DIRECTION


def run_last_states(kernel, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    seeds = exact_halfspace(N_CHAINS, rng).astype(dtype)
    population, stats_ = run_chains(
        kernel, seeds, evaluate(seeds, 0), BETA, N_CHAINS * STEPS, kernel.initial_scale, evaluate, rng
    )
    return population.u[:, -1], stats_


def invariance_pvalues(kernel, seed=0, dtype=np.float64):
    last, stats_ = run_last_states(kernel, seed, dtype)
    assert last.dtype == dtype, "the chains keep the latent precision"
    last = last.astype(np.float64)
    along = last @ DIRECTION
    # a unit vector orthogonal to DIRECTION
    ortho = np.zeros(DIM)
    ortho[0], ortho[1] = 1 / np.sqrt(2), -1 / np.sqrt(2)
    p_along = stats.kstest(along, stats.truncnorm(BETA, np.inf).cdf).pvalue
    p_ortho = stats.kstest(last @ ortho, stats.norm.cdf).pvalue
    return p_along, p_ortho, stats_


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(KERNEL_VARIANTS))
def test_kernel_leaves_restricted_gaussian_invariant(name, dtype):
    kernel = KERNEL_VARIANTS[name]
    p_along, p_ortho, stats_ = invariance_pvalues(kernel, dtype=dtype)
    assert stats_.acceptance_rate > 0.05, "the chains must actually move for the check to mean anything"
    assert p_along > 1e-3 and p_ortho > 1e-3, (p_along, p_ortho)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(KERNEL_VARIANTS))
def test_proposal_alone_is_reversible_for_standard_normal(name, dtype):
    """Without the domain, a proposal step must map N(0, I) samples to N(0, I)."""
    kernel = KERNEL_VARIANTS[name]
    rng = np.random.default_rng(1)
    u = rng.standard_normal((4000, DIM)).astype(dtype)
    params = kernel.tune(u[:200], kernel.initial_scale)
    v = kernel.propose(u, params, rng)
    assert v.dtype == dtype
    v = v.astype(np.float64)
    assert stats.kstest(v[:, 0], stats.norm.cdf).pvalue > 1e-3
    assert stats.kstest(v @ DIRECTION, stats.norm.cdf).pvalue > 1e-3


class _DriftingKernel(Kernel):
    """Not reversible: drifts every proposal outward."""

    name = "drift"
    initial_scale = 0.5
    adapt = False

    def propose(self, u, params, rng):
        return u + 0.3 * DIRECTION + 0.3 * rng.standard_normal(u.shape)


def test_invariance_check_rejects_a_wrong_kernel():
    p_along, _, _ = invariance_pvalues(_DriftingKernel())
    assert p_along < 1e-6


def test_make_kernel_did_you_mean():
    with pytest.raises(ValueError, match="Did you mean 'acs'"):
        make_kernel("acss")


@pytest.mark.parametrize(
    "factory, match",
    [
        (lambda: ConditionalSampling(spread="wide"), "spread"),
        (lambda: ConditionalSampling(target_acceptance=1.5), "target_acceptance"),
        (lambda: ModifiedMetropolis(proposal="cauchy"), "proposal"),
        (lambda: ModifiedMetropolis(spread=-1), "spread"),
    ],
)
def test_kernel_parameters_are_validated(factory, match):
    with pytest.raises(ValueError, match=match):
        factory()
