"""Separation metrics between the good and bad score distributions of a ruler.

Every metric takes ``good`` (scores of ``D_good``) and ``bad`` (scores of ``D_bad``) and returns a
float; the registry records whether higher means better separated (all but ``overlap``). The
paper's selector is ``kl_good_bad`` = ``KL(p_good || p_bad)`` (section "Ruler selection";
appendix ``app:llm-ranking`` benchmarks these 14 candidates).

Estimators (details and biases in :mod:`scarce.selection.density`): the KL divergences
(``kl_good_bad``, ``kl_bad_good``, ``jeffreys``) use the 1-D k-nearest-neighbour estimator (no
bandwidth; biased low when KL is dominated by one sample's tail beyond the other's range); the
bounded divergences (``jensen_shannon``, ``bhattacharyya``, ``hellinger``, ``overlap``,
``mutual_information``) use shared-grid kernel densities (biased low by the smoothing, about -2.5 %
at ``n = 10^4`` for Gaussian location shifts). The rest are computed from the samples directly.
Every value is finite for finite inputs. Logarithms are natural (nats).

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> good, bad = rng.normal(0, 1, 2000), rng.normal(2, 1, 2000)
>>> abs(compute_metric("auc", good, bad) - 0.921) < 0.02   # Phi(2 / sqrt 2) = 0.921
True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scarce.checks import check_scores, power_of_two_scale
from scarce.checks import check_positive_int
from scarce.errors import ScarceError, unknown_name_error
from scarce.selection.density import GridDensities, knn_kl_divergence, shared_grid_densities

__all__ = [
    "MetricSpec",
    "auc",
    "available_metrics",
    "cohens_d",
    "compute_metric",
    "compute_metrics",
    "metric_spec",
]

Array = NDArray[np.float64]


def _kl(p: Array, q: Array) -> float:
    return float(np.sum(p * np.log(p / q)))


def _bhattacharyya_coefficient(d: GridDensities) -> float:
    return float(np.sum(np.sqrt(d.good * d.bad)))


# -- k-nearest-neighbour KL -----------------------------------------------------------------------
def _kl_good_bad(good: Array, bad: Array, k: int) -> float:
    return knn_kl_divergence(good, bad, k)


def _kl_bad_good(good: Array, bad: Array, k: int) -> float:
    return knn_kl_divergence(bad, good, k)


def _jeffreys(good: Array, bad: Array, k: int) -> float:
    return knn_kl_divergence(good, bad, k) + knn_kl_divergence(bad, good, k)


# -- shared-grid kernel densities -----------------------------------------------------------------
def _jensen_shannon(d: GridDensities) -> float:
    m = 0.5 * (d.good + d.bad)
    return float(np.clip(0.5 * _kl(d.good, m) + 0.5 * _kl(d.bad, m), 0.0, np.log(2.0)))


def _bhattacharyya(d: GridDensities) -> float:
    return float(-np.log(min(_bhattacharyya_coefficient(d), 1.0)))


def _hellinger(d: GridDensities) -> float:
    return float(np.sqrt(max(1.0 - _bhattacharyya_coefficient(d), 0.0)))


def _overlap(d: GridDensities) -> float:
    # Each density sums to 1 only up to rounding, so the sum of minima can exceed 1 by an ulp.
    return float(np.clip(np.sum(np.minimum(d.good, d.bad)), 0.0, 1.0))


def _mutual_information(d: GridDensities) -> float:
    w = d.weight_bad
    m = (1.0 - w) * d.good + w * d.bad
    return max(0.0, (1.0 - w) * _kl(d.good, m) + w * _kl(d.bad, m))


# -- sample-based -------------------------------------------------------------------------------
def _rounding_level(g: Array, b: Array) -> float:
    """Spread or gap below which a difference is float64 rounding of the scores, not signal."""
    top = max(float(np.abs(g).max(initial=0.0)), float(np.abs(b).max(initial=0.0)))
    return 8.0 * np.finfo(np.float64).eps * top


def cohens_d(good: ArrayLike, bad: ArrayLike) -> float:
    """Cohen's d: ``(mean_bad - mean_good) / s_pooled``.

    ``s_pooled^2 = ((n_g - 1) s_g^2 + (n_b - 1) s_b^2) / (n_g + n_b - 2)``. Signed: positive when
    bad scores sit higher. Returns ``+-inf`` (or 0) when both samples have zero spread; spreads
    and gaps at the level of float64 rounding of the scores count as zero (two copies of one
    constant give 0, not the ratio of two rounding errors).
    """
    g = check_scores(good, name="good", min_size=2)
    b = check_scores(bad, name="bad", min_size=2)
    scale = power_of_two_scale(g, b)  # scale-free: keeps the variances of extreme scores finite
    g, b = g / scale, b / scale
    tiny = _rounding_level(g, b)
    pooled = ((g.size - 1) * g.var(ddof=1) + (b.size - 1) * b.var(ddof=1)) / (g.size + b.size - 2)
    gap = float(b.mean() - g.mean())
    gap = 0.0 if abs(gap) <= tiny else gap
    if not np.sqrt(pooled) > tiny:
        return 0.0 if gap == 0 else float(np.copysign(np.inf, gap))
    return gap / float(np.sqrt(pooled))


def auc(good: ArrayLike, bad: ArrayLike) -> float:
    """Area under the ROC curve, ``P(bad score > good score) + P(tie) / 2``.

    Counted straight from that definition (the Mann-Whitney U over ``n_good n_bad``): for each
    bad score, the good scores below it and half those equal to it, by binary search in the
    sorted good scores; O(n log n).
    """
    g = np.sort(check_scores(good, name="good", allow_inf=True))
    b = check_scores(bad, name="bad", allow_inf=True)
    below = np.searchsorted(g, b, side="left")
    ties = np.searchsorted(g, b, side="right") - below
    return float((below.sum() + 0.5 * ties.sum()) / (g.size * b.size))


def _fisher_ratio(good: Array, bad: Array) -> float:
    tiny = _rounding_level(good, bad)
    spread = good.var(ddof=1) + bad.var(ddof=1)
    gap = float(bad.mean() - good.mean())
    gap2 = 0.0 if abs(gap) <= tiny else gap * gap
    if not np.sqrt(spread) > tiny:
        return 0.0 if gap2 == 0 else float(np.inf)
    return gap2 / float(spread)


def _wasserstein(good: Array, bad: Array) -> float:
    from scipy import stats  # imported where used: it is slow to import
    return float(stats.wasserstein_distance(good, bad))


def _ks(good: Array, bad: Array) -> float:
    from scipy import stats  # imported where used: it is slow to import
    return float(stats.ks_2samp(good, bad).statistic)


def _energy(good: Array, bad: Array) -> float:
    from scipy import stats  # imported where used: it is slow to import
    return float(stats.energy_distance(good, bad))


@dataclass(frozen=True)
class MetricSpec:
    """A registered metric.

    Attributes
    ----------
    name : str
        Registry key.
    function : callable
        ``f(good, bad, k) -> float`` for ``estimator="knn"``, ``f(GridDensities) -> float`` for
        ``"kde"``, ``f(good, bad) -> float`` for ``"sample"``.
    estimator : {"knn", "kde", "sample"}
        How the value is estimated (see the module docstring).
    higher_is_better : bool
        Orientation: larger value = better-separated good and bad scores.
    symmetric : bool
        Unchanged when good and bad are swapped.
    formula : str
        One-line definition.
    """

    name: str
    function: Callable[..., float]
    estimator: str
    higher_is_better: bool
    symmetric: bool
    formula: str


_METRICS: dict[str, MetricSpec] = {
    spec.name: spec
    for spec in (
        MetricSpec("kl_good_bad", _kl_good_bad, "knn", True, False,
                   "KL(p_good || p_bad) = E_good log(p_good / p_bad) (the paper's selector)"),
        MetricSpec("kl_bad_good", _kl_bad_good, "knn", True, False, "KL(p_bad || p_good)"),
        MetricSpec("jeffreys", _jeffreys, "knn", True, True,
                   "KL(p_good || p_bad) + KL(p_bad || p_good)"),
        MetricSpec("jensen_shannon", _jensen_shannon, "kde", True, True,
                   "(KL(p_good || m) + KL(p_bad || m)) / 2, m = (p_good + p_bad) / 2 (<= log 2)"),
        MetricSpec("bhattacharyya", _bhattacharyya, "kde", True, True,
                   "-log integral sqrt(p_good p_bad)"),
        MetricSpec("hellinger", _hellinger, "kde", True, True,
                   "sqrt(1 - integral sqrt(p_good p_bad)) in [0, 1]"),
        MetricSpec("overlap", _overlap, "kde", False, True,
                   "integral min(p_good, p_bad) in [0, 1] (lower is better)"),
        MetricSpec("mutual_information", _mutual_information, "kde", True, False,
                   "I(score; label) with the sample's label prior, in nats"),
        MetricSpec("cohens_d", cohens_d, "sample", True, False,
                   "(mean_bad - mean_good) / pooled standard deviation"),
        MetricSpec("auc", auc, "sample", True, False, "P(bad > good) + P(tie) / 2"),
        MetricSpec("fisher_ratio", _fisher_ratio, "sample", True, True,
                   "(mean_bad - mean_good)^2 / (var_good + var_bad)"),
        MetricSpec("wasserstein", _wasserstein, "sample", True, True,
                   "integral |F_good - F_bad| (Wasserstein-1)"),
        MetricSpec("ks", _ks, "sample", True, True, "sup |F_good - F_bad| (Kolmogorov-Smirnov)"),
        MetricSpec("energy", _energy, "sample", True, True,
                   "sqrt(2 E|X - Y| - E|X - X'| - E|Y - Y'|) (scipy.stats.energy_distance)"),
    )
}


def available_metrics() -> tuple[str, ...]:
    """Names of the registered metrics, sorted."""
    return tuple(sorted(_METRICS))


def metric_spec(name: str) -> MetricSpec:
    """Registry entry of a metric; an unknown name raises with "did you mean" and the list."""
    try:
        return _METRICS[name]
    except (KeyError, TypeError):
        raise unknown_name_error("metric", name, _METRICS) from None


def compute_metrics(names: Iterable[str], good: ArrayLike, bad: ArrayLike, *, k: int = 1,
                    bandwidth: str | float = "scott", floor: float = 1e-12,
                    n_grid: int | None = None) -> dict[str, float]:
    """Several metrics on one pair of score samples (the kernel densities are estimated once).

    Parameters
    ----------
    names : iterable of str
        Metric names (see :func:`available_metrics`).
    good, bad : array_like of shape (n_good,), (n_bad,)
        Finite scores of normal and failure samples, at least 2 each.
    k : int
        Neighbour order of the k-NN KL estimator.
    bandwidth, floor, n_grid
        Options of :func:`~scarce.selection.density.shared_grid_densities`.

    Returns
    -------
    dict
        Name -> value.
    """
    if isinstance(names, str):
        raise ScarceError(f"names must be an iterable of metric names, not the string {names!r}; "
                          f"write [{names!r}]")
    specs = [metric_spec(n) for n in names]
    g = check_scores(good, name="good", min_size=2)
    b = check_scores(bad, name="bad", min_size=2)
    k = check_positive_int("k", k)
    for spec in specs:
        _check_knn_sizes(spec.name, k, g.size, b.size)
    # Every metric is scale-invariant except the two distances, scaled back below: dividing by
    # a power of two (exact) keeps squares and spreads of extreme scores finite.
    scale = power_of_two_scale(g, b)
    g, b = g / scale, b / scale
    dens: GridDensities | None = None
    out = {}
    for spec in specs:
        if spec.estimator == "knn":
            out[spec.name] = spec.function(g, b, k)
        elif spec.estimator == "kde":
            if dens is None:
                dens = shared_grid_densities(g, b, bandwidth=bandwidth, floor=floor, n_grid=n_grid)
            out[spec.name] = spec.function(dens)
        elif spec.name in _IN_SCORE_UNITS:
            out[spec.name] = _unscale(spec.name, spec.function(g, b), scale)
        else:
            out[spec.name] = spec.function(g, b)
    return out


#: Smallest (good, bad) sample sizes of each k-NN divergence, as offsets added to ``k``: the
#: estimator of ``KL(P || Q)`` needs ``k + 1`` samples of P (a point is not its own neighbour)
#: and ``k`` of Q (see :func:`~scarce.selection.density.knn_kl_divergence`).
_KNN_MIN_SIZES = {"kl_good_bad": (1, 0), "kl_bad_good": (0, 1), "jeffreys": (1, 1)}


def _check_knn_sizes(name: str, k: int, n_good: int, n_bad: int) -> None:
    """A :class:`ScarceError` when a k-NN divergence has too few samples for neighbour order ``k``."""
    if name not in _KNN_MIN_SIZES:
        return
    extra_good, extra_bad = _KNN_MIN_SIZES[name]
    if n_good < k + extra_good or n_bad < k + extra_bad:
        raise ScarceError(f"k={k} is too large for {name}: it needs at least {k + extra_good} good and "
                          f"{k + extra_bad} bad scores, got {n_good} good and {n_bad} bad; "
                          "lower k or add scores")


#: Metrics measured in score units (the others are scale-invariant), with the power of the
#: score scale each grows with: the Wasserstein distance is linear in the scale, while
#: scipy's energy distance is the square root of a combination of mean distances, so it grows
#: with the square root of the scale.
_IN_SCORE_UNITS = {"wasserstein": 1.0, "energy": 0.5}


def _unscale(name: str, value: float, scale: float) -> float:
    """``value * scale**power`` (the metric's power in :data:`_IN_SCORE_UNITS`), or a
    :class:`ScarceError` when that exceeds float64's range."""
    out = value * scale ** _IN_SCORE_UNITS[name]
    if not np.isfinite(out):
        raise ScarceError(f"{name}: the distance between the good and bad scores is about "
                          f"{value:.3g} * {scale:.3g}, beyond float64's range; rescale the scores")
    return float(out)


def compute_metric(name: str, good: ArrayLike, bad: ArrayLike, **options: Any) -> float:
    """One metric on one pair of score samples; options as in :func:`compute_metrics`."""
    return compute_metrics([name], good, bad, **options)[name]
