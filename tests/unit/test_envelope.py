"""Unit tests of the CoV formula, intervals and the Ville envelope."""

import math

import numpy as np
import pytest
from scipy.stats import binomtest

from scarce.errors import ScarceError
from scarce.envelope import (
    Envelope,
    chain_correlation_factor,
    clopper_pearson,
    combine_cov,
    latin_hypercube_variance,
    level_cov,
    lineage_variance,
    lognormal_interval,
)


def test_independent_samples_have_zero_correlation_factor():
    ind = np.array([[1], [0], [0], [1]], dtype=bool)
    assert chain_correlation_factor(ind, np.ones_like(ind)) == 0.0


def test_constant_chains_have_maximal_correlation():
    # each chain repeats its seed's indicator: rho(k) = 1 for every lag,
    # gamma = 2 * sum_{k=1}^{Ns-1} (1 - k/Ns) = Ns - 1
    ind = np.repeat(np.array([[1], [0], [0], [0], [1]], dtype=bool), 4, axis=1)
    gamma = chain_correlation_factor(ind, np.ones_like(ind))
    assert gamma == pytest.approx(3.0)


def test_correlation_factor_by_hand():
    ind = np.array([[1, 1, 0], [0, 0, 1]], dtype=float)
    p = 0.5
    r0 = p * (1 - p)
    r1 = (1 * 1 + 1 * 0 + 0 * 0 + 0 * 1) / 4 - p * p
    r2 = (1 * 0 + 0 * 1) / 2 - p * p
    expected = 2 * ((1 - 1 / 3) * r1 / r0 + (1 - 2 / 3) * r2 / r0)
    assert chain_correlation_factor(ind, np.ones((2, 3), bool)) == pytest.approx(max(expected, -1.0))


def test_mask_excludes_missing_states():
    ind = np.array([[1, 1, 1], [0, 0, 0]], dtype=float)
    mask = np.array([[True, True, True], [True, True, False]])
    with_pad = chain_correlation_factor(ind, mask)
    ind2 = ind.copy()
    ind2[1, 2] = 1  # a value in a masked slot must not matter
    assert chain_correlation_factor(ind2, mask) == with_pad


def test_au_beck_level_cov():
    assert level_cov(0.1, 1000) == pytest.approx(math.sqrt(0.9 / 100))
    assert level_cov(0.1, 1000, 2.0) == pytest.approx(math.sqrt(0.9 / 100 * 3))
    assert level_cov(0.0, 1000) == math.inf
    assert combine_cov([0.3, 0.4]) == pytest.approx(0.5)


def test_lognormal_interval_is_centred_on_the_mean_not_the_median():
    lo, hi = lognormal_interval(1e-6, 0.3, 0.95)
    assert lo < 1e-6 < hi
    centre = math.log(1e-6) + 0.5 * math.log1p(0.3**2)  # log P_hat + s^2 / 2
    assert math.log(hi) - centre == pytest.approx(centre - math.log(lo))
    assert math.log(hi) - centre == pytest.approx(1.959964 * math.sqrt(math.log1p(0.3**2)), rel=1e-6)


@pytest.mark.parametrize("cov", [0.1, 0.5, 1.5])
def test_lognormal_interval_misses_an_unbiased_estimate_equally_on_both_sides(cov):
    """An unbiased log-normal estimate: each tail holds 2.5% of the misses (the median-centred interval did not)."""
    s = math.sqrt(math.log1p(cov * cov))
    truth = 1e-4
    estimates = truth * np.exp(s * np.random.default_rng(0).standard_normal(20_000) - 0.5 * s * s)
    assert estimates.mean() == pytest.approx(truth, rel=4 * cov / math.sqrt(20_000))
    bounds = np.array([lognormal_interval(float(p), cov, 0.95) for p in estimates])
    low, high = np.mean(bounds[:, 1] < truth), np.mean(bounds[:, 0] > truth)
    tolerance = 3 * math.sqrt(0.025 * 0.975 / 20_000)  # three binomial standard errors
    assert abs(low - 0.025) < tolerance and abs(high - 0.025) < tolerance


