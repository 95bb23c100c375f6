"""AMLS as published by Webb et al. (2019) / SAFARI: the "Traditional SS" baseline.

Known answers (tolerance from the spread of seeded runs), the published level
jump on tied scores (counted, flagged, and contrasted with Subset Simulation),
exact query accounting, budgets, validation and reproducibility.
"""

import math
import warnings

import numpy as np
import pytest
from scipy.stats import norm

from scarce import RareEventProblem, StalledLevelWarning, SubsetSimulation
from scarce.errors import BudgetExhaustedWarning, ScarceError
from scarce.estimators import AMLS
from scarce.problems import linear


def quiet(estimator, problem, seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StalledLevelWarning)
        return estimator.estimate(problem, seed=seed)


def step_problem(dim=4, a=1.0, b=2.5, probability=1e-4):
    r"""Scores tied on a flat step: ``t = sum(u) / sqrt(d)``, score ``t`` below ``a``, ``a`` on
    ``[a, b)``, ``t - (b - a)`` above ``b``; failure ``t >= beta`` with ``beta > b``, so ``P_f = Phi(-beta)``.

    Given ``t >= a``, ``P(t >= b) = Phi(-b) / Phi(-a) < 0.1``: at least 90% of a level at ``a``
    is tied at ``a`` and the published quantile cannot rise above it.
    """
    beta = float(norm.isf(probability))
    assert beta > b and norm.sf(b) / norm.sf(a) < 0.1
    root = math.sqrt(dim)

    def score(u):
        t = u.sum(axis=1) / root
        return np.where(t < a, t, np.where(t < b, a, t - (b - a)))

    return RareEventProblem.from_score(score, dim, beta - (b - a), name="step", exact_probability=probability)


class CountingProblem(RareEventProblem):
    """Records the size of every batched model call."""

    def __init__(self, base: RareEventProblem):
        super().__init__(base.dim, base.evaluate, base.transform, name=base.name, exact_probability=base.exact_probability)
        self.batches: list[int] = []

    def evaluate_latent(self, u, *, where=""):
        self.batches.append(u.shape[0])
        return super().evaluate_latent(u, where=where)


# -- validation ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_samples": 1}, r"n_samples must be an integer >= 2, got 1"),
        ({"n_samples": 10.0}, r"n_samples must be an integer >= 2, got 10.0 \(float\)"),
        ({"level_probability": 0.0}, r"level_probability must be in \(0, 1\), got 0.0"),
        ({"level_probability": 1.0}, r"level_probability must be in \(0, 1\), got 1.0"),
        ({"level_probability": "0.1"}, r"level_probability must be a number in \(0, 1\), got '0.1'"),
        ({"n_samples": 5, "level_probability": 0.1}, r"n_samples \* level_probability must be >= 1.*5 \* 0.1"),
        ({"n_steps": 0}, r"n_steps must be an integer >= 1, got 0"),
        ({"initial_width": 0.0}, r"initial_width must be a finite number > 0, got 0.0"),
        ({"initial_width": math.nan}, r"initial_width must be a finite number > 0, got nan"),
        ({"initial_width": "wide"}, r"initial_width must be a finite number > 0, got 'wide' \(str\)"),
        ({"max_levels": 0}, r"max_levels must be an integer >= 1, got 0"),
        ({"max_queries": 0}, r"max_queries must be an integer >= 1, got 0"),
        (
            {"n_samples": 100, "n_steps": 9, "max_queries": 999},
            r"max_queries must be at least n_samples \* \(n_steps \+ 1\) = 1000.*got 999",
        ),
        ({"target_acceptance": 1.0}, r"target_acceptance must be in \(0, 1\), got 1.0"),
        ({"width_growth": 1.0}, r"width_growth must be a finite number > 1, got 1.0"),
        ({"width_shrink": 1.0}, r"width_shrink must be in \(0, 1\), got 1.0"),
    ],
)
def test_bad_parameters_name_parameter_value_and_allowed(kwargs, match):
    with pytest.raises(ScarceError, match=match):
        AMLS(**kwargs).estimate(linear(dim=2, probability=1e-2), seed=0)


def test_bad_problem_and_seed():
    with pytest.raises(ScarceError, match="problem must be a RareEventProblem, got function"):
        AMLS().estimate(lambda u: u, seed=0)
    with pytest.raises(ScarceError, match="seed must be a non-negative integer"):
        AMLS(n_samples=20, n_steps=1).estimate(linear(dim=2, probability=1e-2), seed=-1)


def test_constructor_only_stores():
    estimator = AMLS(n_samples=-3, n_steps="many")  # validated at estimate, not here
    assert estimator.n_samples == -3 and estimator.n_steps == "many"


