"""Selection: metrics against closed forms, aggregation, rank validation, the paper's tables."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys

import numpy as np
import pytest
from scipy import integrate, stats

from scarce.errors import ScarceError
from scarce.selection import (
    aggregate,
    aggregate_groups,
    available_metrics,
    bootstrap_interval,
    compute_metric,
    compute_metrics,
    family_ranking,
    group_scores,
    leakage_masses,
    leakage_relative_bias,
    leave_one_out_min,
    metric_by_group,
    metric_spec,
    permutation_pvalue,
    selector_robustness,
    selector_values,
    shared_grid_densities,
    spearman,
    spearman_asymptotic_pvalue,
    validate_selector,
)
from scarce.selection.density import knn_kl_divergence


def test_importing_selection_does_not_import_sklearn_or_scipy_stats():
    code = "import sys, scarce.selection; print('sklearn' in sys.modules, 'scipy.stats' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


@pytest.mark.parametrize("seed", range(6))
def test_mid_ranks_equal_scipy_rankdata_with_ties(seed):
    from scarce.selection.ranking import _mid_ranks

    rng = np.random.default_rng(seed)
    x = rng.integers(0, 4 + seed, size=(50, 3 + 2 * seed)).astype(float)  # many ties
    x[0] = 1.0  # one row all tied
    assert np.array_equal(_mid_ranks(x), stats.rankdata(x, axis=1))
    assert np.array_equal(_mid_ranks(x[3]), stats.rankdata(x[3]))


@pytest.mark.parametrize("seed", range(4))
def test_spearman_pvalue_equals_scipy(seed):
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=12), rng.normal(size=12)
    y[:4] = x[:4]  # some dependence, some ties
    y[5] = y[6]
    expected = stats.spearmanr(x, y)
    assert spearman(x, y) == pytest.approx(expected.statistic, rel=1e-12)
    assert spearman_asymptotic_pvalue(x, y) == pytest.approx(expected.pvalue, rel=1e-9)


N = 10_000
REPLICATES = 20


# -- closed forms for good ~ N(m1, s1^2), bad ~ N(m2, s2^2) ----------------------------------------
def _kl(m1, s1, m2, s2):
    return math.log(s2 / s1) + (s1**2 + (m1 - m2) ** 2) / (2 * s2**2) - 0.5


def _bhattacharyya(m1, s1, m2, s2):
    v = s1**2 + s2**2
    return (m1 - m2) ** 2 / (4 * v) + 0.5 * math.log(v / (2 * s1 * s2))


def _folded_mean(mu, sd):
    """E|X| for X ~ N(mu, sd^2)."""
    if sd == 0:
        return abs(mu)
    return (sd * math.sqrt(2 / math.pi) * math.exp(-mu**2 / (2 * sd**2))
            + mu * (1 - 2 * stats.norm.cdf(-mu / sd)))


def _integral(f, m1, s1, m2, s2):
    lo, hi = min(m1 - 12 * s1, m2 - 12 * s2), max(m1 + 12 * s1, m2 + 12 * s2)
    return integrate.quad(f, lo, hi, points=[m1, m2], limit=200)[0]


def _closed_form(metric, m1, s1, m2, s2, w_bad=0.5):
    p, q = stats.norm(m1, s1).pdf, stats.norm(m2, s2).pdf
    delta = m2 - m1
    if metric == "kl_good_bad":
        return _kl(m1, s1, m2, s2)
    if metric == "kl_bad_good":
        return _kl(m2, s2, m1, s1)
    if metric == "jeffreys":
        return _kl(m1, s1, m2, s2) + _kl(m2, s2, m1, s1)
    if metric == "bhattacharyya":
        return _bhattacharyya(m1, s1, m2, s2)
    if metric == "hellinger":
        return math.sqrt(1 - math.exp(-_bhattacharyya(m1, s1, m2, s2)))
    if metric == "cohens_d":
        return delta / math.sqrt((s1**2 + s2**2) / 2)
    if metric == "auc":
        return stats.norm.cdf(delta / math.sqrt(s1**2 + s2**2))
    if metric == "fisher_ratio":
        return delta**2 / (s1**2 + s2**2)
    if metric == "wasserstein":
        return _folded_mean(delta, abs(s2 - s1))
    if metric == "energy":
        e_xy = _folded_mean(delta, math.hypot(s1, s2))
        return math.sqrt(2 * e_xy - 2 * s1 / math.sqrt(math.pi) - 2 * s2 / math.sqrt(math.pi))
    if metric == "ks":
        x = np.linspace(min(m1, m2) - 8 * max(s1, s2), max(m1, m2) + 8 * max(s1, s2), 400_001)
        return float(np.max(np.abs(stats.norm.cdf(x, m1, s1) - stats.norm.cdf(x, m2, s2))))
    if metric == "overlap":
        return _integral(lambda x: min(p(x), q(x)), m1, s1, m2, s2)
    if metric in ("jensen_shannon", "mutual_information"):
        w = 0.5 if metric == "jensen_shannon" else w_bad

        def integrand(x):
            px, qx = p(x), q(x)
            m = (1 - w) * px + w * qx
            return sum(c * f * math.log(f / m) for c, f in ((1 - w, px), (w, qx)) if f > 0)

        return _integral(integrand, m1, s1, m2, s2)
    raise KeyError(metric)


# The KL estimator needs P not wider than Q (else its tail lies beyond Q's sample; see below).
GAUSSIAN_CASES = {
    "equal-variance": ((0.0, 1.0, 1.0, 1.0), available_metrics()),
    "wider-bad": ((0.0, 1.0, 1.5, 1.5), tuple(m for m in available_metrics()
                                              if m not in ("kl_bad_good", "jeffreys"))),
    "wider-good": ((0.0, 1.5, 1.5, 1.0), ("kl_bad_good", "mutual_information")),
}
CASES = [(case, metric) for case, (_, metrics) in GAUSSIAN_CASES.items() for metric in metrics]


@pytest.fixture(scope="module")
def replicate_values():
    """Every metric on REPLICATES independent Gaussian draws of n = 10^4 per case (seeded)."""
    out = {}
    for case, (params, metrics) in GAUSSIAN_CASES.items():
        m1, s1, m2, s2 = params
        n_bad = N // 2 if case == "wider-good" else N   # unequal sizes exercise the MI prior
        rows = []
        for seed in range(REPLICATES):
            rng = np.random.default_rng([7, seed])
            rows.append(compute_metrics(metrics, rng.normal(m1, s1, N), rng.normal(m2, s2, n_bad)))
        out[case] = ({m: np.array([r[m] for r in rows]) for m in metrics}, n_bad)
    return out


@pytest.mark.parametrize("case, metric", CASES)
def test_metric_matches_its_gaussian_closed_form(case, metric, replicate_values):
    """Mean of 20 estimates at n = 10^4 within 4 standard errors of the closed form.

    Kernel-density metrics may in addition be off by their documented smoothing bias: the
    closed form at the variances inflated by (1 + n^(-2/5)), plus 0.5 % binning error.
    """
    (m1, s1, m2, s2), _ = GAUSSIAN_CASES[case]
    values, n_bad = replicate_values[case]
    v = values[metric]
    w_bad = n_bad / (N + n_bad)
    truth = _closed_form(metric, m1, s1, m2, s2, w_bad)
    allowance = 0.0
    if metric_spec(metric).estimator == "kde":
        f_good, f_bad = N ** -0.2, n_bad ** -0.2
        smoothed = _closed_form(metric, m1, s1 * math.sqrt(1 + f_good**2), m2,
                                s2 * math.sqrt(1 + f_bad**2), w_bad)
        allowance = abs(smoothed - truth) + 0.005 * abs(truth)
    se = v.std(ddof=1) / math.sqrt(v.size)
    assert abs(v.mean() - truth) <= 4 * se + allowance + 1e-12, (v.mean(), truth, se, allowance)


def test_knn_kl_is_biased_low_but_monotone_when_tail_dominated():
    """Documented limitation: KL(P||Q) with much of P beyond Q's sample range is underestimated."""
    rng = np.random.default_rng(11)
    good = rng.normal(0, 1, N)
    estimates = [compute_metric("kl_good_bad", good, rng.normal(shift, 1, N)) for shift in (0.5, 1, 2, 3)]
    assert np.all(np.diff(estimates) > 0)
    assert 0.8 * 4.5 < estimates[-1] < 1.02 * 4.5


