"""The ruler contract, as checks a user runs on their own ruler.

A ruler (:class:`scarce.rulers.BaseRuler`) follows the scikit-learn estimator contract and the
paper's orientation: ``fit(Z, y)`` with ``y = 1`` for failure ("bad") embeddings and 0 for
normal ("good") ones returns ``self``; ``score_samples(Z)`` gives one float64 per row, larger
meaning closer to failure; ``threshold(p)`` is the ``p``-th percentile of the bad training
scores, so at least ``1 - p/100`` of them lie at or above it.  The checks fit the ruler on two
Gaussian clouds in five dimensions (the bad one shifted by ``(3, 1, 0, 0, 0)``).

>>> from scarce.rulers import make_ruler
>>> from scarce.testing import check_ruler
>>> check_ruler(make_ruler("centroid"))
[]
"""

from __future__ import annotations

import pickle
import warnings

import numpy as np

from scarce.testing._base import Check, rule, run_checks

__all__ = ["check_ruler", "ruler_checks"]

N_GOOD, N_BAD, DIM = 300, 150, 5
BAD_SHIFT = np.array([3.0, 1.0, 0.0, 0.0, 0.0])
PERCENTILES = (33.3, 50, 75, 90, 95)


def two_clouds(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``N_GOOD`` standard normal points (y = 0) and ``N_BAD`` shifted by ``BAD_SHIFT`` (y = 1)."""
    rng = np.random.default_rng(seed)
    Z = np.vstack([rng.standard_normal((N_GOOD, DIM)), rng.standard_normal((N_BAD, DIM)) + BAD_SHIFT])
    return Z, np.r_[np.zeros(N_GOOD, dtype=int), np.ones(N_BAD, dtype=int)]


def _fresh(ruler):  # type: ignore[no-untyped-def]
    """An unfitted copy with its randomness fixed (``random_state=0`` where it has one)."""
    from sklearn.base import clone

    copy = clone(ruler)
    if "random_state" in copy.get_params():
        copy.set_params(random_state=0)
    return copy


def _fitted(ruler):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _fresh(ruler).fit(*two_clouds())


@rule("Nothing is fitted before fit; fit returns self and sets n_features_in_.")
def check_fit_returns_self(ruler) -> None:  # type: ignore[no-untyped-def]
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    fresh, (Z, y) = _fresh(ruler), two_clouds()
    for call in (lambda: check_is_fitted(fresh), lambda: fresh.score_samples(Z)):
        try:
            call()
        except NotFittedError:
            continue
        raise AssertionError("an unfitted ruler must raise NotFittedError (check_is_fitted, score_samples)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert fresh.fit(Z, y) is fresh, "fit must return self"
    check_is_fitted(fresh)
    assert fresh.n_features_in_ == DIM, f"n_features_in_ is {fresh.n_features_in_!r}, expected {DIM}"


@rule("score_samples gives a finite float64 array of shape (n,), the same for lists and arrays.")
def check_scores_float64_of_shape_n(ruler) -> None:  # type: ignore[no-untyped-def]
    fitted, Z = _fitted(ruler), two_clouds()[0][:17]
    scores = fitted.score_samples(Z)
    assert isinstance(scores, np.ndarray) and scores.shape == (17,), f"got {type(scores).__name__} {np.shape(scores)}"
    assert scores.dtype == np.float64, f"dtype {scores.dtype}, expected float64"
    assert np.isfinite(scores).all(), "scores of finite embeddings must be finite"
    np.testing.assert_allclose(fitted.score_samples(Z.tolist()), scores, err_msg="a list gives other scores")


@rule("A clone refitted on the same data, and a pickled copy, score exactly as the original.")
def check_clone_and_pickle(ruler) -> None:  # type: ignore[no-untyped-def]
    from sklearn.base import clone

    fitted, (Z, y) = _fitted(ruler), two_clouds()
    expected = fitted.score_samples(Z)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        refit = clone(fitted).fit(Z, y)
    np.testing.assert_array_equal(refit.score_samples(Z), expected, err_msg="a refitted clone scores differently")
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(fitted)).score_samples(Z), expected,
                                  err_msg="a pickled copy scores differently")
    assert clone(fitted).get_params() == fitted.get_params(), "clone changed the parameters"


@rule("Fitting on a copy of the same data gives the same scores (no hidden randomness or state).")
def check_same_data_same_scores(ruler) -> None:  # type: ignore[no-untyped-def]
    Z, y = two_clouds()
    a = _fitted(ruler).score_samples(Z)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = _fresh(ruler).fit(Z.copy(), y.copy()).score_samples(Z)
    np.testing.assert_array_equal(a, b, err_msg="two fits on the same data disagree")


@rule("Larger is closer to failure: scores never fall along the path from the good centroid to the bad one.")
def check_orientation(ruler) -> None:  # type: ignore[no-untyped-def]
    Z, y = two_clouds()
    good, bad = Z[y == 0].mean(axis=0), Z[y == 1].mean(axis=0)
    path = good + np.linspace(0.0, 1.0, 11)[:, None] * (bad - good)
    fitted = _fitted(ruler)
    scores = fitted.score_samples(path)
    scale = max(float(np.ptp(fitted.score_samples(Z))), 1e-300)
    assert np.all(np.diff(scores) >= -1e-9 * scale), f"scores fall toward the bad centroid: {np.round(scores, 4)}"
    assert scores[-1] > scores[0] or np.isclose(scores[-1], scores[0]), "the bad centroid scores below the good one"


@rule("threshold(p) leaves at least 1 - p/100 of the bad training scores at or above it, and no larger value would.")
def check_threshold_fraction(ruler) -> None:  # type: ignore[no-untyped-def]
    fitted, (Z, y) = _fitted(ruler), two_clouds()
    bad = fitted.score_samples(Z[y == 1])
    np.testing.assert_array_equal(np.sort(bad), fitted.bad_scores_, err_msg="bad_scores_ must be the sorted bad scores")
    for p in PERCENTILES:
        tau = fitted.threshold(p)
        assert np.mean(bad >= tau) >= 1 - p / 100, f"threshold({p}) keeps only {np.mean(bad >= tau):.3f} of bad scores"
        assert np.mean(bad > tau) < 1 - p / 100, f"threshold({p}) is lower than the percentile needs"


@rule("threshold() uses the ruler's own percentile, and without one it asks for p.")
def check_default_percentile(ruler) -> None:  # type: ignore[no-untyped-def]
    fitted = _fitted(ruler)
    if fitted.percentile is None:
        try:
            fitted.threshold()
        except ValueError as exc:
            assert "percentile" in str(exc), f"the error does not name the percentile: {exc}"
            return
        raise AssertionError("threshold() without a percentile must raise a ValueError naming it")
    assert fitted.threshold() == fitted.threshold(fitted.percentile), "threshold() differs from threshold(percentile)"


@rule("separation_auc_ is the AUC of the training scores; diagnostics(Z, y) reports it with Cohen's d and KL.")
def check_separation_and_diagnostics(ruler) -> None:  # type: ignore[no-untyped-def]
    from sklearn.metrics import roc_auc_score

    fitted, (Z, y) = _fitted(ruler), two_clouds()
    auc = roc_auc_score(y, fitted.score_samples(Z))
    assert np.isclose(fitted.separation_auc_, auc), f"separation_auc_ {fitted.separation_auc_} != AUC {auc}"
    diag = fitted.diagnostics(Z, y)
    assert np.isclose(diag["auc"], auc), "diagnostics()['auc'] differs from the AUC of the scores"
    missing = {"cohens_d", "kl_good_bad"} - set(diag)
    assert not missing, f"diagnostics() lacks {sorted(missing)}"


def _refuses(call, *words: str) -> None:  # type: ignore[no-untyped-def]
    try:
        call()
    except ValueError as exc:
        text = str(exc)
        assert all(w in text for w in words), f"the error {text!r} should mention {words}"
        return
    raise AssertionError(f"accepted bad input (expected a ValueError mentioning {words})")


@rule("Bad input gets a ValueError naming it: non-finite, one class, empty, wrong width, bad percentiles.")
def check_rejects_bad_input(ruler) -> None:  # type: ignore[no-untyped-def]
    Z, y = two_clouds()
    fresh, fitted = _fresh(ruler), _fitted(ruler)
    Z_nan = Z.copy()
    Z_nan[3, 1] = np.nan
    _refuses(lambda: fresh.fit(Z_nan, y), "non-finite")
    _refuses(lambda: fresh.fit(Z, np.zeros_like(y)), "both classes")
    _refuses(lambda: fresh.fit(Z[:0], y[:0]), "at least one sample")
    _refuses(lambda: fitted.score_samples(Z[:, :4]), "4 features")
    Z_inf = Z[:5].copy()
    Z_inf[0, 0] = np.inf
    _refuses(lambda: fitted.score_samples(Z_inf), "non-finite")
    for p in (0, 100, -5, 150, float("nan")):
        _refuses(lambda p=p: fitted.threshold(p), "percentile")


def ruler_checks(ruler) -> list[Check]:  # type: ignore[no-untyped-def]
    """The ruler contract's checks, each ``check(ruler)``; for ``pytest.mark.parametrize``."""
    return [check_fit_returns_self, check_scores_float64_of_shape_n, check_clone_and_pickle,
            check_same_data_same_scores, check_orientation, check_threshold_fraction, check_default_percentile,
            check_separation_and_diagnostics, check_rejects_bad_input]


def check_ruler(ruler) -> list[str]:  # type: ignore[no-untyped-def]
    """Run the ruler contract on an unfitted ruler; raise the first :class:`ContractViolation`.

    Returns the rules skipped (none for rulers). The ruler is cloned; it is never fitted itself.
    """
    return run_checks(ruler, ruler_checks(ruler))
