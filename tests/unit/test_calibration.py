"""Surrogate calibration: definitions, recovery of a known P(T), bootstrap coverage, transfer."""

from __future__ import annotations

import math
import pickle
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats
from sklearn.exceptions import NotFittedError

from scarce.calibration import (
    CalibratedEstimate,
    CalibrationWarning,
    SurrogateCalibration,
    precision_recall,
)
from scarce.errors import ScarceError
from scarce.rulers import make_ruler


class Population:
    """Scores with a known failure rate: T ~ Bernoulli(pi), score | T ~ N(mu_T, sd_T^2)."""

    def __init__(self, pi, bad=(2.0, 1.0), good=(0.0, 1.0)):
        self.pi, self.bad, self.good = pi, bad, good

    def sample(self, n, rng):
        labels = rng.random(n) < self.pi
        scores = np.where(labels, rng.normal(*self.bad, n), rng.normal(*self.good, n))
        return scores, labels.astype(int)

    def tail(self, tau, which):
        mu, sd = getattr(self, which)
        return stats.norm.sf(tau, mu, sd)

    def surrogate_probability(self, tau):
        """Exact P(A_tau)."""
        return self.pi * self.tail(tau, "bad") + (1 - self.pi) * self.tail(tau, "good")

    def calibrated_se(self, tau, n_cal, n_mc=None):
        """Delta-method standard error of P(A_tau) * C_hat, C_hat = n_bad / n_above from n_cal
        samples (plus an independent Monte Carlo P_hat(A_tau) from n_mc samples, if given)."""
        a, pi = self.surrogate_probability(tau), self.pi
        joint = pi * self.tail(tau, "bad")
        var_log = ((1 - pi) / (n_cal * pi) + (1 - a) / (n_cal * a)
                   - 2 * (joint - pi * a) / (n_cal * pi * a))
        if n_mc is not None:
            var_log += (1 - a) / (n_mc * a)
        return pi * math.sqrt(var_log)


# -- definitions ----------------------------------------------------------------------------------
def test_precision_recall_definition_with_ties_at_tau():
    scores = [0.1, 0.5, 0.5, 0.9, 0.7]
    labels = [0, 1, 0, 1, 0]
    assert precision_recall(scores, labels, 0.5) == (0.5, 1.0)   # ">= tau" keeps both 0.5s
    assert precision_recall(scores, labels, 0.6) == (0.5, 0.5)
    p, r = precision_recall(scores, labels, 1.0)
    assert math.isnan(p) and r == 0.0
    p_vec, r_vec = precision_recall(scores, labels, [0.5, 0.6, 0.0])
    np.testing.assert_allclose(p_vec, [0.5, 0.5, 0.4])
    np.testing.assert_allclose(r_vec, [1.0, 0.5, 1.0])


def test_factor_is_precision_over_recall_and_n_bad_over_n_above():
    rng = np.random.default_rng(0)
    scores, labels = Population(0.2).sample(5000, rng)
    cal = SurrogateCalibration(threshold=1.2).fit(scores, labels)
    above = scores >= 1.2
    assert cal.precision_ == pytest.approx(np.mean(labels[above]))
    assert cal.recall_ == pytest.approx(np.mean(above[labels == 1]))
    assert cal.factor_ == pytest.approx(cal.precision_ / cal.recall_)
    assert cal.factor_ == pytest.approx(labels.sum() / above.sum())
    assert (cal.n_samples_, cal.n_bad_, cal.n_above_) == (5000, labels.sum(), above.sum())


def test_sample_weights_equal_replicated_rows():
    rng = np.random.default_rng(1)
    scores, labels = Population(0.3).sample(400, rng)
    w = rng.integers(0, 4, 400)
    weighted = SurrogateCalibration(threshold=1.0).fit(scores, labels, sample_weight=w)
    replicated = SurrogateCalibration(threshold=1.0).fit(np.repeat(scores, w), np.repeat(labels, w))
    assert weighted.precision_ == pytest.approx(replicated.precision_)
    assert weighted.recall_ == pytest.approx(replicated.recall_)
    lo, hi = weighted.set_params(random_state=0).factor_interval()
    assert lo < weighted.factor_ < hi


