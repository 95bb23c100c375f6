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
        # a first step of 1e-300 was taken: the chains stayed at their seeds and the run reported an
        # estimate a fifth of the truth with no flag
        (lambda: ConditionalSampling(initial_scale=1e-300), r"initial_scale must be in \[0.0001, .*leaves the chains"),
        (lambda: ModifiedMetropolis(initial_scale=5e-5), r"initial_scale must be in \[0.0001"),
    ],
)
def test_kernel_parameters_are_validated(factory, match):
    with pytest.raises(ValueError, match=match):
        factory()


MEAN, SPREAD = np.array([0.9, -0.4, 0.0]), 1.5


def _log_weight(x):  # type: ignore[no-untyped-def]
    """``log phi(x) - log q(x)`` for the proposal ``q = N(MEAN, SPREAD^2 I)``."""
    x = np.asarray(x, dtype=float)
    return (-0.5 * (x * x).sum(-1) + 0.5 * (((x - MEAN) / SPREAD) ** 2).sum(-1)) + x.shape[-1] * np.log(SPREAD)


class _Shifted(ConditionalSampling):
    """An independence sampler from ``N(MEAN, SPREAD^2 I)``, drawn ahead: its weights vary, so a chain
    whose weight were not carried with its moves (or recomputed wrongly) would drift off the level's law.

    Its step-by-step proposal is never used: a chain that called it would fail the test.
    """

    def propose(self, u, params, rng):  # type: ignore[no-untyped-def]
        raise AssertionError("candidates drawn ahead: no step-by-step proposal")

    def draws_ahead(self, params, n_chains, n_steps, dim, dtype, rng):  # type: ignore[no-untyped-def]
        candidates = (MEAN + SPREAD * rng.standard_normal((n_steps, n_chains, dim))).astype(dtype)
        return candidates, _log_weight(candidates)

    def state_log_weights(self, params, u):  # type: ignore[no-untyped-def]
        return _log_weight(u)


@pytest.mark.parametrize("block_steps, extra, count_seeds", [(None, 0, True), (1, 1700, True), (3, 999, False),
                                                               (2, 1300, False)])
def test_a_users_independence_sampler_drawn_ahead_keeps_the_level(block_steps, extra, count_seeds, monkeypatch):
    """Chains of an independence proposal drawn ahead, in one block or in blocks of 1-3 steps (the
    last one short), with chains of unequal length (``extra`` states) and with or without the seeds
    counted, keep N(0, I) restricted to ``{u0 >= 0.5}``, and make one batched model call a step."""
    from scarce.estimators.chains import run_chains

    if block_steps is not None:
        monkeypatch.setattr("scarce.estimators.chains.DRAW_AHEAD_VALUES", 3000 * 3 * block_steps)
    rng = np.random.default_rng(2)
    seeds = rng.standard_normal((40_000, 3))
    seeds = seeds[seeds[:, 0] >= 0.5][:3000]
    calls = []

    def evaluate(x, step):
        calls.append(len(x))
        return x[:, 0]

    population, chain_stats = run_chains(_Shifted(), seeds, seeds[:, 0], 0.5, 3000 * 6 + extra, 1.0, evaluate, rng,
                                         count_seeds=count_seeds)
    lengths = population.mask.sum(axis=1)
    last = population.u[np.arange(3000), lengths - 1]
    assert len(calls) == int(lengths.max()) - int(count_seeds) and chain_stats.n_queries == sum(calls)
    assert 0.2 < chain_stats.acceptance_rate < 0.6
    assert stats.kstest(last[:, 0], stats.truncnorm(0.5, np.inf).cdf).pvalue > 1e-3
    assert stats.kstest(last[:, 1], stats.norm.cdf).pvalue > 1e-3
