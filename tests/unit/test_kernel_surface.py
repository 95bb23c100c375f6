"""Response-surface sampling: the fitted surface, its held-out check, and the exactness of its move.

The move is Metropolis-Hastings for N(0, I) restricted to the level whatever the fit, so the
invariance tests force a surface that is wrong for the level (an anisotropic curvature the
surface cannot express) and check that chains started at exact draws keep the law.
"""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from scarce import AdaptiveMultilevelSplitting, RareEventProblem, SubsetSimulation
from scarce.errors import ScarceError
from scarce.estimators.chains import run_chains
from scarce.kernels import ConditionalSampling, ModifiedMetropolis, ResponseSurfaceSampling, make_kernel
from scarce.kernels.response_surface import fit_surface
from scarce.kernels.surface import global_move
from scarce.problems import four_branch, linear, two_regions


def _linear_sample(n, dim, rng, direction):
    u = rng.standard_normal((n, dim))
    return u, 2.0 * (u @ direction) - 1.0


def test_a_linear_score_is_recovered_exactly():
    rng = np.random.default_rng(0)
    direction = np.ones(20) / math.sqrt(20)
    u, score = _linear_sample(1000, 20, rng, direction)
    surface = fit_surface(u, score, 1.5, 0.9)
    assert surface is not None and surface.curvature == 0.0
    np.testing.assert_allclose(surface.direction, direction, atol=1e-10)
    # the fitted level is {2 t - 1 >= 1.5} = {t >= 1.25} (the fit works on standardised scores)
    assert surface.offset / surface.slope == pytest.approx(1.25)
    assert surface.agreement == 1.0


def test_a_chi_square_score_is_recovered_as_one_curvature():
    rng = np.random.default_rng(1)
    u = rng.standard_normal((1000, 10))
    surface = fit_surface(u, np.einsum("ij,ij->i", u, u) - 5.0, 12.0, 0.9)
    assert surface is not None and surface.curvature > 0.0 and surface.agreement == 1.0
    # the fitted level is {|u|^2 >= 17}: no direction, one curvature
    assert surface.slope / surface.curvature < 1e-8
    assert surface.offset / surface.curvature == pytest.approx(17.0)


@pytest.mark.parametrize("case", ["too few points", "infinite threshold", "two regions", "failure outside",
                                  "constant columns"])
def test_no_surface_where_it_cannot_describe_the_level(case):
    rng = np.random.default_rng(2)
    u = rng.standard_normal((400, 10))
    score, threshold = u[:, 0].copy(), 1.0
    if case == "too few points":
        u, score = u[:40], score[:40]  # fewer than 6 (d + 2) finite scores
    elif case == "infinite threshold":
        threshold = math.inf
    elif case == "two regions":
        score = np.abs(u[:, 0])
    elif case == "failure outside":
        score[np.argmin(score)] = math.inf  # a failure whose surface value is far below the level
    else:
        u[:, 3] = 0.0  # a coordinate that never varies: the normal equations are singular
    assert fit_surface(u, score, threshold, 0.9) is None


def _exact_level(n, rng):
    """Exact draws of N(0, I) in d = 3 restricted to {u1 + 0.3 u2^2 >= 1.5} (rejection)."""
    out = []
    while sum(len(x) for x in out) < n:
        u = rng.standard_normal((200_000, 3))
        out.append(u[u[:, 0] + 0.3 * u[:, 1] ** 2 >= 1.5])
    return np.concatenate(out)[:n]


