"""Aggregation of a selector metric over groups (e.g. PAIR attack turns).

The paper aggregates by the *worst* group (appendix ``app:llm-ranking``, "Metric Ranking and
Stability"): one weak turn can dominate the cascade error, and a mean dilutes that bottleneck.
"Worst" follows the metric's orientation: the minimum of a higher-is-better metric, the maximum of
``overlap``.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scarce.checks import as_real_array, check_scores, power_of_two_scale
from scarce.errors import ScarceError, show, unknown_name_error
from scarce.selection.metrics import compute_metrics, metric_spec

__all__ = ["AGGREGATIONS", "aggregate", "aggregate_groups", "metric_by_group"]

AGGREGATIONS = ("worst", "mean")
"""How a metric is aggregated over groups: the worst group, or the mean."""

ScorePair = tuple[ArrayLike, ArrayLike]


def _check_how(how: str) -> str:
    if not isinstance(how, str) or how not in AGGREGATIONS:
        raise unknown_name_error("aggregation", str(how), AGGREGATIONS)
    return how


def aggregate_array(values: ArrayLike, higher_is_better: bool, how: str, axis: int = -1
                    ) -> NDArray[np.float64] | float:
    """Worst or mean along ``axis`` of an array of metric values (worst = min if higher is
    better, else max)."""
    v = as_real_array(values, "values", "an array of metric values")
    if _check_how(how) != "mean":
        return v.min(axis=axis) if higher_is_better else v.max(axis=axis)
    # The mean of finite values near float64's limit is finite: average the scaled values.
    finite = np.isfinite(v)
    scale = power_of_two_scale(v[finite])
    with np.errstate(invalid="ignore"):
        mean = (v / scale).mean(axis=axis) * scale
    if np.isnan(mean).any() and not np.isnan(v).any():
        raise ScarceError("values: the mean of +inf and -inf is undefined (cohens_d and "
                          "fisher_ratio are infinite when a group's scores have zero spread); "
                          "aggregate by 'worst' or drop those groups")
    return mean


def aggregate(values: Mapping[Hashable, float] | ArrayLike, metric: str, how: str = "worst"
              ) -> float:
    """Aggregate per-group values of ``metric``.

    Parameters
    ----------
    values : mapping group -> float, or array_like of shape (n_groups,)
        Metric value per group (at least one).
    metric : str
        Metric name (fixes the orientation of "worst").
    how : {"worst", "mean"}

    Returns
    -------
    float
    """
    spec = metric_spec(metric)
    _check_how(how)
    v = check_scores(list(values.values()) if isinstance(values, Mapping) else values,
                     name="values", allow_inf=True)
    return float(aggregate_array(v, spec.higher_is_better, how))


def metric_by_group(groups: Mapping[Hashable, ScorePair], metric: str, **density_options: Any
                    ) -> dict[Hashable, float]:
    """Metric value per group.

    Parameters
    ----------
    groups : mapping group -> (good_scores, bad_scores)
        Score samples per group (e.g. per attack turn).
    metric : str
        Metric name.
    **density_options
        Passed to the density estimate of density-based metrics.

    Returns
    -------
    dict
        Group -> value.
    """
    if not isinstance(groups, Mapping) or not groups:
        raise ScarceError("groups must map at least one group to (good_scores, bad_scores); got "
                          f"{show(groups)}")
    out = {}
    for k, pair in groups.items():
        if isinstance(pair, (str, bytes, Mapping)) or not hasattr(pair, "__len__") or len(pair) != 2:
            raise ScarceError(f"groups[{k!r}] must be a pair (good_scores, bad_scores); got "
                              f"{type(pair).__name__}")
        out[k] = compute_metrics([metric], pair[0], pair[1], **density_options)[metric]
    return out


def aggregate_groups(groups: Mapping[Hashable, ScorePair], metric: str = "kl_good_bad",
                     how: str = "worst", **density_options: Any) -> float:
    """Worst-group (or mean) value of ``metric``: the paper's ruler selector.

    Parameters
    ----------
    groups : mapping group -> (good_scores, bad_scores)
    metric : str
        Default ``"kl_good_bad"``, i.e. ``S(G) = min_t KL(p_good,t || p_bad,t)``.
    how : {"worst", "mean"}

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> turns = {t: (rng.normal(0, 1, 500), rng.normal(mu, 1, 500))
    ...          for t, mu in [(1, 3.0), (2, 1.0)]}
    >>> aggregate_groups(turns, "cohens_d") < 1.5    # the weaker turn decides
    True
    """
    _check_how(how)
    return aggregate(metric_by_group(groups, metric, **density_options), metric, how)
