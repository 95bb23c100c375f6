"""Subset Simulation and Monte Carlo: known answers, bad input, budgets, reproducibility.

Statistical tests run R seeded repetitions and compare the mean with the truth
using the standard error measured from those repetitions, so the tolerance
follows the estimator's own spread.
"""

import math
import warnings

import numpy as np
import pytest

import scarce
from scarce import (
    ConditionalSampling,
    EvaluationError,
    ModifiedMetropolis,
    MonteCarlo,
    RareEventProblem,
    StalledLevelWarning,
    SubsetSimulation,
)
from scarce.errors import BudgetExhaustedWarning
from scarce.levels import early_stop_allowed
from scarce.problems import chi_square, four_branch, linear, make_problem, two_regions
from scarce.results import EstimateResult


def repeated(problem, estimator, reps):
    return [estimator.estimate(problem, seed=s) for s in range(reps)]


def assert_unbiased(results, truth, n_se=4.0):
    est = np.array([r.probability for r in results])
    se = est.std(ddof=1) / math.sqrt(len(est))
    assert se > 0
    assert abs(est.mean() - truth) <= n_se * se, (est.mean(), truth, se)
    return est


@pytest.mark.parametrize(
    "problem",
    [linear(dim=50, probability=1e-5), chi_square(dim=20, probability=1e-5), two_regions(dim=5, probability=1e-4), four_branch()],
    ids=lambda p: p.name,
)
def test_subset_simulation_is_unbiased_on_known_answers(problem):
    results = repeated(problem, SubsetSimulation(n_samples=1000), reps=40)
    est = assert_unbiased(results, problem.exact_probability)
    assert all(r.reached_failure for r in results)
    # the estimator is far from a trivial one: its spread is that of a real estimate
    assert 0.05 < est.std() / est.mean() < 0.6


@pytest.mark.parametrize("width", [0.5, 1.5])
def test_unbiased_when_scores_sit_on_wide_plateaus(width):
    """Scores floor(u1 / width) * width: every level is a block of ties (the LLM fleet's case)."""
    from scipy.stats import norm

    def evaluate(x):
        return np.floor(x[:, 0] / width) * width, x[:, 0] >= 3.0

    problem = scarce.RareEventProblem(dim=2, evaluate=evaluate, name=f"plateaus-{width}")
    results = repeated(problem, SubsetSimulation(n_samples=500), reps=120)
    assert_unbiased(results, norm.sf(3.0))
    assert all(r.reached_failure for r in results)


@pytest.mark.parametrize(
    "problem", [linear(dim=50, probability=1e-5), chi_square(dim=20, probability=1e-5)], ids=lambda p: p.name
)
def test_float32_latents_are_unbiased_and_stay_float32(problem):
    seen = []

    def evaluate(x):
        seen.append(x.dtype)
        return problem.evaluate(x)

    watched = RareEventProblem(problem.dim, evaluate, problem.transform, name=problem.name)
    results = repeated(watched, SubsetSimulation(n_samples=1000, dtype="float32"), reps=40)
    est = assert_unbiased(results, problem.exact_probability)
    assert set(seen) == {np.dtype(np.float32)}
    assert all(r.reached_failure and r.info["dtype"] == "float32" for r in results)
    assert 0.05 < est.std() / est.mean() < 0.6


def test_modified_metropolis_is_unbiased():
    problem = linear(dim=20, probability=1e-4)
    assert_unbiased(repeated(problem, SubsetSimulation(n_samples=1000, kernel=ModifiedMetropolis()), 40), 1e-4)


def test_reported_cov_tracks_observed_spread_and_intervals_cover():
    problem = linear(dim=50, probability=1e-5)
    results = repeated(problem, SubsetSimulation(n_samples=1000), reps=60)
    est = np.array([r.probability for r in results])
    observed = est.std(ddof=1) / est.mean()
    reported = np.mean([r.cov for r in results])
    # the CoV of a CoV estimate from 60 runs is about 1/sqrt(120) ~ 9%: allow 35%
    assert 0.65 < reported / observed < 1.35, (reported, observed)
    covered = sum(lo <= 1e-5 <= hi for lo, hi in (r.ci(0.95) for r in results))
    # Binomial(60, 0.95) is >= 51 with probability > 0.99
    assert covered >= 51