class _StepByStep(ResponseSurfaceSampling):
    """The same kernel proposing step by step (no candidates drawn ahead)."""

    def draws_ahead(self, params, n_chains, n_steps, dim, dtype, rng):  # type: ignore[no-untyped-def]
        return None


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("path", ["ahead", "one step a block", "step by step"])
def test_a_wrong_surface_still_leaves_the_level_invariant(dtype, path, monkeypatch):
    """The isotropic curvature cannot express 0.3 u2^2: the Hastings factors and the level test do the work.

    Whether the level's candidates are drawn before its steps (in one block, or a block a step)
    or step by step, the chains keep the law.
    """
    if path == "one step a block":
        monkeypatch.setattr("scarce.estimators.chains.DRAW_AHEAD_VALUES", 1)
    rng = np.random.default_rng(3)

    def score(x):
        x = x.astype(float)
        return x[:, 0] + 0.3 * x[:, 1] ** 2

    wider = rng.standard_normal((4000, 3))
    wider = wider[score(wider) >= 0.5]
    surface = fit_surface(wider, score(wider), 1.5, 1e-6)
    assert surface is not None and surface.agreement < 0.99  # a real approximation, not the exact level
    seeds = _exact_level(3000, rng).astype(dtype)
    kernel = (_StepByStep if path == "step by step" else ResponseSurfaceSampling)(min_agreement=1e-6)
    population, stats_ = run_chains(kernel, seeds, score(seeds), 1.5, 3000 * 5, kernel.initial_scale,
                                    lambda x, step: score(x), rng, sample=(wider, score(wider)))
    assert population.u.dtype == dtype
    last = population.u[:, -1].astype(float)
    reference = _exact_level(20_000, np.random.default_rng(4))
    assert 0.2 < stats_.acceptance_rate < 0.99
    for axis in range(3):
        assert stats.ks_2samp(last[:, axis], reference[:, axis]).pvalue > 1e-3, axis


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_drawn_ahead_the_weights_are_phi_s_over_q_computed_independently(dtype):
    """One step drawn ahead uses the step-by-step move's random numbers, and every log weight, of a
    candidate or of a state, is ``log [phi(t) S(t) / q(t)]`` with ``S`` from SciPy's chi-square
    (``-inf`` for a state outside the fitted level)."""
    rng = np.random.default_rng(11)
    u = rng.standard_normal((3000, 6)) * 1.4
    score = np.einsum("ij,ij->i", u, u) + 0.5 * u[:, 0]
    kernel = ResponseSurfaceSampling()
    seeds = u[score >= 12.0][:300]
    params = kernel.fit(kernel.tune(seeds, 1.0), seeds, u, score, 12.0)
    assert params.surfaces is not None and params.surfaces[0].curvature > 0.0
    states = np.concatenate([seeds[:250], u[score < 9.0][:50]]).astype(dtype)  # the last 50 outside the level
    candidate, _ = kernel.propose_weighted(states, params, np.random.default_rng(5))
    ahead, log_weight = kernel.draws_ahead(params, len(states), 1, 6, np.dtype(dtype), np.random.default_rng(5))
    assert ahead.shape == (1, len(states), 6) and ahead.dtype == dtype and log_weight.shape == (1, len(states))
    np.testing.assert_array_equal(ahead[0], candidate)

    def expected(x, surface):
        x = x.astype(float)
        t = x @ surface.direction
        rest = np.einsum("ij,ij->i", x, x) - t * t
        s_range = stats.chi2(surface.dof).sf(np.maximum(surface.residual(t) / surface.curvature, 0.0))
        with np.errstate(divide="ignore"):
            value = -0.5 * t * t + np.log(s_range) - surface.log_proposal(t)
        return np.where(surface.contains(t, rest), value, -np.inf)

    state = kernel.state_log_weights(params, states)
    for rows, surface in ((slice(0, params.split), params.surfaces[0]), (slice(params.split, None), params.surfaces[1])):
        np.testing.assert_allclose(log_weight[0, rows], expected(ahead[0, rows], surface), rtol=1e-7, atol=1e-7)
        np.testing.assert_allclose(state[rows], expected(states[rows], surface), rtol=1e-7, atol=1e-7)
    assert np.isneginf(state[-50:]).all() and np.isfinite(state[:250]).mean() > 0.9


def test_the_move_is_exact_for_an_exact_surface():
    """Linear level: every global candidate lies in the level and has Hastings factor near 1."""
    rng = np.random.default_rng(5)
    direction = np.ones(30) / math.sqrt(30)
    u, score = _linear_sample(2000, 30, rng, direction)
    surface = fit_surface(u, score, 3.0, 0.9)
    state = u[score >= 3.0]
    candidate, log_factor = global_move(surface, state, rng)
    assert np.all(2.0 * (candidate @ direction) - 1.0 >= 3.0 - 1e-9)
    assert np.all(np.abs(log_factor) < 0.05)
    t = stats.truncnorm(2.0, np.inf)
    assert stats.kstest(candidate @ direction, t.cdf).pvalue > 1e-3
    across = candidate - np.outer(candidate @ direction, direction)
    assert stats.kstest(across[:, 0] * math.sqrt(30 / 29), stats.norm.cdf).pvalue > 1e-3


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_the_move_on_a_curved_surface_is_exact_with_the_factor_computed_independently(sign):
    """Chi-square level {|u|^2 >= 16} (and a ball {|u|^2 <= 6}) in d = 10: the factor of every move is
    ``phi(t') S(t') / q(t')`` over the state's, with ``S`` from SciPy's chi-square, and the accepted moves keep the law."""
    rng = np.random.default_rng(8)
    bound = 16.0 if sign > 0 else 6.0
    u = rng.standard_normal((3000, 10)) * (1.3 if sign > 0 else 0.8)
    score = sign * np.einsum("ij,ij->i", u, u)
    surface = fit_surface(u, score, sign * bound, 0.9)
    assert surface is not None and np.sign(surface.curvature) == sign
    state = rng.standard_normal((200_000, 10))
    radius2 = np.einsum("ij,ij->i", state, state)
    state = state[sign * radius2 >= sign * bound][:3000]
    candidate, log_factor = global_move(surface, state, rng)

    def log_weight(x):
        t = x @ surface.direction
        rest = np.einsum("ij,ij->i", x, x) - t * t
        limit = surface.residual(t) / surface.curvature  # kappa s >= r(t)
        chi2 = stats.chi2(surface.dof)
        s_range = chi2.sf(np.maximum(limit, 0.0)) if sign > 0 else chi2.cdf(np.maximum(limit, 0.0))
        assert np.all(surface.contains(t, rest))
        return -0.5 * t * t + np.log(s_range) - surface.log_proposal(t)

    np.testing.assert_allclose(log_factor, log_weight(candidate) - log_weight(state), atol=1e-6)
    moved = np.where((np.log(rng.random(len(state))) < log_factor)[:, None], candidate, state)
    radius = np.einsum("ij,ij->i", moved, moved)
    exact = stats.chi2(10)
    level = exact.sf(bound) if sign > 0 else exact.cdf(bound)
    law = (lambda r: 1.0 - exact.sf(r) / level) if sign > 0 else (lambda r: exact.cdf(r) / level)
    assert stats.kstest(radius, law).pvalue > 1e-3