# -- known answers --------------------------------------------------------------------------------
@pytest.mark.parametrize("tau", [0.5, 1.0, 1.5, 2.5])
def test_calibrated_surrogate_recovers_known_failure_probability(tau):
    """P(A_tau) * C_tau recovers P(T) = 0.05 within 4 standard errors, for several tau."""
    pop = Population(pi=0.05)
    n_cal, n_mc = 20_000, 200_000
    rng = np.random.default_rng([2, int(10 * tau)])
    cal = SurrogateCalibration(threshold=tau).fit(*pop.sample(n_cal, rng))
    exact_a = pop.surrogate_probability(tau)
    assert abs(exact_a - pop.pi) > 0.01       # the surrogate alone is far off: calibration matters
    estimate = cal.apply(exact_a).probability
    assert abs(estimate - pop.pi) <= 4 * pop.calibrated_se(tau, n_cal)
    # with P(A_tau) itself estimated (as the cascade would), from an independent sample
    mc_scores, _ = pop.sample(n_mc, rng)
    estimate = cal.apply(float(np.mean(mc_scores >= tau))).probability
    assert abs(estimate - pop.pi) <= 4 * pop.calibrated_se(tau, n_cal, n_mc)


def test_bootstrap_interval_of_the_factor_covers_the_truth():
    pop, tau, n_cal, reps = Population(pi=0.1), 1.5, 2000, 200
    truth = pop.pi / pop.surrogate_probability(tau)          # population C_tau = P(T) / P(A_tau)
    rng = np.random.default_rng(3)
    covered = 0
    for rep in range(reps):
        cal = SurrogateCalibration(tau, n_resamples=500, random_state=rep).fit(*pop.sample(n_cal, rng))
        lo, hi = cal.factor_interval(0.95)
        covered += lo <= truth <= hi
    # nominal 0.95; 0.88 is 4.5 binomial standard errors below it at 200 replicates
    assert covered / reps >= 0.88


def test_refit_transfers_threshold_but_not_calibration():
    """PAIR -> GCG: same ruler and tau; the inherited C_tau is biased, the refit one is not."""
    pair = Population(pi=0.10, bad=(2.0, 1.0), good=(0.0, 1.0))
    gcg = Population(pi=0.076, bad=(1.4, 0.8), good=(-0.3, 1.3))
    rng = np.random.default_rng(4)
    n_cal = 20_000
    pair_scores, pair_labels = pair.sample(n_cal, rng)
    # the paper's operating point: p75 of the failure scores, via a fitted ruler on 1-D embeddings
    ruler = make_ruler("centroid_p75").fit(pair_scores[:, None], pair_labels)
    tau_scores = ruler.score_samples(pair_scores[:, None])
    inherited = SurrogateCalibration.from_ruler(ruler).fit(tau_scores, pair_labels)
    assert inherited.threshold == ruler.threshold(75)
    gcg_scores, gcg_labels = gcg.sample(n_cal, rng)
    refit = inherited.refit(ruler.score_samples(gcg_scores[:, None]), gcg_labels)
    assert refit.threshold == inherited.threshold and refit is not inherited
    assert refit.factor_ != inherited.factor_
    # P(A_tau) on GCG, exactly (tau mapped back to the raw score scale: the ruler is affine)
    raw_tau = (inherited.threshold - ruler.intercept_) / ruler.coef_[0]
    surrogate = gcg.surrogate_probability(raw_tau)
    se = gcg.calibrated_se(raw_tau, n_cal)
    assert abs(refit.apply(surrogate).probability - gcg.pi) <= 4 * se
    inherited_estimate = inherited.apply(surrogate).probability
    assert abs(inherited_estimate - gcg.pi) > 5 * se and inherited_estimate / gcg.pi < 0.8