def test_defaults_are_the_published_ones():
    estimator = AMLS()
    assert (estimator.n_samples, estimator.level_probability, estimator.n_steps) == (1000, 0.1, 250)
    assert estimator.initial_width == pytest.approx(1 / 30) and estimator.max_levels == 500
    assert (estimator.target_acceptance, estimator.width_growth, estimator.width_shrink) == (0.124, 1.02, 0.5)


# -- known answer ----------------------------------------------------------------------------------


def test_agrees_with_the_truth_when_no_level_stalls():
    problem = linear(dim=10, probability=1e-3)
    results = [AMLS(n_samples=500, n_steps=25, initial_width=1.0).estimate(problem, seed=s) for s in range(20)]
    est = np.array([r.probability for r in results])
    se = est.std(ddof=1) / math.sqrt(est.size)
    assert abs(est.mean() - 1e-3) <= 4 * se, (est.mean(), se)
    assert 0.05 < est.std() / est.mean() < 0.6  # a real estimator, not a constant
    for r in results:
        assert r.method == "amls-webb2019" and r.reached_failure and r.status == "converged"
        assert r.info["level_jumps"] == 0 and not r.info["jumped"] and "stalled level" not in r.flags
        thresholds = [level.threshold for level in r.levels]
        assert thresholds[0] == -math.inf and thresholds[-1] == math.inf
        assert all(lo < hi for lo, hi in zip(thresholds, thresholds[1:]))  # levels rise strictly
        # the published quantile: at least 10% of the population survives every intermediate level
        assert all(level.n_seeds >= 50 for level in r.levels[1:-1])
        assert r.probability == pytest.approx(math.prod(level.probability for level in r.levels[1:]))
        assert r.n_failed == r.levels[-1].n_seeds >= 50


def test_reported_cov_is_safaris_independent_level_formula():
    r = AMLS(n_samples=400, n_steps=5, initial_width=1.0).estimate(linear(dim=5, probability=1e-3), seed=3)
    expected = math.sqrt(sum((1 - lv.probability) / (400 * lv.probability) for lv in r.levels[1:]))
    assert r.cov == pytest.approx(expected)
    assert all(level.correlation_factor == 0.0 for level in r.levels)
    lo, hi = r.ci(0.95)
    assert lo < r.probability < hi


# -- the published level jump ----------------------------------------------------------------------


def test_tied_scores_make_amls_jump_and_overshoot_while_subset_simulation_climbs():
    n = 500
    # P(F | level at a) * N = 0.6 < 1: after the jump the last factor counts 0 or >= 1 failures in N
    truth = 0.6 * norm.sf(1.0) / n
    problem = step_problem(probability=truth)
    amls = AMLS(n_samples=n, n_steps=10, initial_width=1.0)
    with pytest.warns(StalledLevelWarning, match="jumping to the failure threshold"):
        amls.estimate(problem, seed=0)
    runs = [quiet(amls, problem, seed) for seed in range(12)]
    for r in runs:
        # counted and flagged: the level at the step could not rise and went straight to the failure threshold
        assert r.info["level_jumps"] == 1 and r.info["jumped"] and "stalled level" in r.flags
        assert r.levels[1].threshold == 1.0 and not r.levels[1].stalled
        assert r.levels[-1].stalled and r.levels[-1].threshold == math.inf
        assert r.reached_failure and r.status == "converged"
        # the cascade collapsed into crude Monte Carlo at the stalled level: 0 or >= P(level) / N
        before = r.levels[-2].cumulative_probability
        assert r.probability == pytest.approx(before * r.n_failed / n)
        assert before / n > 1.2 * truth
    est = np.array([r.probability for r in runs])
    # no run lands near the truth: it reports 0, or over-counts by at least 1 / (N P(F | level)) ~ 1.7
    assert np.all((est == 0) | (est > 1.2 * truth))
    assert np.count_nonzero(est > 1.2 * truth) >= 2, est
    assert np.count_nonzero(est == 0) >= 2, est

    ss_runs = [SubsetSimulation(n_samples=n, level_probability=0.1).estimate(problem, seed=seed) for seed in range(12)]
    for r in ss_runs:
        # Subset Simulation does not jump: it splits the tie block by the keys, then climbs past it
        assert r.reached_failure and not any(level.stalled for level in r.levels)
        assert r.levels[1].threshold == 1.0 and any(1.0 < level.threshold < math.inf for level in r.levels)
        assert len(r.levels) > len(runs[0].levels)
    ss = np.array([r.probability for r in ss_runs])
    se = ss.std(ddof=1) / math.sqrt(ss.size)
    assert abs(ss.mean() - truth) <= 4 * se, (ss.mean(), truth, se)
    assert np.all(ss > 0)


