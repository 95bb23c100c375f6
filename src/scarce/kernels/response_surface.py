r"""The response surface of response-surface sampling: its least-squares fit, held-out check and proposal grid.

:class:`Surface` is ``m(u) = alpha + beta . u + kappa |u|^2`` fitted to a level's points
(:func:`fit_surfaces`; the move that uses it is :mod:`scarce.kernels.surface`), with the
piecewise-constant proposal of ``t = v . u`` over its fitted level. Cross-fitting
(:func:`cross_fitted_surfaces`) fits one surface for each half of the chains, without every copy
of that half's seeds among the points (:func:`copies_of_seeds`).

A surface is checked on held-out points before the kernel uses it. The fit reads about
``max(FIT_ROWS, 6 (d + 2))`` of the previous level's points that it keeps, evenly spaced; the
surface fitted on the first half of them must reach ``min_agreement`` in ``recall x precision``
of the level on the second half (the share of points in the level that the fitted level holds,
times the share of the fitted level's points that are in the level), and the surface then used
is refitted on both halves and must hold every failure among those points. Otherwise the level is sampled by the
local kernel alone (adaptive conditional sampling by default), draw for draw as that kernel
would. Fitting needs at least ``6 (d + 2)`` finite scores a level (:data:`ROWS_PER_COEFFICIENT`);
with fewer, a held-out check in hundreds of dimensions measures mostly the fit's own noise.

A fit keeps its rows and normal equations (:class:`FitBasis`), and the next level reuses it
(:func:`reused_surfaces`) when, re-solved without every copy of that level's seeds among its
rows, its level passes the same check on the new level's points, less those it read and, for
each half of the chains, that half's seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from scarce._least_squares import MIN_PIVOT_RATIO  # noqa: F401 - the singularity rule of the fits, re-exported
from scarce._least_squares import solve_normal_equations as _solve
from scarce._rows import copies, first_order, member

#: Cells of the piecewise-constant proposal of ``t``: narrow enough that ``phi(t) S(t)`` barely varies
#: within one, so the Hastings factors stay close to 1.
GRID_CELLS = 1024
#: A reused fit serves thresholds up to this many times the largest score it read (beyond: fit anew).
REUSE_RANGE = 1e6
#: Entries of a surface's guide table to its cells: about four a cell, so that few draws need a search.
GUIDE_ENTRIES = 4 * GRID_CELLS
#: Finite scores a level needs per coefficient of the surface (``d + 2`` of them) before one is fitted.
ROWS_PER_COEFFICIENT = 6
#: The fit reads about ``max(FIT_ROWS, ROWS_PER_COEFFICIENT (d + 2))`` kept points, evenly spaced.
FIT_ROWS = 500
#: The proposal of ``t`` covers the range where its log-density is within this of its peak.
LOG_RANGE = 40.0
#: The first search for that range spans ``[-T_SPAN, T_SPAN]`` (beyond it ``phi(t) < 1e-347``) ...
T_SPAN = 40.0
#: ... in two passes of this many points, the second over the range the first found.
COARSE_POINTS = 257
#: :data:`GUIDE_ENTRIES` slice starts of ``[0, 1)``, exact in binary (the count is a power of two).
_SLICES = np.arange(GUIDE_ENTRIES) / GUIDE_ENTRIES


@dataclass(frozen=True)
class Surface:
    """A fitted response surface ``alpha + beta . u + kappa |u|^2`` and its level ``>= threshold``.

    Attributes
    ----------
    direction : ndarray, shape (d,)
        ``v = beta / |beta|`` (the first axis when ``beta`` is 0).
    slope, curvature, offset : float
        ``|beta|``, ``kappa`` and ``threshold - alpha``, for the score standardised by the fit
        (measured from the threshold in units of its spread: the level is the same).
    edges : ndarray, shape (GRID_CELLS + 1,)
        Cell edges of the proposal of ``t``.
    log_mass : ndarray, shape (GRID_CELLS,)
        Log-probability of each cell (they sum to one).
    cdf : ndarray, shape (GRID_CELLS,)
        Cumulative probability of the cells, for drawing one.
    agreement : float
        ``recall x precision`` of this (refitted) surface's level on the points it was fitted to;
        the check against ``min_agreement`` was made on held-out points before the refit.
    guide : ndarray, shape (GUIDE_ENTRIES,)
        The first cell of each of ``GUIDE_ENTRIES`` equal slices of the cumulative probability
        (Chen and Asau's guide table), from which :meth:`cells` starts its search.
    """

    direction: np.ndarray
    slope: float
    curvature: float
    offset: float
    edges: np.ndarray
    log_mass: np.ndarray
    cdf: np.ndarray
    agreement: float
    guide: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.intp))

    def cells(self, uniform: np.ndarray) -> np.ndarray:
        """The cell of each uniform draw: ``searchsorted(cdf, uniform * cdf[-1], "right")``, the last cell at most.

        Found from the guide table: the slice ``floor(uniform * GUIDE_ENTRIES)`` names the first
        cell the draw can fall in, and only the draws whose cell lies further are searched, over
        the whole table, so the result is that of the full search, draw for draw.
        """
        target = uniform * self.cdf[-1]
        cell = self.guide[np.minimum((uniform * self.guide.size).astype(np.intp), self.guide.size - 1)]
        further = self.cdf[cell] <= target
        cell[further] = np.searchsorted(self.cdf, target[further], side="right")
        return np.minimum(cell, self.cdf.size - 1)

    @property
    def dof(self) -> int:
        """Degrees of freedom of ``|w|^2``: the dimension less one."""
        return self.direction.size - 1

    def residual(self, t: np.ndarray) -> np.ndarray:
        """``r(t) = (b - alpha) - |beta| t - kappa t^2``; the fitted level at ``t`` is ``kappa s >= r(t)``."""
        return self.offset - self.slope * t - self.curvature * t * t

    def log_range_probability(self, t: np.ndarray) -> np.ndarray:
        """``log S(t)``: the log chi-square probability that ``s = |w|^2`` lies in the fitted level at ``t``."""
        return _log_range_probability(self.residual(t), self.curvature, self.dof)

    def contains(self, t: np.ndarray, s: np.ndarray) -> np.ndarray:
        """Whether the points with coordinates ``(t, s)`` lie in the fitted level."""
        return self.curvature * s >= self.residual(t)

    def log_proposal(self, t: np.ndarray) -> np.ndarray:
        """Log-density of the piecewise-constant proposal of ``t`` (``-inf`` outside its cells)."""
        width = self.edges[1] - self.edges[0]
        cell = np.floor((t - self.edges[0]) / width)
        inside = (cell >= 0) & (cell < self.log_mass.size)
        return np.where(inside, self.log_mass[np.where(inside, cell, 0).astype(np.intp)] - math.log(width), -math.inf)


@dataclass(frozen=True)
class FitBasis:
    """The rows a fit read and their least-squares sums, kept so that later levels can reuse the fit.

    Attributes
    ----------
    u : ndarray, shape (n, d)
        The rows read, in the points' own dtype (their bytes find the copies of later seeds).
    design, y, finite : ndarray
        Their design rows ``(1, u, |u|^2)``, standardised scores and which scores are finite.
    gram, moment : ndarray
        The normal equations over the rows with a finite score, and ``coef`` their solution
        (None: singular).
    magnitude, shift, spread : float
        The standardisation ``y = (score / magnitude - shift / magnitude) / spread``, ``shift``
        the threshold of the level fitted.
    """

    u: np.ndarray
    design: np.ndarray
    y: np.ndarray
    finite: np.ndarray
    gram: np.ndarray
    moment: np.ndarray
    coef: np.ndarray | None
    magnitude: float
    shift: float
    spread: float

    def standardised(self, score: np.ndarray) -> np.ndarray:
        """Scores (or thresholds) in the fit's units; a score beyond them becomes infinite, keeping its side."""
        with np.errstate(over="ignore", invalid="ignore"):
            return (score / self.magnitude - self.shift / self.magnitude) / self.spread

    def without(self, out: np.ndarray) -> np.ndarray | None:
        """The coefficients fitted to the rows not ``out`` (``coef`` itself when ``out`` holds no finite row).

        None when the rows left number fewer than :data:`ROWS_PER_COEFFICIENT` a coefficient, or
        the equations are singular.
        """
        out = out & self.finite
        if not out.any():
            return self.coef
        if np.count_nonzero(self.finite) - np.count_nonzero(out) < ROWS_PER_COEFFICIENT * self.design.shape[1]:
            return None
        return _solve(*_less(self.gram, self.moment, self.design, self.y, out))

    @cached_property
    def order(self) -> np.ndarray:
        """The rows' order by their first coordinate (:func:`scarce._rows.first_order`), sorted once for every level."""
        return first_order(self.u)

    @cached_property
    def first(self) -> np.ndarray:
        """The rows' first coordinates, ascending: which of a new level's points the fit read."""
        return self.u[self.order, 0]


def _log_range_probability(residual: np.ndarray, curvature: float, dof: int) -> np.ndarray:
    """``log P(kappa s >= r)`` for ``s`` chi-square with ``dof`` degrees of freedom (``s = 0`` when ``dof = 0``).

    A probability below the smallest double (about 1e-308) is 0 here: such a range is never
    proposed, and a state there is never moved by a global move, which keeps the chain exact.
    """
    from scipy.special import gammainc, gammaincc

    residual = np.asarray(residual, dtype=float)
    if dof == 0 or curvature == 0.0:
        return np.where(residual <= 0.0, 0.0, -math.inf)
    bound = np.maximum(residual / curvature, 0.0)
    probability = (gammaincc if curvature > 0.0 else gammainc)(0.5 * dof, 0.5 * bound)  # s >= bound, or s <= bound
    with np.errstate(divide="ignore"):
        return np.log(probability)


def cross_fitted_surfaces(seeds: np.ndarray, u: np.ndarray, score: np.ndarray, threshold: float,
                          min_agreement: float) -> tuple[tuple[Surface, Surface] | None, FitBasis | None]:
    """The surfaces of the first and the second half of the chains, and the basis a later level may reuse.

    Each is fitted to the points less every copy of its own chains' seeds. The basis is None
    when a surface fails (the level is then the local kernel's).
    """
    (first, second), basis = _fit(u, score, threshold, min_agreement, copies_of_seeds(u, seeds))
    return (None, None) if first is None or second is None else ((first, second), basis)


def reused_surfaces(basis: FitBasis, seeds: np.ndarray, u: np.ndarray, score: np.ndarray, threshold: float,
                    min_agreement: float) -> tuple[Surface, Surface] | None:
    """The surface of ``basis``'s fit for a new level, for both halves of the chains, if it still describes the level.

    The fitted function ``m`` is the score's, not the level's: only the threshold moves from one
    level to the next, so a fit that read an earlier level's points serves as long as it orders
    the new points (None: fit anew). It is re-solved without every copy of a seed among the
    basis's rows, so that no chain moves by a surface fitted on its own seed (the rule of
    :func:`cross_fitted_surfaces`); the basis's rows come from an earlier level, where few of the
    seeds sit, so one fit can leave out the seeds of both halves. Its level must then pass the
    fresh fit's check on the new level's points ``u``, held out as there: for each half of the
    chains, on the points that are neither copies of that half's seeds nor of rows the fit read,
    ``recall x precision`` at least ``min_agreement``; and every failure must lie inside it. A
    threshold beyond :data:`REUSE_RANGE` times the largest score the fit read is fitted anew: the
    fit's units no longer describe it.
    """
    if not abs(threshold) <= REUSE_RANGE * basis.magnitude:  # also NaN
        return None
    theta = float(basis.standardised(np.array([threshold], dtype=float))[0])
    seeds = np.asarray(seeds, dtype=basis.u.dtype)
    coef = basis.without(copies(basis.u, seeds, order=basis.order)[0])  # every copy of every seed
    if coef is None or not math.isfinite(theta):
        return None
    total, dim = u.shape
    picked = _evenly(total, max(FIT_ROWS, ROWS_PER_COEFFICIENT * (dim + 2)))
    raw = np.asarray(score, dtype=float)[picked]
    fitted, y = _fitted(u[picked], coef), basis.standardised(raw)
    # which points the fit read or a half's chains start from, by their first coordinate: a
    # continuous draw shares it with no other point, and a check on fewer points stays a check
    first, split = u[picked, 0].astype(basis.u.dtype, copy=False), split_point(seeds.shape[0])
    read = member(first, basis.first, presorted=True)
    own = (member(first, seeds[:split, 0]), member(first, seeds[split:, 0]))
    agreement = min(_agreement(fitted[~(read | mine)], y[~(read | mine)], theta) for mine in own)
    if agreement < min_agreement or np.any(fitted[np.isposinf(raw)] < theta):
        return None
    surface = _surface(coef, theta, agreement)
    return None if surface is None else (surface, surface)


def split_point(n_seeds: int) -> int:
    """Chains moved by the first of the two surfaces: the first half of them (rounded up)."""
    return (n_seeds + 1) // 2


def copies_of_seeds(u: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """Masks over ``u``'s rows: ``[0, i]`` says row ``i`` is a copy of a seed in the first half, ``[1, i]`` the second.

    A copy shares every coordinate with its seed, so only the rows whose first coordinate is
    some seed's are compared whole, by their bytes (:func:`scarce._rows.copies`).
    """
    seeds = np.asarray(seeds, dtype=u.dtype)
    split = split_point(seeds.shape[0])
    return copies(u, seeds[:split], seeds[split:])


def fit_surface(u: np.ndarray, score: np.ndarray, threshold: float, min_agreement: float,
                rows: np.ndarray | None = None) -> Surface | None:
    """The response surface of ``score`` over ``u`` (its ``rows``, all by default) if its level passes the check.

    One surface of :func:`fit_surfaces`, which leaves out the rows not in ``rows``.
    """
    left_out = np.zeros((1, u.shape[0]), dtype=bool)
    if rows is not None:
        left_out[0] = True
        left_out[0, np.asarray(rows)] = False
    return fit_surfaces(u, score, threshold, min_agreement, left_out)[0]


def fit_surfaces(u: np.ndarray, score: np.ndarray, threshold: float, min_agreement: float,
                 left_out: np.ndarray) -> list[Surface | None]:
    """For each mask of ``left_out``, the surface fitted to the points it keeps, if its level passes the check.

    The fits read about ``max(FIT_ROWS, ROWS_PER_COEFFICIENT (d + 2))`` kept points: that many
    over the share of points the most leaving mask keeps, evenly spaced among all the points.
    Each surface is fitted on the kept points of the first half of them and checked on those of
    the second, then refitted on both (normal equations add up, and a mask's left-out rows are
    taken out of them by subtraction, so the masks share one design). A mask keeping fewer than
    ``ROWS_PER_COEFFICIENT (d + 2)`` finite scores gets no surface: the held-out check would
    measure the fit's noise. The scores are standardised over all the points read; the fitted
    level does not depend on that positive affine map.
    """
    return _fit(u, score, threshold, min_agreement, left_out)[0]


def _fit(u: np.ndarray, score: np.ndarray, threshold: float, min_agreement: float,
         left_out: np.ndarray) -> tuple[list[Surface | None], FitBasis | None]:
    """:func:`fit_surfaces`, and the :class:`FitBasis` of the rows it read (None: no surface, or no scale)."""
    total, dim = u.shape
    finite = np.isfinite(score)
    needed = ROWS_PER_COEFFICIENT * (dim + 2)
    kept = [int(np.count_nonzero(finite & ~mask)) for mask in left_out]
    usable = [count >= needed for count in kept]
    if not any(usable) or not math.isfinite(threshold):
        return [None] * len(left_out), None
    fewest = min(int(np.count_nonzero(~mask)) for mask, ok in zip(left_out, usable) if ok)
    picked = _evenly(total, math.ceil(max(FIT_ROWS, needed) * total / fewest))
    if not finite[picked].any():
        return [None] * len(left_out), None
    design = _design(u[picked])
    y, magnitude, spread = _standardised(score[picked], finite[picked], threshold)
    n = picked.size
    parts = (slice(None, n // 2), slice(n // 2, None))
    sums = [_normal_equations(design[part], y[part], finite[picked][part]) for part in parts]
    # the standardised threshold is 0
    surfaces = [_checked_fit(design, y, 0.0, min_agreement, mask[picked], finite[picked], parts, sums)
                if ok else None for mask, ok in zip(left_out, usable)]
    if any(surface is None for surface in surfaces) or not magnitude * spread > 0.0:
        return surfaces, None
    gram, moment = sums[0][0] + sums[1][0], sums[0][1] + sums[1][1]
    basis = FitBasis(u[picked], design, y, finite[picked], gram, moment, _solve(gram, moment), magnitude, threshold,
                     spread)
    return surfaces, basis


def _evenly(total: int, n: int) -> np.ndarray:
    """``n`` row indices evenly spaced over ``total`` rows (all of them when ``n >= total``)."""
    return np.linspace(0, total - 1, n).astype(int) if n < total else np.arange(total)


def _design(u: np.ndarray) -> np.ndarray:
    """Rows ``(1, u, |u|^2)`` of the least-squares design."""
    design = np.empty((u.shape[0], u.shape[1] + 2))
    design[:, 0] = 1.0
    design[:, 1:-1] = u
    design[:, -1] = np.einsum("ij,ij->i", design[:, 1:-1], design[:, 1:-1])
    return design


def _fitted(u: np.ndarray, coef: np.ndarray) -> np.ndarray:
    """``alpha + beta . u + kappa |u|^2`` for each row of ``u``: the design's product, without building the design."""
    x = np.asarray(u, dtype=float)
    return coef[0] + x @ coef[1:-1] + coef[-1] * np.einsum("ij,ij->i", x, x)


def _checked_fit(design: np.ndarray, y: np.ndarray, threshold: float, min_agreement: float, out: np.ndarray,
                 finite: np.ndarray, parts: tuple[slice, slice],
                 sums: list[tuple[np.ndarray, np.ndarray]]) -> Surface | None:
    """The surface of the rows not ``out``: fitted on the first part, checked on the second, refitted on both."""
    (gram_a, moment_a), (gram_b, moment_b) = (_less(gram, moment, design[part], y[part], out[part] & finite[part])
                                              for part, (gram, moment) in zip(parts, sums))
    coef = _solve(gram_a, moment_a)
    held = ~out[parts[1]]
    if coef is None or _agreement((design[parts[1]] @ coef)[held], y[parts[1]][held], threshold) < min_agreement:
        return None
    coef = _solve(gram_a + gram_b, moment_a + moment_b)
    if coef is None:
        return None
    kept = ~out
    fitted, y = (design @ coef)[kept], y[kept]  # one product over all rows: no copy of the design's kept rows
    if np.any(fitted[np.isposinf(y)] < threshold):  # a failure outside the fitted level: the score does not order them
        return None
    return _surface(coef, threshold, _agreement(fitted, y, threshold))


def _less(gram: np.ndarray, moment: np.ndarray, design: np.ndarray, y: np.ndarray,
          out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Normal equations less the contribution of the rows ``out`` (which must have finite scores)."""
    if not out.any():
        return gram, moment
    rows = design[out]
    return gram - rows.T @ rows, moment - rows.T @ y[out]


def _standardised(score: np.ndarray, finite: np.ndarray, threshold: float) -> tuple[np.ndarray, float, float]:
    """Scores measured from the threshold (which becomes 0) in units of their spread, so the fit never overflows.

    Returns them with the map's ``magnitude`` and ``spread``: ``y = (score / magnitude -
    threshold / magnitude) / spread`` (``magnitude = 0``: every score and the threshold are 0).
    Levels are invariant under a positive affine map of the score, and so is the fitted level.
    """
    magnitude = max(float(np.max(np.abs(score[finite]))), abs(threshold))
    if magnitude == 0.0:
        return np.where(finite, 0.0, score), 0.0, 1.0
    shifted = score / magnitude - threshold / magnitude  # each term in [-1, 1]: no overflow
    spread = float(np.std(shifted[finite]))
    return (shifted / spread, magnitude, spread) if spread > 0.0 else (shifted, magnitude, 1.0)


def _normal_equations(design: np.ndarray, y: np.ndarray, finite: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``X^T X`` and ``X^T y`` over the rows with a finite score."""
    if not finite.all():
        design, y = design[finite], y[finite]
    return design.T @ design, design.T @ y


def _agreement(fitted_score: np.ndarray, score: np.ndarray, threshold: float) -> float:
    """``recall x precision`` of the fitted level ``{m >= threshold}`` for the points above the threshold.

    Points scoring exactly the threshold (the level's boundary sample, ties) count on neither side.
    """
    fitted = fitted_score >= threshold
    level = score > threshold
    fitted &= level | (score < threshold)
    both = np.count_nonzero(fitted & level)
    if both == 0:
        return 0.0
    return both / np.count_nonzero(level) * both / np.count_nonzero(fitted)


def _surface(coef: np.ndarray, threshold: float, agreement: float) -> Surface | None:
    """The :class:`Surface` of fitted coefficients: its direction and the proposal grid of ``t``."""
    beta, kappa = coef[1:-1], float(coef[-1])
    dim = beta.size
    slope = float(np.linalg.norm(beta))
    if abs(kappa) * math.sqrt(2.0 * dim) <= 1e-9 * slope:
        kappa = 0.0  # a linear score fitted with rounding error
    direction = beta / slope if slope > 0.0 else np.eye(dim)[0]
    partial = Surface(direction, slope, kappa, threshold - float(coef[0]), np.zeros(2), np.zeros(1), np.zeros(1),
                      agreement)
    grid = _grid(partial)
    log_mass = None if grid is None else _cell_log_mass(partial, *grid)
    if log_mass is None:
        return None
    cdf = np.cumsum(np.exp(log_mass))
    return replace(partial, edges=grid[0], log_mass=log_mass, cdf=cdf, guide=_guide(cdf))


def _guide(cdf: np.ndarray) -> np.ndarray:
    """Chen and Asau's guide table: for each slice start ``x_j``, the first cell with ``cdf > x_j``.

    The starts are ``x_j = (j / GUIDE_ENTRIES) cdf[-1]``, and the entries are
    ``searchsorted(cdf, x, "right")``, counted the other way round: cell ``i`` has ``cdf[i] <=
    x_j`` exactly for the slices ``j >= m_i``, ``m_i`` the number of starts below ``cdf[i]``, so
    the entry of slice ``j`` is the number of cells with ``m_i <= j``. One search of the cells
    among the starts, instead of one of each start among the cells.
    """
    starts = _SLICES * cdf[-1]
    below = np.searchsorted(starts, cdf, side="left")
    return np.minimum(np.cumsum(np.bincount(below, minlength=GUIDE_ENTRIES + 1)[:GUIDE_ENTRIES]), cdf.size - 1)


def _log_phi(t: np.ndarray) -> np.ndarray:
    """Log-density of the standard normal."""
    return -0.5 * t * t - 0.5 * math.log(2.0 * math.pi)


def _log_marginal(surface: Surface, t: np.ndarray) -> np.ndarray:
    """``log [phi(t) S(t)]``: the log-density of ``t`` over the fitted level, up to its normaliser."""
    return _log_phi(t) + surface.log_range_probability(t)


def _grid(surface: Surface) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Cell edges over the range where ``t``'s marginal is within :data:`LOG_RANGE` of its peak.

    Also returns the last pass's points and log-marginal, from which the cells' masses are interpolated.
    A flat fitted level is a half-line of ``t`` (:func:`_flat_grid`); otherwise the range is found
    by two passes of :data:`COARSE_POINTS` points.
    """
    if surface.curvature == 0.0:
        return _flat_grid(surface)
    low, high = -T_SPAN, T_SPAN
    for _ in range(2):
        t = np.linspace(low, high, COARSE_POINTS)
        log_m = _log_marginal(surface, t)
        peak = float(np.max(log_m))
        if not math.isfinite(peak):
            return None
        keep = np.flatnonzero(log_m >= peak - LOG_RANGE)
        low, high = t[max(keep[0] - 1, 0)], t[min(keep[-1] + 1, t.size - 1)]
    return np.linspace(low, high, GRID_CELLS + 1), t, log_m


def _flat_grid(surface: Surface) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`_grid` where the fitted level is ``{|beta| t >= b - alpha}``: ``t >= t0``, or every ``t`` when ``beta = 0``.

    The marginal is ``phi`` on that half-line, so the range where it is within :data:`LOG_RANGE`
    of its peak ``p = max(t0, 0)`` is ``t0 <= t <= sqrt(p^2 + 2 LOG_RANGE)`` (and ``t >= -sqrt(2
    LOG_RANGE)``), and the log-marginal is returned at the cells' middles, where it is exact.
    """
    if surface.slope > 0.0:
        start = surface.offset / surface.slope
    elif surface.offset <= 0.0:
        start = -math.inf
    else:
        return None  # the fitted level is empty
    if not start <= T_SPAN:
        return None
    peak = max(start, 0.0)
    low, high = max(start, -math.sqrt(2.0 * LOG_RANGE)), math.sqrt(peak * peak + 2.0 * LOG_RANGE)
    edges = np.linspace(low, high, GRID_CELLS + 1)
    middle = 0.5 * (edges[1:] + edges[:-1])
    return edges, middle, _log_phi(middle)


def _cell_log_mass(surface: Surface, edges: np.ndarray, t: np.ndarray, log_m: np.ndarray) -> np.ndarray | None:
    """Log-probability of each cell: the log-marginal at the cell's middle, normalised over the cells.

    The proposal only has to be known exactly, not to equal the marginal: the log-marginal is
    interpolated linearly from the points ``t`` (whose span holds the cells), and computed
    where an interpolant is not finite (next to a point where the marginal vanishes). The
    Hastings factor divides the exact marginal by these masses.
    """
    middle = 0.5 * (edges[1:] + edges[:-1])
    with np.errstate(invalid="ignore"):
        cell = np.interp(middle, t, log_m)
    exact = ~np.isfinite(cell)
    if exact.any():
        cell[exact] = _log_marginal(surface, middle[exact])
    peak = float(np.max(cell))
    if not math.isfinite(peak):
        return None
    return cell - (peak + math.log(float(np.sum(np.exp(cell - peak)))))
