"""Subset Simulation: the Latin-hypercube first level and the genealogy-aware CoV."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from scarce import BudgetExhaustedWarning, ScarceError, SubsetSimulation
from scarce.estimators.chains import run_chains
from scarce.estimators.subset import latin_hypercube_normal
from scarce.kernels import ConditionalSampling
from scarce.problems import four_branch, linear


@pytest.mark.parametrize("block", [1 << 22, 7])
def test_latin_hypercube_has_one_point_per_stratum_and_normal_marginals(block):
    n, dim = 500, 13
    u = latin_hypercube_normal(n, dim, np.random.default_rng(3), block=block)
    assert u.shape == (n, dim) and np.isfinite(u).all()
    strata = np.floor(stats.norm.cdf(u) * n).astype(int)
    for k in range(dim):
        assert np.array_equal(np.sort(strata[:, k]), np.arange(n))
    # coordinates are paired at random: no coordinate pair is strongly correlated
    corr = np.corrcoef(u, rowvar=False)
    assert np.abs(corr[np.triu_indices(dim, 1)]).max() < 0.2
    assert stats.kstest(u[:, 0], stats.norm.cdf).pvalue > 0.01


def test_first_level_lhs_is_the_default_and_mc_still_available():
    problem = linear(dim=10, probability=1e-3)
    lhs = SubsetSimulation(n_samples=500).estimate(problem, seed=1)
    mc = SubsetSimulation(n_samples=500, first_level="mc").estimate(problem, seed=1)
    assert lhs.info["first_level"] == "lhs" and mc.info["first_level"] == "mc"
    assert lhs.reached_failure and mc.reached_failure
    assert lhs.probability != mc.probability


@pytest.mark.parametrize(
    "kwargs, match",
    [({"first_level": "sobol"}, "first_level"), ({"cov_depth": -1}, "cov_depth"), ({"cov_depth": 1.5}, "cov_depth")],
)
def test_bad_first_level_and_cov_depth(kwargs, match):
    with pytest.raises(ScarceError, match=match):
        SubsetSimulation(n_samples=500, **kwargs).estimate(linear(dim=5, probability=1e-2), seed=0)


def test_cov_depth_zero_is_the_au_beck_formula_and_depth_one_is_reported_by_default():
    problem = linear(dim=20, probability=1e-4)
    r0 = SubsetSimulation(n_samples=1000, cov_depth=0).estimate(problem, seed=4)
    r1 = SubsetSimulation(n_samples=1000).estimate(problem, seed=4)
    assert r0.probability == r1.probability
    # the levels' squared CoVs sum to the variance of log P_hat, reported as a CoV (envelope.lognormal_cov)
    assert math.sqrt(sum(l.cov**2 for l in r0.levels)) == pytest.approx(r0.info["cov_au_beck"])
    assert r0.cov == pytest.approx(math.sqrt(math.expm1(r0.info["cov_au_beck"] ** 2)))
    assert r1.info["cov_depth"] == "auto" and r1.info["cov_depth_used"] == 1 and r1.cov != r0.cov
    assert 0.5 * r0.cov < r1.cov < 2.0 * r0.cov
    depth_one = SubsetSimulation(n_samples=1000, cov_depth=1).estimate(problem, seed=4)
    assert depth_one.cov == r1.cov and depth_one.ci() == r1.ci()  # five levels: "auto" is depth 1


def test_auto_depth_takes_the_whole_genealogy_from_ten_levels_on():
    """At p0 = 0.1 a run of ten levels or more (its intermediate levels reach 1e-8) reports,
    under the default, exactly what ``cov_depth="all"`` reports (the variance and the degrees of
    freedom), and a shorter one exactly what depth 1 reports; at p0 = 0.2 ten levels reach only
    0.2^8 and keep depth 1."""

    results = {}
    for probability in (1e-7, 1e-9):  # p0 = 0.1: about 9 and 11 levels, either side of the bar
        problem = linear(dim=10, probability=probability)
        for depth in ("auto", 1, "all"):
            results[probability, depth] = SubsetSimulation(n_samples=1000, cov_depth=depth).estimate(problem, seed=3)
    shallow, deep = results[1e-7, "auto"], results[1e-9, "auto"]
    assert len(shallow.levels) < 10 <= len(deep.levels)
    assert shallow.info["cov_depth_used"] == 1 and deep.info["cov_depth_used"] == "all"
    # the whole genealogy reports at least depth 1's variance; on this shallow run it adds nothing
    assert shallow.cov == results[1e-7, 1].cov <= results[1e-7, "all"].cov
    assert shallow.info["cov_degrees_of_freedom"] == results[1e-7, 1].info["cov_degrees_of_freedom"]
    assert deep.cov == results[1e-9, "all"].cov != results[1e-9, 1].cov
    assert deep.info["cov_degrees_of_freedom"] == results[1e-9, "all"].info["cov_degrees_of_freedom"]
    assert deep.ci() == results[1e-9, "all"].ci()
    wide = SubsetSimulation(n_samples=500).estimate(linear(dim=10, probability=1e-6), seed=3)
    assert wide.level_probability == 0.2 and len(wide.levels) >= 10 and wide.info["cov_depth_used"] == 1
    # a run stopped short of the failure counts every level it reached: nine levels, eight of them
    # intermediate, reach 1e-8
    with pytest.warns(BudgetExhaustedWarning):
        short = SubsetSimulation(n_samples=1000, max_levels=9).estimate(linear(dim=10, probability=1e-9), seed=3)
    assert short.status == "max_levels" and len(short.levels) == 9 and short.info["cov_depth_used"] == "all"


def test_chains_carry_the_parent_of_their_seed():
    rng = np.random.default_rng(0)
    seeds = rng.standard_normal((6, 3))
    parent = np.array([10, 11, 12, 13, 14, 15])
    pop, _ = run_chains(
        ConditionalSampling(), seeds, seeds[:, 0], -np.inf, 30, 0.5, lambda u, step: u[:, 0], rng, seeds_parent=parent
    )
    for chain in range(6):
        row = np.flatnonzero((seeds == pop.u[chain, 0]).all(axis=1))
        assert parent[row[0]] == pop.parent[chain]
    assert np.array_equal(pop.chain_of_flat(), np.repeat(np.arange(6), 5))


def test_reported_cov_tracks_observed_on_the_four_branch_problem():
    # Au-Beck reports about 0.87 of the observed CoV here (chains from one parent are correlated)
    problem = four_branch()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = [SubsetSimulation(n_samples=1000).estimate(problem, seed=300 + i) for i in range(150)]
    est = np.array([r.probability for r in results])
    observed = est.std(ddof=1) / est.mean()
    reported = np.mean([r.cov for r in results])
    assert 0.8 < reported / observed < 1.25, (reported, observed)
    covered = np.mean([lo <= problem.exact_probability <= hi for lo, hi in (r.ci(0.95) for r in results)])
    assert covered >= 0.88
