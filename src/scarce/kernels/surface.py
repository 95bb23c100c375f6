r"""Response-surface sampling: independent draws from a fitted level, corrected by Metropolis-Hastings.

Markov chains inside a level are correlated, and that correlation (Au and Beck's ``gamma``) is
what keeps Subset Simulation's CoV above the one independent samples would give (the benchmark
page on splitting has the figures). Where the score is, in the standard-normal space, a linear
function plus one isotropic curvature, the level can be sampled exactly, and where it is close to
one, almost so. For each level this kernel has a fit of the response surface

.. math:: m(u) = \alpha + \beta \cdot u + \kappa \lVert u \rVert^2

by least squares to the finite scores of an earlier level's points (Bucher and Bourgund
1990's response surface, with the single mean curvature of Breitung's second-order
approximation; FORM is ``kappa = 0``): ``m`` describes the score, not one level, so a fit carries
over to the next level while it still orders the new points, and is made anew from the previous
level's points when it does not (:meth:`ResponseSurfaceSampling.refit`). With
``v = beta / |beta|``, ``t = v . u`` and ``w = u - t v``, the fitted level ``{m(u) >= b}`` is
``{|beta| t + kappa (t^2 + |w|^2) >= b - alpha}``: for each ``t`` a range of ``s = |w|^2``,
whose law under N(0, I) is chi-square with ``d - 1`` degrees of freedom, independent of ``t``
and of the direction of ``w``. A global move
draws ``t'`` from a fine piecewise-constant approximation ``q`` of its marginal
``phi(t) S(t)`` (``S(t)`` the chi-square probability of the range), then ``s'`` exactly from the
chi-square restricted to the range at ``t'`` (by rejection, :func:`_upper_gamma`, or inverse
CDF), and a uniformly random direction for ``w'``. Its
Metropolis-Hastings factor is

.. math:: \frac{\phi(t') S(t') / q(t')}{\phi(t) S(t) / q(t)}\, 1\{m(u) \ge b\},

close to 1 inside the fitted level, and the driver accepts the move only when the candidate
lies in the true level, so the chain leaves N(0, I) restricted to the level invariant whatever
the fit. Where the surface is exact (a linear or chi-square score) the moves are independent
draws from the level, accepted almost always. Where it is not, a state of the level outside the
fitted level is never moved (its factor is 0): invariant still, but that part of the level is
carried by the seeds that start there. A chain moves by a surface fitted without its own seed
(cross-fitting, :class:`ResponseSurfaceSampling`), so that its proposal does not lean towards
its starting point. The candidates ignore the state, so a level's are drawn in blocks of steps
before the steps run (:func:`draws_ahead`), and a step's factor is a difference of log weights
``log w = log [phi(t) S(t) / q(t)]`` (:func:`state_log_weights` for the states).

The surface, its fit and its held-out check are in :mod:`scarce.kernels.response_surface`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from scarce.checks import check_in_interval
from scarce.errors import ScarceError
from scarce.kernels.base import Kernel, KernelParams
from scarce.kernels.conditional import ConditionalSampling
from scarce.kernels.response_surface import (
    ROWS_PER_COEFFICIENT,
    FitBasis,
    Surface,
    cross_fitted_surfaces,
    reused_surfaces,
    split_point,
)
from scarce.normals import standard_normal

__all__ = ["ResponseSurfaceSampling", "SurfaceParams", "draws_ahead", "global_move", "global_moves", "state_log_weights"]


@dataclass(frozen=True)
class SurfaceParams(KernelParams):
    """The local kernel's parameters and, when the level is sampled by global moves, the fitted surfaces.

    ``local`` is what the local kernel's :meth:`~Kernel.tune` or :meth:`~Kernel.adapted` returned,
    of whatever class (``scale`` and ``spread`` repeat its own); ``surfaces[0]`` moves the chains
    before ``split``, ``surfaces[1]`` the others, each fitted without its chains' seeds; ``basis``
    is the fit they come from, for the next level to reuse.
    """

    local: KernelParams | None = None
    surfaces: tuple[Surface, Surface] | None = None
    split: int = 0
    basis: FitBasis | None = None

    @classmethod
    def wrapping(cls, local: KernelParams) -> SurfaceParams:
        """Parameters holding ``local`` (the local kernel's own, unchanged) and no surface."""
        return cls(scale=local.scale, spread=local.spread, local=local)

    @staticmethod
    def local_of(params: KernelParams) -> KernelParams:
        """The local kernel's parameters inside ``params`` (``params`` itself when it wraps none)."""
        inner = getattr(params, "local", None)
        return params if inner is None else inner


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
    fitted before the chains start, to the previous level's points, and cross-fitted: the first
    half of the chains move by a surface fitted without their seeds (every copy of them among
    the points), the second half by one fitted without theirs (halves, not alternate chains, so
    that each surface moves a contiguous block of rows). A surface fitted on a chain's own seed
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

    def check_settings(self) -> None:
        """The local kernel's settings (and its own), and ``min_agreement`` in (0, 1]."""
        local = self.local
        if not isinstance(local, Kernel) or isinstance(local, ResponseSurfaceSampling):
            raise ScarceError(f"ResponseSurfaceSampling.local must be a scarce.kernels.Kernel other than "
                              f"ResponseSurfaceSampling, got {type(local).__name__}")
        local.check_settings()
        super().check_settings()
        check_in_interval("ResponseSurfaceSampling.min_agreement", self.min_agreement, 0.0, 1.0, low_open=True)

    def tune(self, seeds: np.ndarray, scale: float) -> KernelParams:
        return SurfaceParams.wrapping(self._local_params("tune", self.local.tune(seeds, scale)))

    def _local_params(self, method: str, params: object) -> KernelParams:
        """What the local kernel's ``method`` returned, if it is a :class:`KernelParams`; an error naming it otherwise."""
        if not isinstance(params, KernelParams):
            raise ScarceError(f"{type(self.local).__name__}.{method}() (the local kernel of ResponseSurfaceSampling) "
                              f"must return a KernelParams, got {type(params).__name__}")
        return params

    def can_fit(self, n_points: int, dim: int) -> bool:
        """At least ``6 (d + 2)`` points (:data:`~scarce.kernels.response_surface.ROWS_PER_COEFFICIENT`)."""
        return n_points >= ROWS_PER_COEFFICIENT * (dim + 2)

    def fit(self, params: KernelParams, seeds: np.ndarray, u: np.ndarray, score: np.ndarray,
            threshold: float) -> KernelParams:
        return self.refit(None, params, seeds, u, score, threshold)

    def refit(self, previous: KernelParams | None, params: KernelParams, seeds: np.ndarray, u: np.ndarray,
              score: np.ndarray, threshold: float) -> KernelParams:
        """The previous level's fit if it still orders this level's points (:func:`reused_surfaces`), else a new fit."""
        if not isinstance(params, SurfaceParams):
            params = SurfaceParams.wrapping(params)
        seeds, u, score = np.asarray(seeds), np.asarray(u), np.asarray(score, dtype=float)
        basis = getattr(previous, "basis", None)
        surfaces = None if basis is None else reused_surfaces(basis, seeds, u, score, float(threshold),
                                                               self.min_agreement)
        if surfaces is None:
            surfaces, basis = cross_fitted_surfaces(seeds, u, score, float(threshold), self.min_agreement)
        return replace(params, surfaces=surfaces, split=split_point(len(seeds)), basis=basis)

    def adapted(self, params: KernelParams, acceptance: float, step: int) -> KernelParams:
        if getattr(params, "surfaces", None) is not None:
            return params  # global moves have no scale; the local kernel's waits for its next level
        local = self.local.adapted(SurfaceParams.local_of(params), acceptance, step)
        return SurfaceParams.wrapping(self._local_params("adapted", local))

    def propose(self, u: np.ndarray, params: KernelParams, rng: np.random.Generator) -> np.ndarray:
        """The local kernel's candidates (the global move needs its Hastings factor: :meth:`propose_weighted`)."""
        return self.local.propose(u, SurfaceParams.local_of(params), rng)

    def propose_weighted(
        self, u: np.ndarray, params: KernelParams, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray | None]:
        surfaces = getattr(params, "surfaces", None)
        if surfaces is None:
            return self.local.propose_weighted(u, SurfaceParams.local_of(params), rng)
        return global_moves(surfaces, params.split, u, rng)

    def draws_ahead(self, params: KernelParams, n_chains: int, n_steps: int, dim: int, dtype: np.dtype,
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray] | None:
        """A level's global candidates, drawn before its steps (:func:`draws_ahead`); None on a local level."""
        surfaces = getattr(params, "surfaces", None)
        if surfaces is None:
            return None
        return draws_ahead(surfaces, params.split, n_chains, n_steps, dim, dtype, rng)

    def state_log_weights(self, params: KernelParams, u: np.ndarray) -> np.ndarray:
        return state_log_weights(params.surfaces, params.split, u)  # type: ignore[attr-defined]


def global_move(surface: Surface, u: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Candidates drawn from N(0, I) restricted to the fitted level, and their log Hastings factors."""
    return global_moves((surface,), u.shape[0], u, rng)


def global_moves(surfaces: tuple[Surface, ...], split: int, u: np.ndarray,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """:func:`global_move` for each row of ``u``: rows before ``split`` by ``surfaces[0]``, the rest by ``surfaces[1]``.

    The candidates are one step of :func:`draws_ahead` (the same random numbers), and each
    factor is ``log w(candidate) - log w(state)`` (:func:`state_log_weights`; ``-inf`` where the
    state's weight is not finite).
    """
    candidate, log_weight = _draw(surfaces, split, u.shape[0], 1, u.shape[1], u.dtype, rng)
    state = state_log_weights(surfaces, split, u)
    with np.errstate(invalid="ignore"):
        log_factor = np.where(np.isfinite(state), log_weight[0] - state, -math.inf)
    return candidate[0], log_factor


def draws_ahead(surfaces: tuple[Surface, ...], split: int, n_chains: int, n_steps: int, dim: int,
                dtype: np.dtype, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n_steps`` global candidates for each of ``n_chains`` chains, and their log importance weights.

    Shapes ``(n_steps, n_chains, d)`` and ``(n_steps, n_chains)``: chains before ``split`` draw
    from ``surfaces[0]``, the others from ``surfaces[1]``. A global candidate does not depend on
    the state it moves from, so a level's candidates can be drawn before its steps
    (:meth:`scarce.kernels.Kernel.draws_ahead`); each step then costs the driver a subtraction
    of log weights instead of a fresh pass over the surface.
    """
    return _draw(surfaces, split, n_chains, n_steps, dim, np.dtype(dtype), rng)


def state_log_weights(surfaces: tuple[Surface, ...], split: int, u: np.ndarray) -> np.ndarray:
    """``log w(u) = log [phi(t) S(t) / q(t)]`` of each state under its chain's surface (``-inf``: never moved).

    A state outside its fitted level (or outside the proposal's cells) gets ``-inf``: the move
    could never propose it, so moving away from it would break detailed balance.
    """
    out = np.empty(u.shape[0])
    for surface, rows in _blocks(surfaces, split, u.shape[0], merge=True):
        out[rows] = _state_log_weight(surface, u[rows])
    return out


def _blocks(surfaces: tuple[Surface, ...], split: int, n: int, merge: bool = False) -> list[tuple[Surface, slice]]:
    """``(surface, rows)`` for the non-empty blocks of chains: before ``split``, and the rest.

    With ``merge``, one block when both halves move by one surface (a reused fit,
    :func:`reused_surfaces`): the states' weights are one short pass. The candidates stay in
    halves, whose temporaries fit the processor's cache better.
    """
    if merge and surfaces[0] is surfaces[-1]:
        return [(surfaces[0], slice(0, n))] if n else []
    bounds = (slice(0, min(split, n)), slice(min(split, n), n))
    return [(surface, rows) for surface, rows in zip(surfaces, bounds) if rows.start < rows.stop]


def _draw(surfaces: tuple[Surface, ...], split: int, n_chains: int, n_steps: int, dim: int, dtype: np.dtype,
          rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Candidates ``(n_steps, n_chains, d)`` and their log weights.

    Each takes ``d`` normals and three uniforms, and on a curved fitted level the rejection draws
    of its squared length (:func:`_upper_gamma`; the third uniform serves a lower range).
    """
    w = standard_normal(rng, (n_steps, n_chains, dim), np.float64)
    uniforms = rng.random((3, n_steps, n_chains))
    log_weight = np.empty((n_steps, n_chains))
    for surface, chains in _blocks(surfaces, split, n_chains):
        log_weight[:, chains] = _candidates(surface, w[:, chains], uniforms[:, :, chains], dtype, rng)
    return (w if dtype == np.float64 else w.astype(dtype)), log_weight


def _candidates(surface: Surface, w: np.ndarray, uniforms: np.ndarray, dtype: np.dtype,
                rng: np.random.Generator) -> np.ndarray:
    """Turn the normals ``w`` (any leading shape, ``d`` last) into candidates in place; the log weight of each.

    With ``p = w . v``, the candidate is ``f (w - p v) + t' v``: ``t'`` from the proposal's cells,
    and ``f = 1`` where the surface is flat (the normals' own length across ``v`` is the
    chi-square draw) or the factor that gives ``|w - p v|^2`` the drawn ``s'``. The weight is
    ``log [phi(t') S(t') / q(t')]`` (``-inf`` where the range had no draw); for a candidate
    stored in float32 it is that of the rounded point.
    """
    v = surface.direction
    cell = surface.cells(uniforms[0])
    width = surface.edges[1] - surface.edges[0]
    t_new = surface.edges[cell] + width * uniforms[1]
    log_proposal = surface.log_mass[cell] - math.log(width)  # the density of the cell each t' was drawn in
    proj = w @ v
    if surface.dof and surface.curvature != 0.0:
        s_new, log_range, drawn = _draw_range(surface.residual(t_new) / surface.curvature, surface.curvature > 0.0,
                                              surface.dof, uniforms[2], rng)
        across = np.sqrt(np.maximum(np.einsum("...j,...j->...", w, w) - proj * proj, 0.0))
        factor = np.sqrt(s_new) / np.where(across > 0.0, across, 1.0)
        w *= factor[..., None]
        proj *= factor
    else:
        log_range, drawn = np.where(surface.residual(t_new) <= 0.0, 0.0, -math.inf), True
    w += (t_new - proj)[..., None] * v
    if dtype != np.float64:  # the weight is that of the candidate as stored, after rounding ...
        w[...] = w.astype(dtype)
        t_new = w @ v
        log_range, log_proposal = surface.log_range_probability(t_new), surface.log_proposal(t_new)
        # ... and a candidate rounded out of the fitted level is never taken (as a state it would never move)
        drawn = drawn & surface.contains(t_new, np.einsum("...j,...j->...", w, w) - t_new * t_new)
    with np.errstate(invalid="ignore"):
        log_weight = -0.5 * t_new * t_new + log_range - log_proposal
    return np.where(drawn & np.isfinite(log_weight), log_weight, -math.inf)


def _state_log_weight(surface: Surface, u: np.ndarray) -> np.ndarray:
    """``log w`` of states (``-inf`` outside the fitted level, where the move never goes)."""
    x = np.asarray(u, dtype=float)
    t = x @ surface.direction
    s = np.einsum("ij,ij->i", x, x) - t * t  # |w|^2 of the states
    # log S(t) = 0 for a state inside a flat fitted level (the others are not kept)
    log_range = surface.log_range_probability(t) if surface.dof and surface.curvature != 0.0 else 0.0
    with np.errstate(invalid="ignore"):
        log_weight = -0.5 * t * t + log_range - surface.log_proposal(t)
    return np.where(surface.contains(t, s) & np.isfinite(log_weight), log_weight, -math.inf)


def _draw_range(bound: np.ndarray, upper: bool, dof: int, uniform: np.ndarray,
                rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``s`` chi-square restricted to ``[bound, inf)`` (``upper``) or ``[0, bound]``.

    The upper range is drawn by rejection (:func:`_upper_gamma`), the lower one by inverse CDF
    of ``uniform``: both exact in law. Returns the draws (``bound`` where the range has no mass
    in double precision), the log mass of the range and which draws exist.
    """
    from scipy.special import gammainc, gammaincc, gammaincinv

    half, bound = 0.5 * dof, np.maximum(bound, 0.0)
    tail = (gammaincc if upper else gammainc)(half, 0.5 * bound)
    ok = tail > 0.0
    if upper:
        s = bound.copy()
        s[ok] = 2.0 * _upper_gamma(half, 0.5 * bound[ok], rng)
    else:
        s = 2.0 * gammaincinv(half, uniform * tail)
        ok &= np.isfinite(s)
    with np.errstate(divide="ignore"):
        return np.where(ok, s, bound), np.log(tail), ok


def _upper_gamma(a: float, c: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    r"""Draws of Gamma(a, 1) restricted to ``[c, inf)``, one for each ``c``, by rejection.

    Each ``c`` must be finite and non-negative, with a tail probability above 0 in double
    precision (:func:`_draw_range` passes only those): beyond it no draw would ever be accepted.

    Below the mode (``c <= max(a - 1, 1/4)``) the proposal is the gamma itself, kept when it
    lands above ``c`` (probability at least about one half). Beyond it the proposal is
    ``c + E / lambda``, ``E`` exponential, at the rate that maximises the acceptance (Dagpunar 1978),
    ``lambda = (c - a + sqrt((c - a)^2 + 4 c)) / (2 c)`` (1 when ``a <= 1``): the target over the
    proposal is ``exp(r(x))`` up to a constant, ``r(x) = (a - 1) log x - (1 - lambda) x``, accepted
    with probability ``exp(r(x) - r(x*))`` at its maximum ``x* = max(c, (a - 1) / (1 - lambda))``.
    Every draw is exact, and cheaper than the inverse CDF (``gammainccinv``).
    """
    beyond = c > max(a - 1.0, 0.25)
    rate, peak = np.ones(c.shape), c.copy()
    if a > 1.0:  # then rate < 1 beyond the mode, and r peaks at (a - 1) / (1 - rate) when that exceeds c
        far = c[beyond]
        rate[beyond] = (far - a + np.sqrt((far - a) ** 2 + 4.0 * far)) / (2.0 * far)
        peak[beyond] = np.maximum(far, (a - 1.0) / (1.0 - rate[beyond]))
    out = np.empty(c.shape)
    exponential, gamma = np.flatnonzero(beyond), np.flatnonzero(~beyond)
    while exponential.size:
        draw = c[exponential] + rng.standard_exponential(exponential.size) / rate[exponential]
        top = peak[exponential]
        log_accept = (a - 1.0) * np.log(draw / top) - (1.0 - rate[exponential]) * (draw - top)
        kept = np.log(rng.random(exponential.size)) <= log_accept
        out[exponential[kept]] = draw[kept]
        exponential = exponential[~kept]
    while gamma.size:
        draw = rng.standard_gamma(a, gamma.size)
        kept = draw >= c[gamma]
        out[gamma[kept]] = draw[kept]
        gamma = gamma[~kept]
    return out
