r"""Error bars of Subset Simulation: CoV, intervals and the Ville envelope.

Coefficient of variation (Au and Beck 2001, eqs. 27-29).  For a level whose
``N`` samples come from ``N_c`` Markov chains, the counted fraction ``p`` of an
indicator ``I`` has squared CoV

.. math:: \delta^2 = \frac{1 - p}{N p} (1 + \gamma), \qquad
          \gamma = 2 \sum_{k=1}^{N_s - 1} \Bigl(1 - \frac{k}{N_s}\Bigr) \rho(k),

where ``rho(k)`` is the lag-``k`` autocorrelation of the indicator along the
chains, estimated from the chains themselves.  Au and Beck combine levels as
``delta^2 = sum_l delta_l^2`` (their correlation neglected); each term is a
relative error, so the sum is, to first order, the variance ``s^2`` of
``log P_hat``, and the CoV of ``P_hat`` it implies is ``sqrt(exp(s^2) - 1)``
(:func:`lognormal_cov`), which is what Subset Simulation reports.  That formula
treats chains as independent; chains grown from seeds of one parent chain are
not.  :func:`lineage_variance` groups chains by their ancestor a few levels up
and adds those correlations (within and between levels); Subset Simulation uses
it with depth 1 on runs of a few levels, and over level-0 ancestors with the
jackknife on deep ones.

Anytime-valid envelope (paper, Theorem 1 and Corollaries 1-2).  ``M_l =
P_hat_l / P_l`` is a non-negative supermartingale, so by Ville's inequality,
with probability at least ``1 - delta``, ``P_hat_l <= P_l / delta`` at every
level at once, including a data-dependent stopping level.  Equivalently
``delta * P_hat_l`` is an anytime-valid lower confidence bound on ``P_l``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from scarce._least_squares import solve_normal_equations


def chain_correlation_factor(indicator: np.ndarray, mask: np.ndarray) -> float:
    r"""Au-Beck correlation factor ``gamma`` of an indicator along Markov chains.

    Parameters
    ----------
    indicator : ndarray, shape (n_chains, n_steps)
        ``I[j, k]``: indicator of the ``k``-th state of chain ``j`` (state 0 is the seed).
    mask : ndarray of bool, shape (n_chains, n_steps)
        Which states exist (chains may differ in length by one).

    Returns
    -------
    float
        ``gamma >= -1``; 0 when every chain has a single state (independent samples)
        or the indicator is constant.

    Notes
    -----
    ``R(k) = mean over valid pairs of I[j, i] I[j, i + k] - p^2``, ``rho(k) = R(k) / R(0)``
    with ``R(0) = p (1 - p)``, and ``N_s`` the longest chain length.
    """
    _check_chain_arrays(indicator, mask)
    values = np.where(mask, indicator, 0.0).astype(float)
    n_steps = values.shape[1]
    n = mask.sum()
    if n_steps < 2 or n == 0:
        return 0.0
    p = values.sum() / n
    r0 = p * (1.0 - p)
    if r0 <= 0.0:
        return 0.0
    gamma = 0.0
    for lag in range(1, n_steps):
        pairs = mask[:, :-lag] & mask[:, lag:]
        n_pairs = pairs.sum()
        if n_pairs == 0:
            break
        r_lag = (values[:, :-lag] * values[:, lag:])[pairs].sum() / n_pairs - p * p
        gamma += 2.0 * (1.0 - lag / n_steps) * (r_lag / r0)
    return max(gamma, -1.0)


def _check_chain_arrays(indicator: object, mask: object) -> None:
    """Both arrays of one shape ``(n_chains, n_steps)``, the mask boolean; a ScarceError naming them otherwise."""
    from scarce.errors import ScarceError

    if not (isinstance(indicator, np.ndarray) and isinstance(mask, np.ndarray) and indicator.ndim == 2
            and mask.shape == indicator.shape and mask.dtype == bool and indicator.dtype.kind in "biuf"):
        describe = [f"{type(a).__name__}" if not isinstance(a, np.ndarray) else f"shape {a.shape}, dtype {a.dtype}"
                    for a in (indicator, mask)]
        raise ScarceError(f"chain_correlation_factor: indicator must be a numeric array of shape (n_chains, n_steps) "
                          f"and mask a boolean array of the same shape; got indicator {describe[0]}, mask "
                          f"{describe[1]}")


#: Rows times squared columns of the linear fit of :func:`latin_hypercube_variance` in many dimensions
#: (a fraction of a second of matrix products): 6,500 points of 784 coordinates.
LINEAR_FIT_WORK = 4_000_000_000


def latin_hypercube_window(n_samples: int) -> int:
    """The default half-width ``h = ceil(sqrt(N) / 2)`` of :func:`latin_hypercube_variance`'s window;
    the windowed fit is made only in fewer than ``2 h`` dimensions (a linear fit beyond)."""
    from scarce.checks import check_positive_int

    return max(1, math.ceil(math.sqrt(check_positive_int("n_samples", n_samples)) / 2.0))


def latin_hypercube_variance(u: np.ndarray, indicator: np.ndarray, half_window: int | None = None,
                             block: int = 1 << 22) -> float:
    r"""Variance per sample of an indicator's mean over a Latin hypercube, estimated from the design.

    For ``N`` Latin-hypercube points, ``Var(mean of I) = (sigma^2 - sum_j sigma_j^2) / N + o(1/N)``
    (Stein 1987; Owen 1992), where ``sigma_j^2`` is the variance of the main effect
    ``g_j(u_j) = E[I | u_j] - p``: the stratification removes the additive part of ``I``. This
    returns an estimate of ``sigma^2 - sum_j sigma_j^2``, the residual's variance, to put in
    place of ``p (1 - p)`` in a level's binomial term.

    Each ``g_j`` is the leave-one-out mean of ``I`` over the ``2 h + 1`` points nearest in
    ``u_j`` (the design holds one point per stratum, so these are neighbouring strata), minus
    ``p``; the estimate is the mean square of ``I - p - sum_j g_j(u_ij)``. Both errors of that
    fit raise it on average: the leave-one-out means add their own noise (about
    ``d p (1 - p) / (2 h)``), and the window smooths part of each main effect into the
    residual. That bias is in expectation: one design's estimate can fall below its own
    variance, most when few points lie above the boundary. It is capped at ``p (1 - p)``, the
    independent-sample variance, which it reaches when the score has no strong main effects.

    In ``d >= 2 h`` dimensions the windows' noise alone would reach that cap, and the main
    effects' linear parts are fitted instead (:func:`_linear_residual_variance`): a linear fit
    costs about ``d p (1 - p) / N``, not ``d p (1 - p) / (2 h)``, and removes less, never more,
    than the main effects do.

    Parameters
    ----------
    u : ndarray, shape (N, d)
        The Latin-hypercube points in the latent space.
    indicator : ndarray of bool, shape (N,)
        The indicator whose mean is estimated (a level's membership).
    half_window : int, optional
        ``h``; by default :func:`latin_hypercube_window` (``ceil(sqrt(N) / 2)``). Windows at
        the ends of the order are cut short (``h`` to ``2 h`` neighbours).
    block : int
        Coordinates are processed in blocks of about ``block`` entries.
    """
    values = np.asarray(indicator, dtype=float).ravel()
    n = values.size
    _check_design(u, n)
    p = float(values.mean()) if n else 0.0
    binomial = p * (1.0 - p)
    if n < 3 or binomial <= 0.0:
        return binomial
    h = max(1, min(n // 2, latin_hypercube_window(n) if half_window is None else int(half_window)))
    if u.shape[1] >= 2 * h:  # the windows' own noise, d p (1 - p) / (2 h), would reach the cap
        return _linear_residual_variance(u, values, binomial)
    rank = np.arange(n)
    lo, hi = np.maximum(rank - h, 0), np.minimum(rank + h, n - 1)
    count = (hi - lo).astype(float)  # points in the window, the point itself left out
    fitted = np.zeros(n)
    width = max(1, block // n)
    for start in range(0, u.shape[1], width):
        order = np.argsort(u[:, start:start + width], axis=0, kind="stable")
        ordered = values[order]
        cumulative = np.vstack([np.zeros((1, order.shape[1])), np.cumsum(ordered, axis=0)])
        effect = (cumulative[hi + 1] - cumulative[lo] - ordered) / count[:, None] - p
        fitted += np.bincount(order.ravel(), weights=effect.ravel(), minlength=n)
    residual = values - p - fitted
    return float(min(binomial, np.mean(residual * residual)))


def _check_design(u: object, n: int) -> None:
    """The design's points: an array of shape ``(n, d)``, one row per indicator value; a ScarceError otherwise."""
    if not (isinstance(u, np.ndarray) and u.ndim == 2 and u.shape[0] == n):
        from scarce.errors import ScarceError

        shape = u.shape if isinstance(u, np.ndarray) else type(u).__name__
        raise ScarceError(f"latin_hypercube_variance: u must be an array of shape (N, d) with one row per indicator "
                          f"value (N = {n}), got {shape}")


def _linear_residual_variance(u: np.ndarray, values: np.ndarray, binomial: float) -> float:
    r"""The variance an indicator's least-squares linear fit leaves, where it is clearly below the binomial.

    ``beta . u`` is additive, so the main effects explain at least its variance and the design's
    residual ``sigma^2 - sum_j sigma_j^2`` is at most ``sigma^2 - Var(beta . u)``, which
    ``RSS / (N - d - 1)`` estimates without bias. It replaces ``binomial`` only when it lies more
    than two of its standard errors below it (``sd(e^2) sqrt(N) / (N - d - 1)``, ``e`` the
    residuals): an indicator with no linear main effect keeps the binomial instead of the lower
    half of its estimate's noise (with no main effect at all, a little of that noise still
    passes: the rule is one-sided at about 2.3%). No fit is made with fewer than ``max(d + 1,
    30)`` residual degrees of freedom, over a point that is not finite, or on a singular design
    (:func:`scarce._least_squares.solve_normal_equations`). It reads at most
    :data:`LINEAR_FIT_WORK` ``/ (d + 1)^2`` points, the first ones: a Latin hypercube's rows are
    in random order, so they are a random subset, and the fit's cost and memory stay bounded in
    any ``N`` and ``d``. The points are taken to be distinct, as a Latin hypercube's are: a
    repeated row would count as a residual degree of freedom.
    """
    columns = u.shape[1] + 1
    n = min(values.size, LINEAR_FIT_WORK // columns**2)
    if n - columns < max(columns, 30):  # too few points even for a design of full rank
        return binomial
    u, values = np.asarray(u[:n], dtype=float), values[:n]
    if not np.isfinite(u).all():
        return binomial
    gram = np.empty((columns, columns))  # (1, u)^T (1, u), without building (1, u)
    gram[0, 0], gram[0, 1:] = n, u.sum(axis=0)
    gram[1:, 0], gram[1:, 1:] = gram[0, 1:], u.T @ u
    coef = solve_normal_equations(gram, np.concatenate([[values.sum()], u.T @ values]))
    if coef is None:  # a singular design (tied coordinates, a constant column): no fit
        return binomial
    dof = n - columns
    residual = values - coef[0] - u @ coef[1:]
    squares = residual * residual
    estimate = float(squares.sum()) / dof
    error = float(np.std(squares)) * math.sqrt(n) / dof
    return estimate if estimate + 2.0 * error < binomial else binomial


def level_cov(probability: float, n_samples: int, correlation_factor: float = 0.0) -> float:
    """Au-Beck CoV ``sqrt((1 - p) / (N p) * (1 + gamma))`` of one level's fraction (``inf`` if p = 0).

    ``p`` must lie in [0, 1] and ``gamma`` be a finite number >= -1 (a NaN or an out-of-range
    value is refused: it would read as a CoV of 0, a level known exactly).
    """
    from scarce.checks import check_in_interval, check_positive_int

    n_samples = check_positive_int("n_samples", n_samples)
    probability = check_in_interval("probability", probability, 0.0, 1.0, low_open=False)
    # gamma >= -1 (chain_correlation_factor's floor); a NaN would read as a CoV of 0 below
    correlation_factor = check_in_interval("correlation_factor", correlation_factor, -1.0, math.inf, low_open=False,
                                           high_open=True)
    if probability <= 0.0:
        return math.inf
    return math.sqrt(max(0.0, (1.0 - probability) / (n_samples * probability) * (1.0 + correlation_factor)))


def combine_cov(level_covs: list[float] | tuple[float, ...]) -> float:
    """Total CoV ``sqrt(sum delta_l^2)`` of a product of level fractions (each a number >= 0, ``inf`` allowed)."""
    from scarce.checks import as_double
    from scarce.errors import ScarceError, show

    covs = [as_double(c) for c in level_covs] if isinstance(level_covs, (list, tuple, np.ndarray)) else [None]
    if not all(c is not None and not c < 0.0 for c in covs):
        raise ScarceError(f"level_covs must be a list of numbers >= 0 (inf allowed), got {show(level_covs)}")
    return math.sqrt(sum(c * c for c in covs))  # type: ignore[operator]


_LOG_MAX_DOUBLE = math.log(sys.float_info.max)


def lognormal_cov(log_variance: float) -> float:
    r"""CoV of an estimate from the variance ``s^2`` of its log: ``sqrt(exp(s^2) - 1)``.

    Subset Simulation's error terms are relative errors of the level fractions, summed:
    ``log P_hat - log P ~ sum_l (p_l_hat - p_l) / p_l`` (the delta method). Their sum of
    variances, and the genealogy's variance (:func:`lineage_variance`), estimate the variance
    ``s^2`` of ``log P_hat``; each level's term matches that of ``log p_l_hat`` to first order,
    and the levels' log-errors add. An unbiased estimate whose log is normal with variance
    ``s^2`` has the CoV ``sqrt(exp(s^2) - 1)``, larger than ``s`` and the more so the deeper the
    run (``s^2`` grows with the number of levels): reading ``s`` itself as the CoV, as the
    first-order formulas do, understates the spread of ``P_hat``, and :func:`lognormal_interval`,
    which takes ``s^2 = log(1 + CoV^2)``, would then use a log-variance below the one measured.
    For independent level fractions the exact CoV of the product, ``prod (1 + delta_l^2) - 1``
    under the root, lies between ``s`` and this value. ``inf`` stays ``inf``; beyond
    ``s^2 = 700`` the value is ``exp(s^2 / 2)`` (``exp(s^2)`` would overflow), and the largest double
    beyond ``s^2 = 1419.6``: a log-variance no run measures, kept finite so that the CoV does not
    read as "not measured" (``inf``).
    """
    if math.isnan(log_variance):
        return math.nan
    if log_variance <= 0.0:  # no spread measured
        return 0.0
    if math.isinf(log_variance):
        return math.inf
    if log_variance > 700.0:  # exp(s^2) would overflow; beyond s^2 = 2 log(max double), the largest double
        return math.exp(min(0.5 * log_variance, _LOG_MAX_DOUBLE))
    return math.sqrt(math.expm1(log_variance))


#: Floor on ``1 - w_g`` in :func:`lineage_variance`'s jackknife: a group holding more than 95% of a
#: level's chains has its sum scaled by at most 20.
JACKKNIFE_MIN_REST = 0.05


def lineage_variance(
    lineage: list[tuple[np.ndarray, np.ndarray | None, float]], n_samples: int, depth: int, jackknife: bool = False
) -> float:
    r"""Variance of ``log P_hat`` from the chains' genealogy (delta method, families as clusters).

    ``log P_hat - log P ~ sum_l (p_l_hat - p_l) / p_l = sum_l sum_c R_{l,c} / (N p_l)``, with
    ``R_{l,c}`` chain ``c``'s hits minus ``p_l`` times its length.  Chains of level ``m``
    are grouped by their ancestor ``depth`` levels up (level ``a = max(m - depth, 0)``);
    groups are treated as independent, so siblings and cousins (chains grown from
    the same ancestor) are correlated within a level and with the levels in between.
    ``depth = 0`` treats every chain as independent (the Au-Beck assumption).

    ``jackknife``: each group's sum of each level is divided by ``1 - w_g``, ``w_g`` the group's
    share of that level's chains (floored at :data:`JACKKNIFE_MIN_REST`), in the squares and the
    cross terms alike. The residuals are
    centred on the level's own fraction, so the plain sum of squared group sums falls short of
    the variance by about the groups' shares; when a few groups hold most chains (a deep run
    grouped by level-0 ancestors, whose genealogy has coalesced) the shortfall is large. The
    correction is the jackknife's (CR3 in the cluster-robust literature: Bell and McCaffrey 2002;
    MacKinnon and White 1985), which errs on the side of too large.
    """
    return float(sum(lineage_terms(lineage, n_samples, depth, jackknife)))


def lineage_terms(
    lineage: list[tuple[np.ndarray, np.ndarray | None, float]], n_samples: int, depth: int, jackknife: bool = False
) -> list[float]:
    """Each level ``m``'s part of :func:`lineage_variance`: its groups' squared sums and their cross
    terms with the levels from its ancestors' level up to ``m``."""
    terms = []
    for m in range(len(lineage)):
        a = max(m - depth, 0)
        size_a = lineage[a][0].size
        groups = []  # level l's sums over the groups of ancestors at level a, for l = a..m
        for l in range(a, m + 1):
            groups.append(_group_sums(lineage[l], _ancestors(lineage, l, a), size_a, n_samples, jackknife))
        # np.sum, not BLAS dot: its pairwise order does not depend on the BLAS thread count,
        # so a seed gives the same CoV in a worker process as in the parent, bit for bit
        g_m = groups[-1]
        terms.append(float(np.sum(g_m * g_m)) + sum(2.0 * float(np.sum(g_l * g_m)) for g_l in groups[:-1]))
    return terms


def _group_sums(level: tuple[np.ndarray, np.ndarray | None, float], anc: np.ndarray, size: int, n_samples: int,
                jackknife: bool) -> np.ndarray:
    """One level's residuals ``R / (N p)`` summed over the groups ``anc`` names (``size`` of them);
    with ``jackknife``, each group's sum over the rest of that level (:func:`lineage_variance`)."""
    res, _, p = level
    group = np.bincount(anc, weights=res / (n_samples * p), minlength=size)
    if jackknife:
        group = group / np.maximum(1.0 - np.bincount(anc, minlength=size) / anc.size, JACKKNIFE_MIN_REST)
    return group


def _ancestors(lineage: list[tuple[np.ndarray, np.ndarray | None, float]], level: int, up_to: int) -> np.ndarray:
    """The ancestor at level ``up_to`` of each chain of ``level``."""
    anc = np.arange(lineage[level][0].size)
    for k in range(level, up_to, -1):
        parent = lineage[k][1]
        if parent is None:
            raise ValueError("lineage without parents above level 0")
        anc = parent[anc]
    return anc


def ancestor_degrees_of_freedom(lineage: list[tuple[np.ndarray, np.ndarray | None, float]], n_samples: int) -> float:
    r"""Degrees of freedom of :func:`lineage_variance` over level-0 ancestors (jackknifed): the
    effective number of those ancestors that carry it, less one.

    Grouped by level-0 ancestor, the variance is one sum over clusters,
    ``V = sum_g C_g^2`` with ``C_g`` ancestor ``g``'s (jackknifed) sums over every level, and its
    precision is that of the few clusters that carry it. The rule taken is Kish's effective
    number of the squares, ``nu = (sum C_g^2)^2 / sum C_g^4 - 1`` (at least 1): ``G - 1`` when
    ``G`` totals are equal, about ``G / 3 - 1`` when they are independent normals of one scale
    (a plug-in count, on the conservative side of a cluster-robust variance's ``G - 1``), and
    about 1 on a deep run, where one or two ancestors carry nearly all of ``V``.
    Counting each level's term as an independent estimate with its own clusters (Satterthwaite
    over the levels) claims many more, but the deep levels' terms all rest on the same few
    ancestors. Nor can ``V`` follow the true variance down a deep run: when every hit of a level
    seeds one chain of the next and a level's chains are of one length (nearly so in this
    engine: ties at a threshold and uneven splits of ``N`` among the seeds break it a little), ancestor ``g``'s sums
    telescope, ``sum_l R_{g,l} / (N p_l)`` being its share of the last level's hits less its
    share of level 0, so without the jackknife ``V`` is at most about one, the chance that two
    of the last hits share a level-0 ancestor; beyond it only the jackknife's inflation of the
    few groups that hold most of a level moves it. A deep run's ``nu`` is one or two.
    """
    size_0 = lineage[0][0].size
    totals, anc = np.zeros(size_0), np.arange(size_0)
    for m, level in enumerate(lineage):
        if m:  # each chain's level-0 ancestor, one level further down the genealogy
            if level[1] is None:
                raise ValueError("lineage without parents above level 0")
            anc = anc[level[1]]
        totals += _group_sums(level, anc, size_0, n_samples, jackknife=True)
    effective = kish_effective_number(totals * totals)
    return float(size_0 - 1) if effective is None else max(effective - 1.0, 1.0)


def kish_effective_number(weights: np.ndarray) -> float | None:
    """Kish's (1965) effective number of nonnegative weights, ``(sum w)^2 / sum w^2``.

    ``G`` for ``G`` equal weights, close to 1 when one weight holds nearly all of the sum; None
    when ``sum w^2`` is 0 or NaN.
    """
    spread = float(np.sum(weights * weights))
    if not spread > 0.0:
        return None
    return float(np.sum(weights)) ** 2 / spread


def satterthwaite_degrees_of_freedom(total: float, parts: Iterable[tuple[float, float | None]]) -> float | None:
    r"""Satterthwaite's (1946) degrees of freedom of a variance ``total`` made of independent parts.

    Each part ``(v_k, nu_k)`` is an estimated variance on ``nu_k`` degrees of freedom (None:
    known exactly, as infinitely many), and
    ``nu = total^2 / sum_k (v_k^2 / nu_k)``, the degrees of freedom of the chi-square whose first
    two moments match the sum's. None when no part carries any uncertainty.
    """
    spread = math.fsum(v * v / nu for v, nu in parts if nu is not None)
    if not spread > 0.0:
        return None
    return total * total / spread


def lognormal_interval(
    probability: float, cov: float, level: float = 0.95, df: float | None = None
) -> tuple[float, float]:
    r"""Interval for ``P`` from an unbiased estimate ``P_hat`` whose log is close to normal.

    The log of a product of level fractions is close to normal. With ``s^2 = log(1 + cov^2)``,
    an estimate whose mean is ``P`` and whose log is normal has
    ``log P_hat ~ N(log P - s^2 / 2, s^2)``: its median lies a factor ``exp(s^2 / 2) =
    sqrt(1 + cov^2)`` below ``P``. Inverting that pivot gives

    .. math:: P \in \bigl[\hat P e^{s^2/2 - q s},\; \hat P e^{s^2/2 + q s}\bigr],

    the interval for the mean of a log-normal law with known log-variance (the correction
    Cox's method makes; Land 1972, Zhou and Gao 1997). Centred on ``log P_hat`` instead, it
    would cover the median of the estimator's law, not ``P``: more of its misses would fall
    below ``P`` than above. ``q`` is the normal quantile, or Student's ``t`` quantile with
    ``df`` degrees of freedom when the CoV comes from a few independent clusters
    (``df = clusters - 1``): a variance estimated from ``G`` cluster sums is itself uncertain,
    and ``t`` carries that uncertainty. The interval always holds ``P_hat`` (at a low
    ``level`` and a large CoV the shifted lower end would pass it; it is then ``P_hat``). An
    upper end beyond double precision is ``inf``; callers cap it at 1.
    """
    from scipy.special import ndtri, stdtrit  # the quantiles of scipy.stats.norm and t, without their per-call set-up

    from scarce.checks import as_double, check_in_interval
    from scarce.errors import ScarceError, show

    level = check_in_interval("level", level, 0.0, 1.0, high_open=True)
    probability = check_in_interval("probability", probability, 0.0, 1.0, low_open=False)
    number = as_double(cov)  # None: not a real number, or an int beyond the doubles
    if number is None or number < 0.0:  # inf or NaN: a CoV no run could measure
        raise ScarceError(f"cov must be a number >= 0 within the doubles (inf or NaN where unmeasured), "
                          f"got {show(cov)}")
    cov = number
    if df is not None:
        df = check_in_interval("df", df, 0.0, math.inf, high_open=True)
    if probability <= 0.0 or not math.isfinite(cov):
        return (0.0, math.nan)
    s = math.sqrt(math.log1p(cov * cov) if cov < 1e150 else 2.0 * math.log(cov))  # cov^2 would overflow
    tail = 0.5 + level / 2.0
    q = float(ndtri(tail)) if df is None else float(stdtrit(df, tail))
    centre = math.log(probability) + 0.5 * s * s
    low = min(probability, math.exp(centre - q * s))
    high = centre + q * s
    return (low, max(probability, math.exp(high)) if high < _LOG_MAX else math.inf)  # exp(log p) may round below p


#: The largest argument of ``math.exp`` that does not overflow (``log`` of the largest double).
_LOG_MAX = math.log(np.finfo(np.float64).max)


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper-Pearson) binomial interval for ``k`` successes in ``n`` trials."""
    from scipy.stats import beta

    from scarce.checks import check_in_interval, check_positive_int

    n = check_positive_int("n", n)
    k = check_positive_int("k", k, minimum=0, maximum=n)
    level = check_in_interval("level", level, 0.0, 1.0, high_open=True)
    alpha = 1.0 - level
    lo = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return (lo, hi)


@dataclass(frozen=True)
class Envelope:
    """Ville's anytime-valid envelope of a Subset Simulation run.

    With probability at least ``1 - delta``, ``P_hat_l <= P_l / delta`` at
    every level ``l`` simultaneously.

    Attributes
    ----------
    delta : float
        Error budget, in (0, 1).
    level_lower : tuple of float
        ``delta * P_hat_l``: lower bounds on the path-wise level probabilities ``P_l``,
        valid at every level at once.
    lower : float
        ``delta * P_hat``: the lower bound on the final probability (the failure
        probability when the run reached the failure event).
    factor : float
        Multiplier applied to the bounds (1, or a calibration constant ``C_tau``).
    """

    delta: float
    level_lower: tuple[float, ...]
    lower: float
    factor: float = 1.0

    @classmethod
    def from_running(cls, running: list[float] | tuple[float, ...], final: float, delta: float) -> Envelope:
        """Build the envelope from the running estimates ``P_hat_l`` and the final estimate (probabilities)."""
        from scarce.checks import check_in_interval

        delta = check_in_interval("delta", delta, 0.0, 1.0, high_open=True)
        final = check_in_interval("final", final, 0.0, 1.0, low_open=False)
        if not isinstance(running, (list, tuple, np.ndarray)):
            from scarce.errors import ScarceError, show

            raise ScarceError(f"running must be a list of the running estimates (probabilities), got {show(running)}")
        running = [check_in_interval(f"running[{i}]", p, 0.0, 1.0, low_open=False) for i, p in enumerate(running)]
        return cls(delta=delta, level_lower=tuple(delta * p for p in running), lower=delta * final)

    def scaled(self, factor: float) -> Envelope:
        """The envelope of ``factor * P_hat`` (a calibration constant fixed before the run, > 0)."""
        from scarce.checks import check_in_interval

        factor = check_in_interval("factor", factor, 0.0, math.inf, high_open=True)
        return Envelope(
            delta=self.delta,
            level_lower=tuple(factor * v for v in self.level_lower),
            lower=factor * self.lower,
            factor=self.factor * factor,
        )
