"""Conditioned rulers: the ruler contract over every registered name fitted per group, the case
they exist for (a pooled ruler anti-correlated with one group's failures), and bad groups."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.metrics import roc_auc_score

from scarce.errors import ScarceError
from scarce.rulers import ConditionedRuler, RulerFitWarning, available_rulers, make_ruler

# a ruler that takes the groups itself (the boundary ruler) is not wrapped per group: make_ruler refuses by=
ALL_RULERS = tuple(n for n in available_rulers() if not getattr(make_ruler(n), "takes_groups", False))
DIM = 5
#: two groups whose failures lie in different directions from their normal inputs
SHIFTS = {0: np.array([3.0, 1.0, 0.0, 0.0, 0.0]), 1: np.array([0.0, 0.0, 3.0, -1.0, 0.0])}


def _grouped(seed: int = 0, n_good: int = 300, n_bad: int = 150):
    rng = np.random.default_rng(seed)
    Z, y, g = [], [], []
    for group, shift in SHIFTS.items():
        Z += [rng.standard_normal((n_good, DIM)) + 4 * group, rng.standard_normal((n_bad, DIM)) + 4 * group + shift]
        y += [np.zeros(n_good, int), np.ones(n_bad, int)]
        g += [np.full(n_good + n_bad, group)]
    return np.vstack(Z), np.concatenate(y), np.concatenate(g)


def _seeded(name: str, **params) -> ConditionedRuler:
    ruler = make_ruler(name, by="group", **params)
    if "random_state" in ruler.ruler.get_params():
        ruler.ruler.set_params(random_state=0)
    return ruler


@pytest.fixture(scope="module")
def data():
    return _grouped()


@pytest.fixture(scope="module")
def fitted(data):
    return {name: _seeded(name).fit(*data) for name in ALL_RULERS}


def _stratified_auc(scores, y, g):
    pairs = [(roc_auc_score(y[g == k], scores[g == k]), (y[g == k] == 1).sum() * (y[g == k] == 0).sum())
             for k in np.unique(g)]
    return sum(a * w for a, w in pairs) / sum(w for _, w in pairs)


# -- the contract, per group ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ALL_RULERS)
def test_contract_fit_returns_self_and_one_ruler_per_group(name, data):
    ruler = _seeded(name)
    with pytest.raises(NotFittedError):
        ruler.score_samples(data[0], groups=data[2])
    assert ruler.fit(*data) is ruler
    assert sorted(ruler.rulers_) == [0, 1] and not ruler.fallback_groups_
    assert ruler.n_features_in_ == DIM
    Z, y, g = data
    for group, sub in ruler.rulers_.items():  # each group's ruler saw only that group
        alone = clone(sub).fit(Z[g == group], y[g == group])
        np.testing.assert_array_equal(alone.score_samples(Z[:7]), sub.score_samples(Z[:7]))


@pytest.mark.parametrize("name", ALL_RULERS)
def test_contract_scores_come_from_each_rows_group(name, fitted, data):
    Z, _, g = data
    ruler = fitted[name]
    rows = np.r_[0:5, 600:605]
    scores = ruler.score_samples(Z[rows], groups=g[rows])
    assert scores.shape == (10,) and scores.dtype == np.float64 and np.isfinite(scores).all()
    for i, row in enumerate(rows):
        assert scores[i] == pytest.approx(ruler.for_group(int(g[row])).score_samples(Z[row:row + 1])[0], rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(ruler.score_samples(Z[rows].tolist(), groups=g[rows].tolist()), scores)


@pytest.mark.parametrize("name", ALL_RULERS)
def test_contract_clone_pickle_and_seed_round_trip(name, fitted, data):
    Z, y, g = data
    ruler = fitted[name]
    expected = ruler.score_samples(Z, groups=g)
    np.testing.assert_array_equal(clone(ruler).fit(Z, y, groups=g).score_samples(Z, groups=g), expected)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(ruler)).score_samples(Z, groups=g), expected)
    np.testing.assert_array_equal(_seeded(name).fit(Z.copy(), y.copy(), g.copy()).score_samples(Z, groups=g), expected)


@pytest.mark.parametrize("name", ALL_RULERS)
def test_contract_orientation_inside_each_group(name, fitted, data):
    Z, y, g = data
    ruler = fitted[name]
    angle = ruler.ruler.get_params().get("angle")
    t = np.linspace(0.0, 1.0, 11)[:, None]
    for group in (0, 1):
        good, bad = Z[(g == group) & (y == 0)].mean(0), Z[(g == group) & (y == 1)].mean(0)
        steps = np.diff(ruler.score_samples(good + t * (bad - good), groups=np.full(11, group)))
        assert np.all(steps >= -1e-9) if angle is not None and abs(angle) >= 90 else np.all(steps > 0)


@pytest.mark.parametrize("name", ALL_RULERS)
@pytest.mark.parametrize("p", [50, 90, 33.3])
def test_contract_threshold_per_group_and_over_all_groups(name, p, fitted, data):
    Z, y, g = data
    ruler = fitted[name]
    for group in (0, 1):
        bad = ruler.score_samples(Z[(g == group) & (y == 1)], groups=np.full(150, group))
        tau = ruler.threshold(p, group=group)
        assert np.mean(bad >= tau) >= 1 - p / 100 > np.mean(bad > tau)
    every_bad = ruler.score_samples(Z[y == 1], groups=g[y == 1])
    np.testing.assert_array_equal(np.sort(every_bad), ruler.bad_scores_)
    assert np.mean(every_bad >= ruler.threshold(p)) >= 1 - p / 100


@pytest.mark.parametrize("name", ALL_RULERS)
def test_contract_separation_auc_is_the_stratified_auc(name, fitted, data):
    Z, y, g = data
    ruler = fitted[name]
    scores = ruler.score_samples(Z, groups=g)
    assert ruler.separation_auc_ == pytest.approx(_stratified_auc(scores, y, g))
    assert ruler.group_auc_[1] == pytest.approx(roc_auc_score(y[g == 1], scores[g == 1]))
    assert ruler.diagnostics(Z, y, groups=g)["auc"] == pytest.approx(ruler.separation_auc_)
    suffix = name.rsplit("_p", 1)[-1]
    assert ruler.percentile == (int(suffix) if suffix.isdigit() else None)


@pytest.mark.parametrize("name", ALL_RULERS)
def test_contract_rejects_bad_input(name, fitted, data):
    Z, y, g = data
    ruler = _seeded(name)
    Z_nan = Z.copy()
    Z_nan[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"Z contains 1 non-finite .* row 3, column 1"):
        ruler.fit(Z_nan, y, g)
    with pytest.raises(ValueError, match="both classes"):
        ruler.fit(Z, np.zeros_like(y), g)
    with pytest.raises(ValueError, match="groups: a conditioned ruler needs the group of every embedding"):
        ruler.fit(Z, y)
    with pytest.raises(ValueError, match=r"groups must be a 1-d array of 900 labels .* shape \(899,\)"):
        ruler.fit(Z, y, g[:-1])
    with pytest.raises(ValueError, match=r"Z has 4 features .* n_features_in_=5"):
        fitted[name].score_samples(Z[:, :4], groups=g)
    with pytest.raises(ValueError, match=r"percentile must be (a finite number )?in \(0, 100\)"):
        fitted[name].threshold(100, group=0)


# -- what conditioning is for -------------------------------------------------------------------------
def _opposed(seed=0):
    """Group 0 (large) fails toward +x; group 1 (small) fails toward -x, from a normal cloud at x = 6.

    Pooled, the bad centroid lies to the right of the good one, so the pooled ruler points +x:
    inside group 1 it ranks the normal inputs above the failures.
    """
    rng = np.random.default_rng(seed)
    blocks = [((0, 0), 0, 0, 300), ((3, 0), 1, 0, 300), ((6, 0), 0, 1, 100), ((4, 0), 1, 1, 100)]
    Z = np.vstack([rng.normal(c, 0.5 if label else 1.0, (n, 2)) for c, label, _, n in blocks])
    y = np.concatenate([np.full(n, label) for _, label, _, n in blocks])
    g = np.concatenate([np.full(n, group) for _, _, group, n in blocks])
    return Z, y, g


@pytest.mark.parametrize("name", ["centroid", "fisher", "logreg", "pc1"])
def test_conditioned_ruler_sees_the_failure_a_pooled_ruler_is_turned_away_from(name):
    Z, y, g = _opposed()
    Z_new, y_new, g_new = _opposed(seed=1)  # fresh inputs the rulers were not fitted on
    in_group = g_new == 1
    pooled = make_ruler(name).fit(Z, y).score_samples(Z_new[in_group])
    conditioned = make_ruler(name, by="class").fit(Z, y, groups=g).score_samples(Z_new[in_group], groups=g_new[in_group])
    assert roc_auc_score(y_new[in_group], pooled) < 0.2  # anti-correlated with failure
    assert roc_auc_score(y_new[in_group], conditioned) > 0.9


# -- groups too small, unseen groups --------------------------------------------------------------
def _with_small_group():
    Z, y, g = _grouped()
    rng = np.random.default_rng(5)
    small = np.vstack([rng.standard_normal((30, DIM)) - 4, rng.standard_normal((3, DIM)) - 2])
    return np.vstack([Z, small]), np.r_[y, np.zeros(30, int), np.ones(3, int)], np.r_[g, np.full(33, 7)]


def test_a_group_with_too_few_failures_is_refused_by_name_count_and_minimum():
    with pytest.raises(ScarceError, match=r"group 7 \(class\) has 3 failure\(s\) and 30 normal .* "
                                          r"min_failures=10 and min_normals=10 \(fallback='refuse'"):
        make_ruler("fisher", by="class", fallback="refuse").fit(*_with_small_group())


def test_a_group_with_too_few_failures_falls_back_on_the_pooled_ruler_with_a_warning():
    Z, y, g = _with_small_group()
    with pytest.warns(RulerFitWarning, match=r"group 7 \(class\) has 3 failure\(s\).*pooled over all groups"):
        ruler = make_ruler("fisher", by="class").fit(Z, y, groups=g)
    assert ruler.fallback_groups_ == {7: (3, 30)} and sorted(ruler.rulers_) == [0, 1]
    assert ruler.for_group(7) is ruler.pooled_
    np.testing.assert_array_equal(ruler.score_samples(Z[-5:], groups=g[-5:]), ruler.pooled_.score_samples(Z[-5:]))
    # with a lower minimum the same group gets a ruler of its own
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert 7 in make_ruler("fisher", by="class", min_failures=3).fit(Z, y, groups=g).rulers_


def test_a_group_unseen_at_fit_is_pooled_with_a_warning_or_refused():
    Z, y, g = _grouped()
    ruler = make_ruler("centroid", by="class").fit(Z, y, groups=g)
    with pytest.warns(RulerFitWarning, match=r"group 9 \(class\) was not seen at fit.*groups 0, 1"):
        assert ruler.for_group(9) is ruler.pooled_
    strict = make_ruler("centroid", by="class", fallback="refuse").fit(Z, y, groups=g)
    with pytest.raises(ScarceError, match=r"group 9 \(class\) was not seen at fit \(fallback='refuse'\); known groups: 0, 1"):
        strict.score_samples(Z[:3], groups=[9, 9, 9])
    assert strict.for_group(np.int64(1)) is strict.rulers_[1]  # numpy labels find the plain ones


@pytest.mark.parametrize("params, match", [
    ({"fallback": "nearest"}, r"fallback.*nearest.*pooled.*refuse"),
    ({"min_failures": 0}, "min_failures"),
    ({"min_normals": 2.5}, "min_normals"),
])
def test_bad_conditioning_parameters_are_named(params, match):
    with pytest.raises(ScarceError, match=match):
        make_ruler("centroid", by="class", **params).fit(*_grouped())


def test_groups_with_nan_or_objects_are_refused():
    Z, y, g = _grouped()
    with pytest.raises(ScarceError, match="groups holds NaN at row 2"):
        make_ruler("centroid", by="class").fit(Z, y, np.where(np.arange(g.size) == 2, np.nan, g))
    with pytest.raises(ScarceError, match="ruler must be a registry name or a BaseRuler"):
        ConditionedRuler(ruler=3.5).fit(Z, y, g)


def test_string_groups_work_like_integer_groups():
    Z, y, g = _grouped()
    names = np.where(g == 0, "zero", "one")
    a = make_ruler("fisher", by="style").fit(Z, y, groups=names).score_samples(Z, groups=names)
    b = make_ruler("fisher", by="style").fit(Z, y, groups=g).score_samples(Z, groups=g)
    np.testing.assert_allclose(a, b)


def test_group_labels_as_zero_d_arrays_and_a_missing_by_are_handled():
    Z, y, g = _grouped()
    ruler = make_ruler("centroid", by="class").fit(Z, y, groups=g)
    assert ruler.for_group(np.array(1)) is ruler.rulers_[1]
    with pytest.raises(ScarceError, match="group must be one label"):
        ruler.for_group(np.array([1, 0]))
    with pytest.raises(ScarceError, match="by must name what the groups are"):
        make_ruler("centroid", by=None).fit(Z, y, groups=g)


def test_groups_of_mixed_types_are_refused_by_name():
    Z, y, g = _grouped()
    mixed = np.array([1 if i % 2 else "a" for i in range(g.size)], dtype=object)
    with pytest.raises(ScarceError, match="groups must hold labels of one type"):
        make_ruler("centroid", by="class").fit(Z, y, mixed)