def test_identical_distributions_give_no_separation():
    rng = np.random.default_rng(12)
    a, b = rng.normal(0, 1, N), rng.normal(0, 1, N)
    v = compute_metrics(available_metrics(), a, b)
    for name in ("kl_good_bad", "kl_bad_good"):      # k-NN: standard error ~0.03 at n = 10^4
        assert abs(v[name]) < 0.1, name
    for name in ("jensen_shannon", "bhattacharyya", "mutual_information"):
        assert 0 <= v[name] < 0.01, name
    assert v["auc"] == pytest.approx(0.5, abs=0.02) and v["overlap"] > 0.95


def test_ties_and_atoms_stay_finite():
    rng = np.random.default_rng(13)
    good = np.round(rng.normal(0, 1, 2000), 1)
    bad = np.r_[np.full(500, 2.0), rng.normal(2, 1, 500)]
    values = compute_metrics(available_metrics(), good, bad)
    assert all(np.isfinite(x) for x in values.values()), values
    constant = compute_metrics(available_metrics(), np.zeros(50), np.zeros(60))
    assert all(np.isfinite(x) for x in constant.values()), constant


def test_orientation_and_symmetry():
    rng = np.random.default_rng(14)
    good, bad = rng.normal(0, 1, 3000), rng.normal(1, 1.3, 2000)
    fwd = compute_metrics(available_metrics(), good, bad)
    rev = compute_metrics(available_metrics(), bad, good)
    for name in available_metrics():
        if metric_spec(name).symmetric:
            assert fwd[name] == pytest.approx(rev[name], rel=1e-9), name
    assert fwd["cohens_d"] == pytest.approx(-rev["cohens_d"])
    assert fwd["auc"] == pytest.approx(1 - rev["auc"])
    assert fwd["kl_good_bad"] == pytest.approx(rev["kl_bad_good"])
    assert [n for n in available_metrics() if not metric_spec(n).higher_is_better] == ["overlap"]


