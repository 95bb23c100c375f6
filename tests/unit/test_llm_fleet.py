"""The fleet: weights, the exact P(A_tau) by enumeration, the cascade against it, calibration."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

from scarce.applications.llm.fleet import Fleet, check_eta, reference_probability
from scarce.calibration import precision_recall
from scarce.errors import ScarceError, ScarceWarning
from scarce.estimators import SubsetSimulation
from scarce.selection import leakage_relative_bias


def scores(seed=0):
    rng = np.random.default_rng(seed)
    benign = rng.normal(-2.0, 1.0, 60)
    adversarial = rng.normal(1.0, 1.0, 25)
    labels = np.arange(25) < 10  # the first 10 adversarial records are jailbreaks
    adversarial[labels] += 1.5
    return benign, adversarial, labels


def test_weights_are_eta_split_evenly_and_sum_to_one():
    benign, adversarial, _ = scores()
    fleet = Fleet.from_scores(benign, adversarial, 1e-3)
    assert fleet.n_records == 85
    np.testing.assert_allclose(fleet.weights[~fleet.adversarial], (1 - 1e-3) / 60)
    np.testing.assert_allclose(fleet.weights[fleet.adversarial], 1e-3 / 25)
    assert math.isclose(fleet.weights.sum(), 1.0)
    assert np.all(np.diff(fleet.scores) <= 0)  # records in decreasing score


def test_exact_probability_matches_enumeration_of_the_records():
    benign = [0.0, 1.0, 1.0, 2.5]
    adversarial = [1.0, 2.0, 3.0]
    eta = 0.2
    fleet = Fleet.from_scores(benign, adversarial, eta)
    records = [(s, (1 - eta) / 4) for s in benign] + [(s, eta / 3) for s in adversarial]
    for tau in (-1.0, 0.0, 0.5, 1.0, 2.0, 2.5, 3.0, 3.5):
        enumerated = sum(w for s, w in records if s >= tau)
        assert math.isclose(fleet.surrogate_probability(tau), enumerated, abs_tol=1e-15), tau


def test_sampler_draws_each_record_with_its_weight():
    benign, adversarial, _ = scores()
    fleet = Fleet.from_scores(benign, adversarial, 0.3)
    u = np.random.default_rng(1).standard_normal((200_000, 1))
    counts = np.bincount(fleet.records(u), minlength=fleet.n_records) / u.shape[0]
    se = np.sqrt(fleet.weights * (1 - fleet.weights) / u.shape[0])
    assert np.all(np.abs(counts - fleet.weights) <= 5 * se + 1e-12)
    # u -> score is non-decreasing: every level is a half-line of u
    grid = np.linspace(-6, 6, 2001)[:, None]
    assert np.all(np.diff(fleet.scores[fleet.records(grid)]) >= 0)


@pytest.mark.parametrize("tie_break", [True, False])
@pytest.mark.parametrize("eta, quantile", [(1e-3, 0.6), (1e-4, 0.3)])
def test_cascade_is_unbiased_for_the_exact_surrogate_probability(eta, quantile, tie_break):
    benign, adversarial, _ = scores()
    tau = float(np.quantile(adversarial, quantile))
    problem = Fleet.from_scores(benign, adversarial, eta).problem(tau, tie_break=tie_break)
    exact = problem.exact_probability
    estimator = SubsetSimulation(n_samples=2000, level_probability=0.1)
    runs = 100
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScarceWarning)
        results = [estimator.estimate(problem, seed=s) for s in np.random.SeedSequence(7).spawn(runs)]
    p = np.array([r.probability for r in results])
    assert all(r.reached_failure for r in results)
    se = p.std(ddof=1) / math.sqrt(runs)
    assert abs(p.mean() - exact) <= 3 * se, (p.mean(), exact, se)
    observed_cov = p.std(ddof=1) / exact
    reported_cov = float(np.mean([r.cov for r in results]))
    # the observed sd of 100 runs of these heavy-tailed estimates (kurtosis 2.5-4.5) is off by 6-9%
    # (1 sd), so a reported CoV within 15% of the true spread gives a ratio inside [0.75, 1.5] unless
    # the observed sd is off by more than about 3 of those
    assert 0.75 <= reported_cov / observed_cov <= 1.5, (reported_cov, observed_cov)


def test_tie_broken_level_score_rises_with_the_latent_and_keeps_the_records_flags():
    benign, adversarial, _ = scores()
    fleet = Fleet.from_scores(benign, adversarial, 0.3)
    tau = float(np.quantile(adversarial, 0.5))
    grid = np.linspace(-6, 6, 20001)[:, None]
    level, failed = fleet.problem(tau).evaluate_latent(grid)
    record_score, record_failed = fleet.problem(tau, tie_break=False).evaluate_latent(grid)
    assert np.array_equal(failed, record_failed)                   # the target event is unchanged
    assert np.all(np.diff(level) >= 0)                             # nested half-lines of u
    assert np.all(level >= record_score)                           # between a record's score ...
    index = fleet.records(grid)
    upper = np.where(index > 0, fleet.scores[np.maximum(index - 1, 0)], np.inf)
    assert np.all(level <= upper)                                  # ... and the next record's
    inside = index == index[len(grid) // 2]                        # one record's interval of u
    assert np.unique(record_score[inside]).size == 1 and np.all(np.diff(level[inside]) > 0)  # rises inside it


def test_tie_broken_levels_halve_the_plateaus_cov_at_the_same_queries():
    """Records are plateaus of the level score: a level cannot split one, so level fractions wander
    from p0. Breaking ties by the place inside the record gives the continuous problem's CoV."""
    rng = np.random.default_rng(0)
    adversarial = rng.normal(0.5, 1.0, 400)
    tau = float(np.sort(adversarial)[-30])
    fleet = Fleet.from_scores(np.minimum(rng.normal(0.0, 1.0, 100), tau - 0.1), adversarial, 1e-3)
    exact = fleet.surrogate_probability(tau)
    estimator = SubsetSimulation(n_samples=2000)
    spread = {}
    for tie_break in (False, True):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ScarceWarning)
            runs = [estimator.estimate(fleet.problem(tau, tie_break=tie_break), seed=s) for s in range(60)]
        p = np.array([r.probability for r in runs])
        spread[tie_break] = (p.std(ddof=1) / exact, np.mean([r.n_queries for r in runs]))
    # 60 runs know a CoV to about 9%: a ratio below 0.75 is 3 of those below 1
    assert spread[True][0] < 0.75 * spread[False][0], spread
    assert spread[True][1] <= 1.05 * spread[False][1], spread


