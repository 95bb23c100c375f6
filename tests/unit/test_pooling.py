"""Pooling independent runs (scarce.pooling): the arithmetic, a known answer, and what cannot be pooled."""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pytest

import scarce
from scarce import EstimateResult, ScarceError, pool_results
from scarce.envelope import lognormal_interval
from scarce.problems import linear


def _result(probability: float, cov: float, dof: float | None = None, **fields) -> EstimateResult:
    values = dict(method="subset_simulation", probability=probability, cov=cov, n_queries=1000, n_samples=500,
                  n_failed=50, reached_failure=True, status="converged", wall_time=0.5, level_probability=0.2,
                  problem="p", info={} if dof is None else {"cov_degrees_of_freedom": dof})
    values.update(fields)
    return EstimateResult(**values)


@pytest.fixture(scope="module")
def runs() -> list[EstimateResult]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scarce.ScarceWarning)
        return [scarce.SubsetSimulation(n_samples=500).estimate(linear(dim=10, probability=1e-5), seed=s)
                for s in range(400)]


def test_the_pooled_estimate_is_the_mean_with_the_standard_errors_in_quadrature():
    parts = [_result(1e-6, 0.3, 10.0, n_queries=100), _result(2e-6, 0.5, 4.0, n_queries=200), _result(4e-6, 0.2, 30.0)]
    pooled = pool_results(parts)
    variances = [(0.3e-6) ** 2, (1e-6) ** 2, (0.8e-6) ** 2]
    assert pooled.probability == pytest.approx(7e-6 / 3, rel=1e-15)
    assert pooled.cov == pytest.approx(math.sqrt(sum(variances)) / 3 / (7e-6 / 3), rel=1e-13)
    dof = sum(variances) ** 2 / (variances[0] ** 2 / 10 + variances[1] ** 2 / 4 + variances[2] ** 2 / 30)
    assert pooled.degrees_of_freedom() == pytest.approx(dof, rel=1e-12)
    assert pooled.ci(0.9) == lognormal_interval(pooled.probability, pooled.cov, 0.9, df=pooled.degrees_of_freedom())
    assert (pooled.method, pooled.n_queries, pooled.n_samples, pooled.n_failed) == ("pooled subset_simulation", 1300, 1500, 150)
    assert pooled.info["pooled_runs"] == 3 and pooled.info["pooled_probabilities"] == [1e-6, 2e-6, 4e-6]
    assert pooled.wall_time == pytest.approx(1.5) and pooled.level_probability == 0.2 and pooled.problem == "p"
    assert pooled.flags == () and pooled.summary().startswith("pooled subset_simulation: P = 2.333e-06")


def test_a_pool_of_runs_without_failures_counted_makes_no_claim_about_level_0():
    """The "no failure in N samples" flag describes a run read off its first level, which a pool is not."""
    pooled = pool_results([_result(1e-6, 0.3, n_failed=0), _result(2e-6, 0.5, n_failed=0)])
    assert pooled.n_failed == 0 and pooled.flags == ()


def test_runs_that_take_a_normal_quantile_give_the_pool_a_normal_quantile():
    pooled = pool_results([_result(1e-6, 0.3), _result(2e-6, 0.5)])
    assert "cov_degrees_of_freedom" not in pooled.info and pooled.degrees_of_freedom() is None
    assert pooled.ci() == lognormal_interval(pooled.probability, pooled.cov)
    # beside one run on 5 degrees of freedom, the others count as infinite ones
    mixed = pool_results([_result(1e-6, 0.3, 5.0), _result(2e-6, 0.5)])
    v = [(0.3e-6) ** 2, (1e-6) ** 2]
    assert mixed.degrees_of_freedom() == pytest.approx(sum(v) ** 2 / (v[0] ** 2 / 5), rel=1e-12)


