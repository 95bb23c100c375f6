"""Adaptive multilevel splitting: unbiased on exact problems (ties and k = 1 included), one batched
model call per move, its replicas' error estimate, and what bad input gets."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.stats import norm

from scarce import AdaptiveMultilevelSplitting, RareEventProblem
from scarce.errors import ScarceError, StalledLevelWarning
from scarce.problems import linear
from scarce.results import EstimateResult


def _mean_and_se(estimates: list[float]) -> tuple[float, float]:
    values = np.asarray(estimates)
    se = values.std(ddof=1) / math.sqrt(values.size)
    return float(values.mean()), float(se)


def _runs(estimator: AdaptiveMultilevelSplitting, problem: RareEventProblem, n_runs: int) -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [estimator.estimate(problem, seed=seed) for seed in range(n_runs)]


def _quiet(problem: RareEventProblem, seed: int, **settings):
    """One run, its warnings silenced (the tests look at the flags instead)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return AdaptiveMultilevelSplitting(**settings).estimate(problem, seed=seed)


@pytest.mark.parametrize(("n_samples", "n_killed", "n_runs"), [(40, 1, 30), (100, 10, 60), (100, 50, 60)])
def test_the_estimate_is_unbiased_for_every_k(n_samples, n_killed, n_runs):
    problem = linear(dim=2, probability=1e-3)
    results = _runs(AdaptiveMultilevelSplitting(n_samples=n_samples, n_killed=n_killed, n_steps=3, n_replicas=2),
                    problem, n_runs)
    assert all(r.reached_failure for r in results)
    mean, se = _mean_and_se([r.probability for r in results])
    assert abs(mean - 1e-3) <= 3 * se, f"k={n_killed}: mean {mean:.4g} vs 1e-3, SE {se:.2g}"
    assert se < 0.15e-3  # the test can fail: the runs pin the mean to within 45%


def test_float32_particles_reach_the_model_as_float32_and_stay_unbiased():
    seen = set()
    base = linear(dim=20, probability=1e-3)

    def evaluate(x):
        seen.add(x.dtype)
        return base.evaluate(x)

    problem = RareEventProblem(20, evaluate, name="linear float32")
    results = _runs(AdaptiveMultilevelSplitting(n_samples=100, n_killed=50, n_steps=3, n_replicas=2, dtype="float32"),
                    problem, 60)
    assert seen == {np.dtype(np.float32)} and results[0].info["dtype"] == "float32"
    assert EstimateResult.from_json(results[0].to_json()).info["dtype"] == "float32"
    assert all(r.reached_failure for r in results)
    mean, se = _mean_and_se([r.probability for r in results])
    assert abs(mean - 1e-3) <= 3 * se and se < 0.15e-3, (mean, se)


def test_a_heavily_tied_score_kills_every_tie_and_stays_unbiased():
    # the score is the first coordinate rounded down to a grid of 0.5: plateaus of many ties
    truth = float(norm.sf(3.0))
    problem = RareEventProblem(2, lambda u: (np.floor(2 * u[:, 0]) / 2, u[:, 0] >= 3.0), name="steps")
    results = _runs(AdaptiveMultilevelSplitting(n_samples=200, n_killed=20, n_steps=3, n_replicas=2), problem, 60)
    assert all(r.reached_failure for r in results)
    tied = sum(rep["tied_iterations"] for r in results for rep in r.info["replicas"])
    assert tied > 0  # levels where more than k particles sat at or below the level, all killed
    mean, se = _mean_and_se([r.probability for r in results])
    assert abs(mean - truth) <= 3 * se, f"mean {mean:.4g} vs {truth:.4g}, SE {se:.2g}"


def test_one_batched_model_call_per_move_for_all_replicas_and_every_point_counted():
    calls: list[int] = []
    inner = linear(dim=3, probability=1e-4)

    def evaluate(u):
        calls.append(len(u))
        return inner.evaluate(u)

    problem = RareEventProblem(3, evaluate, inner.transform, name="counted")
    result = AdaptiveMultilevelSplitting(n_samples=100, n_killed=30, n_steps=4, n_replicas=3).estimate(problem, seed=1)
    iterations = [r["iterations"] for r in result.info["replicas"]]
    # every replica's first draws in one call, then one call per move for all replicas still running
    assert len(calls) == 1 + 4 * max(iterations) and calls[0] == 300
    assert sum(calls) == result.n_queries
    active = [sum(i < n for n in iterations) for i in range(max(iterations))]
    assert calls[1:5] == [30 * active[0]] * 4  # k = 30 on a continuous score: 30 copies per replica
    assert result.n_queries == sum(r["n_queries"] for r in result.info["replicas"])


