r"""Response-surface sampling: independent draws from a fitted level, corrected by Metropolis-Hastings.

Markov chains inside a level are correlated, and that correlation (Au and Beck's ``gamma``) is
what keeps Subset Simulation's CoV above the one independent samples would give (the benchmark
page on splitting has the figures). Where the score is, in the standard-normal space, a linear
function plus one isotropic curvature, the level can be sampled exactly, and where it is close to
one, almost so. Before each level this kernel fits the response surface

.. math:: m(u) = \alpha + \beta \cdot u + \kappa \lVert u \rVert^2

by least squares to the finite scores of the previous level's points (Bucher and Bourgund
1990's response surface, with the single mean curvature of Breitung's second-order
approximation; FORM is ``kappa = 0``). With ``v = beta / |beta|``, ``t = v . u`` and
``w = u - t v``, the fitted level ``{m(u) >= b}`` is ``{|beta| t + kappa (t^2 + |w|^2) >= b -
alpha}``: for each ``t`` a range of ``s = |w|^2``, whose law under N(0, I) is chi-square with
``d - 1`` degrees of freedom, independent of ``t`` and of the direction of ``w``. A global move
draws ``t'`` from a fine piecewise-constant approximation ``q`` of its marginal
``phi(t) S(t)`` (``S(t)`` the chi-square probability of the range), then ``s'`` exactly from the
chi-square restricted to the range at ``t'``, and a uniformly random direction for ``w'``. Its
Metropolis-Hastings factor is

.. math:: \frac{\phi(t') S(t') / q(t')}{\phi(t) S(t) / q(t)}\, 1\{m(u) \ge b\},

close to 1 inside the fitted level, and the driver accepts the move only when the candidate
lies in the true level, so the chain leaves N(0, I) restricted to the level invariant whatever
the fit. Where the surface is exact (a linear or chi-square score) the moves are independent
draws from the level, accepted almost always. Where it is not, a state of the level outside the
fitted level is never moved (its factor is 0): invariant still, but that part of the level is
carried by the seeds that start there. A chain moves by a surface fitted without its own seed
(cross-fitting, :class:`ResponseSurfaceSampling`), so that its proposal does not lean towards
its starting point.

Before it uses a surface the kernel checks it on held-out points. The fit reads at most
``max(FIT_ROWS, 6 (d + 2))`` of the previous level's points, evenly spaced; the surface fitted on
the first half of them must reach ``min_agreement`` in ``recall x precision`` of the level on the
second half (the share of points in the level that the fitted level holds, times the share of
the fitted level's points that are in the level), and the surface then used is refitted on both
halves and must hold every failure among those points. Otherwise the level is sampled by the
local kernel alone (adaptive conditional sampling by default), draw for draw as that kernel
would. Fitting needs at least ``6 (d + 2)`` finite scores a level (:data:`ROWS_PER_COEFFICIENT`);
with fewer, a held-out check in hundreds of dimensions measures mostly the fit's own noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from scarce.checks import check_in_interval
from scarce.errors import ScarceError
from scarce.kernels.base import Kernel, KernelParams
from scarce.kernels.conditional import ConditionalSampling
from scarce.normals import standard_normal

#: Cells of the piecewise-constant proposal of ``t``: narrow enough that ``phi(t) S(t)`` barely varies
#: within one, so the Hastings factors stay close to 1.
GRID_CELLS = 1024
#: Seed of the fixed weights of the row hash that matches points to seeds (cross-fitting); not a
#: source of randomness.
_HASH_SEED = 20261127
#: Smallest ratio of the equilibrated normal equations' Cholesky pivots: below it the design is singular.
MIN_PIVOT_RATIO = 1e-6
#: Finite scores a level needs per coefficient of the surface (``d + 2`` of them) before one is fitted.
ROWS_PER_COEFFICIENT = 6
#: The fit reads at most ``max(FIT_ROWS, ROWS_PER_COEFFICIENT (d + 2))`` points, evenly spaced.
FIT_ROWS = 500
#: The proposal of ``t`` covers the range where its log-density is within this of its peak.
LOG_RANGE = 40.0
#: The first search for that range spans ``[-T_SPAN, T_SPAN]`` (beyond it ``phi(t) < 1e-347``) ...
T_SPAN = 40.0
#: ... in two passes of this many points, the second over the range the first found.
COARSE_POINTS = 257


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
    """

    direction: np.ndarray
    slope: float
    curvature: float
    offset: float
    edges: np.ndarray
    log_mass: np.ndarray
    cdf: np.ndarray
    agreement: float

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
        out = np.full(t.shape, -math.inf)
        out[inside] = self.log_mass[cell[inside].astype(int)] - math.log(width)
        return out

    def log_target_over_proposal(self, t: np.ndarray) -> np.ndarray:
        """``log [phi(t) S(t) / q(t)]``, the part of the Hastings factor each end of a move contributes."""
        with np.errstate(invalid="ignore"):  # -inf - -inf outside the proposal's cells: nan, then -inf
            out = _log_phi(t) + self.log_range_probability(t) - self.log_proposal(t)
        return np.where(np.isnan(out), -math.inf, out)


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
    upper = curvature > 0.0  # s >= bound; otherwise s <= bound
    probability = (gammaincc if upper else gammainc)(0.5 * dof, 0.5 * bound)
    with np.errstate(divide="ignore"):
        return np.log(probability)


