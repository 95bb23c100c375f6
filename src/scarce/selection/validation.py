"""Validation of a ruler selector against downstream estimation error.

Produces the paper's tables (appendix ``app:llm-ranking``):

* ``tab:selector-family-truth`` ("Ground-truth family ranking"): :func:`family_ranking` on a
  long-format table of downstream errors ``|r - 1|`` (one row per family, variant and cell),
  joined with worst-group selector values from :func:`selector_values`;
* ``tab:selector-cv`` ("Selector robustness"): :func:`selector_robustness` on per-(family, group)
  score samples built from a long-format table by :func:`group_scores`.

Sign convention: the selector "agrees" with the downstream ranking when better-separated
families have lower error, so rho is computed between the oriented selector value (negated for
lower-is-better metrics) and the *negative* error; rho > 0 is agreement.

Long-format inputs are plain 1-D columns (numpy arrays, lists, or pandas columns).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from scarce.checks import check_labels, check_scores
from scarce.errors import ScarceError, unknown_name_error
from scarce.seeding import SeedLike, as_generator
from scarce.selection.aggregation import AGGREGATIONS, aggregate_array
from scarce.selection.metrics import available_metrics, compute_metrics, metric_spec
from scarce.selection.ranking import (
    bootstrap_interval,
    leave_one_out_min,
    permutation_pvalue,
    spearman,
    spearman_asymptotic_pvalue,
)

__all__ = [
    "FamilyRanking",
    "SelectorValidation",
    "family_ranking",
    "group_scores",
    "metric_values",
    "selector_robustness",
    "selector_values",
    "validate_selector",
]

GroupValues = Mapping[Hashable, Mapping[Hashable, float]]


def _columns(**cols: ArrayLike) -> dict[str, np.ndarray]:
    arrays = {}
    for k, v in cols.items():
        try:
            arrays[k] = np.asarray(v)
        except Exception as exc:  # noqa: BLE001 - ragged lists and odd objects
            raise ScarceError(f"{k} must be a 1-D column (array, list or pandas column); got a "
                              f"{type(v).__name__} numpy cannot read ({type(exc).__name__})") from None
    lengths = {k: a.shape for k, a in arrays.items()}
    n = next(iter(arrays.values())).shape
    if any(a.ndim != 1 or a.shape != n for a in arrays.values()):
        raise ScarceError(f"long-format columns must be 1-D and of equal length; "
                          f"got shapes {lengths}")
    if n[0] == 0:
        raise ScarceError("the long-format table is empty")
    return arrays


def group_scores(family: ArrayLike, group: ArrayLike, label: ArrayLike, score: ArrayLike
                 ) -> dict[Hashable, dict[Hashable, tuple[np.ndarray, np.ndarray]]]:
    """Split a long-format table of labelled ruler scores into per-(family, group) samples.

    Parameters
    ----------
    family, group : array_like of shape (n_rows,)
        Ruler family (or variant) and group (e.g. attack turn) of each scored sample.
    label : array_like of shape (n_rows,)
        1 failure ("bad"), 0 normal ("good").
    score : array_like of shape (n_rows,)
        The ruler's score of that sample.

    Returns
    -------
    dict
        ``family -> group -> (good_scores, bad_scores)``.
    """
    cols = _columns(family=family, group=group, label=label, score=score)
    y = check_labels(cols["label"], n_samples=cols["label"].size, name="label", require_both=False)
    s = check_scores(cols["score"], name="score")
    out: dict[Hashable, dict[Hashable, tuple[np.ndarray, np.ndarray]]] = {}
    for fam in dict.fromkeys(cols["family"].tolist()):
        in_fam = cols["family"] == fam
        out[fam] = {}
        for grp in dict.fromkeys(cols["group"][in_fam].tolist()):
            rows = in_fam & (cols["group"] == grp)
            out[fam][grp] = (s[rows & ~y], s[rows & y])
    return out


def metric_values(scores: Mapping[Hashable, Mapping[Hashable, tuple[ArrayLike, ArrayLike]]],
                  metrics: Sequence[str], **density_options: Any
                  ) -> dict[str, dict[Hashable, dict[Hashable, float]]]:
    """Every metric for every (family, group): ``metric -> family -> group -> value``.

    The density of each (family, group) pair is estimated once for all density-based metrics.
    """
    for m in metrics:
        metric_spec(m)
    out: dict[str, dict[Hashable, dict[Hashable, float]]] = {m: {} for m in metrics}
    _check_nested("scores", scores, "(good_scores, bad_scores)")
    for fam, groups in scores.items():
        for grp, pair in groups.items():
            good, bad = _score_pair(pair, f"scores[{fam!r}][{grp!r}]")
            values = compute_metrics(metrics, good, bad, **density_options)
            for m in metrics:
                out[m].setdefault(fam, {})[grp] = values[m]
    return out


def _check_nested(name: str, value: object, leaf: str) -> None:
    """Raise unless ``value`` maps families to mappings of groups (the nested inputs here)."""
    if not isinstance(value, Mapping) or not all(isinstance(v, Mapping) for v in value.values()):
        raise ScarceError(f"{name} must map family -> (mapping group -> {leaf}); got "
                          f"{type(value).__name__}")


def _score_pair(pair: object, where: str) -> tuple[ArrayLike, ArrayLike]:
    """``(good, bad)`` from a 2-item sequence, or a :class:`ScarceError` naming ``where``."""
    if isinstance(pair, (str, bytes, Mapping)) or not hasattr(pair, "__len__") or len(pair) != 2:
        raise ScarceError(f"{where} must be a pair (good_scores, bad_scores); got {type(pair).__name__}")
    return pair[0], pair[1]


def _matrix(values: GroupValues) -> tuple[list, list, np.ndarray]:
    _check_nested("values", values, "metric value")
    families = list(values)
    if not families:
        raise ScarceError("values must hold at least one family")
    groups = list(dict.fromkeys(g for fam in families for g in values[fam]))
    if not groups:
        raise ScarceError("values must give each family a value for at least one group; got none")
    missing = [(f, g) for f in families for g in groups if g not in values[f]]
    if missing:
        raise ScarceError(f"values must give every family a value for every group; missing "
                          f"(family, group) pairs: {missing[:5]}")
    table = check_scores([values[f][g] for f in families for g in groups], name="values", allow_inf=True)
    return families, groups, table.reshape(len(families), len(groups))


def selector_values(values: GroupValues, metric: str, how: str = "worst") -> dict[Hashable, float]:
    """Aggregate ``family -> group -> value`` over groups: ``family -> selector value``."""
    families, _, v = _matrix(values)
    agg = aggregate_array(v, metric_spec(metric).higher_is_better, how, axis=1)
    return dict(zip(families, np.atleast_1d(agg).tolist(), strict=True))


@dataclass(frozen=True)
class SelectorValidation:
    """Agreement of one selector (metric + aggregation) with downstream family error.

    Attributes
    ----------
    metric, aggregation : str
    rho : float
        Spearman rho between oriented selector value and negative error (> 0 = agreement).
    p_asymptotic : float
        Two-sided t-approximation p-value (the ``p`` column of ``tab:selector-cv``).
    p_permutation : float
        One-sided (pre-specified positive direction) permutation p-value; exact for n <= 8.
    p_permutation_two_sided : float
    lofo_min : float
        Leave-one-family-out minimum rho (NaN with fewer than 4 families).
    logo_min : float
        Leave-one-group-out minimum rho (selector re-aggregated without each group; NaN with
        a single group).
    bootstrap_interval : (float, float)
        Percentile interval of rho, resampling families.
    selector : dict
        Family -> aggregated selector value (raw, not oriented).
    errors : dict
        Family -> downstream error.
    """

    metric: str
    aggregation: str
    rho: float
    p_asymptotic: float
    p_permutation: float
    p_permutation_two_sided: float
    lofo_min: float
    logo_min: float
    bootstrap_interval: tuple[float, float]
    selector: dict = field(repr=False)
    errors: dict = field(repr=False)

    @property
    def n_families(self) -> int:
        """Number of families ranked."""
        return len(self.errors)


def _family_errors(errors: Mapping[Hashable, float], families: list) -> np.ndarray:
    """The finite downstream error of each family, in order, or a :class:`ScarceError`."""
    if not isinstance(errors, Mapping):
        raise ScarceError(f"errors must map family -> downstream error; got {type(errors).__name__}")
    missing = [f for f in families if f not in errors]
    if missing:
        raise ScarceError(f"errors has no downstream error for families {missing}")
    return check_scores([errors[f] for f in families], name="errors")


def _finite_selector(v: np.ndarray, higher_is_better: bool, how: str, metric: str, families: list) -> np.ndarray:
    """Each family's aggregated selector value; a ScarceError naming the families where it is not finite."""
    sel = np.asarray(aggregate_array(v, higher_is_better, how, axis=1))
    if not np.isfinite(sel).all():
        bad = [f for f, x in zip(families, sel.tolist(), strict=True) if not np.isfinite(x)]
        raise ScarceError(f"values: the {how} {metric} of families {bad[:5]} is not finite, so the "
                          "families cannot be ranked by it (cohens_d and fisher_ratio are infinite "
                          "when a group's good and bad scores both have zero spread)")
    return sel


