"""Kernels: names and parameters.  The kernel contract (N(0, I) restricted to a level stays
invariant; proposals are reversible for N(0, I); kernels are stateless) runs over every kernel in
tests/contract/test_contracts.py through :func:`scarce.testing.check_kernel`.
"""

import numpy as np
import pytest
from scipy import stats

from scarce.kernels import ConditionalSampling, ModifiedMetropolis, make_kernel


def test_make_kernel_did_you_mean():
    with pytest.raises(ValueError, match="Did you mean 'acs'"):
        make_kernel("acss")


@pytest.mark.parametrize(
    "factory, match",
    [
        (lambda: ConditionalSampling(spread="wide"), "spread"),
        (lambda: ConditionalSampling(target_acceptance=1.5), "target_acceptance"),
        (lambda: ModifiedMetropolis(proposal="cauchy"), "proposal"),
        (lambda: ModifiedMetropolis(initial_scale=-1), "initial_scale"),
    ],
)
def test_kernel_parameters_are_validated(factory, match):
    with pytest.raises(ValueError, match=match):
        factory()


class _Prior(ConditionalSampling):
    """An independence sampler whose proposal is N(0, I) itself (``w = phi / phi = 1``), drawn ahead.

    Its step-by-step proposal is never used: a chain that called it would fail the test.
    """

    def propose(self, u, params, rng):  # type: ignore[no-untyped-def]
        raise AssertionError("candidates drawn ahead: no step-by-step proposal")

    def draws_ahead(self, params, n_chains, n_steps, dim, dtype, rng):  # type: ignore[no-untyped-def]
        return rng.standard_normal((n_steps, n_chains, dim)).astype(dtype), np.zeros((n_steps, n_chains))

    def state_log_weights(self, params, u):  # type: ignore[no-untyped-def]
        return np.zeros(u.shape[0])


@pytest.mark.parametrize("block_values", [None, 1, 7 * 3])
def test_a_users_independence_sampler_drawn_ahead_keeps_the_level(block_values, monkeypatch):
    """Chains of the prior as an independence proposal, drawn in one block, a step a block, or
    seven chains' worth a block, keep N(0, I) restricted to ``{u0 >= 0.5}`` and make one batched
    model call a step."""
    from scarce.estimators.chains import run_chains

    if block_values is not None:
        monkeypatch.setattr("scarce.estimators.chains.DRAW_AHEAD_VALUES", block_values)
    rng = np.random.default_rng(2)
    seeds = rng.standard_normal((20_000, 3))
    seeds = seeds[seeds[:, 0] >= 0.5][:2000]
    calls = []

    def evaluate(x, step):
        calls.append(len(x))
        return x[:, 0]

    population, chain_stats = run_chains(_Prior(), seeds, seeds[:, 0], 0.5, 2000 * 8, 1.0, evaluate, rng)
    last = population.u[:, -1]
    assert len(calls) == 7 and max(calls) <= 2000 and chain_stats.n_queries == sum(calls)
    assert 0.25 < chain_stats.acceptance_rate < 0.37  # P(u0 >= 0.5) = 0.31: each step's candidate is a fresh draw
    assert stats.kstest(last[:, 0], stats.truncnorm(0.5, np.inf).cdf).pvalue > 1e-3
    assert stats.kstest(last[:, 1], stats.norm.cdf).pvalue > 1e-3
    moved = np.mean(population.u[:, -1, 0] != population.u[:, 0, 0])
    assert moved > 0.9  # 1 - 0.69^7 of the chains left their seed