def test_auc_and_cohens_d_match_references():
    rng = np.random.default_rng(15)
    good, bad = rng.normal(0, 1, 500), np.round(rng.normal(1, 1, 400), 1)
    u = stats.mannwhitneyu(bad, good).statistic
    assert compute_metric("auc", good, bad) == pytest.approx(u / (500 * 400))
    s = math.sqrt((499 * good.var(ddof=1) + 399 * bad.var(ddof=1)) / 898)
    assert compute_metric("cohens_d", good, bad) == pytest.approx((bad.mean() - good.mean()) / s)


def test_density_grid_is_normalised_and_floored():
    rng = np.random.default_rng(16)
    d = shared_grid_densities(rng.normal(0, 1, 1000), rng.normal(8, 0.1, 300), floor=1e-10)
    assert d.good.sum() == pytest.approx(1) and d.bad.sum() == pytest.approx(1)
    assert d.good.min() >= 1e-10 * 0.99 and d.bad.min() > 0
    assert np.diff(d.grid).max() <= min(d.bandwidths) / 4 * 1.0001
    assert d.weight_bad == pytest.approx(300 / 1300)


def test_metric_registry_and_bad_input():
    assert len(available_metrics()) == 14
    with pytest.raises(ScarceError, match="Did you mean 'kl_good_bad'"):
        compute_metric("kl_good_bda", [0, 1], [1, 2])
    with pytest.raises(ValueError, match=r"good contains 1 non-finite .* row 1"):
        compute_metric("auc", [0.0, np.nan, 1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="bad must hold at least 2"):
        compute_metric("auc", [0.0, 1.0], [1.0])
    with pytest.raises(ValueError, match="bandwidth must be"):
        compute_metric("hellinger", [0.0, 1.0, 2.0], [1.0, 2.0, 3.0], bandwidth="wide")
    with pytest.raises(ValueError, match="k must be an integer >= 1, got 0"):
        knn_kl_divergence(np.arange(5.0), np.arange(5.0), k=0)


# -- aggregation ----------------------------------------------------------------------------------
def test_worst_and_mean_aggregation_follow_orientation():
    assert aggregate({1: 0.3, 2: 0.1, 3: 0.2}, "kl_good_bad", "worst") == 0.1
    assert aggregate({1: 0.3, 2: 0.1, 3: 0.2}, "overlap", "worst") == 0.3
    assert aggregate([0.3, 0.1, 0.2], "overlap", "mean") == pytest.approx(0.2)
    with pytest.raises(ScarceError, match="Did you mean 'worst'"):
        aggregate([0.1], "auc", "wrost")


def test_aggregate_groups_picks_the_weakest_turn():
    rng = np.random.default_rng(17)
    groups = {t: (rng.normal(0, 1, 2000), rng.normal(mu, 1, 2000))
              for t, mu in [(1, 3.0), (2, 1.0), (3, 2.0)]}
    per_turn = metric_by_group(groups, "kl_good_bad")
    assert min(per_turn, key=per_turn.get) == 2
    assert aggregate_groups(groups) == per_turn[2]
    assert aggregate_groups(groups, how="mean") == pytest.approx(np.mean(list(per_turn.values())))


# -- rank statistics ------------------------------------------------------------------------------
def _brute_force_pvalues(x, y):
    """p-values by enumerating every permutation with scipy's own Spearman."""
    rho = stats.spearmanr(x, y).statistic
    null = np.array([stats.spearmanr(x, np.asarray(y)[list(p)]).statistic
                     for p in itertools.permutations(range(len(x)))])
    return {"greater": np.mean(null >= rho - 1e-12), "less": np.mean(null <= rho + 1e-12),
            "two-sided": np.mean(np.abs(null) >= abs(rho) - 1e-12)}


@pytest.mark.parametrize("n", [4, 5, 6, 7])
def test_exact_permutation_pvalue_equals_brute_force(n):
    rng = np.random.default_rng(n)
    x = rng.normal(size=n)
    y = np.round(x + rng.normal(size=n), 0)          # ties in y
    for alternative, expected in _brute_force_pvalues(x, y).items():
        got = permutation_pvalue(x, y, alternative=alternative)
        assert got == pytest.approx(expected, abs=1e-12), alternative
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic)