@pytest.mark.parametrize("problem", [linear(dim=50, probability=1e-5), chi_square(dim=20, probability=1e-5)],
                         ids=lambda p: p.name)
def test_response_surface_sampling_is_unbiased_with_honest_error_bars(problem):
    """Exact surfaces: independent moves, so the chains' gamma is near 0 (aCS's is far above 1 on these levels)."""
    from scarce.kernels import ResponseSurfaceSampling

    results = repeated(problem, SubsetSimulation(n_samples=1000, kernel=ResponseSurfaceSampling()), reps=60)
    est = assert_unbiased(results, problem.exact_probability)
    observed = est.std(ddof=1) / est.mean()
    reported = np.mean([r.cov for r in results])
    assert 0.65 < reported / observed < 1.35, (reported, observed)
    covered = sum(lo <= problem.exact_probability <= hi for lo, hi in (r.ci(0.95) for r in results))
    assert covered >= 51
    assert max(level.correlation_factor for r in results for level in r.levels[2:]) < 1.0


def test_monte_carlo_matches_truth_and_interval_covers():
    problem = linear(dim=5, probability=1e-2)
    results = repeated(problem, MonteCarlo(n_samples=20_000, batch_size=3000), reps=30)
    assert_unbiased(results, 1e-2)
    assert sum(lo <= 1e-2 <= hi for lo, hi in (r.ci() for r in results)) >= 26
    r = results[0]
    assert r.n_queries == 20_000 and r.interval == "clopper-pearson"
    assert r.cov == pytest.approx(math.sqrt((1 - r.probability) / (20_000 * r.probability)))


def test_monte_carlo_in_float32_matches_truth():
    problem = linear(dim=50, probability=1e-2)
    results = repeated(problem, MonteCarlo(n_samples=20_000, batch_size=3000, dtype="float32"), reps=30)
    assert_unbiased(results, 1e-2)
    assert results[0].info["dtype"] == "float32"
    with pytest.raises(ValueError, match=r"dtype must be one of \('float64', 'float32'\), got 'half'"):
        MonteCarlo(n_samples=100, dtype="half").estimate(problem, seed=0)


def test_same_seed_same_numbers_and_different_seed_different_numbers():
    problem = linear(dim=20, probability=1e-4)
    a = SubsetSimulation(n_samples=500).estimate(problem, seed=7)
    b = SubsetSimulation(n_samples=500).estimate(problem, seed=7)
    c = SubsetSimulation(n_samples=500).estimate(problem, seed=8)
    assert a.probability == b.probability and a.levels == b.levels
    assert a.probability != c.probability
    seq = SubsetSimulation(n_samples=500).estimate(problem, seed=np.random.SeedSequence(7))
    assert seq.probability == a.probability


class CountingProblem:
    """Wraps a problem's evaluate, recording the size of every model call."""

    def __init__(self, problem):
        self.calls = []
        inner = problem.evaluate

        def evaluate(x):
            self.calls.append(len(x))
            return inner(x)

        self.problem = RareEventProblem(problem.dim, evaluate, name=problem.name, exact_probability=problem.exact_probability)


def _mcmc_steps(level, n_samples, seeds_counted):
    """MCMC steps of a level of ``n_samples`` grown from ``level.n_seeds`` chains."""
    per_chain = math.ceil(n_samples / level.n_seeds)
    return per_chain - 1 if seeds_counted else per_chain


