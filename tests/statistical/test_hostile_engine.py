"""Known-answer scenarios a hostile score makes: ties, plateaus, steps, a misleading score.

Each test runs seeded repetitions and judges them by their own spread: the mean must lie
within 3 standard errors of the truth, or every run that cannot vouch for its estimate must say
so (a flag) with an interval that still holds the truth.  The scenarios are small (d = 2,
N = 500) so the whole file runs in a few seconds.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.stats import norm

from scarce import RareEventProblem, SubsetSimulation
from scarce.envelope import clopper_pearson, lognormal_cov
from scarce.errors import StalledLevelWarning, ThinEvidenceWarning
from scarce.levels import early_stop_allowed

N = 500


def problem(score, failed, dim=2):
    return RareEventProblem(dim, lambda u: (score(u), failed(u)))


def runs(make, reps, n=N, **kwargs):
    """``reps`` seeded runs; ``make(seed)`` builds the problem (so a random oracle can be seeded)."""
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(reps):
            out.append(SubsetSimulation(n_samples=n, **kwargs).estimate(make(seed), seed=seed))
    return out


def z_score(results, truth):
    est = np.array([r.probability for r in results])
    se = est.std(ddof=1) / math.sqrt(est.size)
    assert se > 0, "a degenerate spread would make any tolerance vacuous"
    return (est.mean() - truth) / se


def coverage(results, truth, level=0.95):
    return float(np.mean([lo <= truth <= hi for lo, hi in (r.ci(level) for r in results)]))


def constant_score(seed):
    oracle = np.random.default_rng([seed, 7])  # failure independent of the input, P = 1e-3
    return RareEventProblem(2, lambda u: (np.zeros(len(u)), oracle.random(len(u)) < 1e-3))


def test_constant_score_with_random_oracle_is_unbiased_and_never_retried():
    results = runs(constant_score, 400)
    assert abs(z_score(results, 1e-3)) < 3
    # a plateau is Monte Carlo: one level of N queries, never resampled until a failure shows up
    assert {r.n_queries for r in results} == {N}
    stalled = [r for r in results if r.status == "stalled"]
    assert stalled and all(r.probability == 0 and not r.reached_failure for r in stalled)
    assert all("stalled level" in r.flags for r in results)
    assert coverage(results, 1e-3) >= 0.93


def test_sign_score_plateau_is_unbiased_and_flagged():
    truth = norm.sf(3.5)
    results = runs(lambda s: problem(lambda u: np.sign(u[:, 0]), lambda u: u[:, 0] >= 3.5), 400)
    assert abs(z_score(results, truth)) < 3
    assert all(r.flags for r in results)
    assert coverage(results, truth) >= 0.93


def test_saturating_score_plateau_is_unbiased_and_covered():
    truth = norm.sf(4.0)
    results = runs(lambda s: problem(lambda u: np.minimum(u[:, 0], 2.0), lambda u: u[:, 0] >= 4.0), 400)
    assert abs(z_score(results, truth)) < 3
    assert all(r.flags for r in results)
    assert coverage(results, truth) >= 0.93


@pytest.mark.parametrize("name, score", [
    ("steps", lambda u: np.floor(2 * u[:, 0]) / 2),
    ("jumps", lambda u: u[:, 0] + (u[:, 0] > 2.0)),
])
def test_steps_and_jumps_are_unbiased_with_honest_intervals(name, score):
    truth = norm.sf(3.5)
    results = runs(lambda s: problem(score, lambda u: u[:, 0] >= 3.5), 300, n=2000)
    assert all(r.reached_failure and not r.flags for r in results)
    assert abs(z_score(results, truth)) < 3
    assert 0.93 <= coverage(results, truth) <= 0.99


def test_a_refused_early_stop_on_a_plateau_ends_the_run_without_a_stall():
    """steps at N = 500: the last scored level's samples that did not fail all score 3.0, with 93
    failures along clustered chains (too few effective draws for an early stop). The classic
    rule cannot rise above a plateau, so the refused stop left 6 of these 60 runs flagged
    'stalled level' for a fraction that is the last factor either way; the stop now stands."""
    truth = norm.sf(3.5)
    results = runs(lambda s: problem(lambda u: np.floor(2 * u[:, 0]) / 2, lambda u: u[:, 0] >= 3.5), 60)
    assert all(r.reached_failure and not r.flags for r in results)
    assert abs(z_score(results, truth)) < 3


@pytest.mark.slow
def test_misleading_score_is_flagged_and_its_intervals_hold_the_truth():
    """Score u2, failure u1 >= 3.5: the chains climb away from the failure set."""
    truth = norm.sf(3.5)
    results = runs(lambda s: problem(lambda u: u[:, 1], lambda u: u[:, 0] >= 3.5), 150)
    reached = [r for r in results if r.reached_failure]
    assert reached, "some runs stumble into the failure set: the case this test is about"
    thin = [r for r in reached if r.thin_evidence]
    assert len(thin) >= 0.85 * len(reached)
    # one or two lineages, or under 5% of the origin level's chains (1-4 of the 100 a level 'auto' gives at N = 500)
    assert all(r.info["failure_lineages"] <= max(2, 0.05 * r.info["failure_origin_chains"]) for r in thin)
    assert np.mean([bool(r.flags) for r in results]) >= 0.95
    assert coverage(results, truth) >= 0.93


def test_thin_evidence_warns():
    with pytest.warns(ThinEvidenceWarning, match="descend from 1 of the"):
        for seed in range(40):
            p = problem(lambda u: u[:, 1], lambda u: u[:, 0] >= 3.5)
            r = SubsetSimulation(n_samples=N, max_levels=12).estimate(p, seed=seed)
            if r.thin_evidence and r.info["failure_lineages"] == 1:
                break
    assert r.thin_evidence and "thin evidence" in " ".join(r.flags)
    lo, hi = r.ci()
    assert lo == 0.0 and hi >= clopper_pearson(r.levels[0].n_failed, N)[1]


def test_probability_near_one_never_gets_a_zero_width_interval():
    truth = norm.sf(-3.0)
    results = runs(lambda s: problem(lambda u: u[:, 0], lambda u: u[:, 0] >= -3.0), 400)
    widths = [hi - lo for lo, hi in (r.ci() for r in results)]
    assert min(widths) > 0
    assert all(hi <= 1.0 for _, hi in (r.ci() for r in results))
    assert coverage(results, truth) >= 0.93
    assert abs(z_score(results, truth)) < 3


def test_no_failure_region_gives_zero_with_the_first_level_bound():
    results = runs(lambda s: problem(lambda u: u[:, 0], lambda u: np.zeros(len(u), dtype=bool)), 10, max_levels=8)
    for r in results:
        assert r.probability == 0.0 and not r.reached_failure and "failure event not reached" in r.flags
        assert r.ci() == clopper_pearson(0, N)


def test_unreached_run_interval_rests_on_the_first_level_not_on_the_last_level_estimate():
    """A run stopped by its budget reports the Monte Carlo interval of its independent first level."""
    p = problem(lambda u: u[:, 0], lambda u: u[:, 0] >= 5.0)
    with pytest.warns(Warning):
        r = SubsetSimulation(n_samples=N, max_queries=2 * N).estimate(p, seed=3)
    assert r.status == "budget" and not r.reached_failure
    assert r.ci() == clopper_pearson(r.levels[0].n_failed, N)
    assert r.ci()[1] > norm.sf(5.0)


def test_stalled_run_warns_and_reports_no_invented_failure():
    p = problem(lambda u: np.minimum(u[:, 0], 1.0), lambda u: u[:, 1] > 4.5)
    with pytest.warns(StalledLevelWarning, match="no level can rise"):
        r = SubsetSimulation(n_samples=N).estimate(p, seed=0)
    assert r.status == "stalled" and r.probability == 0.0 and r.cov == math.inf
    assert r.levels[-1].stalled and r.levels[-1].threshold == math.inf and r.levels[-1].n_failed == 0


def test_calibrated_probability_is_capped_at_one_with_a_warning():
    from scarce.calibration import CalibrationWarning, SurrogateCalibration

    calibration = SurrogateCalibration(threshold=1.1).fit([.1, .2, .3, .9, 1., 1.1], [0, 0, 0, 1, 1, 1])
    with pytest.warns(CalibrationWarning, match="exceeds 1"):
        out = calibration.apply(0.5)
    assert out.probability == 1.0 and out.factor == pytest.approx(3.0)


def test_calibration_random_state_is_named_in_its_error():
    from scarce.calibration import SurrogateCalibration
    from scarce.errors import ScarceError

    calibration = SurrogateCalibration(threshold=0.5, random_state=-1).fit([.1, .9, .2, .8], [0, 1, 0, 1])
    with pytest.raises(ScarceError, match="random_state"):
        calibration.factor_interval()


def test_a_level_beyond_the_memory_bound_is_refused_before_any_model_call():
    from scarce.errors import ScarceError

    calls = []

    def evaluate(u):
        calls.append(len(u))
        return u[:, 0], u[:, 0] > 3

    huge = RareEventProblem(10**6, evaluate)
    with pytest.raises(ScarceError, match=r"n_samples=2000 .* allow_large=True"):
        SubsetSimulation(n_samples=2000).estimate(huge, seed=0)
    assert not calls
    with pytest.raises(ScarceError, match="allow_large must be True or False"):
        SubsetSimulation(allow_large="yes").estimate(problem(lambda u: u[:, 0], lambda u: u[:, 0] > 3), seed=0)


@pytest.mark.parametrize("value", [np.int64(300), np.int16(300), np.uint32(300)])
def test_numpy_integer_n_samples_is_kept_as_a_plain_int(value):
    r = SubsetSimulation(n_samples=value, stop_factor=np.float16(0.5)).estimate(
        problem(lambda u: u[:, 0], lambda u: u[:, 0] >= 2.0), seed=0)
    assert type(r.n_samples) is int and type(r.info["stop_factor"]) is float
    assert r.reached_failure and 0 < r.probability < 1


def test_thin_evidence_needs_enough_chains_to_mean_anything():
    """With 10 chains a level, a good score's failures sit in one or two chains anyway: no flag."""
    from scarce.problems import linear

    with warnings.catch_warnings():
        warnings.simplefilter("error", ThinEvidenceWarning)
        flagged = [SubsetSimulation(n_samples=100).estimate(linear(10, 1e-6), seed=s).thin_evidence for s in range(40)]
    assert not any(flagged)