def test_pooled_runs_are_unbiased_and_their_intervals_cover(runs):
    """100 pools of 4 runs: a coverage to about 0.022 and a CoV to about 7%; measured 0.96 and 1.01."""
    pools = [pool_results(runs[i:i + 4]) for i in range(0, len(runs), 4)]
    estimates, truth = np.array([p.probability for p in pools]), 1e-5
    assert abs(estimates.mean() - truth) <= 3 * estimates.std(ddof=1) / math.sqrt(estimates.size)
    held = np.mean([lo <= truth <= hi for lo, hi in (p.ci() for p in pools)])
    assert 0.90 <= held <= 0.99, held
    ratio = math.sqrt(np.mean([p.cov**2 for p in pools])) / (estimates.std() / truth)
    assert 0.8 <= ratio <= 1.2, ratio
    # four runs' pooled CoV is about half of one run's
    assert np.median([p.cov for p in pools]) == pytest.approx(np.median([r.cov for r in runs]) / 2, rel=0.25)


def test_the_runs_flags_are_counted_among_the_pooled_results_flags():
    few = {"chains_per_level": 50.0}
    pooled = pool_results([_result(1e-6, 0.3, info=few, levels=_moved()), _result(2e-6, 0.5, info=few, levels=_moved()),
                           _result(3e-6, 0.4)])
    assert pooled.flags == ("2 of 3 runs: few chains: 50 a level, fewer than 100; the reported CoV can fall short on "
                            "deep runs",)
    assert EstimateResult.from_json(pooled.to_json()).flags == pooled.flags


def test_two_seeds_that_share_a_count_are_not_taken_for_one_run():
    """An estimate read off the first level is a count: two seeds can share it, not their levels' thresholds."""
    levels = _moved()
    other = tuple(dataclasses.replace(level, threshold=level.threshold + 0.5) for level in levels)
    assert pool_results([_result(0.01, 0.2, levels=levels), _result(0.01, 0.2, levels=other)]).probability == 0.01
    with pytest.raises(ScarceError, match=r"are one run \(the same estimate, queries and levels\)"):
        pool_results([_result(0.01, 0.2, levels=levels), _result(0.01, 0.2, levels=levels)])


def _moved() -> tuple:
    """Two levels, the second with model calls: a run that moved chains."""
    from scarce.results import LevelDiagnostics

    return tuple(LevelDiagnostics(level=i, threshold=float(i), probability=0.2, cumulative_probability=0.2 ** (i + 1),
                                  n_seeds=100, correlation_factor=0.0, cov=0.1, n_queries=500 * i, n_failed=0,
                                  acceptance_rate=0.5) for i in range(2))


def test_tiny_probabilities_pool_as_their_rescaled_copies_do():
    """The standard errors are combined relative to the largest: no square underflows near 1e-300."""
    covs, dofs = [46.0, 87.0, 60.0], [3.0, 1.5, 2.0]
    small = pool_results([_result(p * 1e-290, c, nu) for p, c, nu in zip([1e-5, 3e-6, 2e-5], covs, dofs)])
    plain = pool_results([_result(p * 1e-100, c, nu) for p, c, nu in zip([1e-5, 3e-6, 2e-5], covs, dofs)])
    assert small.cov == pytest.approx(plain.cov, rel=1e-12) and plain.cov > 10
    assert small.degrees_of_freedom() == pytest.approx(plain.degrees_of_freedom(), rel=1e-12)
    (lo, hi), (plain_lo, plain_hi) = small.ci(), plain.ci()
    assert lo < small.probability < hi and hi / lo == pytest.approx(plain_hi / plain_lo, rel=1e-9)


def test_covs_near_the_largest_double_pool_to_a_finite_cov():
    pooled = pool_results([_result(1e-6, 1.7e308), _result(1e-6, 1.7e308, n_queries=5)])
    assert pooled.cov == pytest.approx(1.7e308 / math.sqrt(2), rel=1e-12)