def validate_selector(values: GroupValues, errors: Mapping[Hashable, float], *, metric: str,
                      how: str = "worst", level: float = 0.95, n_resamples: int = 2000,
                      n_permutations: int = 9999, seed: SeedLike = None) -> SelectorValidation:
    """Validate a selector against downstream errors, as in the paper's ``tab:selector-cv``.

    Parameters
    ----------
    values : mapping family -> (mapping group -> float)
        Metric value per family and group (e.g. from :func:`metric_values`); every family must
        cover the same groups.
    errors : mapping family -> float
        Downstream error per family (e.g. mean ``|r - 1|`` of its best variant, from
        :func:`family_ranking`); lower is better.
    metric : str
        The metric the values come from (fixes its orientation).
    how : {"worst", "mean"}
        Aggregation over groups.
    level : float
        Coverage of the bootstrap interval.
    n_resamples, n_permutations : int
        Bootstrap resamples; Monte Carlo permutations (used only above 8 families).
    seed : int, Generator, SeedSequence or None
        Split into independent streams for the permutations and the bootstrap.

    Returns
    -------
    SelectorValidation
    """
    spec = metric_spec(metric)
    if not isinstance(how, str) or how not in AGGREGATIONS:
        raise unknown_name_error("aggregation", how, AGGREGATIONS)
    families, groups, v = _matrix(values)
    target = -_family_errors(errors, families)
    sign = 1.0 if spec.higher_is_better else -1.0
    sel = _finite_selector(v, spec.higher_is_better, how, metric, families)
    oriented = sign * sel
    logo = [spearman(sign * aggregate_array(np.delete(v, j, axis=1), spec.higher_is_better, how,
                                            axis=1), target)
            for j in range(len(groups))] if len(groups) > 1 else [math.nan]
    perm_rng, boot_rng = as_generator(seed).spawn(2)
    perm = {alt: permutation_pvalue(oriented, target, alternative=alt, n_resamples=n_permutations,
                                    seed=perm_rng) for alt in ("greater", "two-sided")}
    return SelectorValidation(
        metric=metric,
        aggregation=how,
        rho=spearman(oriented, target),
        p_asymptotic=spearman_asymptotic_pvalue(oriented, target),
        p_permutation=perm["greater"],
        p_permutation_two_sided=perm["two-sided"],
        lofo_min=leave_one_out_min(oriented, target) if len(families) >= 4 else math.nan,
        logo_min=math.nan if np.all(np.isnan(logo)) else float(np.nanmin(logo)),
        bootstrap_interval=bootstrap_interval(oriented, target, level=level,
                                              n_resamples=n_resamples, seed=boot_rng),
        selector=dict(zip(families, sel.tolist(), strict=True)),
        errors=dict(zip(families, (-target).tolist(), strict=True)),
    )