def test_without_a_surface_the_kernel_is_its_local_kernel_draw_for_draw():
    problem = four_branch()  # a series system: no second-order surface passes the check
    a = SubsetSimulation(n_samples=500).estimate(problem, seed=3)
    b = SubsetSimulation(n_samples=500, kernel=ResponseSurfaceSampling()).estimate(problem, seed=3)
    assert a.probability == b.probability and a.cov == b.cov and a.n_queries == b.n_queries
    c = SubsetSimulation(n_samples=500, kernel=ModifiedMetropolis()).estimate(two_regions(dim=4), seed=3)
    d = SubsetSimulation(n_samples=500, kernel=ResponseSurfaceSampling(local=ModifiedMetropolis())).estimate(
        two_regions(dim=4), seed=3)
    assert c.probability == d.probability and c.n_queries == d.n_queries


@pytest.mark.parametrize("dim", [1, 2, 12])
def test_subset_simulation_with_global_moves_is_unbiased_in_every_dimension(dim):
    problem = linear(dim=dim, probability=1e-5)
    est = np.array([SubsetSimulation(n_samples=500, kernel=ResponseSurfaceSampling()).estimate(problem, seed=s)
                    .probability for s in range(40)])
    se = est.std(ddof=1) / math.sqrt(est.size)
    assert abs(est.mean() - 1e-5) <= 3.5 * se, (est.mean(), se)
    assert 0.05 < est.std() / est.mean() < 0.5


def test_global_moves_cost_one_batched_call_per_step_and_count_every_query():
    calls = []

    def evaluate(x):
        calls.append(len(x))
        return x.sum(axis=1) / math.sqrt(x.shape[1]), x.sum(axis=1) / math.sqrt(x.shape[1]) >= 3.5

    problem = RareEventProblem(20, evaluate, name="counted")
    result = SubsetSimulation(n_samples=400, kernel=ResponseSurfaceSampling()).estimate(problem, seed=0)
    # level 0 once, then one call per MCMC step of each level, all 100 chains together ('auto': 400 x 0.25)
    steps = sum(math.ceil(level.n_queries / 100) for level in result.levels[1:])
    assert len(calls) == 1 + steps and max(calls[1:]) == 100
    assert sum(calls) == result.n_queries
    assert result.levels[1].acceptance_rate > 0.9  # an exact surface: almost every move is taken


def test_splitting_with_global_moves_is_unbiased():
    problem = linear(dim=10, probability=1e-4)
    engine = AdaptiveMultilevelSplitting(n_samples=200, n_killed=100, n_steps=1, n_replicas=2,
                                         kernel=ResponseSurfaceSampling())
    est = np.array([engine.estimate(problem, seed=s).probability for s in range(40)])
    se = est.std(ddof=1) / math.sqrt(est.size)
    assert abs(est.mean() - 1e-4) <= 3.5 * se, (est.mean(), se)


def test_a_level_too_small_to_fit_is_never_handed_to_the_kernel(monkeypatch):
    """Below 6 (d + 2) points no surface can pass: the drivers neither copy the points nor call refit."""
    calls = []
    original = ResponseSurfaceSampling.refit
    monkeypatch.setattr(ResponseSurfaceSampling, "refit", lambda self, *a: calls.append(len(a[3])) or original(self, *a))
    problem = linear(dim=40, probability=1e-4)  # 6 (40 + 2) = 252 points a fit
    small = SubsetSimulation(n_samples=200, kernel=ResponseSurfaceSampling()).estimate(problem, seed=1)
    split = AdaptiveMultilevelSplitting(n_samples=200, n_killed=100, n_steps=1, n_replicas=2,
                                        kernel=ResponseSurfaceSampling()).estimate(problem, seed=1)
    assert calls == []
    assert small.probability == SubsetSimulation(n_samples=200).estimate(problem, seed=1).probability
    assert split.probability == AdaptiveMultilevelSplitting(n_samples=200, n_killed=100, n_steps=1,
                                                            n_replicas=2).estimate(problem, seed=1).probability
    SubsetSimulation(n_samples=400, kernel=ResponseSurfaceSampling()).estimate(problem, seed=1)
    assert calls and min(calls) >= 252  # enough points: fitted at every Markov-chain level