def test_lognormal_interval_holds_the_estimate_and_never_overflows():
    assert lognormal_interval(1e-6, 3.0, 0.5)[0] == 1e-6  # the shifted lower end would pass P_hat
    lo, hi = lognormal_interval(0.1, 5.0, 0.99999999, df=1.0)
    assert lo <= 0.1 and hi == math.inf
    assert lognormal_interval(0.1, 1e300, 0.95) == (0.1, math.inf)  # cov^2 would overflow; s stays finite
    for bad in (dict(level=2.0), dict(level=math.nan), dict(df=0.0), dict(df=-1.0)):
        with pytest.raises(ScarceError, match=next(iter(bad))):
            lognormal_interval(0.1, 0.5, **{"level": 0.95, **bad})


@pytest.mark.parametrize("k, n", [(0, 50), (3, 100), (50, 50), (17, 1000)])
def test_clopper_pearson_matches_scipy(k, n):
    ref = binomtest(k, n).proportion_ci(0.95, method="exact")
    assert clopper_pearson(k, n) == pytest.approx((ref.low, ref.high))


def test_envelope_is_delta_times_running_estimate():
    env = Envelope.from_running([0.1, 0.01, 0.001], 0.001, delta=0.05)
    assert env.level_lower == pytest.approx((0.005, 0.0005, 0.00005))
    assert env.lower == pytest.approx(0.00005)
    scaled = env.scaled(2.0)
    assert scaled.lower == pytest.approx(0.0001) and scaled.factor == 2.0


@pytest.mark.parametrize("delta", [0.0, 1.0, -0.1, float("nan")])
def test_envelope_rejects_bad_delta(delta):
    with pytest.raises(ValueError, match="delta"):
        Envelope.from_running([0.1], 0.1, delta=delta)


def _residuals(indicator, probability):
    indicator = np.atleast_2d(np.asarray(indicator, dtype=float))
    return indicator.sum(axis=1) - probability * indicator.shape[1]


def test_lineage_variance_of_independent_samples_is_binomial():
    # level 0 only, N independent samples, k above: variance (1 - p) / (N p), for any depth
    indicator = np.array([1, 0, 0, 1, 0, 0, 0, 0, 0, 0], dtype=float)[:, None]
    lineage = [(_residuals(indicator, 0.2), None, 0.2)]
    for depth in (0, 1, 3):
        assert lineage_variance(lineage, 10, depth) == pytest.approx(level_cov(0.2, 10) ** 2)


def test_lineage_variance_by_hand():
    # level 0: 4 samples, 2 above (p0 = 1/2); level 1: 3 chains of lengths 2, 1, 1 from parents 0, 0, 1
    r0 = np.array([0.5, 0.5, -0.5, -0.5])
    r1 = np.array([1.0, 1.0, -2.0])  # residual hits of the three chains (sum 0)
    lineage = [(r0, None, 0.5), (r1, np.array([0, 0, 1]), 0.5)]
    n = 4
    # depth 0: chains independent, levels uncorrelated
    assert lineage_variance(lineage, n, 0) == pytest.approx((r0 @ r0 + r1 @ r1) / (n * 0.5) ** 2)
    # depth 1: chains 0 and 1 (siblings) form one group: (1 + 1)^2 + (-2)^2 = 8; the cross term
    # pairs the parents' residuals with their families: 0.5 * 2 + 0.5 * (-2) = 0
    assert lineage_variance(lineage, n, 1) == pytest.approx((r0 @ r0 + 8.0) / (n * 0.5) ** 2)
    # a family that does well where its parent did well adds a positive covariance
    lineage[1] = (np.array([1.0, 1.0, -2.0]), np.array([0, 0, 2]), 0.5)
    cross = 2 * (0.5 * 2 + (-0.5) * (-2)) / (n * 0.5) ** 2
    assert lineage_variance(lineage, n, 1) == pytest.approx((r0 @ r0 + 8.0) / (n * 0.5) ** 2 + cross)