def selector_robustness(
    scores: Mapping[Hashable, Mapping[Hashable, tuple[ArrayLike, ArrayLike]]] | None,
    errors: Mapping[Hashable, float], *, metrics: Sequence[str] | None = None,
    aggregations: Sequence[str] = AGGREGATIONS, seed: SeedLike = None,
    values: Mapping[str, Mapping[Hashable, Mapping[Hashable, float]]] | None = None, **options: Any,
) -> list[SelectorValidation]:
    """The paper's "Selector robustness" table: every metric x aggregation, best rho first.

    Parameters
    ----------
    scores : mapping family -> (mapping group -> (good_scores, bad_scores))
        E.g. from :func:`group_scores`.
    errors : mapping family -> float
        Downstream error per family (lower is better).
    metrics : sequence of str, optional
        Default: all registered metrics.
    aggregations : sequence of {"worst", "mean"}
    seed : int, Generator, SeedSequence or None
        One seed is drawn from it and used by every row, so rows differ only by their metric.
    values : mapping metric -> family -> group -> value, optional
        The metrics already computed (:func:`metric_values`, e.g. stored with a run); then
        ``scores`` is not read and may be None.
    **options
        ``level``, ``n_resamples``, ``n_permutations`` for :func:`validate_selector`; the other
        keywords go to the density estimate.

    Returns
    -------
    list of SelectorValidation
        Sorted by decreasing rho (NaN last).
    """
    names = list(metrics) if metrics is not None else list(available_metrics())
    keys = ("level", "n_resamples", "n_permutations")
    validation = {k: options.pop(k) for k in keys if k in options}
    if values is None:
        table = metric_values(scores, names, **options)
    else:
        missing = [m for m in names if m not in values]
        if missing:
            raise ScarceError(f"values lacks the metric(s) {missing}; give them or leave values out")
        table = {m: {f: dict(g) for f, g in values[m].items() if f in errors} for m in names}
    row_seed = None if seed is None else int(as_generator(seed).integers(2**63))
    rows = [validate_selector(table[m], errors, metric=m, how=how, seed=row_seed, **validation)
            for m in names for how in aggregations]
    return sorted(rows, key=lambda r: (math.isnan(r.rho), -r.rho if not math.isnan(r.rho) else 0))


