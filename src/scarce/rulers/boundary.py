r"""The boundary ruler: one softmax over the groups, fitted on failure flags, read per group.

The catalogue's rulers model *where failures were*: a centroid, a covariance, a support. Failures
of different inputs lie in different places (a perturbed 3 fails toward 5, another toward 8), so
those anchors describe the training seeds' neighbourhoods and transfer poorly to seeds they were
not fitted on. A classifier's failure, though, is a crossing of *its decision boundary*, and that
boundary is shared by every input of a class. The boundary ruler models it.

It fits one linear score per group ``k`` (for a classifier: per class) plus one "elsewhere" score
``s_0`` for failures toward groups it has no data of,

.. math:: s_k(z) = a_k \cdot \tilde z + \beta_k, \qquad
          P(\text{normal} \mid z, c) = \frac{e^{s_c(z)}}{e^{s_0(z)} + \sum_k e^{s_k(z)}},

on standardised embeddings ``\tilde z``, by maximising the likelihood of the failure flags (a
normal embedding of group ``c`` stayed in ``c``; a failure left it, for any other group or
elsewhere) with an L2 penalty ``alpha \sum_k \|a_k\|^2``. Every group's normal embeddings shape
its own score, and the failures of one group teach the scores of the others where the crossing
lies. The ruler of group ``c`` is the log-odds of failure,

.. math:: G(z \mid c) = \log \sum_{k \ne c} e^{s_k(z)} - s_c(z),

a softmax margin: on a classifier's penultimate features, whose last layer is linear, it can
recover the classifier's own logit margin (:math:`\max_{j \ne c} l_j - l_c`, smoothed) from the
flags alone. With one group it is a logistic regression of the flag (``s_0 - s_1``).

It is *multinomial logistic regression with coarsened labels*: only "stayed" or "left" is seen,
not where a failure went. The fit is L-BFGS on the exact gradient (scipy), deterministic.

In a run every input shares the seed's group, so :meth:`BoundaryRuler.for_group` gives the one
ruler it reads; scores of different groups are log-odds on one scale.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.utils.validation import check_is_fitted

from scarce.checks import check_choice, check_embeddings, check_in_interval, check_labels, check_percentile
from scarce.checks import check_positive_int, power_of_two_scale, warn_user
from scarce.errors import ScarceError
from scarce.rulers.base import BaseRuler, RulerFitWarning
from scarce.rulers.conditioned import FALLBACKS, _as_key, check_groups, stratified_auc

__all__ = ["BoundaryRuler"]


def _log_odds(S: NDArray[np.float64], own: NDArray[np.intp]) -> NDArray[np.float64]:
    """``log sum_{k != own} exp(S_k) - S_own`` per row, stably."""
    rows = np.arange(S.shape[0])
    s_own = S[rows, own]
    others = S.copy()
    others[rows, own] = -np.inf
    top = others.max(axis=1)
    return top + np.log(np.exp(others - top[:, None]).sum(axis=1)) - s_own


def _objective(w: NDArray[np.float64], X: NDArray[np.float64], own: NDArray[np.intp], failed: NDArray[np.float64],
               alpha: float, n_scores: int) -> tuple[float, NDArray[np.float64]]:
    """Mean negative log-likelihood of the flags plus the penalty, and its gradient.

    With ``q = P(normal)``: a normal row contributes ``-log q`` (gradient ``P - e_c``, the usual
    cross-entropy), a failed row ``-log(1 - q)`` (gradient ``P - (1 - e_c) P / (1 - q)``).
    """
    W = w.reshape(X.shape[1], n_scores)
    S = X @ W
    S -= S.max(axis=1, keepdims=True)
    P = np.exp(S)
    P /= P.sum(axis=1, keepdims=True)
    rows = np.arange(X.shape[0])
    log_odds = _log_odds(S, own)  # log((1 - q) / q)
    # -log q = log(1 + e^lo); -log(1 - q) = log(1 + e^-lo)
    loss = np.logaddexp(0.0, np.where(failed > 0, -log_odds, log_odds)).mean()
    q = P[rows, own]
    # P_j / (1 - q) = exp(S_j - log sum_{k != c} exp(S_k)), computed so: no 1 - q near q = 1 and
    # no underflow of both P_j and 1 - q when the model is sure of a failed row
    beyond = S - (log_odds + S[rows, own])[:, None]
    beyond[rows, own] = -np.inf
    G = P - failed[:, None] * np.exp(beyond)
    G[rows, own] = q - (1.0 - failed)
    grad = X.T @ G / X.shape[0]
    penalty = W[:-1]
    loss += alpha * float(np.sum(penalty * penalty))
    grad[:-1] += 2.0 * alpha * penalty
    return float(loss), grad.ravel()


class BoundaryRuler(BaseRuler):
    """Softmax boundary ruler: per-group log-odds of failure from one multinomial fit (module docstring).

    Parameters
    ----------
    alpha : float
        L2 penalty on the standardised weights, >= 0 (per embedding: the loss is a mean).
    max_iter : int
        L-BFGS iterations.
    fallback : {"pooled", "refuse"}
        A group with fewer than ``min_failures`` failures or ``min_normals`` normal embeddings
        has no boundary of its own to learn (its rows are left out of the softmax); it, and a
        group unseen at fit, is scored by the pooled ruler (this ruler fitted on every row
        without groups: a logistic regression of the flag), with a :class:`RulerFitWarning`,
        or refused with a :class:`ScarceError` naming the group and its counts.
    min_failures, min_normals : int
        Fewest failures and normal embeddings a group needs for its own score.
    percentile : float, optional
        Default operating percentile of :meth:`threshold`, in (0, 100).

    Attributes
    ----------
    groups_ : tuple
        The groups with their own score, in the order of the score columns 1..K (0 is "elsewhere").
    fallback_groups_ : dict
        Group seen at fit -> ``(n_failures, n_normals)`` for each group scored by the pooled ruler.
    pooled_ : BoundaryRuler or None
        The pooled ruler (fitted when groups are given and ``fallback="pooled"``).
    weights_ : ndarray of shape (n_features + 1, K + 1)
        ``s = [standardised z, 1] @ weights_``.
    mean_, scale_ : ndarray of shape (n_features,)
        The standardisation.
    group_auc_ : dict
        Group -> AUC of its bad versus good training scores.
    separation_auc_ : float
        Stratified AUC: (bad, good) training pairs within one group ordered correctly.
    bad_scores_ : ndarray
        Sorted scores of the bad training embeddings of the groups with their own score.
    group_bad_scores_ : dict
        Group -> its sorted bad training scores (for ``threshold(p, group=g)``).
    """

    #: fit and score take the group of every embedding (``groups=``), as conditioned rulers do
    takes_groups = True

    def __init__(self, alpha: float = 1e-4, max_iter: int = 500, fallback: str = "pooled", min_failures: int = 5,
                 min_normals: int = 10, percentile: float | None = None) -> None:
        self.alpha = alpha
        self.max_iter = max_iter
        self.fallback = fallback
        self.min_failures = min_failures
        self.min_normals = min_normals
        self.percentile = percentile

    def fit(self, Z: ArrayLike, y: ArrayLike, groups: ArrayLike | None = None) -> BoundaryRuler:
        """Fit on labelled embeddings and the group of each (None: one group, a logistic regression).

        Parameters
        ----------
        Z : array_like of shape (n_samples, n_features)
        y : array_like of shape (n_samples,)
            1 failure, 0 normal.
        groups : array_like of shape (n_samples,), optional
            The group of each embedding (for a classifier, the true class of its seed).

        Returns
        -------
        self
        """
        check_choice("fallback", self.fallback, FALLBACKS)
        alpha = check_in_interval("alpha", self.alpha, 0.0, math.inf, high_open=True)
        max_iter = check_positive_int("max_iter", self.max_iter, maximum=10**6)
        if self.percentile is not None:
            check_percentile(self.percentile)
        Z = check_embeddings(Z)
        labels = check_labels(y, n_samples=Z.shape[0])
        grouped = groups is not None
        self._fitted_without_groups = not grouped
        groups = check_groups(groups, Z.shape[0]) if grouped else np.zeros(Z.shape[0], dtype=np.int64)
        own_rows = self._split_groups(labels, groups)
        self.pooled_ = None
        if grouped and self.fallback == "pooled":
            self.pooled_ = type(self)(**{**self.get_params(), "min_failures": 1, "min_normals": 1}).fit(Z, labels)
        self.input_scale_ = power_of_two_scale(Z)
        Z = self._rescale(Z)
        own = self._fit_softmax(Z[own_rows], labels[own_rows], groups[own_rows], alpha, max_iter)
        self.n_features_in_ = Z.shape[1]
        scores = self._scores(Z[own_rows], own, "its training embeddings")
        bad = labels[own_rows]
        self.bad_scores_ = np.sort(scores[bad])
        self.group_bad_scores_ = {g: np.sort(scores[bad & (own == i + 1)]) for i, g in enumerate(self.groups_)}
        self.group_auc_, self.separation_auc_ = stratified_auc(scores, bad, groups[own_rows])
        return self

    def _split_groups(self, labels: NDArray[np.bool_], groups: NDArray[Any]) -> NDArray[np.bool_]:
        """Rows of the groups with enough data for their own score; the rest become fallback groups."""
        min_failures = check_positive_int("min_failures", self.min_failures)
        min_normals = check_positive_int("min_normals", self.min_normals)
        keep = np.zeros(labels.size, dtype=bool)
        self.fallback_groups_ = {}
        for group in np.unique(groups):
            rows = groups == group
            n_bad, n_good = int(labels[rows].sum()), int((~labels[rows]).sum())
            if n_bad >= min_failures and n_good >= min_normals:
                keep |= rows
                continue
            what = (f"groups: group {_as_key(group)!r} has {n_bad} failure(s) and {n_good} normal embedding(s); its "
                    f"own boundary score needs at least min_failures={min_failures} and min_normals={min_normals}")
            if self.fallback == "refuse":
                raise ScarceError(f"{what} (fallback='refuse'; pass fallback='pooled' to score it with the ruler "
                                  "fitted on every group, or harvest more of it)")
            self.fallback_groups_[_as_key(group)] = (n_bad, n_good)
            warn_user(f"{what}: it is scored by the ruler pooled over all groups", RulerFitWarning)
        if not keep.any():
            raise ScarceError(f"groups: no group has min_failures={min_failures} failures and min_normals="
                              f"{min_normals} normal embeddings, so no boundary can be fitted; counts (failures, "
                              f"normal) per group: {self.fallback_groups_}")
        return keep

    def _fit_softmax(self, Z: NDArray[np.float64], labels: NDArray[np.bool_], groups: NDArray[Any],
                     alpha: float, max_iter: int) -> NDArray[np.intp]:
        """The weights of the K + 1 scores by L-BFGS on the penalised likelihood of the flags; returns
        each row's own score column."""
        from scipy.optimize import minimize

        unique = np.unique(groups)
        self.groups_ = tuple(_as_key(g) for g in unique)
        own = np.searchsorted(unique, groups) + 1
        self.mean_ = Z.mean(axis=0)
        spread = Z.std(axis=0)
        self.scale_ = np.where(spread > 0.0, spread, 1.0)
        X = np.hstack([(Z - self.mean_) / self.scale_, np.ones((Z.shape[0], 1))])
        n_scores = len(self.groups_) + 1
        fitted = minimize(_objective, np.zeros(X.shape[1] * n_scores), jac=True, method="L-BFGS-B",
                          args=(X, own, labels.astype(np.float64), alpha, n_scores), options={"maxiter": max_iter})
        self.weights_ = fitted.x.reshape(X.shape[1], n_scores)
        self.n_iter_ = int(fitted.nit)
        if not fitted.success:
            warn_user(f"BoundaryRuler: L-BFGS stopped before converging after {self.n_iter_} iterations "
                      f"({fitted.message}); raise max_iter (now {max_iter}) or alpha (now {alpha:g})", RulerFitWarning)
        return own

    def _columns(self, groups: ArrayLike | None, n: int) -> NDArray[np.intp]:
        """Score column of each row's group; 0 marks a row for the pooled ruler (a fallback group)."""
        if groups is None:
            if len(self.groups_) != 1 or self.fallback_groups_:
                raise ScarceError(f"groups: this boundary ruler was fitted on {len(self.groups_) + len(self.fallback_groups_)} "
                                  "groups, so scoring needs the group of every embedding (groups=...)")
            return np.ones(n, dtype=np.intp)
        if self._fitted_without_groups:
            raise ScarceError("groups: this boundary ruler was fitted without groups (one logistic regression of the "
                              "flag), so it knows none; score without groups, or fit with groups=...")
        groups = check_groups(groups, n)
        index = {g: i + 1 for i, g in enumerate(self.groups_)}
        out = np.zeros(n, dtype=np.intp)
        for group in np.unique(groups):
            key = _as_key(group)
            if key in index:
                out[groups == group] = index[key]
            elif key not in self.fallback_groups_:
                self._unseen(key)
        return out

    def _unseen(self, key: Hashable) -> None:
        known = ", ".join(map(repr, [*self.groups_, *self.fallback_groups_]))
        if self.pooled_ is None:
            raise ScarceError(f"groups: group {key!r} was not seen at fit (fallback={self.fallback!r}); the boundary "
                              f"ruler has a score only for the groups {known}")
        warn_user(f"group {key!r} was not seen at fit: it is scored by the ruler pooled over the groups {known}",
                  RulerFitWarning)

    def _scores(self, Z: NDArray[np.float64], own: NDArray[np.intp], what: str) -> NDArray[np.float64]:
        """Finite log-odds of ``Z`` (already rescaled) under the score columns ``own``, or a clear error."""
        with np.errstate(over="ignore", invalid="ignore"):
            S = ((Z - self.mean_) / self.scale_) @ self.weights_[:-1] + self.weights_[-1]
            scores = _log_odds(S, own)
        if not np.isfinite(scores).all():
            self._raise_nonfinite(Z, scores, what)
        return scores

    def _score(self, Z: NDArray[np.float64]) -> NDArray[np.float64]:
        return self._scores(Z, self._columns(None, Z.shape[0]), "the embeddings scored")

    def score_samples(self, Z: ArrayLike, groups: ArrayLike | None = None) -> NDArray[np.float64]:
        """Log-odds of failure of each embedding under its group's score; larger is closer to failure.

        ``groups`` gives the group of every row (needed unless the ruler was fitted on one group).
        A fallback group's rows, and those of a group unseen at fit (with a warning), are scored by
        the pooled ruler; with ``fallback="refuse"`` an unseen group is an error that lists the known ones.
        """
        check_is_fitted(self, "weights_")
        Z = check_embeddings(Z, n_features=self.n_features_in_)
        own = self._columns(groups, Z.shape[0])
        out = np.empty(Z.shape[0])
        mine = own > 0
        if mine.any():
            out[mine] = self._scores(self._rescale(Z[mine]), own[mine], "the embeddings scored")
        if not mine.all():
            out[~mine] = self.pooled_.score_samples(Z[~mine])
        return out

    def for_group(self, group: Hashable) -> BaseRuler:
        """The fitted ruler of one group (what a run on a seed of that group reads); the pooled
        ruler for a fallback group or (with a warning) one unseen at fit."""
        check_is_fitted(self, "weights_")
        if not isinstance(group, Hashable) or (isinstance(group, np.ndarray) and group.ndim):
            raise ScarceError(f"group must be one label (an integer or a string), got {type(group).__name__} {group!r}")
        column = int(self._columns(np.asarray([_as_key(group)]), 1)[0])
        return _GroupBoundary(self, column)._attach() if column else self.pooled_

    def threshold(self, percentile: float | None = None, group: Hashable | None = None) -> float:
        """Operating threshold at a percentile of the bad training scores, of ``group`` when given."""
        if group is None:
            return super().threshold(percentile)
        return self.for_group(group).threshold(percentile)

    def diagnostics(self, Z: ArrayLike, y: ArrayLike,  # type: ignore[override]
                    metrics: Any = ("auc", "cohens_d", "kl_good_bad"),
                    groups: ArrayLike | None = None) -> dict[str, float]:
        """The separation metrics of :meth:`BaseRuler.diagnostics`; with ``groups``, each embedding is
        scored by its group and ``auc`` is the stratified AUC (pairs within one group)."""
        if groups is None or isinstance(metrics, str):  # the base class names a bad metrics argument
            return super().diagnostics(Z, y, metrics)
        from scarce.selection.metrics import compute_metrics

        scores = self.score_samples(Z, groups)
        labels = check_labels(y, n_samples=scores.size)
        out = compute_metrics(list(metrics), scores[~labels], scores[labels])
        out["auc"] = stratified_auc(scores, labels, check_groups(groups, scores.size))[1]
        out.update(self._extra_diagnostics())
        return out

    def _extra_diagnostics(self) -> dict[str, Any]:
        return {"groups": float(len(self.groups_)), "groups_pooled": float(len(self.fallback_groups_))}