def test_jump_without_failures_is_reported_as_zero_while_subset_simulation_flags_the_stall():
    """A score that saturates: nothing lies above the tie block but failures, and none is sampled."""
    a = 1.0

    def score(u):
        return np.minimum(u.sum(axis=1) / 2.0, a)

    # failure (t >= 6) is unreachable by the score and has probability ~1e-9: no particle fails
    problem = RareEventProblem(
        4, lambda u: (score(u), u.sum(axis=1) / 2.0 >= 6.0), name="saturated", exact_probability=float(norm.sf(6.0))
    )
    counting = CountingProblem(problem)
    r = quiet(AMLS(n_samples=200, n_steps=5, initial_width=1.0), counting, 1)
    assert r.info["level_jumps"] == 1 and r.levels[-1].stalled and r.levels[-1].threshold == math.inf
    assert r.probability == 0.0 and r.n_failed == 0 and r.cov == math.inf
    assert r.reached_failure and r.status == "converged"  # as published: the run ends at the failure threshold
    # level 1 scored + moved, level 2 scored only (the published loop returns before moving)
    assert r.n_queries == 200 * 6 + 200 == sum(counting.batches) == sum(r.queries_per_level)
    assert r.levels[-1].n_queries == 200

    with pytest.warns(StalledLevelWarning):
        ss = SubsetSimulation(n_samples=200).estimate(problem, seed=1)
    assert ss.status == "stalled" and not ss.reached_failure and "failure event not reached" in ss.flags


# -- cost, budget, adaptation, reproducibility ---------------------------------------------------


def test_query_count_is_exact_and_batched_once_per_step():
    n, m = 300, 7
    problem = CountingProblem(linear(dim=6, probability=1e-3))
    r = AMLS(n_samples=n, n_steps=m, initial_width=1.0).estimate(problem, seed=2)
    n_levels = len(r.levels) - 1  # level 0 is the initial population
    assert n_levels >= 3
    # every level: score the N particles once, then M batched MH steps of N candidates (terminal level included)
    assert r.n_queries == n_levels * n * (m + 1)
    assert problem.batches == [n] * (n_levels * (m + 1))
    assert r.queries_per_level == (0,) + (n * (m + 1),) * n_levels


def test_query_budget_stops_before_a_level_that_does_not_fit():
    n, m = 200, 4
    per_level = n * (m + 1)
    problem = linear(dim=5, probability=1e-6)
    with pytest.warns(BudgetExhaustedWarning, match="max_queries=2500"):
        r = AMLS(n_samples=n, n_steps=m, initial_width=1.0, max_queries=2 * per_level + 500).estimate(problem, seed=0)
    assert r.status == "budget" and not r.reached_failure and "query budget exhausted" in r.flags
    assert r.n_queries == 2 * per_level <= r.info["max_queries"]
    assert r.probability == pytest.approx(r.levels[-1].cumulative_probability * r.n_failed / n)


def test_max_levels_returns_a_flagged_partial_result():
    with pytest.warns(BudgetExhaustedWarning, match="max_levels=1"):
        r = AMLS(n_samples=200, n_steps=3, initial_width=1.0, max_levels=1).estimate(linear(dim=5, probability=1e-6), seed=0)
    assert r.status == "max_levels" and not r.reached_failure and len(r.levels) == 2


@pytest.mark.parametrize(("width", "factor"), [(1e-3, 1.02), (50.0, 0.5)])
def test_widths_follow_the_published_adaptation_rule(width, factor):
    # tiny boxes: every particle accepts > 12.4% -> x1.02; huge boxes: none accepts -> x0.5
    r = quiet(AMLS(n_samples=200, n_steps=5, initial_width=width, max_levels=3), linear(dim=10, probability=1e-3), 0)
    widths = [level.kernel_scale for level in r.levels[1:] if not math.isnan(level.kernel_scale)]
    assert widths[0] == pytest.approx(width)
    assert np.allclose(np.array(widths[1:]) / np.array(widths[:-1]), factor)
    rates = [level.acceptance_rate for level in r.levels[1:] if not math.isnan(level.acceptance_rate)]
    assert all(rate > 0.5 for rate in rates) if factor > 1 else all(rate < 0.05 for rate in rates)


def test_callback_sees_every_level_and_results_are_reproducible():
    problem = linear(dim=5, probability=1e-3)
    seen = []
    estimator = AMLS(n_samples=200, n_steps=4, initial_width=1.0)
    a = estimator.estimate(problem, seed=11, callback=seen.append)
    b = estimator.estimate(problem, seed=11)
    c = estimator.estimate(problem, seed=12)
    assert tuple(seen) == a.levels
    assert (a.probability, a.n_queries, a.levels) == (b.probability, b.n_queries, b.levels)
    assert a.probability != c.probability
    assert a.info["seed"] == 11
    restored = type(a).from_json(a.to_json())
    assert restored.probability == a.probability and restored.info["level_jumps"] == 0