@pytest.mark.parametrize("factory, match", [
    (lambda: ResponseSurfaceSampling(min_agreement=0.0), "min_agreement"),
    (lambda: ResponseSurfaceSampling(min_agreement=1.5), "min_agreement"),
    (lambda: ResponseSurfaceSampling(local=ResponseSurfaceSampling()), "local"),
    (lambda: ResponseSurfaceSampling(local="acs"), "local"),
])
def test_bad_settings_are_refused_by_name(factory, match):
    with pytest.raises((ValueError, ScarceError), match=match):
        factory()


def test_the_registry_builds_it_with_its_parameters():
    kernel = make_kernel("surface", min_agreement=0.8)
    assert isinstance(kernel, ResponseSurfaceSampling) and kernel.min_agreement == 0.8
    assert isinstance(kernel.local, ConditionalSampling)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "ResponseSurfaceSampling" in repr(kernel)


def test_a_chain_never_moves_by_a_surface_fitted_on_its_own_seed():
    """Seeds among the fitted points: cross-fitting keeps the share of a region the surface misses.

    The level {u >= 0.5} plus an island {u < -2.5} that no second-order surface holds; a surface
    fitted on the seeds themselves leans towards them, and chains started there lose part of the
    island's mass (this test fails when both halves of the chains share one surface fitted on all
    the points).
    """
    rng = np.random.default_rng(7)
    island = stats.norm.cdf(-2.5) / (stats.norm.cdf(-2.5) + stats.norm.sf(0.5))

    def score(x):
        x = np.asarray(x, dtype=float)[:, 0]
        return np.where(x > -2.5, x, 3.0)

    kernel = ResponseSurfaceSampling(min_agreement=1e-6)
    counts, sizes = [], []
    for _ in range(1500):
        x = rng.standard_normal((40, 1))
        seeds = x[score(x) >= 0.5]
        population, _ = run_chains(kernel, seeds, score(seeds), 0.5, seeds.shape[0] * 8, 1.0,
                                   lambda u, step: score(u), rng, sample=(x, score(x)))
        counts.append(np.count_nonzero(population.u[:, -1, 0] < -2.5))
        sizes.append(seeds.shape[0])
    counts, sizes = np.array(counts), np.array(sizes)
    share = counts.sum() / sizes.sum()
    se = math.sqrt(np.sum((counts - share * sizes) ** 2)) / sizes.sum()
    assert 4 * se < 0.25 * island  # the test can see the lean
    assert abs(share - island) < 4 * se, (share, island, se)


@pytest.mark.parametrize("a", [0.5, 1.0, 1.5, 24.5, 200.0])
@pytest.mark.parametrize("where", ["zero", "below mode", "at mode", "one sd beyond", "far tail"])
def test_the_chi_square_range_is_drawn_exactly_by_rejection(a, where):
    """Gamma(a) restricted to [c, inf) by rejection has the restricted law (Kolmogorov-Smirnov against SciPy)."""
    from scipy.special import gammaincc

    from scarce.kernels.surface import _upper_gamma

    mode = max(a - 1.0, 0.0)
    c = {"zero": 0.0, "below mode": 0.5 * mode, "at mode": mode, "one sd beyond": mode + math.sqrt(a) + 0.3,
         "far tail": 3.0 * a + 15.0}[where]
    rng = np.random.default_rng(int(10 * a) + len(where))
    bounds = np.full(20_000, c)
    bounds[::2] = c + 0.1  # two bounds in one call: each draw keeps its own
    x = _upper_gamma(a, bounds, rng)
    for bound, draws in ((c, x[1::2]), (c + 0.1, x[::2])):
        assert draws.min() >= bound
        tail = gammaincc(a, bound)
        p = stats.kstest(draws, lambda v: (tail - gammaincc(a, v)) / tail).pvalue
        assert p > 1e-4, (a, bound, p)