def test_lineage_variance_depth_zero_matches_au_beck_on_real_chains():
    rng = np.random.default_rng(5)
    indicator = rng.random((40, 10)) < np.linspace(0.05, 0.3, 40)[:, None]  # chains differ: correlated states
    p = indicator.mean()
    lineage = [(_residuals(indicator, p), None, p)]
    expected = (_residuals(indicator, p) ** 2).sum() / (400 * p) ** 2
    assert lineage_variance(lineage, 400, 0) == pytest.approx(expected)
    # the chain-sum variance and the Au-Beck correlation factor describe the same spread
    au_beck = level_cov(p, 400, chain_correlation_factor(indicator, np.ones_like(indicator))) ** 2
    assert 0.5 * au_beck < expected < 2.0 * au_beck


def _lhs_fractions(score, dim, n=200, reps=300, seed=3):
    """The fraction above the population's 90% point over ``reps`` Latin hypercubes, and each
    design's own variance estimate."""
    from scarce.estimators.subset import latin_hypercube_normal

    rng = np.random.default_rng(seed)
    threshold = np.quantile(score(np.random.default_rng(99).standard_normal((400_000, dim))), 0.9)
    fractions, estimates = [], []
    for _ in range(reps):
        u = latin_hypercube_normal(n, dim, rng)
        above = score(u) > threshold
        fractions.append(above.mean())
        estimates.append(latin_hypercube_variance(u, above))
    return np.array(fractions), np.array(estimates)


@pytest.mark.parametrize("score, dim", [
    (lambda u: u[:, 0], 2),  # one main effect: the design places the level almost exactly
    (lambda u: u.sum(1), 3),  # additive, spread over three coordinates
    (lambda u: (u * u).sum(1), 2),  # even in each coordinate: main effects, not linear ones
    (lambda u: u[:, 0] * u[:, 1], 2),  # no main effect at all: the binomial variance
])
def test_latin_hypercube_variance_is_conservative_and_below_the_binomial(score, dim):
    n = 200
    fractions, estimates = _lhs_fractions(score, dim, n)
    observed = fractions.var(ddof=1) * n  # per sample, like the estimate
    # the variance of a variance over 300 designs: allow its sampling error (about 8%) and no more
    assert estimates.mean() >= 0.85 * observed
    assert np.all(estimates <= fractions * (1 - fractions) + 1e-12)  # never above each design's p (1 - p)


def test_latin_hypercube_variance_sees_a_single_main_effect():
    fractions, estimates = _lhs_fractions(lambda u: u[:, 0], 2)
    # the binomial term would be 0.09; the design's own error is far below it, and so is the estimate
    assert fractions.var(ddof=1) * 200 < 0.001
    assert estimates.mean() < 0.2 * 0.09


@pytest.mark.parametrize("score, dim, n", [
    (lambda u: u.sum(1), 20, 200),  # additive: the linear fit sees most of the main effects
    (lambda u: u[:, :5].sum(1) + 0.3 * u[:, 5:].sum(1), 40, 400),  # unequal weights
    (lambda u: (u * u).sum(1), 20, 200),  # even main effects, no linear part: the binomial
    (lambda u: u[:, 0] * u[:, 1], 20, 200),  # no main effect at all: the binomial
])
def test_latin_hypercube_variance_in_many_dimensions_is_conservative(score, dim, n):
    # d >= 2 h: the main effects' linear parts replace the windows
    from scarce.envelope import latin_hypercube_window

    assert dim >= 2 * latin_hypercube_window(n)
    fractions, estimates = _lhs_fractions(score, dim, n)
    observed = fractions.var(ddof=1) * n
    assert estimates.mean() >= 0.85 * observed  # the same allowance as in fewer dimensions
    assert np.all(estimates <= fractions * (1 - fractions) + 1e-12)


def test_latin_hypercube_variance_in_many_dimensions_sees_a_linear_score():
    fractions, estimates = _lhs_fractions(lambda u: u.sum(1), 20, 200)
    binomial = fractions * (1 - fractions)
    # the binomial term overstates this design's error by about half; the linear fit does not
    assert fractions.var(ddof=1) * 200 < 0.75 * binomial.mean()
    assert estimates.mean() < 0.75 * binomial.mean()
    # an even score has no linear part: each design keeps its binomial (the fit's noise is not taken)
    fractions, estimates = _lhs_fractions(lambda u: (u * u).sum(1), 20, 200)
    assert np.mean(np.isclose(estimates, fractions * (1 - fractions))) > 0.9


