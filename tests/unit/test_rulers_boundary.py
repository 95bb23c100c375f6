"""The boundary ruler: a softmax over the groups fitted on failure flags.

What it is for: failures of a linear multi-class decision seen on seeds it was not fitted on. The
synthetic classifier here is ``argmax(W z)`` over three classes; "seeds" are points of a class, their
perturbations are normal while the argmax keeps the class and failures when it leaves it. Rulers are
fitted on the perturbations of some seeds and judged, within each new seed, on the perturbations of
others.
"""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
from scipy.optimize import check_grad
from scipy.stats import spearmanr
from sklearn.base import clone
from sklearn.metrics import roc_auc_score

from scarce.errors import ScarceError
from scarce.rulers import BoundaryRuler, RulerFitWarning, make_ruler
from scarce.rulers.boundary import _objective

DIM = 6
W = np.array([[2.0, 0.0, 1.0, 0, 0, 0], [0.0, 2.0, -1.0, 0, 0, 0], [-2.0, -2.0, 0.0, 0, 0, 0]])


def _logits(Z):
    return Z @ W.T


def _seeds(rng, n_per_class):
    """Points of each class, close enough to a boundary that their perturbations sometimes fail."""
    out = []
    for c in range(3):
        found = []
        while len(found) < n_per_class:
            z = rng.normal(0.0, 1.5, DIM)
            logits = _logits(z)
            gap = logits[c] - np.max(np.delete(logits, c))
            if 0.5 < gap < 2.5:
                found.append(z)
        out += [(c, z) for z in found]
    return out


def _perturbed(seeds, rng, n=150, scale=0.8):
    Z, y, g, s = [], [], [], []
    for i, (c, z) in enumerate(seeds):
        pts = z + scale * rng.standard_normal((n, DIM))
        Z.append(pts)
        y.append(_logits(pts).argmax(1) != c)
        g.append(np.full(n, c))
        s.append(np.full(n, i))
    return np.vstack(Z), np.concatenate(y).astype(int), np.concatenate(g), np.concatenate(s)


@pytest.fixture(scope="module")
def split():
    rng = np.random.default_rng(0)
    train = _perturbed(_seeds(rng, 6), rng)
    held = _perturbed(_seeds(rng, 6), rng)
    return train, held


def _per_seed_auc(scores, y, seeds):
    aucs = [roc_auc_score(y[seeds == k], scores[seeds == k]) for k in np.unique(seeds)
            if 0 < y[seeds == k].sum() < (seeds == k).sum()]
    return float(np.median(aucs))


def test_the_boundary_ruler_sees_failure_on_seeds_it_was_not_fitted_on(split):
    (Z, y, g, _), (Zh, yh, gh, sh) = split
    boundary = make_ruler("boundary").fit(Z, y, groups=g)
    per_class_centroid = make_ruler("centroid", by="class").fit(Z, y, groups=g)
    held_boundary = _per_seed_auc(boundary.score_samples(Zh, groups=gh), yh, sh)
    held_centroid = _per_seed_auc(per_class_centroid.score_samples(Zh, groups=gh), yh, sh)
    assert held_boundary > 0.97
    assert held_boundary > held_centroid + 0.05


def test_its_score_ranks_like_the_classifiers_own_margin(split):
    (Z, y, g, _), (Zh, _, gh, _) = split
    scores = make_ruler("boundary").fit(Z, y, groups=g).score_samples(Zh, groups=gh)
    logits = _logits(Zh)
    own = logits[np.arange(len(gh)), gh]
    others = np.where(np.eye(3, dtype=bool)[gh], -np.inf, logits).max(1)
    assert spearmanr(scores, others - own).statistic > 0.95


def test_for_group_is_the_groups_ruler_with_its_own_threshold(split):
    (Z, y, g, _), _ = split
    ruler = make_ruler("boundary", percentile=75).fit(Z, y, groups=g)
    view = ruler.for_group(np.int64(2))
    rows = g == 2
    np.testing.assert_array_equal(view.score_samples(Z[rows][:9]), ruler.score_samples(Z[rows][:9], groups=g[rows][:9]))
    bad = view.score_samples(Z[rows & (y == 1)])
    assert ruler.threshold(group=2) == view.threshold() and np.mean(bad >= view.threshold()) >= 0.25
    assert view.separation_auc_ == ruler.group_auc_[2]
    with pytest.raises(ScarceError, match="view of its BoundaryRuler"):
        view.fit(Z, y)


@pytest.mark.parametrize("scale", [0.3, 3.0])
def test_the_gradient_is_exact(scale):
    rng = np.random.default_rng(3)
    X = np.hstack([rng.standard_normal((40, 4)), np.ones((40, 1))])
    own = rng.integers(1, 4, 40)
    failed = (rng.random(40) < 0.4).astype(float)
    w0 = scale * rng.standard_normal(5 * 4)
    error = check_grad(lambda w: _objective(w, X, own, failed, 0.01, 4)[0],
                       lambda w: _objective(w, X, own, failed, 0.01, 4)[1], w0)
    assert error < 1e-5 * max(1.0, scale)