def test_a_reused_fit_never_moves_a_chain_by_a_surface_fitted_on_its_own_seed(monkeypatch):
    """The previous test across two levels: the second reuses the first's fit, whose rows hold its seeds.

    The second level's seeds are the first level's (copies of rows the fit read); each half of
    the chains must get the fit re-solved without its own seeds. With one fit of all the rows
    for both halves (``without`` returning the whole fit), the island loses part of its share.
    """
    from scarce.kernels.response_surface import FitBasis

    def score(x):
        x = np.asarray(x, dtype=float)[:, 0]
        return np.where(x > -2.5, x, 3.0)

    def share_of_island(rng):
        kernel = ResponseSurfaceSampling(min_agreement=1e-6)
        counts, sizes, reused = [], [], 0
        for _ in range(1500):
            x = rng.standard_normal((40, 1))
            seeds = x[score(x) >= 0.5]
            first, stats_ = run_chains(kernel, seeds, score(seeds), 0.5, seeds.shape[0] * 8, 1.0,
                                       lambda u, step: score(u), rng, sample=(x, score(x)))
            flat = first.u.reshape(-1, 1)
            second, stats2 = run_chains(kernel, seeds, score(seeds), 0.5, seeds.shape[0] * 8, 1.0,
                                        lambda u, step: score(u), rng, sample=(flat, score(flat)),
                                        previous=stats_.params)
            reused += stats2.params.basis is not None and stats2.params.basis is stats_.params.basis
            counts.append(np.count_nonzero(second.u[:, -1, 0] < -2.5))
            sizes.append(seeds.shape[0])
        counts, sizes = np.array(counts), np.array(sizes)
        share = counts.sum() / sizes.sum()
        return share, math.sqrt(np.sum((counts - share * sizes) ** 2)) / sizes.sum(), reused

    island = stats.norm.cdf(-2.5) / (stats.norm.cdf(-2.5) + stats.norm.sf(0.5))
    share, se, reused = share_of_island(np.random.default_rng(7))
    assert reused > 1000  # the second level did reuse the first's fit
    assert 4 * se < 0.25 * island
    assert abs(share - island) < 4 * se, (share, island, se)
    monkeypatch.setattr(FitBasis, "without", lambda self, out: self.coef)  # one fit of every row for both halves
    leaning, se, _ = share_of_island(np.random.default_rng(7))
    assert abs(leaning - island) > 4 * se, (leaning, island, se)


def test_a_fit_carries_over_while_it_orders_the_new_level(monkeypatch):
    """On a linear score one fit serves every level: the later levels' surfaces are the fresh fits'."""
    import scarce.kernels.surface as surface_module

    fits, surfaces = [], []
    fresh = surface_module.cross_fitted_surfaces
    monkeypatch.setattr(surface_module, "cross_fitted_surfaces", lambda *a: fits.append(1) or fresh(*a))
    original = ResponseSurfaceSampling.refit

    def refit(self, previous, params, seeds, u, score, threshold):
        got = original(self, previous, params, seeds, u, score, threshold)
        again = fresh(np.asarray(seeds), np.asarray(u), np.asarray(score, dtype=float), threshold, 0.9)[0]
        surfaces.append((got.surfaces, again))
        return got

    monkeypatch.setattr(ResponseSurfaceSampling, "refit", refit)
    result = SubsetSimulation(n_samples=1000, kernel=ResponseSurfaceSampling()).estimate(
        linear(dim=20, probability=1e-6), seed=4)
    assert result.status == "converged" and len(surfaces) >= 4
    assert len(fits) == 1  # the kernel fitted the first level only; every later level reused that fit ...
    for got, again in surfaces:  # ... and its surfaces are those a fresh fit of the level gives
        for a, b in zip(got, again):
            np.testing.assert_allclose(a.direction, b.direction, atol=1e-9)
            assert a.offset / a.slope == pytest.approx(b.offset / b.slope, rel=1e-8)


def test_a_fit_that_no_longer_orders_the_level_is_not_reused():
    """New points the fit ranks the wrong way, or a failure outside its level: no reuse; the kernel fits anew."""
    from scarce.kernels.response_surface import cross_fitted_surfaces, reused_surfaces

    rng = np.random.default_rng(3)
    direction = np.eye(6)[0]
    u, score = _linear_sample(400, 6, rng, direction)
    seeds = u[score >= 1.0]
    (first, _), basis = cross_fitted_surfaces(seeds, u, score, 1.0, 0.9)
    new = rng.standard_normal((400, 6))
    assert reused_surfaces(basis, new[:5], new, 2.0 * (new @ direction) - 1.0, 1.5, 0.9) is not None
    assert reused_surfaces(basis, new[:5], new, -2.0 * (new @ direction), 1.5, 0.9) is None
    failing = 2.0 * (new @ direction) - 1.0
    failing[np.argmin(failing)] = math.inf  # a failure the fitted level does not hold
    assert reused_surfaces(basis, new[:5], new, failing, 1.5, 0.9) is None
    kernel = ResponseSurfaceSampling()
    previous = kernel.fit(kernel.tune(seeds, 1.0), seeds, u, score, 1.0)
    mirrored = -2.0 * (new @ direction)
    params = kernel.refit(previous, kernel.tune(new[:5], 1.0), new[:5], new, mirrored, 1.5)
    assert params.basis is not previous.basis
    np.testing.assert_allclose(params.surfaces[0].direction, -direction, atol=1e-9)