def test_latin_hypercube_variance_bounds_the_linear_fit(monkeypatch):
    import scarce.envelope as envelope
    from scarce.estimators.subset import latin_hypercube_normal

    u = latin_hypercube_normal(1000, 40, np.random.default_rng(5))
    above = u.sum(1) > 8.0
    # the fit reads the first LINEAR_FIT_WORK / (d + 1)^2 rows (here 300), a random subset of a Latin hypercube
    monkeypatch.setattr(envelope, "LINEAR_FIT_WORK", 300 * 41**2)
    capped = latin_hypercube_variance(u, above)
    monkeypatch.undo()
    p = above.mean()
    head = envelope._linear_residual_variance(u[:300], above[:300].astype(float), p * (1 - p))
    assert capped == pytest.approx(head) and capped < 0.8 * p * (1 - p)
    # in a dimension where no row fits the bound, the binomial, before any copy of the points
    wide = np.zeros((40, 70_000), dtype=np.float32)
    assert latin_hypercube_variance(wide, np.arange(40) % 4 == 0) == pytest.approx(0.1875)
    # a point that is not finite: no fit
    u[7, 3] = np.nan
    assert latin_hypercube_variance(u, above) == pytest.approx(p * (1 - p))


def test_latin_hypercube_variance_edge_cases():
    u = np.random.default_rng(0).standard_normal((50, 3))
    assert latin_hypercube_variance(u, np.zeros(50, bool)) == 0.0
    assert latin_hypercube_variance(u, np.ones(50, bool)) == 0.0
    assert latin_hypercube_variance(u[:2], np.array([True, False])) == 0.25
    # d >= 2 h (h = 5 at N = 100): the linear fit; no linear effect keeps the binomial unfitted
    wide = np.random.default_rng(1).standard_normal((100, 10))
    p = np.mean(np.abs(wide[:, 0]) > 1.0)
    assert latin_hypercube_variance(wide, np.abs(wide[:, 0]) > 1.0) == pytest.approx(p * (1 - p))
    # ... and so does a design with too few residual degrees of freedom (N - 11 < 30)
    few = wide[:40]
    p = np.mean(few[:, 0] > 0.0)
    assert latin_hypercube_variance(few, few[:, 0] > 0.0) == pytest.approx(p * (1 - p))
    # blocks of coordinates give the same estimate as one pass
    above = u[:, 0] + u[:, 1] > 1.0
    assert latin_hypercube_variance(u, above, block=50) == pytest.approx(latin_hypercube_variance(u, above))


def test_latin_hypercube_variance_stays_between_zero_and_the_binomial_on_any_design():
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp

    shapes = st.tuples(st.integers(1, 60), st.integers(1, 6))

    @settings(max_examples=200, deadline=None, derandomize=True, database=None)
    @given(data=st.data(), shape=shapes, window=st.one_of(st.none(), st.integers(1, 40)))
    def check(data, shape, window):
        # tied coordinates, repeated points and any indicator, not only Latin-hypercube designs
        u = data.draw(hnp.arrays(np.float64, shape, elements=st.sampled_from([-2.0, -0.5, 0.0, 0.3, 1.0, 4.0])))
        above = data.draw(hnp.arrays(np.bool_, shape[0]))
        value = latin_hypercube_variance(u, above, window)
        p = above.mean()
        assert math.isfinite(value) and 0.0 <= value <= p * (1 - p) + 1e-12

    check()


@pytest.mark.parametrize("call, name", [
    (lambda: clopper_pearson(5, 3), "k"),
    (lambda: clopper_pearson(1, 0), "n"),
    (lambda: clopper_pearson(-1, 3), "k"),
    (lambda: clopper_pearson(1, 3, 1.5), "level"),
    (lambda: level_cov(0.5, 0), "n_samples"),
    (lambda: level_cov(0.5, 2.5), "n_samples"),
    (lambda: Envelope.from_running([0.1], -0.5, 0.05), "final"),
    (lambda: Envelope.from_running([0.1, math.nan], 0.01, 0.05), r"running\[1\]"),
    (lambda: Envelope.from_running([0.1], 0.01, 0.05).scaled(-1.0), "factor"),
    (lambda: Envelope.from_running([0.1], 0.01, 0.05).scaled("x"), "factor"),
    (lambda: Envelope.from_running([0.1], 0.01, 0.05).scaled(math.inf), "factor"),
])
def test_public_interval_helpers_refuse_bad_arguments_by_name(call, name):
    with pytest.raises(ScarceError, match=name):
        call()