class _GroupBoundary(BaseRuler):
    """One group's view of a fitted :class:`BoundaryRuler`: a plain fitted ruler of one argument.

    Made by :meth:`BoundaryRuler.for_group`; it shares the parent's weights and carries that
    group's bad training scores (``threshold``) and AUC (``separation_auc_``).
    """

    def __init__(self, parent: BoundaryRuler | None = None, column: int = 1, percentile: float | None = None) -> None:
        self.parent = parent
        self.column = column
        self.percentile = percentile

    def _attach(self) -> _GroupBoundary:
        parent = self.parent
        if self.percentile is None:
            self.percentile = parent.percentile
        self.group_ = parent.groups_[self.column - 1]
        self.input_scale_ = parent.input_scale_
        self.bad_scores_ = parent.group_bad_scores_[self.group_]
        self.separation_auc_ = parent.group_auc_.get(self.group_, float("nan"))
        self.n_features_in_ = parent.n_features_in_
        return self

    @property
    def name(self) -> str:
        """What a problem's name shows: the ruler this is a view of."""
        return type(self.parent).__name__

    def fit(self, Z: ArrayLike, y: ArrayLike) -> _GroupBoundary:
        """A view is not fitted by itself: fit its :class:`BoundaryRuler` (with the groups)."""
        raise ScarceError("a group's boundary ruler is a view of its BoundaryRuler; fit that one, with groups=...")

    def _score(self, Z: NDArray[np.float64]) -> NDArray[np.float64]:
        return self.parent._scores(Z, np.full(Z.shape[0], self.column, dtype=np.intp), "the embeddings scored")