def test_the_same_seed_twice_is_one_run_whatever_its_cov(runs):
    """One seed's run with its CoV computed another way (cov_depth=0) is the same run, not a second one."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scarce.ScarceWarning)
        again = scarce.SubsetSimulation(n_samples=500, cov_depth=0).estimate(linear(dim=10, probability=1e-5), seed=3)
    assert again.probability == runs[3].probability and again.cov != runs[3].cov
    with pytest.raises(ScarceError, match=r"results\[0\] and results\[2\] share the seed 3"):
        pool_results([runs[3], runs[4], again])


def test_a_pooled_result_takes_its_runs_estimator_revision():
    from scarce.results import estimator_revision

    assert estimator_revision("pooled subset_simulation") == estimator_revision("subset_simulation") >= 2


def test_a_pooled_result_survives_json_and_keeps_its_interval(runs):
    pooled = pool_results(runs[:10])
    again = EstimateResult.from_json(pooled.to_json())
    assert again == pooled and again.ci() == pooled.ci() and again.degrees_of_freedom() == pooled.degrees_of_freedom()


@pytest.mark.parametrize("results, message", [
    ("runs", r"results must be a sequence \(a list or tuple\) of EstimateResult, got 'runs'"),
    (None, r"results must be a sequence \(a list or tuple\) of EstimateResult, got None"),
    ([], r"results must hold at least 2 independent runs to pool, got 0"),
    ([_result(1e-6, 0.3)], r"at least 2 independent runs to pool, got 1"),
    ([_result(1e-6, 0.3), 0.5], r"results\[1\] must be an EstimateResult, got 0.5"),
    ([_result(1e-6, 0.3), _result(2e-6, 0.3, method="adaptive_multilevel_splitting")],
     r"one estimator on one problem: their methods are \['adaptive_multilevel_splitting', 'subset_simulation'\]"),
    ([_result(1e-6, 0.3), _result(2e-6, 0.3, problem="q")], r"their problems are \['p', 'q'\]"),
    ([_result(1e-6, 0.3), _result(1e-6, 0.4)], r"results\[0\] and results\[1\] are one run \(the same estimate, "
                                                r"queries and levels\)"),
    ([_result(1e-6, 0.3, info={"seed": 7}), _result(2e-6, 0.3, info={"seed": 7})],
     r"results\[0\] and results\[1\] share the seed 7: their random numbers are the same"),
    ([_result(1e-6, 0.3), _result(2e-6, 0.3, levels=None)], r"results\[1\] is not a valid result: its fields cannot "
                                                             r"be read as a result's \(TypeError"),
    ([_result(1e-6, 0.3), _result(2e-6, 0.3, info=None)], r"results\[1\] is not a valid result: .*info must be a dict"),
    ([_result(1e-6, 0.3), _result(2e-6, 0.3, n_queries=np.int64(5))],
     r"results\[1\] is not a valid result: .*n_queries must be an integer >= 0, got np.int64\(5\)"),
    ([_result(1e-6, 0.3), _result(2e-6, 0.3, problem=None)], r"results\[1\] is not a valid result: .*problem must be a string"),
    ([_result(1e-6, 0.3), _result(2e-6, 0.3, reached_failure=False, status="budget")],
     r"results\[1\] did not reach the failure event \(budget\): it is a bound"),
    ([_result(1e-6, 0.3), _result(0.1, 0.1, method="monte_carlo", interval="clopper-pearson")],
     r"results\[1\] is a clopper-pearson count \(monte_carlo\): pool counts exactly"),
    ([_result(1e-6, math.inf), _result(2e-6, 0.3)], r"results\[0\] has no measured error to pool: probability 1e-06, CoV inf"),
    ([_result(0.0, 0.3), _result(2e-6, 0.3)], r"results\[0\] has no measured error"),
    ([_result(1e-6, 0.0), _result(2e-6, 0.3)], r"results\[0\] has no measured error"),
])
def test_what_cannot_be_pooled_is_refused_by_name(results, message):
    with pytest.raises(ScarceError, match=message):
        pool_results(results)


def test_a_pooled_result_or_a_thin_evidence_run_is_refused(runs):
    with pytest.raises(ScarceError, match=r"results\[0\] is already a pooled result: pool the runs themselves"):
        pool_results([pool_results(runs[:2]), runs[2]])
    deep = next(r for r in runs if len(r.levels) > 2)
    thin = dataclasses.replace(deep, info={**deep.info, "failure_lineages": 1, "failure_origin_chains": 100,
                                           "failure_origin_level": 3})
    assert thin.thin_evidence
    with pytest.raises(ScarceError, match=r"results\[1\] carries thin evidence \(lineages\): its CoV is not its error"):
        pool_results([runs[0], thin])