@pytest.mark.parametrize("call, message", [
    (lambda: level_cov(math.nan, 100), "probability must be a finite number"),
    (lambda: level_cov(1.5, 100), r"probability must be in \[0, 1\]"),
    (lambda: level_cov(0.1, 100, math.nan), "correlation_factor must be a finite number"),
    (lambda: level_cov(0.1, 100, -2.0), r"correlation_factor must be in \[-1, inf\)"),
    (lambda: lognormal_interval(0.1, 10**400), "cov must be a number >= 0 within the doubles"),
    (lambda: combine_cov(None), "level_covs must be a list of numbers >= 0"),
    (lambda: combine_cov([0.1, -1.0]), "level_covs must be a list of numbers >= 0"),
    (lambda: combine_cov([0.1, 10**400]), "level_covs must be a list of numbers >= 0"),
])
def test_a_nan_or_out_of_range_level_input_is_refused_not_read_as_a_cov_of_zero(call, message):
    with pytest.raises(ScarceError, match=message):
        call()


def test_chain_and_design_arrays_of_the_wrong_shape_are_named():
    from scarce.envelope import Envelope, latin_hypercube_variance, latin_hypercube_window

    with pytest.raises(ScarceError, match="indicator must be a numeric array of shape"):
        chain_correlation_factor(np.ones((3, 4)), np.ones((3, 5), dtype=bool))
    with pytest.raises(ScarceError, match="indicator must be a numeric array of shape"):
        chain_correlation_factor(np.ones(3), np.ones(3, dtype=bool))
    with pytest.raises(ScarceError, match="one row per indicator value"):
        latin_hypercube_variance(np.zeros((60, 2)), np.arange(120) % 2 == 0)
    with pytest.raises(ScarceError, match="n_samples must be an integer >= 1"):
        latin_hypercube_window(-4)
    with pytest.raises(ScarceError, match="running must be a list"):
        Envelope.from_running(None, 0.1, 0.05)
    assert level_cov(0.1, 100, 1.0) == pytest.approx(math.sqrt(0.9 / 10 * 2))
    assert combine_cov([0.1, math.inf]) == math.inf


def test_satterthwaite_degrees_of_freedom_of_a_sum_of_variances():
    from scarce.envelope import satterthwaite_degrees_of_freedom

    # two equal parts on 4 degrees of freedom each: a chi-square of 8
    assert satterthwaite_degrees_of_freedom(2.0, [(1.0, 4.0), (1.0, 4.0)]) == pytest.approx(8.0, rel=1e-15)
    # a part known exactly adds nothing to the spread: 3^2 / (1 / 2)
    assert satterthwaite_degrees_of_freedom(3.0, [(1.0, 2.0), (2.0, None)]) == pytest.approx(18.0, rel=1e-15)
    assert satterthwaite_degrees_of_freedom(3.0, [(3.0, None)]) is None
    assert satterthwaite_degrees_of_freedom(0.0, []) is None


def test_kish_effective_number_counts_equal_weights_and_one_dominant_weight():
    """G equal weights count G; one weight holding nearly all counts about 1; all zero is None (no count)."""
    from scarce.envelope import kish_effective_number

    assert kish_effective_number(np.full(7, 0.3)) == pytest.approx(7.0)
    assert kish_effective_number(np.array([1e6, 1.0, 1.0])) == pytest.approx(1.0, abs=1e-5)
    assert kish_effective_number(np.array([3.0, 1.0])) == pytest.approx(16.0 / 10.0)
    assert kish_effective_number(np.zeros(4)) is None and kish_effective_number(np.zeros(0)) is None