# -- applying to an estimate ----------------------------------------------------------------------
class FakeResult:
    """Duck-typed stand-in for scarce.results.EstimateResult."""

    probability = 2e-4

    def ci(self, level=0.95):
        half = stats.norm.ppf(0.5 + level / 2) * 3e-5
        return (self.probability - half, self.probability + half)

    def envelope(self, delta):
        return SimpleNamespace(delta=delta, lower=delta * self.probability, level_lower=(0.1, 0.01))


@pytest.fixture(scope="module")
def fitted_calibration():
    rng = np.random.default_rng(5)
    return SurrogateCalibration(threshold=1.5, random_state=0).fit(*Population(0.2).sample(3000, rng))


def test_apply_to_a_float(fitted_calibration):
    cal = fitted_calibration
    out = cal.apply(0.01)
    assert isinstance(out, CalibratedEstimate)
    assert out.probability == pytest.approx(0.01 * cal.factor_)
    assert (out.surrogate_probability, out.factor, out.threshold) == (0.01, cal.factor_, 1.5)
    assert out.interval is None and out.envelope_lower is None


def test_apply_to_an_estimate_object(fitted_calibration):
    cal, result = fitted_calibration, FakeResult()
    out = cal.apply(result, level=0.9, delta=0.05)
    c = cal.factor_
    assert out.probability == pytest.approx(result.probability * c)
    np.testing.assert_allclose(out.interval, np.array(result.ci(0.9)) * c)
    f_lo, f_hi = cal.factor_interval(0.95)                  # 1 - (1 - 0.9) / 2
    assert out.factor_interval == (f_lo, f_hi) and f_lo < c < f_hi
    b_lo, b_hi = result.ci(0.95)
    np.testing.assert_allclose(out.interval_with_calibration, [b_lo * f_lo, b_hi * f_hi])
    wide, narrow = out.interval_with_calibration, out.interval
    assert wide[0] < narrow[0] < narrow[1] < wide[1]
    assert out.envelope_lower == pytest.approx(0.05 * result.probability * c)
    assert (out.delta, out.level) == (0.05, 0.9)
    with pytest.raises(AttributeError):
        out.probability = 1.0                                 # frozen


def test_apply_to_the_engines_estimate_result(fitted_calibration):
    """Integration with scarce.results.EstimateResult (probability, ci, envelope)."""
    import scarce

    result = scarce.SubsetSimulation(n_samples=300).estimate(
        scarce.problems.linear(dim=5, probability=1e-3), seed=0)
    cal = fitted_calibration
    out = cal.apply(result, delta=0.05)
    c = cal.factor_
    assert out.probability == pytest.approx(result.probability * c)
    np.testing.assert_allclose(out.interval, np.array(result.ci(0.95)) * c)
    assert out.envelope_lower == pytest.approx(result.envelope(0.05).lower * c)
    assert out.envelope.lower == pytest.approx(out.envelope_lower)
    assert out.envelope.factor == pytest.approx(c)


def test_factor_interval_is_seeded_and_survives_pickle(fitted_calibration):
    cal = fitted_calibration
    assert cal.factor_interval() == cal.factor_interval()
    assert pickle.loads(pickle.dumps(cal)).factor_interval() == cal.factor_interval()


# -- bad input ------------------------------------------------------------------------------------
def test_recall_zero_is_an_error_naming_threshold():
    with pytest.raises(ValueError, match=r"threshold=5\.0 gives recall 0.* largest failure score is 0\.9"):
        SurrogateCalibration(threshold=5.0).fit([0.1, 0.9, 0.3], [0, 1, 0])


@pytest.mark.parametrize("threshold", [float("nan"), None, "p75", True])
def test_threshold_must_be_a_real_number(threshold):
    with pytest.raises(ValueError, match="threshold must be a real number"):
        SurrogateCalibration(threshold=threshold).fit([0.1, 0.9], [0, 1])