def test_a_failed_row_the_model_is_sure_of_keeps_its_gradient():
    """A failed row scored as normal by a gap of 40 (q = 1 - 4e-18): its loss is about 40 and the
    gradient on the other scores is -P_j / (1 - q) + P_j, about -1/2 each; a 1 - q formed as a
    difference would be 0 there (a gradient of -inf or 0)."""
    X = np.array([[1.0]])
    w = np.array([0.0, 40.0, 0.0])  # scores: elsewhere 0, own 40, other 0
    loss, grad = _objective(w, X, np.array([1]), np.array([1.0]), 0.0, 3)
    assert loss == pytest.approx(40.0 - np.log(2.0), rel=1e-9)
    np.testing.assert_allclose(grad, [-0.5, 1.0, -0.5], atol=1e-12)


def test_one_group_is_a_logistic_regression_of_the_flag(split):
    (Z, y, _, _), _ = split
    boundary = make_ruler("boundary", alpha=1e-6).fit(Z, y)
    logistic = make_ruler("logreg", C=1e6).fit(Z, y)
    assert spearmanr(boundary.score_samples(Z), logistic.score_samples(Z)).statistic > 0.999
    with pytest.raises(ScarceError, match="groups"):
        make_ruler("boundary").fit(Z, y, groups=np.arange(len(y)) % 2).score_samples(Z)


def test_same_data_same_scores_clone_and_pickle(split):
    (Z, y, g, _), _ = split
    a = make_ruler("boundary").fit(Z, y, groups=g)
    b = clone(a).fit(Z, y, groups=g)
    np.testing.assert_array_equal(a.score_samples(Z[:50], groups=g[:50]), b.score_samples(Z[:50], groups=g[:50]))
    c = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(a.score_samples(Z[:50], groups=g[:50]), c.score_samples(Z[:50], groups=g[:50]))


def _with_thin_group(split):
    (Z, y, g, _), _ = split
    rng = np.random.default_rng(9)
    extra = rng.standard_normal((20, DIM)) + 5.0
    return np.vstack([Z, extra]), np.r_[y, np.ones(20, int)], np.r_[g, np.full(20, 7)]


def test_a_group_without_normal_embeddings_is_pooled_with_a_warning_or_refused(split):
    Z, y, g = _with_thin_group(split)
    with pytest.warns(RulerFitWarning, match=r"group 7 has 20 failure\(s\) and 0 normal"):
        ruler = make_ruler("boundary").fit(Z, y, groups=g)
    assert ruler.fallback_groups_ == {7: (20, 0)} and ruler.groups_ == (0, 1, 2)
    np.testing.assert_array_equal(ruler.score_samples(Z[-5:], groups=g[-5:]), ruler.pooled_.score_samples(Z[-5:]))
    assert ruler.for_group(7) is ruler.pooled_
    with pytest.raises(ScarceError, match=r"group 7 has 20 failure\(s\) and 0 normal.*min_normals=10.*fallback='refuse'"):
        make_ruler("boundary", fallback="refuse").fit(Z, y, groups=g)


def test_a_group_unseen_at_fit_is_pooled_with_a_warning_or_refused(split):
    (Z, y, g, _), _ = split
    pooled = make_ruler("boundary").fit(Z, y, groups=g)
    with pytest.warns(RulerFitWarning, match="group 5 was not seen at fit"):
        view = pooled.for_group(5)
    assert view is pooled.pooled_
    strict = make_ruler("boundary", fallback="refuse").fit(Z, y, groups=g)
    with pytest.raises(ScarceError, match=r"group 5 was not seen at fit.*0, 1, 2"):
        strict.score_samples(Z[:3], groups=[5, 5, 5])


@pytest.mark.parametrize("params, match", [
    ({"alpha": -1.0}, r"alpha.*-1"), ({"max_iter": 0}, r"max_iter.*0"), ({"fallback": "drop"}, r"fallback.*drop.*pooled"),
    ({"min_normals": 0}, r"min_normals.*0"), ({"percentile": 100}, r"percentile.*100")])
def test_bad_parameters_are_named(split, params, match):
    (Z, y, g, _), _ = split
    with pytest.raises(ScarceError, match=match):
        BoundaryRuler(**params).fit(Z, y, groups=g)


def test_no_group_with_enough_data_is_an_error_that_gives_the_counts():
    rng = np.random.default_rng(1)
    Z = rng.standard_normal((30, 3))
    y = np.r_[np.zeros(27, int), np.ones(3, int)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RulerFitWarning)
        with pytest.raises(ScarceError, match=r"no group has.*\{0: \(0, 15\), 1: \(3, 12\)\}"):
            make_ruler("boundary").fit(Z, y, groups=np.r_[np.zeros(15, int), np.ones(15, int)])


def test_wrapping_it_per_group_is_refused_it_takes_the_groups_itself():
    with pytest.raises(ScarceError, match="fitted with the groups itself.*drop by='class'"):
        make_ruler("boundary", by="class")


def test_a_ruler_fitted_without_groups_refuses_groups(split):
    (Z, y, _, _), _ = split
    ruler = make_ruler("boundary").fit(Z, y)
    with pytest.raises(ScarceError, match="fitted without groups"):
        ruler.score_samples(Z[:3], groups=[0, 0, 0])
    with pytest.raises(ScarceError, match="group must be one label"):
        make_ruler("boundary").fit(Z, y, groups=split[0][2]).for_group([1, 2])


def test_a_fit_stopped_by_max_iter_warns(split):
    (Z, y, g, _), _ = split
    with pytest.warns(RulerFitWarning, match="stopped before converging after 2 iterations.*max_iter"):
        make_ruler("boundary", max_iter=2).fit(Z, y, groups=g)