def test_a_reused_fit_is_checked_on_points_it_did_not_read():
    """Points that are copies of the fit's rows say nothing about the new level: the check leaves them out.

    The new level holds the fit's own rows, scored as before, and a few fresh points scored the
    other way; over all of them the fitted level would pass (recall x precision above 0.9), over
    the fresh ones it fails.
    """
    from scarce.kernels.response_surface import _agreement, _design, cross_fitted_surfaces, reused_surfaces

    rng = np.random.default_rng(3)
    direction = np.eye(6)[0]
    u, score = _linear_sample(400, 6, rng, direction)
    _, basis = cross_fitted_surfaces(rng.permutation(u[score >= 1.0]), u, score, 1.0, 0.9)
    fresh = rng.standard_normal((12, 6))
    new, new_score = np.concatenate([u, fresh]), np.concatenate([score, -2.0 * (fresh @ direction)])
    theta = float(basis.standardised(np.array([1.5]))[0])
    assert _agreement(_design(new) @ basis.coef, basis.standardised(new_score), theta) > 0.9  # in-sample: passes
    assert reused_surfaces(basis, new[:0], new, new_score, 1.5, 0.9) is None
    assert reused_surfaces(basis, new[:0], fresh, -2.0 * (fresh @ direction), 1.5, 0.9) is None


def test_a_threshold_far_beyond_the_fit_is_fitted_anew_without_a_warning():
    """A threshold a million times beyond the scores the fit read: None (fit anew), no overflow warning."""
    from scarce.kernels.response_surface import cross_fitted_surfaces, reused_surfaces

    rng = np.random.default_rng(8)
    u = rng.standard_normal((600, 3))
    score = np.einsum("ij,ij->i", u, u) + u[:, 0]
    _, basis = cross_fitted_surfaces(rng.permutation(u[score >= 4.0]), u, score, 4.0, 0.9)
    assert basis is not None and basis.coef[-1] != 0.0  # a curved fit
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for threshold in (-1e308, 1e308, 1e7 * basis.magnitude, math.nan, math.inf):
            assert reused_surfaces(basis, u[:0], u, score, threshold, 1e-6) is None
        fresh = rng.standard_normal((600, 3))  # the same score on points the fit did not read: reused
        assert reused_surfaces(basis, u[:0], fresh, np.einsum("ij,ij->i", fresh, fresh) + fresh[:, 0], 5.0,
                               0.9) is not None


def test_a_reused_fit_leaves_out_exactly_the_seeds_rows():
    """``without`` is the least-squares fit of the rows kept, and refuses when too few are left."""
    from scarce.kernels.response_surface import cross_fitted_surfaces

    rng = np.random.default_rng(5)
    u = rng.standard_normal((300, 3))
    score = 0.5 + u @ np.array([1.0, -2.0, 0.5]) + 0.3 * np.einsum("ij,ij->i", u, u) + 0.2 * rng.standard_normal(300)
    _, basis = cross_fitted_surfaces(u[score > 3.0], u, score, 3.0, 1e-6)
    out = np.zeros(basis.u.shape[0], dtype=bool)
    out[rng.choice(out.size, 70, replace=False)] = True
    keep = ~out
    design = np.column_stack([np.ones(keep.sum()), basis.u[keep], np.einsum("ij,ij->i", basis.u[keep], basis.u[keep])])
    expected = np.linalg.lstsq(design, basis.y[keep], rcond=None)[0]
    np.testing.assert_allclose(basis.without(out), expected, rtol=1e-9, atol=1e-12)
    assert basis.without(np.zeros_like(out)) is basis.coef
    assert basis.without(np.arange(out.size) >= 6 * 5 - 1) is None  # 29 rows left, 30 needed


@pytest.mark.parametrize("dim", [3, 20, 100])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_every_copy_of_a_seed_is_recognised_wherever_it_sits(dim, dtype):
    """Cross-fitting leaves a chain's seed out of its surface by matching rows' bytes: exact for copies."""
    from scarce._rows import member, row_keys

    rng = np.random.default_rng(dim)
    u = rng.standard_normal((2190, dim)).astype(dtype)
    seeds = np.ascontiguousarray(u[rng.integers(0, 2190, 700)][::-1])  # copies, elsewhere in memory
    assert member(row_keys(seeds), row_keys(u)).all()
    assert np.unique(row_keys(u)).size == 2190
    other = u[:5].copy()
    other[:, -1] = np.nextafter(other[:, -1], np.inf)  # one ulp off in the last coordinate: not a copy
    assert not member(row_keys(other), row_keys(u)).any()