def test_monte_carlo_pvalue_agrees_with_exact_and_is_seeded():
    rng = np.random.default_rng(21)
    x = rng.normal(size=9)
    y = x + rng.normal(scale=1.5, size=9)
    exact = permutation_pvalue(x, y, exact_max_n=9)
    mc = permutation_pvalue(x, y, exact_max_n=8, n_resamples=20_000, seed=3)
    assert abs(mc - exact) <= 4 * math.sqrt(exact * (1 - exact) / 20_000) + 1 / 20_001
    assert mc == permutation_pvalue(x, y, exact_max_n=8, n_resamples=20_000, seed=3)
    assert permutation_pvalue(x, -x, exact_max_n=2, n_resamples=99, seed=0) == pytest.approx(1.0)
    assert permutation_pvalue(x, x, exact_max_n=2, n_resamples=99, seed=0) == pytest.approx(1 / 100)


def test_rank_statistics_validate_input():
    with pytest.raises(ScarceError, match="alternative"):
        permutation_pvalue([1, 2, 3], [1, 2, 3], alternative="bigger")
    with pytest.raises(ValueError, match="equal length"):
        spearman([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match=r"level must be (a finite number )?in \(0, 1\)"):
        bootstrap_interval([1, 2, 3], [1, 2, 3], level=95)
    assert math.isnan(permutation_pvalue([1, 1, 1], [1, 2, 3]))


def test_bootstrap_interval_is_seeded_and_sensible():
    rng = np.random.default_rng(22)
    x = rng.normal(size=30)
    y = x + 0.3 * rng.normal(size=30)
    lo, hi = bootstrap_interval(x, y, seed=1)
    assert (lo, hi) == bootstrap_interval(x, y, seed=1)
    assert lo < spearman(x, y) < hi and lo > 0.6


# -- the paper's tables (appendix app:llm-ranking) -----------------------------------------------
PAPER_ERRORS = {"pc1": 0.026, "centroid": 0.028, "fisher": 0.172, "mah_bad": 0.566,
                "logreg": 1.151, "centroid_rot90": 39.962}
PAPER_WORST_KL = {"pc1": 2.913, "centroid": 2.822, "fisher": 0.960, "mah_bad": 0.043,
                  "logreg": 1.126, "centroid_rot90": 0.037}
PAPER_COHENS_D = {"pc1": 1.510, "centroid": 1.526, "fisher": 1.619, "mah_bad": 0.000,
                  "logreg": 1.726, "centroid_rot90": 0.198}


def test_paper_selector_table_headline_row():
    """tab:selector-cv, worst-turn KL: rho 0.83, asymptotic p 0.042, exact 0.029 / 0.058, LOFO 0.70."""
    v = validate_selector({f: {"t1": k} for f, k in PAPER_WORST_KL.items()}, PAPER_ERRORS,
                          metric="kl_good_bad", seed=0)
    assert round(v.rho, 2) == 0.83 and round(v.p_asymptotic, 3) == 0.042
    assert v.p_permutation == pytest.approx(21 / 720) and v.p_permutation_two_sided == pytest.approx(42 / 720)
    assert v.lofo_min == pytest.approx(0.70)
    assert v.bootstrap_interval == pytest.approx((0.0, 1.0))
    assert math.isnan(v.logo_min)  # a single group: nothing to leave out


def test_paper_selector_table_cohens_d_row():
    """tab:selector-cv, Cohen's d: rho 0.09, p 0.872, LOFO -0.40 (symmetric metrics fail)."""
    v = validate_selector({f: {"t1": d} for f, d in PAPER_COHENS_D.items()}, PAPER_ERRORS,
                          metric="cohens_d", how="mean")
    assert round(v.rho, 2) == 0.09 and round(v.p_asymptotic, 3) == 0.872
    assert v.lofo_min == pytest.approx(-0.40)


def test_leave_one_group_out_reaggregates_without_each_group():
    values = {"a": {1: 3.0, 2: 0.1}, "b": {1: 2.0, 2: 2.0}, "c": {1: 1.0, 2: 1.5}, "d": {1: 0.5, 2: 0.4}}
    errors = {"a": 0.1, "b": 0.2, "c": 0.3, "d": 0.4}
    v = validate_selector(values, errors, metric="kl_good_bad", seed=0)
    assert v.selector == {"a": 0.1, "b": 2.0, "c": 1.0, "d": 0.4}
    # dropping group 1 keeps the bad a (rho 0.2); dropping group 2 gives the true order (rho 1)
    assert v.logo_min == pytest.approx(spearman([0.1, 2.0, 1.5, 0.4], [-0.1, -0.2, -0.3, -0.4]))
    assert v.lofo_min == pytest.approx(leave_one_out_min([0.1, 2.0, 1.0, 0.4], [-0.1, -0.2, -0.3, -0.4]))
    with pytest.raises(ValueError, match="no downstream error for families"):
        validate_selector(values, {"a": 0.1}, metric="kl_good_bad")
    with pytest.raises(ValueError, match="missing"):
        validate_selector({"a": {1: 1.0}, "b": {2: 1.0}}, errors, metric="kl_good_bad")


def test_tables_from_long_format_end_to_end():
    """Synthetic families whose benign leakage grows: worst-turn KL ranks them like the error."""
    rng = np.random.default_rng(23)
    fam, grp, lab, sc = [], [], [], []
    shifts = {"sharp": 4.0, "medium": 2.5, "blunt": 1.5, "blind": 0.3}
    for f, shift in shifts.items():
        for turn in (1, 2, 3):
            for label, mean in ((0, 0.0), (1, shift - 0.2 * turn)):
                n = 400
                fam += [f] * n
                grp += [turn] * n
                lab += [label] * n
                sc += list(rng.normal(mean, 1.0, n))
    scores = group_scores(np.array(fam), np.array(grp), np.array(lab), np.array(sc))
    assert set(scores) == set(shifts) and set(scores["sharp"]) == {1, 2, 3}
    assert len(scores["sharp"][1][0]) == 400
    # long error table: family x variant x cell; best variant per family
    ef, ev, ee = [], [], []
    for rank, f in enumerate(shifts):
        for variant, extra in (("p75", 0.0), ("p95", 0.5)):
            for cell in range(4):
                ef.append(f)
                ev.append(f"{f}_{variant}")
                ee.append(0.02 * (rank + 1) * 10**rank + extra + 0.001 * cell)
    ranking = family_ranking(ef, ev, ee)
    assert [r.family for r in ranking] == list(shifts)
    assert ranking[0].best_variant == "sharp_p75" and ranking[0].n_cells == 4
    errors = {r.family: r.mean_error for r in ranking}
    rows = selector_robustness(scores, errors, metrics=["kl_good_bad", "overlap", "auc"], seed=0)
    assert len(rows) == 6 and rows[0].rho == pytest.approx(1.0)
    worst_kl = selector_values({f: {t: compute_metric("kl_good_bad", *scores[f][t]) for t in (1, 2, 3)}
                                for f in shifts}, "kl_good_bad")
    headline = next(r for r in rows if r.metric == "kl_good_bad" and r.aggregation == "worst")
    assert headline.selector == pytest.approx(worst_kl)
    assert headline.p_permutation == pytest.approx(1 / 24)


# -- benign-leakage bias decomposition (eq. selector-bias-decomp) --------------------------------
def test_leakage_relative_bias_matches_the_calibrated_estimator():
    eta, pi, p_h, p_b = 1e-3, 0.2, 0.6, 2e-4
    surrogate = eta * p_h + (1 - eta) * p_b         # P(A_tau) in the fleet
    calibrated = surrogate * pi / p_h               # C_tau from harmful-only calibration
    assert (calibrated - eta * pi) / (eta * pi) == pytest.approx(leakage_relative_bias(eta, p_b, p_h))
    assert leakage_relative_bias(1e-3, 1e-3, 1.0) == pytest.approx(0.999)
    np.testing.assert_allclose(leakage_relative_bias(np.array([0.1, 0.5]), 0.1, 0.5), [1.8, 0.2])
    with pytest.raises(ValueError, match="eta must lie in"):
        leakage_relative_bias(0.0, 0.1, 0.5)
    with pytest.raises(ValueError, match="harmful_mass"):
        leakage_relative_bias(0.1, 0.1, 0.0)
    assert leakage_masses([0, 1, 2, 3], [2, 3, 4, 5], 2.5) == (0.25, 0.75)