def test_the_replicas_give_the_cov_and_the_interval_degrees_of_freedom():
    result = AdaptiveMultilevelSplitting(n_samples=100, n_steps=3, n_replicas=5).estimate(
        linear(dim=2, probability=1e-3), seed=3)
    values = np.array([r["probability"] for r in result.info["replicas"]])
    assert result.probability == pytest.approx(values.mean())
    assert result.cov == pytest.approx(values.std(ddof=1) / math.sqrt(5) / values.mean())
    assert result.info["cov_degrees_of_freedom"] == 4
    low, high = result.ci(0.95)
    s = math.sqrt(math.log1p(result.cov**2))
    from scipy.stats import t

    assert high / result.probability == pytest.approx(math.exp(s * s / 2 + t.ppf(0.975, 4) * s))  # the mean's interval
    assert low < result.probability < high


def test_same_seed_same_result_and_the_envelope_bound():
    estimator = AdaptiveMultilevelSplitting(n_samples=80, n_steps=2, n_replicas=2)
    a = estimator.estimate(linear(dim=2, probability=1e-3), seed=11)
    b = estimator.estimate(linear(dim=2, probability=1e-3), seed=11)
    assert (a.probability, a.n_queries, a.cov) == (b.probability, b.n_queries, b.cov)
    assert a.envelope(0.05).lower == pytest.approx(0.05 * a.probability)


def test_a_score_that_never_rises_is_flagged_stalled_never_jumped():
    problem = RareEventProblem(2, lambda u: (np.zeros(len(u)), u[:, 0] >= 3.5), name="constant")
    with pytest.warns(StalledLevelWarning, match="tied at one score"):
        result = AdaptiveMultilevelSplitting(n_samples=50, n_steps=2, n_replicas=2).estimate(problem, seed=0)
    assert result.status == "stalled" and not result.reached_failure
    assert "failure event not reached" in result.flags and "stalled level" in result.flags
    low, high = result.ci(0.95)
    assert low == 0.0 and high > norm.sf(3.5)  # the first draws' Clopper-Pearson bound holds the truth
    assert result.n_queries == 100  # nothing was moved


def test_a_budget_exhausted_mid_run_gives_a_flagged_partial_result():
    with pytest.warns(Warning, match="max_queries"):
        result = AdaptiveMultilevelSplitting(n_samples=100, n_steps=3, n_replicas=2, max_queries=1000).estimate(
            linear(dim=2, probability=1e-6), seed=0)
    assert result.status == "budget" and not result.reached_failure
    assert result.n_queries <= 1000
    assert "query budget exhausted" in result.flags


@pytest.mark.parametrize(("params", "message"), [
    ({"n_killed": 0}, r"n_killed must be"),
    ({"n_killed": 100}, r"n_killed must be in \[1, n_samples - 1\] = \[1, 99\]"),
    ({"n_killed": 2.5}, r"n_killed"),
    ({"n_samples": 1}, r"n_samples"),
    ({"n_replicas": 1}, r"n_replicas"),
    ({"n_steps": 0}, r"n_steps"),
    ({"max_queries": 150}, r"max_queries must be at least n_samples \* n_replicas = 400"),
    ({"kernel": "acs"}, r"kernel must be a scarce.kernels.Kernel"),
    ({"dtype": "float16"}, r"dtype must be one of"),
])
def test_bad_settings_are_refused_before_any_model_call(params, message):
    calls = []
    problem = RareEventProblem(2, lambda u: (calls.append(1), (u[:, 0], u[:, 0] > 3))[1])
    settings = {"n_samples": 100, "n_replicas": 4, **params}
    with pytest.raises(ScarceError, match=message):
        AdaptiveMultilevelSplitting(**settings).estimate(problem, seed=0)
    assert not calls


def test_identical_replicas_leave_the_error_unmeasured_not_zero():
    # a discrete score can make every replica return the same value: no spread is no evidence
    problem = RareEventProblem(2, lambda u: (np.floor(u[:, 0]), u[:, 0] >= 2), name="floor")
    result = _quiet(problem, 139, n_samples=20, n_killed=10, n_steps=5, n_replicas=2)
    values = [r["probability"] for r in result.info["replicas"]]
    assert values[0] == values[1] > 0
    assert math.isinf(result.cov)
    assert any(flag.startswith("error not measured") for flag in result.flags)
    low, high = result.ci(0.95)
    assert low == 0.0 and high >= result.probability and high >= norm.sf(2.0)