@dataclass(frozen=True)
class FamilyRanking:
    """One row of the ground-truth family ranking (``tab:selector-family-truth``).

    Attributes
    ----------
    family : hashable
    best_variant : hashable
        The variant (e.g. threshold percentile) with the lowest mean error.
    mean_error : float
        Mean of the best variant's errors over its cells (turns x eta).
    worst_error : float
        Largest error of the best variant over its cells.
    n_cells : int
        Number of cells averaged.
    """

    family: Hashable
    best_variant: Hashable
    mean_error: float
    worst_error: float
    n_cells: int


def family_ranking(family: ArrayLike, variant: ArrayLike, error: ArrayLike) -> list[FamilyRanking]:
    """Rank families by the mean error of their best variant (long-format input).

    Parameters
    ----------
    family, variant : array_like of shape (n_rows,)
        Family and variant of each row (one row per evaluated cell, e.g. turn x eta).
    error : array_like of shape (n_rows,)
        Downstream error of that cell, e.g. ``|p_hat / p_ref - 1|``.

    Returns
    -------
    list of FamilyRanking
        Sorted by increasing mean error.
    """
    cols = _columns(family=family, variant=variant, error=error)
    err = check_scores(cols["error"], name="error", allow_inf=True)
    rows = []
    for fam in dict.fromkeys(cols["family"].tolist()):
        in_fam = cols["family"] == fam
        best = None
        for var in dict.fromkeys(cols["variant"][in_fam].tolist()):
            e = err[in_fam & (cols["variant"] == var)]
            cand = FamilyRanking(fam, var, float(e.mean()), float(e.max()), int(e.size))
            if best is None or cand.mean_error < best.mean_error:
                best = cand
        rows.append(best)
    return sorted(rows, key=lambda r: r.mean_error)
