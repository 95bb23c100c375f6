"""Rank statistics for validating a selector against downstream error (few families).

Spearman's rho is the Pearson correlation of mid-ranks. With ``n`` families the exact permutation
distribution enumerates all ``n!`` re-pairings (``n <= exact_max_n``, default 8: 40,320
permutations); above that, ``n_resamples`` random permutations give a Monte Carlo p-value
``(1 + #{rho* >= rho}) / (1 + B)`` (never zero). Paper: appendix ``app:llm-ranking`` (exact
permutation over six families: ``p = 0.029`` one-sided, ``0.058`` two-sided at ``rho = 0.83``).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from scarce.checks import as_real_array
from scarce.checks import check_in_interval, check_positive_int
from scarce.errors import ScarceError, unknown_name_error
from scarce.seeding import SeedLike, as_generator

__all__ = [
    "ALTERNATIVES",
    "bootstrap_interval",
    "leave_one_out_min",
    "permutation_pvalue",
    "spearman",
    "spearman_asymptotic_pvalue",
]

ALTERNATIVES = ("greater", "less", "two-sided")
_TOL = 1e-12


def _paired(x: ArrayLike, y: ArrayLike, min_n: int = 3) -> tuple[NDArray, NDArray]:
    a = as_real_array(x, "x", "a 1-D array of numbers")
    b = as_real_array(y, "y", "a 1-D array of numbers")
    if a.ndim != 1 or a.shape != b.shape:
        raise ScarceError(f"x and y must be 1-D arrays of equal length; got shapes {a.shape} "
                          f"and {b.shape}")
    if a.size < min_n:
        raise ScarceError(f"x and y need at least {min_n} pairs for a rank correlation; "
                          f"got {a.size}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ScarceError("x and y must be finite (drop or impute missing families first)")
    return a, b


def _mid_ranks(x: NDArray) -> NDArray:
    """Ranks 1..n along the last axis, tied values sharing the mean of their positions.

    The ``"average"`` method of :func:`scipy.stats.rankdata`, written here because
    :mod:`scipy.stats` is slow to import and a report ranks only a few families.
    In sorted order a tie run spans positions ``start..end`` (from 0) and each member gets
    ``(start + end) / 2 + 1``.
    """
    x = np.asarray(x, dtype=float)
    n = x.shape[-1]
    order = np.argsort(x, axis=-1, kind="stable")
    s = np.take_along_axis(x, order, axis=-1)
    pos = np.broadcast_to(np.arange(n), s.shape)
    first = np.ones(s.shape, dtype=bool)
    first[..., 1:] = s[..., 1:] != s[..., :-1]
    last = np.ones(s.shape, dtype=bool)
    last[..., :-1] = first[..., 1:]
    start = np.maximum.accumulate(np.where(first, pos, 0), axis=-1)
    end = np.flip(np.minimum.accumulate(np.flip(np.where(last, pos, n - 1), axis=-1), axis=-1), axis=-1)
    ranks = np.empty(s.shape)
    np.put_along_axis(ranks, order, (start + end) / 2.0 + 1.0, axis=-1)
    return ranks


def _rank_corr(rx: NDArray, ry: NDArray) -> NDArray | float:
    """Pearson correlation of rank arrays along the last axis (NaN where a row is constant)."""
    dx = rx - rx.mean(axis=-1, keepdims=True)
    dy = ry - ry.mean(axis=-1, keepdims=True)
    num = (dx * dy).sum(axis=-1)
    den = np.sqrt((dx * dx).sum(axis=-1) * (dy * dy).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    return float(out) if np.ndim(out) == 0 else out


def spearman(x: ArrayLike, y: ArrayLike) -> float:
    """Spearman's rank correlation (mid-ranks for ties); NaN when either input is constant.

    Examples
    --------
    >>> spearman([1, 2, 3, 4], [10, 20, 40, 30])
    0.8
    """
    a, b = _paired(x, y, min_n=2)
    return float(_rank_corr(_mid_ranks(a), _mid_ranks(b)))


def spearman_asymptotic_pvalue(x: ArrayLike, y: ArrayLike) -> float:
    """Two-sided p-value of the t approximation ``t = rho sqrt((n-2)/(1-rho^2))``, ``n-2`` d.o.f.

    The "asymptotic Spearman value" of the paper's table ``tab:selector-cv``
    (as :func:`scipy.stats.spearmanr`).
    """
    a, b = _paired(x, y)
    rho = spearman(a, b)
    if math.isnan(rho):
        return math.nan
    if abs(rho) >= 1.0:
        return 0.0
    t = rho * math.sqrt((a.size - 2) / (1.0 - rho * rho))
    return float(2.0 * special.stdtr(a.size - 2, -abs(t)))  # the t tail (scipy.stats.t.sf)


def _exceed(null: NDArray, observed: float, alternative: str) -> NDArray:
    if alternative == "greater":
        return null >= observed - _TOL
    if alternative == "less":
        return null <= observed + _TOL
    return np.abs(null) >= abs(observed) - _TOL


def permutation_pvalue(x: ArrayLike, y: ArrayLike, *, alternative: str = "greater",
                       exact_max_n: int = 8, n_resamples: int = 9999,
                       seed: SeedLike = None) -> float:
    """Permutation p-value of Spearman's rho between ``x`` and ``y``.

    Parameters
    ----------
    x, y : array_like of shape (n,)
        Paired values (e.g. selector score and negative downstream error per family), n >= 3.
    alternative : {"greater", "less", "two-sided"}
        ``"greater"``: ``P(rho* >= rho)``; ``"less"``: ``P(rho* <= rho)``;
        ``"two-sided"``: ``P(|rho*| >= |rho|)``.
    exact_max_n : int
        Enumerate all ``n!`` permutations when ``n <= exact_max_n`` (at most 10).
    n_resamples : int
        Monte Carlo permutations when ``n > exact_max_n``.
    seed : int, Generator, SeedSequence or None
        Randomness of the Monte Carlo permutations (unused when exact).

    Returns
    -------
    float
        Exact: ``#{perm : rho* beyond rho} / n!``; Monte Carlo: ``(1 + count) / (1 + B)``.
        NaN when rho is undefined (a constant input).
    """
    if not isinstance(alternative, str) or alternative not in ALTERNATIVES:
        raise unknown_name_error("alternative", str(alternative), ALTERNATIVES)
    exact_max_n = check_positive_int("exact_max_n", exact_max_n)
    if exact_max_n > 10:
        raise ScarceError(f"exact_max_n must be <= 10 (10! = 3.6e6 permutations); "
                          f"got {exact_max_n}")
    a, b = _paired(x, y)
    rx, ry = _mid_ranks(a), _mid_ranks(b)
    observed = _rank_corr(rx, ry)
    if math.isnan(observed):
        return math.nan
    n = a.size
    if n <= exact_max_n:
        perms = np.fromiter(itertools.chain.from_iterable(itertools.permutations(range(n))),
                            dtype=np.intp).reshape(-1, n)
        return float(_exceed(_rank_corr(rx, ry[perms]), observed, alternative).mean())
    n_resamples = check_positive_int("n_resamples", n_resamples)
    rng = as_generator(seed)
    count, done = 0, 0
    while done < n_resamples:
        batch = min(n_resamples - done, max(1, 2_000_000 // n))
        shuffled = rng.permuted(np.broadcast_to(ry, (batch, n)), axis=1)
        count += int(_exceed(_rank_corr(rx, shuffled), observed, alternative).sum())
        done += batch
    return (1 + count) / (1 + n_resamples)


def bootstrap_interval(x: ArrayLike, y: ArrayLike, *, level: float = 0.95, n_resamples: int = 2000,
                       seed: SeedLike = None) -> tuple[float, float]:
    """Percentile bootstrap interval of Spearman's rho, resampling pairs with replacement.

    Resamples in which either side is constant (rho undefined) are dropped; at very small ``n``
    the interval is correspondingly wide (the paper reports ``[0.00, 1.00]`` at ``n = 6``).

    Parameters
    ----------
    x, y : array_like of shape (n,)
    level : float
        Coverage in (0, 1).
    n_resamples : int
    seed : int, Generator, SeedSequence or None

    Returns
    -------
    (float, float)
    """
    level = check_in_interval("level", level, 0.0, 1.0, high_open=True)
    n_resamples = check_positive_int("n_resamples", n_resamples)
    a, b = _paired(x, y)
    rng = as_generator(seed)
    idx = rng.integers(0, a.size, size=(n_resamples, a.size))
    rho = _rank_corr(_mid_ranks(a[idx]), _mid_ranks(b[idx]))
    rho = rho[~np.isnan(rho)]
    if rho.size == 0:
        return (math.nan, math.nan)
    tail = 50.0 * (1.0 - level)
    lo, hi = np.percentile(rho, [tail, 100.0 - tail])
    return (float(lo), float(hi))


def leave_one_out_min(x: ArrayLike, y: ArrayLike) -> float:
    """Smallest Spearman rho after deleting any one pair (the paper's leave-one-family-out).

    Needs ``n >= 4`` so that each subset keeps three pairs; NaN subsets are ignored.
    """
    a, b = _paired(x, y, min_n=4)
    keep = ~np.eye(a.size, dtype=bool)
    rho = [spearman(a[k], b[k]) for k in keep]
    return float(np.nanmin(rho)) if not np.all(np.isnan(rho)) else math.nan