def test_bad_labelled_sets_are_rejected():
    cal = SurrogateCalibration(threshold=0.5)
    with pytest.raises(ValueError, match="both classes"):
        cal.fit([0.1, 0.9], [1, 1])
    with pytest.raises(ValueError, match="at least 1 score"):
        cal.fit([], [])
    with pytest.raises(ValueError, match=r"scores contains 1 non-finite .* row 1"):
        cal.fit([0.1, np.nan], [0, 1])
    with pytest.raises(ValueError, match="sample_weight must hold 2 non-negative"):
        cal.fit([0.1, 0.9], [0, 1], sample_weight=[1.0, -1.0])
    with pytest.raises(ValueError, match="n_resamples must be an integer in \[1, 10000000\]"):
        SurrogateCalibration(threshold=0.5, n_resamples=0).fit([0.1, 0.9], [0, 1])
    assert SurrogateCalibration(threshold=0.5).fit([-np.inf, np.inf], [0, 1]).factor_ == 1.0


def test_apply_and_interval_validate_their_arguments(fitted_calibration):
    cal = fitted_calibration
    with pytest.raises(NotFittedError):
        SurrogateCalibration(threshold=0.5).factor_interval()
    with pytest.raises(ScarceError, match="estimate must be a probability"):
        cal.apply("1e-4")
    with pytest.raises(ValueError, match=r"estimate probability must be in \[0, 1\]"):
        cal.apply(1.5)
    with pytest.raises(ValueError, match=r"level must be (a finite number )?in \(0, 1\)"):
        cal.factor_interval(95)
    with pytest.raises(ValueError, match="delta: an envelope needs"):
        cal.apply(0.1, delta=0.05)


def test_too_few_failures_warn_in_the_bootstrap():
    scores = np.r_[np.linspace(0, 1, 29), 2.0]
    labels = np.r_[np.zeros(29, int), 1]
    cal = SurrogateCalibration(threshold=1.5, n_resamples=200, random_state=0).fit(scores, labels)
    with pytest.warns(CalibrationWarning, match="had no failure"):
        lo, hi = cal.factor_interval()
    assert lo <= cal.factor_ <= hi


@pytest.mark.parametrize("threshold", ["abc", "0.5", 1 + 2j, None, True, [[0.5], [1.0]], object()])
def test_precision_recall_names_a_threshold_that_is_not_a_real_number(threshold):
    with pytest.raises(ValueError, match="threshold must be a real number or a 1-D array of them"):
        precision_recall([0.1, 0.9], [0, 1], threshold)


def test_weights_near_the_largest_double_give_the_ratios_of_any_scale():
    rng = np.random.default_rng(0)
    labels = np.repeat([0, 1], 100)
    scores = rng.normal(size=200) + labels
    base = precision_recall(scores, labels, 0.5, sample_weight=np.full(200, 3.0))
    assert precision_recall(scores, labels, 0.5, sample_weight=np.full(200, 1e307)) == pytest.approx(base, rel=1e-12)
    huge = SurrogateCalibration(0.5).fit(scores, labels, sample_weight=np.full(200, 1e307))
    assert huge.factor_ == pytest.approx(base[0] / base[1], rel=1e-12)


def test_an_interval_with_every_bootstrap_resample_dropped_is_a_clear_error():
    scores, labels = np.r_[np.zeros(99), 1.0], np.r_[np.zeros(99), 1]
    cal = SurrogateCalibration(0.5, n_resamples=1, random_state=2).fit(scores, labels)
    with pytest.warns(CalibrationWarning), pytest.raises(ValueError, match="none of the 1 bootstrap resamples"):
        cal.factor_interval()
    with pytest.raises(ValueError, match=r"n_resamples must be an integer in \[1, 10000000\]"):
        SurrogateCalibration(0.5, n_resamples=2**40).fit(scores, labels)


def test_a_threshold_or_estimate_beyond_the_doubles_or_not_a_number_is_named():
    scores, labels = [0.1, 0.5, 0.9, 1.2], [0, 0, 1, 1]
    with pytest.raises(ValueError, match="threshold must be a real number"):
        SurrogateCalibration(10**400).fit(scores, labels)
    cal = SurrogateCalibration(0.8).fit(scores, labels)
    with pytest.raises(ValueError, match="estimate probability must be a finite number"):
        cal.apply(10**400)

    class Stored:
        probability = "0.1"

    with pytest.raises(ValueError, match="estimate probability must be a number in"):
        cal.apply(Stored())