def test_every_sample_failed_is_the_failure_level_not_a_stall():
    from scarce.levels import next_threshold

    choice = next_threshold(np.full(4, np.inf), 0.5)
    assert choice.is_failure_level and not choice.stalled and choice.n_above == 4 and choice.probability == 1.0


def test_amls_result_without_failure_or_with_all_failed_has_an_honest_interval():
    from scarce.estimators import AMLS

    nothing = RareEventProblem(2, lambda x: (np.zeros(len(x)), np.zeros(len(x), bool)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lo, hi = AMLS(n_samples=100, n_steps=5).estimate(nothing, seed=0).ci()
        assert lo == 0.0 and hi == pytest.approx(clopper_pearson(0, 100)[1])
        everything = RareEventProblem(2, lambda x: (np.zeros(len(x)), np.ones(len(x), bool)))
        lo, hi = AMLS(n_samples=100, n_steps=5).estimate(everything, seed=0).ci()
    assert lo < 1.0 and hi == 1.0


def test_intervals_hold_at_n_500_where_a_level_has_only_50_chains():
    """Few chains a level: the CoV rests on few lineages, so the interval takes t with G - 1 df."""
    truth = norm.sf(4.0)
    results = runs(lambda s: problem(lambda u: u.sum(1) / 2, lambda u: u.sum(1) / 2 >= 4.0, dim=4), 400)
    assert all(r.reached_failure and not r.flags for r in results)
    assert 0.93 <= coverage(results, truth) <= 0.97
    # a threshold at the p0 N-th sample instead of one below it gave 1.15x here (z = 5.5)
    assert abs(z_score(results, truth)) < 3


def test_jumps_are_unbiased_at_n_500_with_the_boundary_one_sample_below_the_seeds():
    # the level rule of Cerou et al. put the threshold at a seed: 1.07x, z = 3.4 over these runs
    truth = norm.sf(3.5)
    results = runs(lambda s: problem(lambda u: u[:, 0] + (u[:, 0] > 2.0), lambda u: u[:, 0] >= 3.5), 400)
    assert all(r.reached_failure for r in results)
    assert abs(z_score(results, truth)) < 3
    assert 0.93 <= coverage(results, truth) <= 0.97


def test_interval_degrees_of_freedom_combine_the_score_levels_with_the_failure_lineages():
    """Plain problem, N = 500: ``t`` on ``G_eff - 1`` alone covered 0.978 over 1,000 runs (1.5
    standard errors above 0.97), though most of the variance came from the levels before the
    failures, measured on about ``N p0`` chains a level. Satterthwaite's combination of the two
    parts brings the coverage inside 0.93-0.97 with the same CoV. The score orders these failures
    (none below a boundary), so the lineages' part counts them all: ``G - 1``, not Kish's
    ``G_eff - 1``; with ``G_eff`` the mean-centred interval covered 0.9725 of these runs."""
    truth = norm.sf(3.5)
    results = runs(lambda s: problem(lambda u: u[:, 0], lambda u: u[:, 0] >= 3.5), 400)
    combined = []
    for r in results:
        assert r.info["failures_below_boundary"] == 0
        df, lineages = r.info["cov_degrees_of_freedom"], max(r.info["failure_lineages"] - 1, 1)
        if r.info["failure_origin_level"] == 0:
            assert df == lineages
        else:  # Satterthwaite lies between the smaller part's degrees of freedom and their sum
            before = (N if r.info["failure_origin_level"] == 1 else N * r.level_probability) - 1
            assert lineages - 1e-9 <= df <= lineages + before + 1e-9
            combined.append(df / lineages)
    # origin level 1: little variance before it, G - 1 stays; origin 2: the score levels weigh in
    assert len(combined) > 300 and np.mean(np.array(combined) > 1.5) > 0.3
    assert 0.93 <= coverage(results, truth) <= 0.97


def test_one_dimensional_score_in_two_dimensions_reports_its_cov_from_the_latin_hypercube():
    """Level 1 of a Latin-hypercube level 0 is placed almost exactly when the score has one main
    effect: its binomial term alone made the reported CoV 1.11x the observed one here."""
    truth = norm.sf(3.5)
    results = runs(lambda s: problem(lambda u: u[:, 0], lambda u: u[:, 0] >= 3.5), 400)
    assert all(r.reached_failure and not r.flags for r in results)
    est = np.array([r.probability for r in results])
    ratio = np.mean([r.cov for r in results]) / (est.std(ddof=1) / est.mean())
    # a CoV over 400 runs is known to about 4%: within 15% of the observed, and no longer 1.11
    assert 0.85 <= ratio <= 1.08
    assert all(r.levels[1].cov < 0.5 * math.sqrt(0.9 / (N * 0.1)) for r in results)
    assert abs(z_score(results, truth)) < 3


def test_a_run_stopped_at_level_0_gives_its_failures_their_own_latin_hypercube_term():
    """``max_levels=1`` ends the run at level 0: its CoV is that of the failure count there, not
    the term of the level boundary the run never took."""
    oracle = problem(lambda u: u[:, 1], lambda u: np.random.default_rng(abs(int(u[0, 0] * 1e6))).random(len(u)) < 0.035)
    onedim = problem(lambda u: u[:, 0], lambda u: u[:, 0] >= 2.0)
    for make, binomial_share in ((oracle, 0.95), (onedim, 0.0)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = SubsetSimulation(n_samples=1000, max_levels=1).estimate(make, seed=1)
        assert r.status == "max_levels" and r.cov == pytest.approx(lognormal_cov(r.info["cov_au_beck"] ** 2))
        binomial = math.sqrt((1 - r.probability) / (1000 * r.probability))
        # a failure the input does not explain keeps the binomial term; one coordinate's does not
        assert binomial_share * binomial <= r.cov <= lognormal_cov(binomial**2) * (1 + 1e-9)
    assert r.cov < 0.5 * binomial


def test_interval_quantile_follows_the_number_of_failure_lineages():
    from scarce.results import EstimateResult, LevelDiagnostics

    levels = tuple(LevelDiagnostics(i, float(i), 0.1, 0.1 ** i, 50, 0.0, 0.1, 500, 0) for i in range(4))

    def interval(lineages):
        info = {} if lineages is None else {"failure_lineages": lineages, "failure_origin_chains": 50}
        return EstimateResult("subset_simulation", 1e-3, 0.3, 2000, 500, 30, True, "converged",
                              levels=levels, info=info).ci(0.95)

    s = math.sqrt(math.log1p(0.09))  # the interval is centred on log P_hat + s^2 / 2 (the mean's)
    assert interval(None)[1] == pytest.approx(1e-3 * math.exp(s * s / 2 + norm.ppf(0.975) * s))
    from scipy.stats import t

    assert interval(4)[1] == pytest.approx(1e-3 * math.exp(s * s / 2 + t.ppf(0.975, 3) * s))
    assert interval(4)[1] > interval(40)[1] > interval(None)[1]


def weak_score(seed):
    """Score 0.6 u1 + 0.8 u2, failure u1 >= 3.5: the score leans towards the failure, 53 degrees off."""
    return problem(lambda u: 0.6 * u[:, 0] + 0.8 * u[:, 1], lambda u: u[:, 0] >= 3.5)


def test_weak_score_runs_whose_failures_appeared_in_chains_are_flagged_and_hold_the_truth():
    """Unflagged, these runs' 95% intervals held the truth in 0.91 of them (every miss below it),
    with a reported CoV half the observed one: the failure set reaches below the score's levels,
    and how many failures the early levels' chains missed is not in any one run's spread."""
    truth = norm.sf(3.5)
    results = runs(weak_score, 400)
    assert abs(z_score(results, truth)) < 3
    chain_origin = [r for r in results if r.info["failure_origin_level"] >= 1]
    assert len(chain_origin) >= 300
    assert all(r.thin_evidence for r in chain_origin)
    # most for order (0.78 with the 100 chains a level of 'auto' at N = 500; over 0.9 with 50), the rest for lineages
    assert sum(r.thin_evidence_reason == "order" for r in chain_origin) >= 0.7 * len(chain_origin)
    assert all(r.info["failures_below_boundary"] > 0 for r in chain_origin if r.thin_evidence_reason == "order")
    assert coverage(results, truth) >= 0.93
    unflagged = [r for r in results if not r.flags]
    assert unflagged and all(r.info["failure_origin_level"] == 0 for r in unflagged)


def test_weak_score_unflagged_runs_report_an_honest_cov_at_n_2000():
    """At N = 2000 about half the runs find their first failures among level 0's draws: those stay
    unflagged, and their intervals and CoV must hold on their own."""
    truth = norm.sf(3.5)
    results = runs(weak_score, 400, n=2000)
    assert abs(z_score(results, truth)) < 3
    unflagged = [r for r in results if not r.flags]
    assert len(unflagged) >= 120
    est = np.array([r.probability for r in unflagged])
    ratio = np.median([r.cov for r in unflagged]) / (est.std(ddof=1) / est.mean())
    # measured 0.94 and 0.85 on these seeds; 180 runs know a coverage to about 0.017
    assert coverage(unflagged, truth) >= 0.90
    assert 0.75 <= ratio <= 1.15
    assert coverage(results, truth) >= 0.93


def weak30_score(seed):
    """Score cos(30 deg) u1 + 0.5 u2, failure u1 >= 3.5: the failures sit in few chains' lineages."""
    return problem(lambda u: math.cos(math.pi / 6) * u[:, 0] + 0.5 * u[:, 1], lambda u: u[:, 0] >= 3.5)


def test_a_clustered_failure_count_does_not_end_a_run_early():
    """At N = 1000 the early stop fired in 7% of these runs on a level whose conditional failure
    probability is a tenth of p0, because 50 failures had piled up in a few chains: those runs
    returned 2.6 times the truth with intervals that held it in 0.59 of them (0.925 over the
    unflagged runs). An early stop now needs 50 failures in effective draws (Kish's count with
    the chains' Au-Beck factor); seeds 8, 73 and 97 are three that stopped early before."""
    truth = norm.sf(3.5)
    results = runs(weak30_score, 300, n=1000)
    m = 100
    for r in results:
        last = r.levels[-1]
        assert last.n_failed > m or early_stop_allowed(last.n_failed, last.correlation_factor, 1000, 0.1)
    assert all(results[seed].levels[-1].n_failed > m for seed in (8, 73, 97))
    assert abs(z_score(results, truth)) < 3


def test_weak_score_at_n_5000_reports_the_variance_of_the_failures_found_below_the_boundaries():
    """At N = 5000 no run is flagged (level 0 always holds a failure), and the answer is close to
    proportional to how many failures level 1's chains found, about half of them below level 2's
    boundary: later levels copy that count. With only the genealogy's CoV these runs covered 0.927
    (every miss but one below the truth); the below-boundary term is the larger of the two in
    about a third of the runs (0.295), and coverage reaches the band."""
    truth = norm.sf(3.5)
    results = runs(weak_score, 600, n=5000)
    assert abs(z_score(results, truth)) < 3
    assert not any(r.flags for r in results)
    below = np.array([r.info["cov_below_boundary"] for r in results])
    cov = np.array([r.cov for r in results])
    # the floor is a CoV of P_hat (proportional to the count): where it binds, it is the CoV reported
    assert np.all(cov >= below * (1 - 1e-12)) and np.mean(below > 0) > 0.95 and np.mean(np.isclose(cov, below)) > 0.2
    est = np.array([r.probability for r in results])
    ratio = math.sqrt(np.mean(cov ** 2)) / (est.std(ddof=1) / est.mean())
    # measured 0.937 and 1.07; 600 runs know a coverage to about 0.009 and this ratio to about 5%
    assert 0.93 <= coverage(results, truth) <= 0.97
    assert 0.85 <= ratio <= 1.15


@pytest.mark.parametrize("score, failed", [
    (lambda u: u[:, 0], lambda u: u[:, 0] >= 3.5),
    (lambda u: np.floor(2 * u[:, 0]) / 2, lambda u: u[:, 0] >= 3.5),
    (lambda u: np.floor(u[:, 0]), lambda u: u[:, 0] >= 3.5),  # failures tie with a boundary: not below it
    (lambda u: u.sum(1) / 2, lambda u: u.sum(1) / 2 >= 3.0),
])
def test_a_score_that_orders_the_failures_never_finds_one_below_its_boundary(score, failed):
    results = runs(lambda s: problem(score, failed, dim=4), 30)
    assert sum(r.info["failures_found"] for r in results) > 100
    assert all(r.info["failures_below_boundary"] == 0 and r.thin_evidence_reason is None for r in results)
    # and nothing is added to their CoV for failures below a boundary
    assert all(r.info["cov_below_boundary"] == 0.0 for r in results)


def test_a_failure_below_the_boundary_counts_only_where_it_first_appeared_in_chains():
    result = _lineage_result(40, 200, 2, effective=20.0, below=3, found=80)
    assert result.thin_evidence_reason == "order"
    assert any("does not order the failures (3 of the 80" in f for f in result.flags)
    lo, hi = result.ci()
    assert lo == 0.0 and hi >= clopper_pearson(0, 2000)[1]
    assert _lineage_result(40, 2000, 0, effective=20.0, below=3, found=80).thin_evidence_reason is None
    assert _lineage_result(40, 200, 2, effective=20.0, below=0, found=80).thin_evidence_reason is None
    # lineages take precedence: the reason names the stronger evidence first
    assert _lineage_result(2, 200, 2, below=3, found=80).thin_evidence_reason == "lineages"


def _lineage_result(lineages, chains, origin_level, effective=None, below=None, found=None):
    from scarce.results import EstimateResult, LevelDiagnostics

    levels = tuple(LevelDiagnostics(i, float(i), 0.1, 0.1 ** i, 50, 0.0, 0.1, 2000, 0) for i in range(5))
    info = {"failure_lineages": lineages, "failure_origin_chains": chains, "failure_origin_level": origin_level}
    if effective is not None:
        info["failure_lineages_effective"] = effective
    if below is not None:
        info["failures_below_boundary"], info["failures_found"] = below, found
    return EstimateResult("subset_simulation", 1e-4, 0.3, 9000, 2000, 120, True, "converged", levels=levels, info=info)


@pytest.mark.parametrize("lineages, chains, origin_level, thin", [
    (2, 2000, 0, True),     # one or two lineages: thin wherever they appeared
    (5, 2000, 0, False),    # failures first seen among independent draws: a binomial count
    (5, 200, 3, True),      # first seen in chains, from 2.5% of them
    (9, 200, 1, True),
    (10, 200, 1, False),    # 5% of the chains: a score that led there
    (3, 50, 2, False),      # 50 chains: 5% is below three lineages
    (5, 10, 2, False),      # too few chains for the count to mean anything
])
def test_thin_evidence_counts_lineages_against_the_chains_they_appeared_in(lineages, chains, origin_level, thin):
    result = _lineage_result(lineages, chains, origin_level)
    assert result.thin_evidence is thin
    assert any(f.startswith("thin evidence") for f in result.flags) is thin
    if thin:
        assert result.ci()[0] == 0.0


def test_interval_degrees_of_freedom_come_from_the_effective_lineages():
    from scipy.stats import t

    s = math.sqrt(math.log1p(0.09))
    centre = s * s / 2
    assert _lineage_result(40, 2000, 0, effective=4.0).ci()[1] == pytest.approx(
        1e-4 * math.exp(centre + t.ppf(0.975, 3) * s))
    assert _lineage_result(40, 2000, 0).ci()[1] == pytest.approx(1e-4 * math.exp(centre + t.ppf(0.975, 39) * s))