def test_one_batched_call_per_mcmc_step_and_every_point_counted():
    wrapped = CountingProblem(linear(dim=30, probability=1e-4))
    result = SubsetSimulation(n_samples=1000).estimate(wrapped.problem, seed=0)
    assert sum(wrapped.calls) == result.n_queries == sum(result.queries_per_level)
    mcmc_levels = [lv for lv in result.levels[1:] if lv.n_queries > 0]
    # level 1's seeds (independent draws) are counted: ceil(1000 / c) - 1 steps from c ~ 100 seeds;
    # deeper levels' seeds are chain states and only moved from: ceil(1000 / c) steps.
    # One model call per step, covering every chain still running.
    steps = [_mcmc_steps(lv, 1000, seeds_counted=(i == 0)) for i, lv in enumerate(mcmc_levels)]
    assert len(mcmc_levels) >= 2 and len(wrapped.calls) == 1 + sum(steps)
    assert wrapped.calls[0] == 1000
    first_level_calls = wrapped.calls[1 : 1 + steps[0]]
    assert first_level_calls[0] == mcmc_levels[0].n_seeds


@pytest.mark.parametrize("count_seeds", ["independent", "always", "never"])
def test_query_count_matches_levels(count_seeds):
    result = SubsetSimulation(n_samples=1000, count_seeds=count_seeds).estimate(linear(dim=30, probability=1e-4), seed=0)
    mcmc = [lv for lv in result.levels[1:] if lv.n_queries]
    assert result.n_queries == 1000 + sum(lv.n_queries for lv in mcmc)
    counted = {"independent": [True] + [False] * (len(mcmc) - 1), "always": [True] * len(mcmc), "never": [False] * len(mcmc)}
    # a level costs N - (seeds) model calls when its seeds count among its N samples, N otherwise
    assert [lv.n_queries for lv in mcmc] == [1000 - lv.n_seeds if c else 1000 for lv, c in zip(mcmc, counted[count_seeds])]
    assert len(mcmc) == len(result.levels) - 2 and len(mcmc) >= 2
    assert result.info["count_seeds"] == count_seeds


def test_uncounted_seeds_are_moved_from_but_not_kept():
    """count_seeds=False: every stored state is an MCMC move, and the level costs N model calls."""
    from scarce.estimators.chains import run_chains

    rng = np.random.default_rng(3)
    seeds = rng.standard_normal((7, 4))
    calls = []

    def accept_all(u, step):
        calls.append(len(u))
        return np.full(len(u), 10.0)

    for count, queries in ((True, 50 - 7), (False, 50)):
        population, stats = run_chains(
            ConditionalSampling(), seeds, np.full(7, 5.0), 1.0, 50, 0.6, accept_all, np.random.default_rng(0), count_seeds=count
        )
        assert population.n_samples == 50 and stats.n_queries == queries and not population.independent
        states = population.flat_u()
        kept = (states[:, None, :] == seeds[None, :, :]).all(axis=2).any(axis=1)
        assert kept.sum() == (7 if count else 0)
    assert sum(calls) == 43 + 50


def test_stop_factor_ends_the_run_once_enough_samples_failed():
    """The run ends at the first level holding stop_factor * p0 * N failures, counted in effective
    draws along the chains (levels.early_stop_allowed); 1 is the classic rule."""
    problem = linear(dim=20, probability=1e-3)
    seen = {}
    for seed in range(40):
        classic = SubsetSimulation(n_samples=2000, stop_factor=1.0).estimate(problem, seed=seed)
        early = SubsetSimulation(n_samples=2000, stop_factor=0.5).estimate(problem, seed=seed)
        # the two runs share every level up to the first one holding 100 to 200 failures
        assert classic.levels[-1].n_failed >= 200 and early.levels[-1].n_failed >= 100
        shared = min(len(classic.levels), len(early.levels)) - 1
        assert early.levels[:shared] == classic.levels[:shared]
        if len(early.levels) < len(classic.levels):
            last = early.levels[-1]
            assert 100 <= last.n_failed <= 200 and last.probability == last.n_failed / 2000
            assert early_stop_allowed(last.n_failed, last.correlation_factor, 2000, 0.1)
            assert early.n_queries < classic.n_queries
            seen["earlier"] = True
        else:
            assert early.probability == classic.probability and early.n_queries == classic.n_queries
            seen["same"] = True
    assert seen == {"earlier": True, "same": True}  # both cases occur in these seeds
    assert early.info["stop_factor"] == 0.5


