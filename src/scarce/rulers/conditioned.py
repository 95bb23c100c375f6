"""Conditioned rulers: one ruler per conditioning group, each applied to its own group's inputs.

A ruler pooled over every class of a classifier learns the direction that separates *all*
failures from *all* normal inputs. Failures of different seeds lie in different places (a
perturbed 3 fails toward 5 or 8, a perturbed 7 toward 1 or 9), so the pooled direction can
point away from the failure of the seed at hand, and on held-out seeds it often does. A
*conditioned* ruler fits one ruler per group ``g`` (the seed's true class, its confusion pair
``true -> most likely other class``, an attack style of a corpus) on that group's labelled
embeddings only, and scores an input with the ruler of its group:

.. math:: G(z \\mid g) = G_g(z), \\qquad G_g \\text{ fitted on } \\{(z_i, y_i) : g_i = g\\}.

In a Subset Simulation run every sample shares the seed's group, so the run sees one ruler,
:meth:`ConditionedRuler.for_group`. A group with too few failures (or normal samples) to fit
falls back to the ruler pooled over all groups, or is refused (``fallback``), by name, with its
count and the minimum.

The wrapper keeps the ruler contract (:mod:`scarce.rulers.base`), with the groups passed next
to the labels: ``fit(Z, y, groups=g)``, ``score_samples(Z, groups=g)``. Scores of different
groups come from different rulers and are not on one scale; ``separation_auc_`` is therefore
the *stratified* AUC (bad-good pairs within a group only) and ``threshold(p, group=g)`` reads
the percentile of that group's own bad scores.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, clone
from sklearn.utils.validation import check_is_fitted

from scarce.checks import check_embeddings, check_labels, check_percentile, warn_user
from scarce.checks import check_choice, check_positive_int
from scarce.errors import ScarceError, show
from scarce.rulers.base import BaseRuler, RulerFitWarning, percentile_threshold
from scarce.selection.metrics import auc

__all__ = ["FALLBACKS", "ConditionedRuler", "stratified_auc"]

#: What a group too small to fit (or unseen at fit) gets.
FALLBACKS = ("pooled", "refuse")


def check_groups(groups: object, n_samples: int, name: str = "groups") -> NDArray[Any]:
    """``groups`` as a 1-d array of ``n_samples`` hashable labels (no NaN), or a clear error."""
    if groups is None:
        raise ScarceError(f"{name}: a conditioned ruler needs the group of every embedding "
                          f"(an array of {n_samples} labels, e.g. the seed's true class); got None")
    try:
        arr = np.asarray(groups)
    except (TypeError, ValueError) as exc:
        raise ScarceError(f"{name} must be a 1-d array of labels; got {show(groups)} ({exc})") from None
    if arr.ndim != 1 or arr.shape[0] != n_samples:
        raise ScarceError(f"{name} must be a 1-d array of {n_samples} labels (one per embedding); "
                          f"got shape {arr.shape}")
    if arr.dtype.kind == "f" and np.isnan(arr).any():
        raise ScarceError(f"{name} holds NaN at row {int(np.flatnonzero(np.isnan(arr))[0])}; every "
                          "embedding needs a group label")
    if arr.dtype.kind not in "biufUSO":
        raise ScarceError(f"{name} must hold integers or strings; got dtype {arr.dtype}")
    try:
        np.unique(arr)
    except TypeError:
        raise ScarceError(f"{name} must hold labels of one type (integers or strings) that can be "
                          f"sorted; got a mix such as {show(arr[:5].tolist())}") from None
    return arr


class ConditionedRuler(BaseEstimator):
    """One ruler per group, applied to each input with the ruler of its group.

    Parameters
    ----------
    ruler : str or BaseRuler
        The ruler fitted in every group: a registry name (:func:`scarce.rulers.make_ruler`) or
        an unfitted ruler, cloned once per group and once for the pooled ruler.
    by : str
        What the groups are (``"class"``, ``"pair"``, ``"style"``...): a label for reports;
        the groups themselves come with ``fit``.
    fallback : {"pooled", "refuse"}
        A group with fewer than ``min_failures`` failures or ``min_normals`` normal
        embeddings, or one unseen at fit, is scored by the pooled ruler (with a
        :class:`RulerFitWarning` at fit) or refused with a :class:`ScarceError`.
    min_failures, min_normals : int
        Fewest labelled failures and normal embeddings a group needs for its own ruler.

    Attributes
    ----------
    rulers_ : dict
        Group -> its fitted ruler (groups with enough data only).
    pooled_ : BaseRuler
        The ruler fitted on every group together (the fallback, and the comparison).
    fallback_groups_ : dict
        Group seen at fit -> ``(n_failures, n_normals)`` for each group scored by the pooled ruler.
    group_auc_ : dict
        Group -> AUC of its bad versus good training scores under its own ruler.
    separation_auc_ : float
        Stratified AUC: the share of (bad, good) training pairs *within one group* that the
        conditioned scores order correctly (ties one half).
    bad_scores_ : ndarray
        Sorted conditioned scores of the bad training embeddings (all groups).
    n_features_in_ : int
    """

    def __init__(self, ruler: str | BaseRuler = "centroid", by: str = "group", fallback: str = "pooled",
                 min_failures: int = 10, min_normals: int = 10) -> None:
        self.ruler = ruler
        self.by = by
        self.fallback = fallback
        self.min_failures = min_failures
        self.min_normals = min_normals

    @property
    def percentile(self) -> float | None:
        """The wrapped ruler's default operating percentile."""
        return getattr(self._template(), "percentile", None)

    def _template(self) -> BaseRuler:
        if isinstance(self.ruler, str):
            from scarce.rulers.registry import make_ruler

            return make_ruler(self.ruler)
        if not isinstance(self.ruler, BaseRuler):
            raise ScarceError(f"ruler must be a registry name or a BaseRuler; got {show(self.ruler)} "
                              f"({type(self.ruler).__name__})")
        return self.ruler

    def fit(self, Z: ArrayLike, y: ArrayLike, groups: ArrayLike | None = None) -> ConditionedRuler:
        """Fit the pooled ruler and one ruler per group with enough failures and normal embeddings.

        Parameters
        ----------
        Z : array_like of shape (n_samples, n_features)
        y : array_like of shape (n_samples,)
            1 failure, 0 normal.
        groups : array_like of shape (n_samples,)
            Group label of every embedding (integers or strings).

        Returns
        -------
        self
        """
        check_choice("fallback", self.fallback, FALLBACKS)
        if not isinstance(self.by, str) or not self.by:
            raise ScarceError(f"by must name what the groups are (e.g. 'class'), got {show(self.by)}")
        min_failures = check_positive_int("min_failures", self.min_failures)
        min_normals = check_positive_int("min_normals", self.min_normals)
        Z = check_embeddings(Z)
        labels = check_labels(y, n_samples=Z.shape[0])
        groups = check_groups(groups, Z.shape[0])
        template = self._template()
        self.pooled_ = clone(template).fit(Z, labels)
        self.rulers_, self.fallback_groups_ = {}, {}
        for group in _unique(groups):
            rows = groups == group
            n_bad, n_good = int(labels[rows].sum()), int((~labels[rows]).sum())
            if n_bad >= min_failures and n_good >= min_normals:
                self.rulers_[group] = clone(template).fit(Z[rows], labels[rows])
            else:
                self._too_small(group, n_bad, n_good, min_failures, min_normals)
        self.n_features_in_ = Z.shape[1]
        scores = self._score_groups(Z, groups)
        self.bad_scores_ = np.sort(scores[labels])
        self.group_auc_, self.separation_auc_ = stratified_auc(scores, labels, groups)
        return self

    def _too_small(self, group: Hashable, n_bad: int, n_good: int, min_failures: int, min_normals: int) -> None:
        what = (f"group {group!r} ({self.by}) has {n_bad} failure(s) and {n_good} normal embedding(s); "
                f"its own ruler needs at least min_failures={min_failures} and min_normals={min_normals}")
        if self.fallback == "refuse":
            raise ScarceError(f"{what} (fallback='refuse'; pass fallback='pooled' to score it with the "
                              "ruler pooled over all groups)")
        self.fallback_groups_[group] = (n_bad, n_good)
        warn_user(f"{what}: it is scored by the ruler pooled over all groups", RulerFitWarning)

    def for_group(self, group: Hashable) -> BaseRuler:
        """The fitted ruler that scores inputs of ``group`` (the pooled one for a fallback group)."""
        check_is_fitted(self, "rulers_")
        key = _as_key(group)
        if key in self.rulers_:
            return self.rulers_[key]
        if key in self.fallback_groups_:
            return self.pooled_
        known = sorted(map(str, [*self.rulers_, *self.fallback_groups_]))
        if self.fallback == "refuse":
            raise ScarceError(f"group {group!r} ({self.by}) was not seen at fit (fallback='refuse'); "
                              f"known groups: {', '.join(known)}")
        warn_user(f"group {group!r} ({self.by}) was not seen at fit: it is scored by the ruler pooled "
                  f"over the groups {', '.join(known)}", RulerFitWarning)
        return self.pooled_

    def score_samples(self, Z: ArrayLike, groups: ArrayLike | None = None) -> NDArray[np.float64]:
        """Score each embedding with its group's ruler; larger means closer to failure."""
        check_is_fitted(self, "rulers_")
        Z = check_embeddings(Z, n_features=self.n_features_in_)
        return self._score_groups(Z, check_groups(groups, Z.shape[0]))

    def _score_groups(self, Z: NDArray[np.float64], groups: NDArray[Any]) -> NDArray[np.float64]:
        out = np.empty(Z.shape[0])
        for group in _unique(groups):
            rows = groups == group
            out[rows] = self.for_group(group).score_samples(Z[rows])
        return out

    def threshold(self, percentile: float | None = None, group: Hashable | None = None) -> float:
        """Operating threshold at a percentile of the bad training scores: of ``group``'s ruler when
        given, else of all groups' conditioned bad scores (which mix the groups' scales)."""
        check_is_fitted(self, "rulers_")
        if group is not None:
            return self.for_group(group).threshold(percentile)
        if percentile is None:
            percentile = self.percentile
            if percentile is None:
                raise ScarceError("percentile: the wrapped ruler has percentile=None, so threshold() "
                                  "needs an explicit percentile in (0, 100), e.g. threshold(75)")
        return percentile_threshold(self.bad_scores_, check_percentile(percentile))

    def diagnostics(self, Z: ArrayLike, y: ArrayLike, groups: ArrayLike | None = None) -> dict[str, float]:
        """Stratified AUC of labelled embeddings, and how many groups have their own ruler."""
        scores = self.score_samples(Z, groups)
        labels = check_labels(y, n_samples=scores.size)
        _, stratified = stratified_auc(scores, labels, check_groups(groups, scores.size))
        return {"auc": stratified, "groups_fitted": float(len(self.rulers_)),
                "groups_pooled": float(len(self.fallback_groups_))}


def _as_key(group: Hashable) -> Hashable:
    """A group label as the plain Python value the fitted dictionaries use."""
    if isinstance(group, (np.generic, np.ndarray)) and np.ndim(group) == 0:
        return group.item()
    if isinstance(group, np.ndarray):
        raise ScarceError(f"group must be one label, got an array of shape {group.shape}")
    return group


def _unique(groups: NDArray[Any]) -> list[Hashable]:
    return [_as_key(g) for g in np.unique(groups)]


def stratified_auc(scores: NDArray[np.float64], labels: NDArray[np.bool_], groups: NDArray[Any]
                   ) -> tuple[Mapping[Hashable, float], float]:
    """Per-group AUC of bad against good scores and their mean weighted by (bad, good) pairs: the
    share of pairs within one group ordered correctly, ties one half (NaN when no group holds
    both classes)."""
    per_group, weighted, pairs = {}, 0.0, 0
    for group in _unique(groups):
        rows = groups == group
        bad, good = scores[rows & labels], scores[rows & ~labels]
        if bad.size and good.size:
            per_group[group] = auc(good, bad)
            weighted += per_group[group] * bad.size * good.size
            pairs += bad.size * good.size
    return per_group, (weighted / pairs if pairs else float("nan"))