@dataclass(frozen=True)
class SurfaceParams(KernelParams):
    """The local kernel's parameters and, when the level is sampled by global moves, the fitted surfaces.

    ``surfaces[h]`` moves the chains ``h, h + 2, h + 4, ...``; it was fitted without their seeds.
    """

    surfaces: tuple[Surface, Surface] | None = None


class ResponseSurfaceSampling(Kernel):
    """Independent moves inside a fitted second-order level, with a local kernel where the fit fails.

    Parameters
    ----------
    local : Kernel, optional
        The kernel of the levels whose surface fails the held-out check; adaptive conditional
        sampling (:class:`~scarce.kernels.ConditionalSampling`) by default. Its scale is adapted
        as usual on those levels and kept unchanged on the others.
    min_agreement : float
        Held-out ``recall x precision`` of the fitted level needed to use global moves, in (0, 1].

    Notes
    -----
    See the module notes for the surface, the move and its Hastings factor. A level sampled by
    global moves is one of independence Metropolis-Hastings: its chains mix in a step where
    the surface is exact, so their correlation factor ``gamma`` is close to 0. The surfaces are
    fitted before the chains start, to the previous level's points, and cross-fitted: the chains
    of even index move by a surface fitted without their seeds (every copy of them among the
    points), the odd ones by one fitted without theirs. A surface fitted on a chain's own seed
    would lean towards it, putting seeds inside the fitted level more often than fresh points of
    the level fall there, and the chains would keep that lean. Both surfaces must pass the check.
    """

    name = "surface"

    def __init__(self, local: Kernel | None = None, min_agreement: float = 0.9) -> None:
        if local is not None and (not isinstance(local, Kernel) or isinstance(local, ResponseSurfaceSampling)):
            raise ScarceError(f"local must be a scarce.kernels.Kernel other than ResponseSurfaceSampling, "
                              f"got {type(local).__name__}")
        self.local = ConditionalSampling() if local is None else local
        self.min_agreement = check_in_interval("min_agreement", min_agreement, 0.0, 1.0, low_open=True)
        self.initial_scale = self.local.initial_scale
        self.target_acceptance = self.local.target_acceptance
        self.adapt = self.local.adapt
        self.always_moves = bool(self.local.always_moves)

    def tune(self, seeds: np.ndarray, scale: float) -> KernelParams:
        params = self.local.tune(seeds, scale)
        return SurfaceParams(scale=params.scale, spread=params.spread)

    def fit(self, params: KernelParams, seeds: np.ndarray, u: np.ndarray, score: np.ndarray,
            threshold: float) -> KernelParams:
        if not isinstance(params, SurfaceParams):
            return params
        surfaces = cross_fitted_surfaces(np.asarray(seeds), np.asarray(u), np.asarray(score, dtype=float),
                                         float(threshold), self.min_agreement)
        return replace(params, surfaces=surfaces)

    def adapted(self, params: KernelParams, acceptance: float, step: int) -> KernelParams:
        if getattr(params, "surfaces", None) is not None:
            return params  # global moves have no scale; the local kernel's waits for its next level
        return self.local.adapted(params, acceptance, step)

    def propose(self, u: np.ndarray, params: KernelParams, rng: np.random.Generator) -> np.ndarray:
        """The local kernel's candidates (the global move needs its Hastings factor: :meth:`propose_weighted`)."""
        return self.local.propose(u, params, rng)

    def propose_weighted(
        self, u: np.ndarray, params: KernelParams, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray | None]:
        surfaces = getattr(params, "surfaces", None)
        if surfaces is None:
            return self.local.propose_weighted(u, params, rng)
        candidate, log_factor = np.empty_like(u), np.empty(u.shape[0])
        for half, surface in enumerate(surfaces):  # chains h, h + 2, ... by the surface fitted without them
            candidate[half::2], log_factor[half::2] = global_move(surface, u[half::2], rng)
        return candidate, log_factor