def test_below_boundary_term_counts_new_failures_below_the_next_boundary():
    """(P_hat(L_j) / N)^2 b (1 + gamma_b) over the failures whose own score is below the boundary,
    found by chains that did not start from a failure; seeds that failed add nothing."""
    from scarce.envelope import chain_correlation_factor
    from scarce.estimators.chains import Population
    from scarce.estimators.subset import _Run

    rng = np.random.default_rng(0)
    n_chains, length = 4, 5
    u = rng.standard_normal((n_chains, length, 2))
    raw = rng.uniform(0.0, 1.0, (n_chains, length))
    failed = np.zeros((n_chains, length), bool)
    failed[0, 1:4] = failed[1, 2] = failed[2, :] = failed[3, 0] = True
    raw[0, 1:3], raw[0, 3], raw[1, 2], raw[2, :], raw[3, 0] = 0.1, 0.9, 0.2, 0.1, 0.3
    seed_score = np.array([0.7, 0.8, np.inf, 0.6])  # chain 2 grew from a failure
    population = Population(u=u, score=np.where(failed, np.inf, raw), key=rng.random((n_chains, length)),
                            mask=np.ones((n_chains, length), bool), parent=np.arange(n_chains), seed_score=seed_score)
    run = _Run(SubsetSimulation(n_samples=20), linear(dim=2, probability=1e-3), rng)
    # the failed points as evaluated, in another order and beside others that left the population
    order = rng.permutation(int(failed.sum()))
    run.failed_u = [u[failed][order], rng.standard_normal((3, 2))]
    run.failed_raw = [raw[failed][order], np.zeros(3)]
    run.level_index = 2
    run._below_boundary_term(population, boundary=0.5, probability=0.01)
    below = np.zeros_like(failed)
    below[0, 1:3] = below[1, 2] = below[3, 0] = True  # raw 0.9 is above the boundary; chain 2 is a copy
    gamma = chain_correlation_factor(below, population.mask)
    assert run.below_boundary_variance == pytest.approx((0.01 / 20) ** 2 * 4 * (1 + gamma))
    # only the population's failures are kept for the next level, with their scores
    assert run.failed_u[0].shape == (failed.sum(), 2) and np.array_equal(run.failed_raw[0], raw[failed])
    # level 0 adds nothing
    run.level_index, run.below_boundary_variance = 0, 0.0
    run._below_boundary_term(population, boundary=0.5, probability=1.0)
    assert run.below_boundary_variance == 0.0


def test_population_take_u_picks_the_same_rows_as_flat_u():
    from scarce.estimators.chains import Population

    rng = np.random.default_rng(0)
    lengths = np.array([4, 4, 3, 3, 3])  # chains differ in length by one, longest first
    mask = np.arange(4)[None, :] < lengths[:, None]
    u = rng.standard_normal((5, 4, 3))
    score = np.where(mask, rng.standard_normal((5, 4)), np.nan)
    key = np.where(mask, rng.random((5, 4)), np.nan)
    population = Population(u=u, score=score, key=key, mask=mask)
    pick = np.array([16, 0, 7, 3, 3, 11])
    np.testing.assert_array_equal(population.take_u(pick), population.flat_u()[pick])
    np.testing.assert_array_equal(population.flat_scores()[pick], score[mask][pick])
    np.testing.assert_array_equal(population.flat_keys()[pick], key[mask][pick])