def test_a_record_of_weight_zero_scores_finite_under_the_tie_break():
    """eta = 1 gives benign records weight 0; a latent far in the tail may still land on one."""
    fleet = Fleet.from_scores([5.0], [1.0, 0.0], 1.0)
    score, failed = fleet.problem(0.5).evaluate_latent(np.array([[38.0], [39.0], [0.0]]))
    assert np.all(np.isfinite(score)) and failed.tolist() == [True, True, True]


def test_tie_break_must_be_a_bool():
    with pytest.raises(ScarceError, match="tie_break must be True or False, got 'yes'"):
        Fleet.from_scores([0.0], [1.0], 0.5).problem(0.5, tie_break="yes")


def test_calibration_identity_and_leakage_bias_hold_exactly():
    benign, adversarial, labels = scores()
    for eta in (1e-4, 1e-3, 0.05, 1.0):
        fleet = Fleet.from_scores(benign, adversarial, eta)
        for tau in np.quantile(adversarial[labels], [0.1, 0.5]):
            precision, recall = precision_recall(adversarial, labels.astype(int), tau)
            corrected = fleet.surrogate_probability(tau) * precision / recall
            target = eta * labels.mean()
            pb, ph = fleet.leakage(tau)
            expected = leakage_relative_bias(eta, pb, ph) if eta < 1 else 0.0
            assert math.isclose(corrected / target - 1, expected, rel_tol=1e-9, abs_tol=1e-12)
    # no benign record above tau: the calibrated surrogate probability is exactly eta * pi
    tau = benign.max() + 1e-9
    fleet = Fleet.from_scores(benign, adversarial, 1e-3)
    precision, recall = precision_recall(adversarial, labels.astype(int), tau)
    assert fleet.leakage(tau)[0] == 0.0
    assert math.isclose(fleet.surrogate_probability(tau) * precision / recall, 1e-3 * labels.mean())


def test_reference_interval_covers_and_has_a_relative_half_width():
    labels = np.arange(80) < 20
    ref = reference_probability(labels, 1e-3, seed=3)
    assert ref.probability == pytest.approx(1e-3 * 0.25)
    lo, hi = ref.interval
    assert lo < ref.probability < hi
    # binomial: half-width about 1.96 sqrt(pi (1 - pi) / n) / pi
    assert ref.relative_half_width == pytest.approx(1.96 * math.sqrt(0.25 * 0.75 / 80) / 0.25, rel=0.15)
    assert reference_probability(labels, 1e-3, seed=3) == ref  # seeded


@pytest.mark.parametrize("eta", [0.0, -0.1, 1.5, math.nan, "x", None])
def test_eta_outside_the_unit_interval_is_refused(eta):
    with pytest.raises(ScarceError, match=r"eta must .*\(0, 1\]"):
        check_eta(eta)
    with pytest.raises(ScarceError, match="eta"):
        Fleet.from_scores([0.0], [1.0], eta)


def test_groups_without_records_or_jailbreaks_are_refused():
    with pytest.raises(ScarceError, match="adversarial must hold at least one"):
        Fleet.from_scores([0.0, 1.0], [], 0.1)
    with pytest.raises(ScarceError, match="at least one jailbreak"):
        reference_probability([0, 0, 0], 0.1)
    with pytest.raises(ScarceError, match="benign is empty"):
        Fleet.from_scores([], [1.0], 0.5)


def test_non_finite_scores_are_refused():
    with pytest.raises(ScarceError, match="(?i)nan|finite"):
        Fleet.from_scores([0.0, np.nan], [1.0], 0.1)


def test_eta_one_needs_no_benign_records():
    fleet = Fleet.from_scores([], [1.0, 2.0, 3.0], 1.0)
    assert [fleet.surrogate_probability(t) for t in (0, 2, 4)] == pytest.approx([1.0, 2 / 3, 0.0])


def test_pairs_of_records_enumerate_the_same_leakage():
    benign, adversarial, _ = scores()
    fleet = Fleet.from_scores(benign, adversarial, 0.01)
    for tau in itertools.islice(np.unique(np.concatenate([benign, adversarial])), 0, None, 9):
        pb, ph = fleet.leakage(tau)
        assert pb == pytest.approx(np.mean(benign >= tau))
        assert ph == pytest.approx(np.mean(adversarial >= tau))