def cross_fitted_surfaces(seeds: np.ndarray, u: np.ndarray, score: np.ndarray, threshold: float,
                          min_agreement: float) -> tuple[Surface, Surface] | None:
    """The surfaces of the even and the odd chains, each fitted to the points less every copy of its chains' seeds."""
    keys, seed_keys = _row_hashes(u), _row_hashes(np.asarray(seeds, dtype=u.dtype))
    surfaces = []
    for half in (0, 1):
        kept = np.flatnonzero(~np.isin(keys, seed_keys[half::2]))
        surface = fit_surface(u, score, threshold, min_agreement, rows=kept)
        if surface is None:
            return None
        surfaces.append(surface)
    return surfaces[0], surfaces[1]


def global_move(surface: Surface, u: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Candidates drawn from N(0, I) restricted to the fitted level, and their log Hastings factors."""
    n, dof, v = u.shape[0], surface.dof, surface.direction
    x = np.asarray(u, dtype=float)
    t = x @ v
    s = np.einsum("ij,ij->i", x, x) - t * t  # |w|^2
    cdf = surface.cdf
    cell = np.minimum(np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right"), cdf.size - 1)
    t_new = surface.edges[cell] + (surface.edges[1] - surface.edges[0]) * rng.random(n)
    w = standard_normal(rng, x.shape, np.float64)
    w -= (w @ v)[:, None] * v  # N(0, I) across v: its length is the chi-square draw when kappa = 0
    drawn = np.ones(n, dtype=bool)
    if dof and surface.curvature != 0.0:
        s_new, drawn = _draw_range(surface, t_new, rng)
        length = np.sqrt(np.einsum("ij,ij->i", w, w))
        w *= (np.sqrt(s_new) / np.where(length > 0.0, length, 1.0))[:, None]
    candidate = w
    candidate += t_new[:, None] * v
    if u.dtype != np.float64:  # the factor is that of the candidate as stored, after rounding
        candidate = candidate.astype(u.dtype)
        t_new = candidate.astype(float) @ v
    with np.errstate(invalid="ignore"):  # inf - inf where the state lies outside the proposal: rejected below
        log_factor = surface.log_target_over_proposal(t_new) - surface.log_target_over_proposal(t)
        keep = surface.contains(t, s) & drawn & np.isfinite(log_factor)
    return candidate, np.where(keep, log_factor, -math.inf)


def _draw_range(surface: Surface, t: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``s = |w|^2`` drawn from the chi-square restricted to the fitted level at each ``t``, and which draws exist.

    Inverse-CDF sampling of the chi-square (``2 Gamma(dof / 2)``) restricted to ``[bound, inf)``
    (``kappa > 0``) or ``[0, bound]`` (``kappa < 0``).
    """
    from scipy.special import gammainc, gammaincc, gammaincinv, gammainccinv

    half, kappa = 0.5 * surface.dof, surface.curvature
    bound = np.maximum(surface.residual(t) / kappa, 0.0)
    uniform = rng.random(t.size)
    if kappa > 0.0:
        tail = gammaincc(half, 0.5 * bound)
        s = 2.0 * gammainccinv(half, uniform * tail)
    else:
        tail = gammainc(half, 0.5 * bound)
        s = 2.0 * gammaincinv(half, uniform * tail)
    ok = (tail > 0.0) & np.isfinite(s)
    return np.where(ok, s, bound), ok


def _row_hashes(rows: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row's bits: the same for every copy of a row, wherever it sits.

    Integer sums wrap exactly and in any order, so unlike a floating-point projection the hash
    does not depend on how a reduction is vectorised. Two different rows share a hash with
    probability about 2^-64 (then one more point is left out of a fit, which is harmless).
    """
    rows = np.ascontiguousarray(rows)
    bits = rows.view(np.uint64 if rows.itemsize == 8 else np.uint32).astype(np.uint64)
    weights = np.random.default_rng(_HASH_SEED).integers(1, 2**63, size=rows.shape[1], dtype=np.uint64) | np.uint64(1)
    return (bits * weights).sum(axis=1, dtype=np.uint64)


def fit_surface(u: np.ndarray, score: np.ndarray, threshold: float, min_agreement: float,
                rows: np.ndarray | None = None) -> Surface | None:
    """The response surface of ``score`` over ``u`` (its ``rows``, all by default) if its level passes the check.

    At most ``max(FIT_ROWS, ROWS_PER_COEFFICIENT (d + 2))`` points are used, evenly spaced; the
    surface is fitted on the first half of them and checked on the second, then refitted on
    all of them (the two halves' normal equations add up). With fewer than
    ``ROWS_PER_COEFFICIENT (d + 2)`` finite scores no surface is fitted: the held-out check
    would measure the fit's noise.
    """
    dim = u.shape[1]
    rows = np.arange(u.shape[0]) if rows is None else np.asarray(rows)
    finite = np.isfinite(score[rows])
    if np.count_nonzero(finite) < ROWS_PER_COEFFICIENT * (dim + 2) or not math.isfinite(threshold):
        return None
    n = min(rows.size, max(FIT_ROWS, ROWS_PER_COEFFICIENT * (dim + 2)))
    if n < rows.size:
        pick = np.linspace(0, rows.size - 1, n).astype(int)
        rows, finite = rows[pick], finite[pick]
    score, threshold = _standardised(score[rows], finite, threshold)
    design = np.empty((n, dim + 2))
    design[:, 0] = 1.0
    design[:, 1:-1] = u[rows]
    design[:, -1] = np.einsum("ij,ij->i", design[:, 1:-1], design[:, 1:-1])
    half = n // 2
    (gram_a, moment_a), (gram_b, moment_b) = (_normal_equations(design[part], score[part], finite[part])
                                              for part in (slice(None, half), slice(half, None)))
    gram, moment = gram_a + gram_b, moment_a + moment_b
    coef = _solve(gram_a, moment_a)
    if coef is None or _agreement(design[half:] @ coef, score[half:], threshold) < min_agreement:
        return None
    coef = _solve(gram, moment)
    if coef is None:
        return None
    fitted = design @ coef
    if np.any(fitted[np.isposinf(score)] < threshold):  # a failure outside the fitted level: the score does not order them
        return None
    return _surface(coef, threshold, _agreement(fitted, score, threshold))


def _standardised(score: np.ndarray, finite: np.ndarray, threshold: float) -> tuple[np.ndarray, float]:
    """Scores measured from the threshold in units of their spread, so the fit never overflows.

    Levels are invariant under a positive affine map of the score, and so is the fitted level.
    """
    magnitude = max(float(np.max(np.abs(score[finite]))), abs(threshold))
    if magnitude == 0.0:
        return np.where(finite, 0.0, score), 0.0
    shifted = score / magnitude - threshold / magnitude  # each term in [-1, 1]: no overflow
    spread = float(np.std(shifted[finite]))
    return (shifted / spread if spread > 0.0 else shifted), 0.0


def _normal_equations(design: np.ndarray, score: np.ndarray, finite: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``X^T X`` and ``X^T y`` over the rows with a finite score."""
    if not finite.all():
        design, score = design[finite], score[finite]
    return design.T @ design, design.T @ score


def _solve(gram: np.ndarray, moment: np.ndarray) -> np.ndarray | None:
    """Least-squares coefficients ``(alpha, beta_1..beta_d, kappa)`` from the normal equations (None: singular).

    The equations are equilibrated (unit diagonal), so the Cholesky factor's diagonal measures the
    design rather than the columns' units; a ratio of its extremes below ``MIN_PIVOT_RATIO`` (a
    condition number above about 1e12) counts as singular.
    """
    from scipy.linalg import cho_solve

    scale = np.sqrt(np.diag(gram))
    if not np.all((scale > 0.0) & np.isfinite(scale)):
        return None
    with np.errstate(all="ignore"):
        unit = gram / np.outer(scale, scale)
        if not np.all(np.isfinite(unit)) or not np.all(np.isfinite(moment)):
            return None
        try:
            factor = np.linalg.cholesky(unit)
        except np.linalg.LinAlgError:
            return None
        pivots = np.abs(np.diag(factor))
        if pivots.min() < MIN_PIVOT_RATIO * pivots.max():
            return None
        coef = cho_solve((factor, True), moment / scale) / scale
    return coef if np.all(np.isfinite(coef)) else None


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
    edges = _grid(partial)
    if edges is None:
        return None
    log_mass = _cell_log_mass(partial, edges)
    return replace(partial, edges=edges, log_mass=log_mass, cdf=np.cumsum(np.exp(log_mass)))


def _log_phi(t: np.ndarray) -> np.ndarray:
    """Log-density of the standard normal."""
    return -0.5 * t * t - 0.5 * math.log(2.0 * math.pi)


def _log_marginal(surface: Surface, t: np.ndarray) -> np.ndarray:
    """``log [phi(t) S(t)]``: the log-density of ``t`` over the fitted level, up to its normaliser."""
    return _log_phi(t) + surface.log_range_probability(t)


def _grid(surface: Surface) -> np.ndarray | None:
    """Cell edges over the range where ``t``'s marginal is within :data:`LOG_RANGE` of its peak."""
    low, high = -T_SPAN, T_SPAN
    for _ in range(2):
        t = np.linspace(low, high, COARSE_POINTS)
        log_m = _log_marginal(surface, t)
        peak = float(np.max(log_m))
        if not math.isfinite(peak):
            return None
        keep = np.flatnonzero(log_m >= peak - LOG_RANGE)
        low, high = t[max(keep[0] - 1, 0)], t[min(keep[-1] + 1, t.size - 1)]
    return np.linspace(low, high, GRID_CELLS + 1)


def _cell_log_mass(surface: Surface, edges: np.ndarray) -> np.ndarray:
    """Log-probability of each cell: the marginal at the cell's middle, normalised over the cells."""
    middle = 0.5 * (edges[1:] + edges[:-1])
    log_m = _log_marginal(surface, middle)
    peak = float(np.max(log_m))  # finite: the grid spans the marginal's peak
    return log_m - (peak + math.log(float(np.sum(np.exp(log_m - peak)))))