def test_copies_of_seeds_marks_exactly_the_copies_of_each_half():
    """The first-coordinate screen and the hashes find the same rows as a comparison of whole rows."""
    from scarce.kernels.response_surface import copies_of_seeds

    rng = np.random.default_rng(11)
    u = rng.standard_normal((600, 5))
    u[:40, 0] = u[40:80, 0]  # rows sharing a first coordinate with others, but not copies
    seeds = u[rng.integers(0, 600, 91)]
    u[rng.integers(0, 600, 50)] = seeds[rng.integers(0, 91, 50)]  # more copies, elsewhere
    masks = copies_of_seeds(u, seeds)
    half = (91 + 1) // 2
    for h, part in enumerate((seeds[:half], seeds[half:])):
        expected = (u[:, None, :] == part[None, :, :]).all(axis=2).any(axis=1)
        np.testing.assert_array_equal(masks[h], expected)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_copies_compares_bytes_after_the_first_value(dtype):
    """A copy is the same bytes: -0.0 is not a copy of 0.0, one ulp off is not a copy, and a group
    holding one row several times (or rows sharing a first value) still finds every copy."""
    from scarce._rows import copies

    rng = np.random.default_rng(4)
    u = rng.standard_normal((300, 4)).astype(dtype)
    u[:30, 0] = u[30:60, 0]  # shared first values, different rows
    u[60] = 0.0
    signed = np.zeros((1, 4), dtype=dtype)
    signed[0, 1] = -0.0
    off = u[70:71].copy()
    off[0, 3] = np.nextafter(off[0, 3], dtype(np.inf))
    group = np.concatenate([u[[5, 5, 5, 35, 120]], signed, off])
    masks = copies(u, group, group[:0], u[[60]])
    assert masks.shape == (3, 300)
    np.testing.assert_array_equal(np.flatnonzero(masks[0]), [5, 35, 120])
    assert not masks[1].any() and np.flatnonzero(masks[2]).tolist() == [60]
    assert copies(u[:0], group).shape == (1, 0)


@pytest.mark.parametrize("case", ["collapsed", "shared first values"])
def test_copies_on_a_collapsed_population_compares_by_keys_not_pairs(case):
    """A population collapsed onto two points (a thousand copies of each, a thousand seeds among
    them), or many distinct rows sharing one first value: pairs would number millions, so the rows
    are compared by their keys; the masks are the brute-force comparison's."""
    from scarce._rows import copies

    rng = np.random.default_rng(6)
    if case == "collapsed":
        rows = np.repeat(rng.standard_normal((2, 30)), 1000, axis=0)
        group = rows[:1000].copy()
    else:
        group = rng.standard_normal((400, 30))
        rows = rng.standard_normal((3000, 30))
        rows[::7] = group[rng.integers(0, 400, len(rows[::7]))]
        group[:, 0] = rows[:, 0] = 1.0
    mask = copies(rows, group)[0]
    words = np.uint64
    expected = np.array([(group.view(words) == row.view(words)).all(axis=1).any() for row in rows])
    np.testing.assert_array_equal(mask, expected)
    assert 0 < mask.sum() < len(rows) or case == "collapsed"


def test_left_out_rows_are_subtracted_exactly_from_the_fit():
    """A surface with rows left out is the least-squares fit of the kept rows (its level's geometry)."""
    from scarce.kernels.response_surface import fit_surfaces

    rng = np.random.default_rng(12)
    u = rng.standard_normal((400, 3))
    score = 0.5 + u @ np.array([1.0, -2.0, 0.5]) + 0.3 * np.einsum("ij,ij->i", u, u) + 0.2 * rng.standard_normal(400)
    failed = score > 6.0
    score[failed] = math.inf  # failures: in no least-squares sum, and left out of none here
    out = np.zeros((2, 400), dtype=bool)
    out[0, rng.choice(400, 80, replace=False)] = True
    out[1, rng.choice(400, 60, replace=False)] = True
    out[:, failed] = False
    surfaces = fit_surfaces(u, score, 2.0, 1e-6, out)
    assert 5 < failed.sum() < 100
    for mask, surface in zip(out, surfaces):
        keep = ~mask & np.isfinite(score)
        design = np.column_stack([np.ones(keep.sum()), u[keep], np.einsum("ij,ij->i", u[keep], u[keep])])
        coef = np.linalg.lstsq(design, score[keep], rcond=None)[0]
        slope = np.linalg.norm(coef[1:-1])
        assert surface is not None
        np.testing.assert_allclose(surface.direction, coef[1:-1] / slope, atol=1e-9)
        assert surface.curvature / surface.slope == pytest.approx(coef[-1] / slope, rel=1e-9)
        assert surface.offset / surface.slope == pytest.approx((2.0 - coef[0]) / slope, rel=1e-9)