def test_failed_samples_always_survive_exact_terminal_event():
    """A ruler score that knows nothing about failure still targets the true event."""
    noise = np.random.default_rng(3).standard_normal(8)
    ruler_direction = np.ones(8) / math.sqrt(8) + 0.8 * noise / np.linalg.norm(noise)
    exact = linear(dim=8, probability=1e-3)

    def evaluate(u):
        score = u @ ruler_direction  # an imperfect "ruler": only partly aligned with the failure direction
        return score, u.sum(1) / math.sqrt(8) >= -exact.evaluate(np.zeros((1, 8)))[0][0]

    problem = RareEventProblem(8, evaluate, exact_probability=1e-3)
    results = repeated(problem, SubsetSimulation(n_samples=1000), reps=30)
    assert_unbiased([r for r in results], 1e-3)


def test_saturated_score_stalls_and_is_flagged_not_jumped():
    """A score that saturates below the failure set cannot guide the run: flagged, never invented."""

    def evaluate(u):
        score = np.minimum(u[:, 0], 1.0)  # saturates at 1
        return score, u[:, 1] > 4.5  # failure unrelated to the score, P ~ 3.4e-6

    problem = RareEventProblem(2, evaluate)
    with pytest.warns(StalledLevelWarning):
        result = SubsetSimulation(n_samples=500).estimate(problem, seed=0)
    assert result.status == "stalled" and not result.reached_failure
    assert any(lv.stalled for lv in result.levels)
    assert "stalled level" in result.flags
    # no failure was seen, so the estimate is zero, not a product jumped to the failure threshold
    assert result.probability == 0.0 and result.n_failed == 0
    lo, hi = result.ci()
    assert lo == 0.0 and 0.0 < hi < 1.0


def test_max_queries_gives_flagged_partial_result_with_envelope():
    problem = linear(dim=20, probability=1e-9)
    with pytest.warns(BudgetExhaustedWarning):
        result = SubsetSimulation(n_samples=500, max_queries=2000).estimate(problem, seed=0)
    assert result.status == "budget" and not result.reached_failure
    assert result.n_queries <= 2000
    env = result.envelope(0.05)
    assert len(env.level_lower) == len(result.levels) - 1
    assert env.level_lower[-1] == pytest.approx(0.05 * result.levels[-1].cumulative_probability)


def test_max_levels_stops_with_flag():
    with pytest.warns(BudgetExhaustedWarning, match="max_levels"):
        result = SubsetSimulation(n_samples=500, max_levels=2).estimate(linear(dim=20, probability=1e-9), seed=0)
    assert result.status == "max_levels" and not result.reached_failure


def test_result_round_trips_through_dict_and_json():
    result = SubsetSimulation(n_samples=500).estimate(four_branch(), seed=1)
    assert EstimateResult.from_dict(result.to_dict()) == result
    again = EstimateResult.from_json(result.to_json())
    assert again.to_json() == result.to_json()  # NaN fields compare unequal as objects
    assert again.probability == result.probability and again.levels[1].threshold == result.levels[1].threshold
    import json

    json.loads(result.to_json(), parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))


def test_envelope_lower_bound_is_anytime_valid_in_repeated_runs():
    """delta * P_hat_l <= P_l at every level, in at least 1 - delta of runs (checked on the final level)."""
    problem = linear(dim=20, probability=1e-5)
    results = repeated(problem, SubsetSimulation(n_samples=500), reps=40)
    violations = sum(r.envelope(0.05).lower > 1e-5 for r in results)
    assert violations <= 6  # Binomial(40, 0.05) exceeds 6 with probability < 0.02


# ---------------------------------------------------------------- bad input
def _problem_returning(score, failed=None, dim=3):
    def evaluate(x):
        n = len(x)
        s = score(n)
        return s, (np.zeros(n, bool) if failed is None else failed(n))

    return RareEventProblem(dim, evaluate, name="bad")


