"""The ruler contract: a scikit-learn estimator that scores embeddings by proximity to failure.

A *geometric ruler* ``G: R^d -> R`` (paper, section "Geometric Rulers" and appendix
``app:rulers``) is fitted offline on labelled embeddings ``D_bad`` (``y = 1``, failure) and
``D_good`` (``y = 0``, normal) and oriented so that **larger scores are closer to failure**. The
cascade's events are ``{G >= gamma}``.

Contract of every ruler (checked for every registered name by :func:`scarce.testing.check_ruler`,
which ``tests/contract/test_contracts.py`` runs):

* ``__init__`` only stores its parameters (scikit-learn convention); ``clone`` and pickle work.
* ``fit(Z, y)`` validates (finite embeddings, labels in {0, 1}, both classes present), sets the
  fitted attributes (their names end in ``_``) and returns ``self``.
* ``score_samples(Z)`` returns a float64 array of shape (n_samples,).
* ``threshold(p)`` is the operating point ``tau`` at percentile ``p`` of the *fitted bad-score
  distribution*: the largest score ``tau`` such that at least a fraction ``1 - p/100`` of the bad
  training scores satisfy ``score >= tau`` (exactly that fraction when there are no ties at
  ``tau``). See :func:`percentile_threshold`.
* ``separation_auc_`` is the AUC of the bad versus good training scores (0.5 = no separation).
* Randomised rulers take ``random_state``; equal seeds give equal scores.

Extreme magnitudes. Covariances, kernels and solvers square (and LedoitWolf raises to the fourth
power) the embeddings, so values near 1e100 overflow float64 and values near 1e-100 underflow to
zero. Embeddings whose largest magnitude lies outside ``[2**-64, 2**64]`` are therefore divided by
the power of two that brings it into ``[1, 2)`` (an exact operation) before fitting and
scoring; ``input_scale_`` records the divisor (1.0 for ordinary embeddings, whose results are
unchanged) and the fitted attributes then refer to ``Z / input_scale_``. Every ruler family is
scale-equivariant or invariant, except the regularised logistic regression, whose penalty has a
scale (its fit at such magnitudes is a fit of the rescaled embeddings).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from scarce.checks import (
    check_embeddings,
    check_labels,
    check_percentile,
    check_scores,
    power_of_two_scale,
    warn_user,
)
from scarce.errors import ScarceError, ScarceWarning, show
from scarce.selection.metrics import auc, compute_metrics

__all__ = ["BaseRuler", "LinearRuler", "RulerFitWarning", "percentile_threshold"]


class RulerFitWarning(ScarceWarning):
    """Statistical trouble while fitting a ruler (too few samples, undefined orientation...)."""


def percentile_threshold(scores: ArrayLike, percentile: float) -> float:
    """Operating threshold at ``percentile`` of a score sample, counted from the failure side.

    With ``n`` scores and ``m = ceil(n * (1 - percentile/100))`` (at least 1), the threshold is the
    ``m``-th largest score. It is the largest ``tau`` with
    ``#{s >= tau} / n >= 1 - percentile/100``; ties at ``tau`` can only raise the fraction above
    ``1 - percentile/100``. This is the paper's ``p50``/``p75``/``p90``/``p95`` operating point
    applied to the bad-score distribution (section "Surrogate Event Design").

    Parameters
    ----------
    scores : array_like of shape (n,)
        Scores (usually the bad training scores of a ruler); NaN is rejected.
    percentile : float
        In the open interval (0, 100).

    Returns
    -------
    float
        The threshold ``tau``.

    Examples
    --------
    >>> percentile_threshold([1.0, 2.0, 3.0, 4.0], 75)
    4.0
    >>> percentile_threshold([1.0, 2.0, 3.0, 4.0], 50)
    3.0
    """
    p = check_percentile(percentile)
    s = check_scores(scores, name="scores", allow_inf=True)
    n = s.size
    # round() removes float noise such as 10 * (100 - 90) / 100 = 9.999999999999998.
    m = max(1, math.ceil(round(n * (100.0 - p) / 100.0, 9)))
    return float(np.partition(s, n - m)[n - m])


def check_random_state_param(value: object) -> None:
    """None, a RandomState, or an int in [0, 2**32) (what scikit-learn accepts); else raise."""
    if value is None or isinstance(value, np.random.RandomState):
        return
    if (isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral)
            or not 0 <= value < 2**32):
        raise ScarceError("random_state must be None, an int in [0, 2**32) or a numpy RandomState "
                          f"(scikit-learn convention); got {show(value)} ({type(value).__name__})")


class BaseRuler(BaseEstimator):
    """Base class of all geometric rulers (scikit-learn estimator contract).

    Subclasses implement ``_fit(Z, y)`` (set the fitted attributes) and ``_score(Z)`` (return
    float64 scores of shape (n,)); validation, threshold bookkeeping and diagnostics live here.
    Every subclass has a ``percentile`` parameter: the default operating percentile used by
    :meth:`threshold` when it is called without an argument (``None`` for the plain families,
    50/75/90/95 for the registry's ``<family>_p<percentile>`` variants).

    Fitted attributes (all rulers)
    ------------------------------
    n_features_in_ : int
        Embedding dimension seen at ``fit``.
    bad_scores_ : ndarray of shape (n_bad,)
        Sorted scores of the bad training embeddings (used by :meth:`threshold`).
    separation_auc_ : float
        AUC of bad versus good training scores, ``P(G(z_bad) > G(z_good))`` with ties counted
        one half.
    """

    percentile: float | None

    def fit(self, Z: ArrayLike, y: ArrayLike) -> BaseRuler:
        """Fit the ruler on labelled embeddings.

        Parameters
        ----------
        Z : array_like of shape (n_samples, n_features)
            Finite embeddings.
        y : array_like of shape (n_samples,)
            1 for failure ("bad"), 0 for normal ("good"); both classes are required.

        Returns
        -------
        self
        """
        if self.percentile is not None:
            check_percentile(self.percentile)
        Z = check_embeddings(Z)
        labels = check_labels(y, n_samples=Z.shape[0])
        self.input_scale_ = power_of_two_scale(Z)
        Z = self._rescale(Z)
        self._fit(Z, labels)
        self.n_features_in_ = Z.shape[1]
        scores = self._checked_scores(Z, "its training embeddings")
        if scores.size > 1 and scores.min() == scores.max():
            warn_user(f"{type(self).__name__}: the fitted ruler gives every training embedding the "
                      f"same score {float(scores[0])!r} (parameter Z); it cannot rank inputs toward failure",
                      RulerFitWarning)
        self.bad_scores_ = np.sort(scores[labels])
        self.separation_auc_ = auc(scores[~labels], scores[labels])
        return self

    def _rescale(self, Z: NDArray[np.float64]) -> NDArray[np.float64]:
        scale = getattr(self, "input_scale_", 1.0)
        return Z if scale == 1.0 else Z / scale

    def _checked_scores(self, Z: NDArray[np.float64], what: str) -> NDArray[np.float64]:
        """``_score(Z)`` as float64 (n,), or a :class:`ScarceError` when any score is not finite.

        Scoring is the per-query hot path, so ``_score`` runs under NumPy's current error state
        (entering an ``np.errstate`` block is a large share of the cost of a small batch); only when that state
        turns an overflow into an exception (``np.seterr(all="raise")``, or warnings made errors)
        is the batch scored again with overflow ignored, so the scores and the errors are the
        same in every error state.
        """
        try:
            scores = np.asarray(self._score(Z), dtype=np.float64).reshape(Z.shape[0])
        except (FloatingPointError, RuntimeWarning):
            with np.errstate(over="ignore", invalid="ignore"):
                scores = np.asarray(self._score(Z), dtype=np.float64).reshape(Z.shape[0])
        if not np.isfinite(scores).all():
            self._raise_nonfinite(Z, scores, what)
        return scores

    def _raise_nonfinite(self, Z: NDArray[np.float64], scores: NDArray[np.float64], what: str) -> None:
        """The :class:`ScarceError` for non-finite ``scores``, naming the first offending row."""
        finite = np.isfinite(scores)
        row = int(np.flatnonzero(~finite)[0])
        raise ScarceError(
            f"Z: {type(self).__name__} gives {int((~finite).sum())} non-finite score(s) to "
            f"{what} (the first at row {row}, whose largest |value| is "
            f"{float(np.abs(Z[row]).max() * getattr(self, 'input_scale_', 1.0)):.3g}); the "
            "embeddings are too far from the range the ruler was fitted on for float64")

    def score_samples(self, Z: ArrayLike) -> NDArray[np.float64]:
        """Score embeddings; larger means closer to failure.

        Parameters
        ----------
        Z : array_like of shape (n_samples, n_features_in_)
            Finite embeddings.

        Returns
        -------
        ndarray of shape (n_samples,), float64
            Finite scores.

        Raises
        ------
        ScarceError
            Invalid embeddings, or embeddings so far beyond the fitted range that a score
            overflows float64 (an infinite score would rank nothing).
        """
        if not hasattr(self, "n_features_in_"):  # set last by fit: a fitted ruler skips sklearn's scan
            check_is_fitted(self)
        Z = self._rescale(check_embeddings(Z, n_features=self.n_features_in_))
        return self._checked_scores(Z, "the embeddings scored")

    def threshold(self, percentile: float | None = None) -> float:
        """Operating threshold ``tau`` at a percentile of the fitted bad-score distribution.

        At least a fraction ``1 - percentile/100`` of the bad training scores are ``>= tau``, and
        exactly that fraction (up to rounding to whole samples) when no ties sit at ``tau``; see
        :func:`percentile_threshold`.

        Parameters
        ----------
        percentile : float, optional
            In (0, 100). Defaults to the ruler's ``percentile`` parameter.

        Returns
        -------
        float
        """
        check_is_fitted(self)
        if percentile is None:
            if self.percentile is None:
                raise ScarceError(
                    "percentile: this ruler has percentile=None, so threshold() needs an explicit "
                    "percentile in (0, 100), e.g. threshold(75), or build a variant such as "
                    "make_ruler('pc1_p75')")
            percentile = self.percentile
        return percentile_threshold(self.bad_scores_, percentile)

    def diagnostics(
        self, Z: ArrayLike, y: ArrayLike,
        metrics: Sequence[str] = ("auc", "cohens_d", "kl_good_bad"),
    ) -> dict[str, float]:
        """Separation of the good and bad score distributions on labelled embeddings.

        Parameters
        ----------
        Z : array_like of shape (n_samples, n_features_in_)
        y : array_like of shape (n_samples,)
            1 failure, 0 normal; both classes required.
        metrics : sequence of str
            Names from :func:`scarce.selection.available_metrics`.

        Returns
        -------
        dict
            Metric name -> value, plus ruler-specific entries from ``_extra_diagnostics``.
        """
        try:
            names = None if isinstance(metrics, str) else list(metrics)
        except TypeError:
            names = None
        if names is None:
            raise ScarceError(f"metrics must be a sequence of metric names such as ['auc']; got "
                              f"{show(metrics)} ({type(metrics).__name__})")
        scores = self.score_samples(Z)
        labels = check_labels(y, n_samples=scores.size)
        out = compute_metrics(names, scores[~labels], scores[labels])
        out.update(self._extra_diagnostics())
        return out

    # -- subclass hooks -------------------------------------------------------------------------
    def _fit(self, Z: NDArray[np.float64], y: NDArray[np.bool_]) -> None:  # pragma: no cover
        raise NotImplementedError

    def _score(self, Z: NDArray[np.float64]) -> NDArray[np.float64]:  # pragma: no cover
        raise NotImplementedError

    def _extra_diagnostics(self) -> Mapping[str, Any]:
        return {}


class LinearRuler(BaseRuler):
    """A ruler of the form ``G(z) = coef_ . z + intercept_`` (one matrix-vector product).

    Subclasses set ``coef_`` (shape (n_features,)) and ``intercept_`` (float) in ``_fit``.
    """

    coef_: NDArray[np.float64]
    intercept_: float

    def _score(self, Z: NDArray[np.float64]) -> NDArray[np.float64]:
        return Z @ self.coef_ + self.intercept_