def test_an_extinct_replica_counts_as_zero_and_the_result_stays_an_estimate():
    # N = 10, k = 1, two moves: copies of one point the kernel could not move fill a replica
    result = _quiet(linear(dim=2, probability=1e-2), 11, n_samples=10, n_killed=1, n_steps=2, n_replicas=3)
    statuses = [r["status"] for r in result.info["replicas"]]
    assert statuses.count("extinct") == result.info["extinct_replicas"] == 2
    assert result.status == "converged" and result.reached_failure and "stalled level" not in result.flags
    assert result.probability == pytest.approx(np.mean([r["probability"] for r in result.info["replicas"]]))


def test_a_run_that_ends_on_its_last_allowed_iteration_has_converged():
    estimator = AdaptiveMultilevelSplitting(n_samples=50, n_steps=3, n_replicas=2)
    free = estimator.estimate(linear(dim=2, probability=1e-3), seed=1)
    needed = max(r["iterations"] for r in free.info["replicas"])
    exact = AdaptiveMultilevelSplitting(n_samples=50, n_steps=3, n_replicas=2, max_iterations=needed).estimate(
        linear(dim=2, probability=1e-3), seed=1)
    assert exact.status == "converged" and exact.probability == free.probability
    with pytest.warns(Warning, match="max_iterations"):
        short = AdaptiveMultilevelSplitting(n_samples=50, n_steps=3, n_replicas=2, max_iterations=needed - 1).estimate(
            linear(dim=2, probability=1e-3), seed=1)
    assert short.status == "max_levels" and not short.reached_failure


def test_the_budget_is_shared_equally_between_the_replicas():
    result = _quiet(linear(dim=2, probability=1e-4), 0, n_samples=100, n_steps=3, n_replicas=4, max_queries=4000)
    costs = [r["n_queries"] for r in result.info["replicas"]]
    assert all(cost <= 1000 for cost in costs) and min(costs) > 100  # every replica got past its first draws


def test_an_extinction_on_a_continuous_score_is_not_called_a_plateau(monkeypatch):
    """All ten particles at or below the level, the top seven copies of one point that never moved:
    an ordinary extinction (estimate 0), not a stall, however distinct the particles below them."""
    from scarce.estimators import splitting

    calls = []
    real = splitting._Replica._extinct
    monkeypatch.setattr(splitting._Replica, "_extinct", lambda self: calls.append(self.index) or real(self))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = AdaptiveMultilevelSplitting(n_samples=10).estimate(linear(dim=10, probability=1e-3), seed=32)
    assert [r["status"] for r in result.info["replicas"]] == ["converged", "converged", "converged", "extinct"]
    assert result.status == "converged" and result.reached_failure and not any("stalled" in f for f in result.flags)
    assert result.flags == (next(f for f in result.flags if f.startswith("few particles")),)  # N = 10 only
    assert calls == [3]  # an ended replica is not examined again while the others run on


@pytest.mark.parametrize("n_samples, n_killed, flagged", [(100, 50, False), (1000, 900, False), (100, 91, True),
                                                          (50, 25, True), (20, 1, True)])
def test_few_particles_or_most_killed_warn_and_flag_the_result(n_samples, n_killed, flagged):
    """Outside N >= 100 and k <= 0.9 N the replicas' interval was measured to fall short of its
    level (0.82-0.93): the run warns and its result carries the flag, through a JSON round trip."""
    from scarce.errors import FewParticlesWarning

    estimator = AdaptiveMultilevelSplitting(n_samples=n_samples, n_killed=n_killed, n_steps=1, n_replicas=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = estimator.estimate(linear(dim=2, probability=1e-2), seed=0)
    warned = [w for w in caught if issubclass(w.category, FewParticlesWarning)]
    assert bool(warned) is flagged and result.info["few_particles"] is flagged
    if flagged:
        assert f"n_samples={n_samples}, n_killed={n_killed}" in str(warned[0].message)
        assert warned[0].filename == __file__  # the user's line
    marks = [f for f in result.flags if f.startswith("few particles")]
    assert len(marks) == int(flagged)
    assert not flagged or marks[0].startswith(f"few particles: N = {n_samples:,} a replica, k = {n_killed} killed")
    assert EstimateResult.from_json(result.to_json()).flags == result.flags