@pytest.mark.parametrize(
    "problem, match",
    [
        (_problem_returning(lambda n: np.where(np.arange(n) == 3, np.nan, 0.0)), r"non-finite score at 1 point\(s\), at index 3"),
        (_problem_returning(lambda n: np.full(n, np.inf)), "non-finite score"),
        (_problem_returning(lambda n: np.zeros(n + 1)), r"score must have shape"),
        (_problem_returning(lambda n: np.zeros((n, 2))), r"score must have shape"),
        (_problem_returning(lambda n: np.array(["a"] * n)), "real numbers"),
        (_problem_returning(lambda n: np.zeros(n), lambda n: np.full(n, 0.5)), "boolean"),
        (_problem_returning(lambda n: np.zeros(n), lambda n: np.zeros(n - 1, bool)), "failed must have shape"),
    ],
)
def test_bad_model_output_is_reported(problem, match):
    with pytest.raises(EvaluationError, match=match):
        SubsetSimulation(n_samples=100).estimate(problem, seed=0)


def test_model_exception_surfaces_with_level():
    calls = {"n": 0}

    def evaluate(x):
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("GPU on fire")
        return x.sum(1), np.zeros(len(x), bool)

    with pytest.raises(EvaluationError, match=r"at level 1, MCMC step 2: GPU on fire") as info:
        SubsetSimulation(n_samples=100, level_probability=0.1).estimate(RareEventProblem(2, evaluate), seed=0)
    assert isinstance(info.value.__cause__, RuntimeError)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"level_probability": 0.0}, r"level_probability must be in \(0, 0.5\]"),
        ({"level_probability": 0.6}, r"level_probability must be in \(0, 0.5\]"),
        ({"level_probability": float("nan")}, "level_probability"),
        ({"n_samples": 5, "level_probability": 0.1}, r"n_samples \* level_probability must be >= 1"),
        ({"n_samples": 1}, "n_samples"),
        ({"n_samples": 10.5}, "n_samples"),
        ({"max_queries": 10}, "max_queries must be at least n_samples"),
        ({"max_levels": 0}, "max_levels"),
        ({"kernel": "acs"}, "kernel must be"),
        ({"dtype": "float16"}, r"dtype must be one of \('float64', 'float32'\)"),
        ({"stop_factor": 0.0}, r"stop_factor must be in \(0, 1\]"),
        ({"stop_factor": 1.5}, r"stop_factor must be in \(0, 1\]"),
        ({"count_seeds": "indep"}, r"unknown count_seeds 'indep'\. Did you mean 'independent'\?"),
    ],
)
def test_bad_estimator_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SubsetSimulation(**kwargs).estimate(linear(dim=3, probability=1e-2), seed=0)


def test_bad_problem_and_seed():
    with pytest.raises(ValueError, match="dim"):
        RareEventProblem(0, lambda x: x)
    with pytest.raises(ValueError, match="evaluate must be callable"):
        RareEventProblem(2, "nope")
    with pytest.raises(ValueError, match="problem must be a RareEventProblem"):
        SubsetSimulation().estimate(lambda u: u)
    with pytest.raises(ValueError, match="seed"):
        SubsetSimulation(n_samples=100).estimate(linear(dim=3, probability=1e-2), seed=-1)
    with pytest.raises(ValueError, match="Did you mean 'linear'"):
        make_problem("lineer")


def test_torch_like_outputs_are_accepted():
    class FakeTensor:
        def __init__(self, a):
            self.a = a

        def detach(self):
            return self

        def cpu(self):
            return self

        def numpy(self):
            return self.a

    def evaluate(x):
        s = x.sum(1)
        return FakeTensor(s), FakeTensor(s > 2.5)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = SubsetSimulation(n_samples=200).estimate(RareEventProblem(1, evaluate), seed=0)
    assert r.reached_failure and r.probability > 0


@pytest.mark.parametrize("value", [True, "0.1", None])
def test_level_probability_must_be_a_number_not_bool_or_string(value):
    with pytest.raises(ValueError, match=r"level_probability must be a number in \(0, 0.5\]"):
        SubsetSimulation(level_probability=value).estimate(linear(dim=3, probability=1e-2), seed=0)