def test_a_local_kernel_keeps_its_own_parameter_class():
    """A local kernel whose parameters carry more than scale and spread gets them back, unchanged."""
    from dataclasses import dataclass, replace

    from scarce.kernels.base import KernelParams

    @dataclass(frozen=True)
    class DampedParams(KernelParams):
        damping: float = 1.0

    class Damped(ConditionalSampling):
        def tune(self, seeds, scale):
            return DampedParams(scale=scale, spread=np.ones(seeds.shape[1]), damping=0.5)

        def adapted(self, params, acceptance, step):
            assert isinstance(params, DampedParams)
            return replace(params, scale=params.scale * (1.1 if acceptance > self.target_acceptance else 0.9))

        def propose(self, u, params, rng):
            assert isinstance(params, DampedParams) and params.damping == 0.5
            return super().propose(u, replace(params, scale=params.scale * params.damping), rng)

    problem = four_branch()  # no surface passes the check: every level is the local kernel's
    a = SubsetSimulation(n_samples=500, kernel=Damped()).estimate(problem, seed=4)
    b = SubsetSimulation(n_samples=500, kernel=ResponseSurfaceSampling(local=Damped())).estimate(problem, seed=4)
    assert a.probability == b.probability and a.cov == b.cov and a.n_queries == b.n_queries


@pytest.mark.parametrize("shape", ["smooth", "zero cells", "one cell", "steep"])
def test_the_guide_table_is_the_search_of_each_slice_start_and_cells_match_a_full_search(shape):
    """The guide entry of slice ``j`` is ``searchsorted(cdf, j / G cdf[-1], "right")``, and cells() gives the full search's cell."""
    from scarce.kernels.response_surface import _SLICES, GUIDE_ENTRIES, _guide, fit_surface

    rng = np.random.default_rng(len(shape))
    mass = {"smooth": np.exp(-0.5 * np.linspace(-4, 4, 1024) ** 2), "zero cells": np.where(rng.random(1024) < 0.7, 0.0, 1.0),
            "one cell": np.eye(1024)[517], "steep": np.exp(rng.normal(0.0, 25.0, 1024))}[shape]
    cdf = np.cumsum(mass)
    expected = np.minimum(np.searchsorted(cdf, np.arange(GUIDE_ENTRIES) / GUIDE_ENTRIES * cdf[-1], side="right"), 1023)
    assert np.array_equal(_guide(cdf), expected)
    assert np.array_equal(_SLICES * GUIDE_ENTRIES, np.arange(GUIDE_ENTRIES))
    u, score = _linear_sample(4000, 6, rng, np.eye(6)[0])
    surface = fit_surface(u, score + 0.3 * np.sum(u * u, axis=1), 0.5, 0.5)
    assert surface is not None
    from dataclasses import replace

    surface = replace(surface, cdf=cdf, guide=_guide(cdf))
    uniform = np.concatenate([rng.random(50_000), np.arange(GUIDE_ENTRIES) / GUIDE_ENTRIES, [0.0, np.nextafter(1.0, 0.0)]])
    full = np.minimum(np.searchsorted(cdf, uniform * cdf[-1], side="right"), 1023)
    assert np.array_equal(surface.cells(uniform), full)


def test_the_fitted_values_without_a_design_equal_the_designs_product():
    from scarce.kernels.response_surface import _design, _fitted

    rng = np.random.default_rng(7)
    for dtype in (np.float64, np.float32):
        u = rng.standard_normal((300, 9)).astype(dtype)
        coef = rng.standard_normal(11)
        np.testing.assert_allclose(_fitted(u, coef), _design(u) @ coef, rtol=1e-12, atol=1e-12)


def test_a_kept_order_and_a_presorted_table_give_the_same_answers_as_sorting_anew():
    """``copies(order=first_order(rows))`` and ``member(presorted=True)`` are the plain calls, for both dtypes;
    a fit's basis keeps that order and its sorted first column, recomputed for a replaced ``u``."""
    from dataclasses import replace

    from scarce._rows import copies, first_order, member
    from scarce.kernels.response_surface import _fit

    rng = np.random.default_rng(11)
    for dtype in (np.float64, np.float32):
        rows = rng.standard_normal((400, 5)).astype(dtype)
        seeds = np.concatenate([rows[rng.choice(400, 30, replace=False)], rng.standard_normal((5, 5)).astype(dtype)])
        assert np.array_equal(copies(rows, seeds, order=first_order(rows)), copies(rows, seeds))
        values = np.concatenate([rows[:50, 0], rng.standard_normal(20).astype(dtype)])
        assert np.array_equal(member(values, np.sort(rows[:, 0]), presorted=True), member(values, rows[:, 0]))
    u, score = _linear_sample(3000, 4, rng, np.eye(4)[0])
    _, basis = _fit(u, score, 1.0, 0.5, np.zeros((1, 3000), dtype=bool))
    assert np.array_equal(basis.first, np.sort(basis.u[:, 0]))
    other = replace(basis, u=basis.u[::-1].copy())
    assert np.array_equal(other.u[other.order, 0], np.sort(basis.u[:, 0]))
