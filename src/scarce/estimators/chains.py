"""The vectorised chain driver: all chains of a level advance together.

At MCMC step ``t`` every chain that is still running proposes a candidate, the
candidates are evaluated in ONE batched call, and each chain accepts its
candidate exactly when it lies in the level (one batched model call per step for all chains).
Chains differ in length by at most one; sorting them longest first makes the
running chains a leading slice, so no masking is needed in the hot loop.

A seed is a chain's first state.  It is counted as a sample of the level
(``count_seeds=True``: ``N - n_seeds`` model calls) or only moved from
(``count_seeds=False``: all ``N`` counted states are MCMC moves, ``N`` model
calls); :class:`~scarce.estimators.subset.SubsetSimulation` says which and why.

A kernel whose candidates ignore the state (an independence sampler, such as response-surface
sampling's global move) may hand over a level's candidates before its steps
(:meth:`~scarce.kernels.Kernel.draws_ahead`, :class:`DrawnAhead`): its per-candidate work is then
one pass over the level instead of one small pass a step, and the steps run as before.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from scarce.kernels.base import Kernel, KernelParams
from scarce.levels import in_level

#: ``evaluate(u, step) -> effective scores`` (``+inf`` for failures).
LatentEvaluate = Callable[[np.ndarray, int], np.ndarray]


@dataclass(frozen=True)
class Population:
    """The samples of one level, laid out by chain.

    Attributes
    ----------
    u : ndarray, shape (n_chains, length, d)
        Latent states; ``u[j, 0]`` is chain ``j``'s seed.
    score : ndarray, shape (n_chains, length)
        Effective scores (``+inf`` where the sample failed, ``nan`` where ``mask`` is false).
    key : ndarray, shape (n_chains, length)
        Tie-breaking keys (:mod:`scarce.levels`): a uniform draw for every evaluated point,
        kept with the state while a chain stays on it.
    mask : ndarray of bool, shape (n_chains, length)
        Which states exist (chain lengths differ by at most one).
    parent : ndarray of int, shape (n_chains,), optional
        For each chain, the chain of the previous level's population its seed
        came from (the lineage used for the between-level covariance).
    seed_score : ndarray, shape (n_chains,), optional
        Each chain's seed's effective score (``+inf``: the chain started from a failure).
    independent : bool
        True when the samples are independent draws (level 0), not Markov chain states.
    """

    u: np.ndarray
    score: np.ndarray
    key: np.ndarray
    mask: np.ndarray
    parent: np.ndarray | None = None
    independent: bool = False
    seed_score: np.ndarray | None = None

    @classmethod
    def from_independent(cls, u: np.ndarray, score: np.ndarray, key: np.ndarray) -> Population:
        """A population of independent samples (level 0): ``N`` chains of length 1."""
        mask = np.ones((u.shape[0], 1), dtype=bool)
        return cls(u=u[:, None, :], score=score[:, None], key=key[:, None], mask=mask, independent=True)

    @property
    def n_samples(self) -> int:
        return int(self.mask.sum())

    def flat_scores(self) -> np.ndarray:
        """Scores of the existing states, shape ``(N,)``."""
        return self.score[self.mask]

    def flat_keys(self) -> np.ndarray:
        """Tie-breaking keys of the existing states, in the order of :meth:`flat_scores`."""
        return self.key[self.mask]

    def flat_u(self) -> np.ndarray:
        """Latent states of the existing samples, shape ``(N, d)`` (same order as :meth:`flat_scores`)."""
        return self.u[self.mask]

    def take_u(self, flat_index: np.ndarray) -> np.ndarray:
        """``flat_u()[flat_index]`` without copying the whole population (only the picked rows)."""
        chains, steps = np.nonzero(self.mask)
        return self.u[chains[flat_index], steps[flat_index]]

    def chain_of_flat(self) -> np.ndarray:
        """Chain index of each existing state, in the order of :meth:`flat_scores`."""
        return np.nonzero(self.mask)[0]

    def n_failed(self) -> int:
        """Failures (score ``+inf``) in the population."""
        return int(np.count_nonzero(np.isposinf(self.score[self.mask])))


@dataclass(frozen=True)
class ChainStats:
    """Summary of one level's MCMC: acceptance rate, final scale, model evaluations, final kernel parameters."""

    acceptance_rate: float
    scale: float
    n_queries: int
    params: KernelParams | None = None


def chain_lengths(n_samples: int, n_chains: int) -> np.ndarray:
    """Lengths (states including the seed) of ``n_chains`` chains sharing ``n_samples`` states, longest first."""
    base, extra = divmod(n_samples, n_chains)
    lengths = np.full(n_chains, base, dtype=int)
    lengths[:extra] += 1
    return lengths


def run_chains(
    kernel: Kernel, seeds_u: np.ndarray, seeds_score: np.ndarray, threshold: float, n_samples: int, scale: float,
    evaluate: LatentEvaluate, rng: np.random.Generator, seeds_parent: np.ndarray | None = None,
    count_seeds: bool = True, seeds_key: np.ndarray | None = None, threshold_key: float = -math.inf,
    sample: tuple[np.ndarray, np.ndarray] | None = None, previous: KernelParams | None = None,
) -> tuple[Population, ChainStats]:
    """Grow ``n_samples`` states of N(0, I) restricted to a level from the seeds.

    The level is ``(score, key) > (threshold, threshold_key)`` in lexicographic order
    (:func:`scarce.levels.in_level`); the default key makes it ``{score >= threshold}``.
    Every candidate draws a fresh uniform key, so ties at the threshold are split at random.

    Parameters
    ----------
    kernel : Kernel
    seeds_u, seeds_score : ndarray, shapes (n_seeds, d) and (n_seeds,)
        Seeds, distributed as the level's target (the chains' first states), and their effective scores.
    threshold : float
        Boundary score of the level.
    n_samples : int
        Total states of the level (seeds included when ``count_seeds``).
    scale : float
        Kernel scale at the first step (then as :meth:`Kernel.adapted` says).
    evaluate : callable
        ``evaluate(u_batch, step) -> effective scores``; called once per step.
    rng : numpy.random.Generator
    seeds_parent : ndarray of int, shape (n_seeds,), optional
        The previous level's chain of each seed (:attr:`Population.parent`, reordered with the chains).
    count_seeds : bool
        Whether each seed is its chain's first counted state (else every counted state is a move).
    seeds_key, threshold_key : optional
        The seeds' tie-breaking keys (fresh uniform draws when omitted) and the boundary's
        (``-inf``: every tie at ``threshold`` is in the level).
    sample, previous : optional
        The previous level's points ``(n, d)`` and effective scores ``(n,)``, and the parameters
        its chains ended with (:attr:`ChainStats.params`), for :meth:`Kernel.refit`.

    Returns
    -------
    (Population, ChainStats)"""
    order = rng.permutation(seeds_u.shape[0])  # which seeds get the longer chains is random
    current_u, current_s, seed_score = seeds_u[order].copy(), seeds_score[order].copy(), seeds_score[order].copy()
    current_k = rng.random(order.size) if seeds_key is None else np.asarray(seeds_key, dtype=float)[order].copy()
    lengths = chain_lengths(n_samples, current_u.shape[0])  # counted states per chain
    u, score, key, mask = _states(current_u, current_s, current_k, lengths, count_seeds)
    params, first = _level_params(kernel, current_u, scale, sample, threshold, previous), int(count_seeds)
    ahead = DrawnAhead.start(kernel, params, current_u, int(lengths[0]) - first, rng)  # None: step by step
    n_accepted = n_proposed = n_queries = 0
    for step, state in enumerate(range(first, int(lengths[0])), start=1):  # a counted seed is state 0
        active = int(np.count_nonzero(lengths > state))  # a leading slice: lengths are sorted
        cur_u, cur_s, cur_k = current_u[:active], current_s[:active], current_k[:active]
        accept, calls = _move(kernel, params, cur_u, cur_s, cur_k, evaluate, rng, step, (threshold, threshold_key),
                              ahead)
        u[:active, state], score[:active, state], key[:active, state] = cur_u, cur_s, cur_k
        n_accepted, n_proposed, n_queries = n_accepted + int(accept.sum()), n_proposed + active, n_queries + calls
        params = checked_params(kernel, "adapted", kernel.adapted(params, accept.sum() / active, step))
    rate = n_accepted / n_proposed if n_proposed else math.nan
    parent = None if seeds_parent is None else np.asarray(seeds_parent)[order]
    population = Population(u=u, score=score, key=key, mask=mask, parent=parent, seed_score=seed_score)
    return population, ChainStats(rate, params.scale, n_queries, params)


def _level_params(kernel: Kernel, seeds_u: np.ndarray, scale: float, sample: tuple[np.ndarray, np.ndarray] | None,
                  threshold: float, previous: KernelParams | None = None) -> KernelParams:
    """The kernel's parameters for a level: tuned to its seeds, then fitted to ``sample`` when there is one."""
    params = checked_params(kernel, "tune", kernel.tune(seeds_u, scale))
    if sample is None:
        return params
    return checked_params(kernel, "fit", kernel.refit(previous, params, seeds_u, sample[0], sample[1], threshold))


def checked_params(kernel: Kernel, method: str, params: object) -> KernelParams:
    """``params`` if it is a :class:`KernelParams` with a finite scale > 0; an error naming the kernel's method otherwise.

    The scale is adapted on the log scale (:func:`scarce.kernels.adaptation.adapt_scale`), so a
    scale of 0, a negative or a non-finite one would fail there, far from the method that made it.
    """
    if not isinstance(params, KernelParams):
        from scarce.errors import ScarceError

        raise ScarceError(f"{type(kernel).__name__}.{method}() must return a KernelParams, got {type(params).__name__}")
    scale = params.scale
    if isinstance(scale, (bool, np.bool_)) or not isinstance(scale, (float, int, np.floating, np.integer)) or not (
            0.0 < scale < math.inf):
        from scarce.errors import ScarceError, show

        raise ScarceError(f"{type(kernel).__name__}.{method}() must return a KernelParams whose scale is a finite "
                          f"number > 0, got scale={show(scale)}")
    return params


def _check_candidates(kernel: Kernel, cur_u: np.ndarray, candidate: object, log_factor: object) -> None:
    """A kernel's proposal must be finite points like the states (and one log factor a state, or None).

    The kernels of this package are tested to propose such points; a user's kernel is checked
    here, so that a wrong width or a NaN names the kernel, not the model that received them.
    """
    from scarce.errors import ScarceError

    _check_points(kernel, "propose", candidate, cur_u.shape)
    if log_factor is not None and (not isinstance(log_factor, np.ndarray) or log_factor.shape != cur_u.shape[:1]
                                   or log_factor.dtype.kind not in "iuf"):
        got = f"shape {log_factor.shape}, dtype {log_factor.dtype}" if isinstance(log_factor, np.ndarray) else \
            type(log_factor).__name__
        raise ScarceError(f"{type(kernel).__name__}.propose_weighted's log factors must be None or a real array of "
                          f"shape ({cur_u.shape[0]},), got {got}")
    _refuse_nonfinite(kernel, "propose", candidate)  # type: ignore[arg-type]


def _check_points(kernel: Kernel, method: str, points: object, shape: tuple[int, ...],
                  dtype: np.dtype | None = None) -> None:
    """Candidates a kernel's ``method`` returned must be an array of ``shape``, of ``dtype`` (any float when None).

    Called on every step, so the message is built only when the check fails.
    """
    from scarce.errors import ScarceError

    if isinstance(points, np.ndarray) and points.shape == shape and (
            points.dtype.kind == "f" if dtype is None else points.dtype == dtype):
        return
    wanted = f"a float array of shape {shape} (one candidate per state)" if dtype is None else \
        f"candidates of shape {shape} and dtype {dtype}"
    got = f"shape {points.shape}, dtype {points.dtype}" if isinstance(points, np.ndarray) else type(points).__name__
    raise ScarceError(f"{type(kernel).__name__}.{method} must return {wanted}, got {got}")


def _refuse_nonfinite(kernel: Kernel, method: str, points: np.ndarray) -> None:
    """A kernel outside this package must return finite candidates (this package's are tested to)."""
    from scarce.errors import ScarceError

    if not _ours(kernel) and not np.isfinite(points).all():
        raise ScarceError(f"{type(kernel).__name__}.{method} returned non-finite candidates")


def _ours(kernel: object) -> bool:
    """Whether a kernel is this package's, and so is every kernel it wraps (a ``local`` one)."""
    for _ in range(8):  # a wrapper of a wrapper at most, in this package
        if kernel is None:
            return True
        if type(kernel).__module__.split(".")[0] != "scarce":
            return False
        kernel = getattr(kernel, "local", None)
    return False


def _states(seeds_u: np.ndarray, seeds_s: np.ndarray, seeds_k: np.ndarray, lengths: np.ndarray,
            count_seeds: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Empty state arrays ``(n_chains, longest, ...)`` with the seeds at state 0 when they count."""
    n_chains, dim = seeds_u.shape
    length = int(lengths[0])
    u = np.empty((n_chains, length, dim), dtype=seeds_u.dtype)
    score = np.full((n_chains, length), np.nan)
    key = np.full((n_chains, length), np.nan)
    mask = np.arange(length)[None, :] < lengths[:, None]
    if count_seeds:
        u[:, 0], score[:, 0], key[:, 0] = seeds_u, seeds_s, seeds_k
    return u, score, key, mask


def propose_moves(kernel: Kernel, params: KernelParams, cur_u: np.ndarray,
                  rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's candidates for the states ``cur_u``, and which of them can be accepted.

    A candidate can be accepted when it differs from its state and, for a kernel with a
    Metropolis-Hastings factor (:meth:`Kernel.propose_weighted`), when ``log U`` is below the
    factor for a fresh uniform ``U``; the caller then accepts it exactly when it lies in the
    level.  Only those candidates need a model call; kernels whose candidates move almost surely
    (aCS) skip the comparison with the state, a full pass over the batch.
    """
    candidate, log_factor = kernel.propose_weighted(cur_u, params, rng)
    _check_candidates(kernel, cur_u, candidate, log_factor)
    moved = np.ones(cur_u.shape[0], dtype=bool) if kernel.always_moves else np.any(candidate != cur_u, axis=1)
    if log_factor is not None:
        with np.errstate(divide="ignore"):  # log 0 = -inf: a uniform of exactly 0 accepts any finite factor
            moved &= np.log(rng.random(cur_u.shape[0])) < log_factor
    return candidate, moved


def _move(kernel: Kernel, params: KernelParams, cur_u: np.ndarray, cur_s: np.ndarray, cur_k: np.ndarray,
          evaluate: LatentEvaluate, rng: np.random.Generator, step: int,
          level: tuple[float, float], ahead: DrawnAhead | None = None) -> tuple[np.ndarray, int]:
    """One MCMC move of the active chains, in place; the accepted mask and the model calls made.

    A candidate is accepted exactly when it lies in the level (``level = (threshold, key)``);
    an unchanged candidate needs no model call (:func:`propose_moves`). The candidates come from
    ``ahead`` when the level's were drawn before its steps.
    """
    if ahead is None:
        candidate, moved = propose_moves(kernel, params, cur_u, rng)
    else:
        candidate, moved = ahead.propose(cur_u.shape[0], rng)
    cand_k = rng.random(cur_u.shape[0])
    cand_s, calls = cur_s.copy(), 0
    if moved.all():
        cand_s, calls = evaluate(candidate, step), cur_u.shape[0]
    elif moved.any():
        cand_s[moved] = evaluate(candidate[moved], step)
        calls = int(moved.sum())
    accept = moved & in_level(cand_s, cand_k, *level)
    cur_u[accept] = candidate[accept]
    cur_s[accept] = cand_s[accept]
    cur_k[accept] = cand_k[accept]
    if ahead is not None:
        ahead.accepted(accept)
    return accept, calls


#: Most values (``chains x steps x d``) of candidates drawn ahead at once: 32 MB in float64.
DRAW_AHEAD_VALUES = 1 << 22


class DrawnAhead:
    """A level's candidates drawn before its steps, for a kernel whose candidates ignore the states.

    :meth:`Kernel.draws_ahead` gives the candidates and their log importance weights ``log w``;
    each chain's ``log w`` is kept here as it moves, and a step's Metropolis-Hastings factor is
    ``log w(candidate) - log w(state)`` (``-inf`` where the state's is not finite: such a state
    is never moved). The candidates are drawn in blocks of steps of at most
    :data:`DRAW_AHEAD_VALUES` values.
    """

    def __init__(self, kernel: Kernel, params: KernelParams, states: np.ndarray, n_steps: int) -> None:
        self.kernel, self.params, self.dtype = kernel, params, states.dtype
        self.n_chains, self.dim, self.steps_left = states.shape[0], states.shape[1], n_steps
        self.block = max(1, DRAW_AHEAD_VALUES // max(1, self.n_chains * self.dim))
        self.candidates = np.empty((0, self.n_chains, self.dim), dtype=states.dtype)
        self.log_weights = np.empty((0, self.n_chains))
        self.position = 0
        self.state_weights = np.empty(0)
        self.last = self.log_weights[:0, :0]

    @classmethod
    def start(cls, kernel: Kernel, params: KernelParams, states: np.ndarray, n_steps: int,
              rng: np.random.Generator) -> DrawnAhead | None:
        """The level's first block of candidates, or None when the kernel proposes step by step."""
        if n_steps <= 0:
            return None
        ahead = cls(kernel, params, states, n_steps)
        if not ahead._draw(rng):
            return None
        ahead.state_weights = np.array(kernel.state_log_weights(params, states), dtype=float)
        if ahead.state_weights.shape != (ahead.n_chains,):
            from scarce.errors import ScarceError

            raise ScarceError(f"{type(kernel).__name__}.state_log_weights must return one log weight a state, "
                              f"shape ({ahead.n_chains},), got shape {ahead.state_weights.shape}")
        return ahead

    def _draw(self, rng: np.random.Generator) -> bool:
        steps = min(self.block, self.steps_left)
        drawn = self.kernel.draws_ahead(self.params, self.n_chains, steps, self.dim, self.dtype, rng)
        if drawn is None:
            return False
        if not isinstance(drawn, tuple) or len(drawn) != 2:
            from scarce.errors import ScarceError

            raise ScarceError(f"{type(self.kernel).__name__}.draws_ahead must return None or a pair (candidates, "
                              f"log weights), got {type(drawn).__name__}")
        candidates, log_weights = drawn
        _check_drawn(self.kernel, candidates, log_weights, (steps, self.n_chains, self.dim), self.dtype)
        self.candidates, self.log_weights = candidates, np.asarray(log_weights, dtype=float)
        self.position, self.steps_left = 0, self.steps_left - steps
        return True

    def propose(self, active: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """The next step's candidates for the first ``active`` chains, and which can be accepted."""
        if self.position == self.candidates.shape[0] and not self._draw(rng):
            from scarce.errors import ScarceError

            raise ScarceError(f"{type(self.kernel).__name__}.draws_ahead returned None after a first block")
        candidate = self.candidates[self.position, :active]
        self.last = self.log_weights[self.position, :active]
        self.position += 1
        state = self.state_weights[:active]
        # -inf - -inf: a candidate never accepted from a state never moved; log 0 = -inf: a uniform
        # of exactly 0 accepts any finite factor
        with np.errstate(invalid="ignore", divide="ignore"):
            log_factor = np.where(np.isfinite(state), self.last - state, -math.inf)
            moved = np.log(rng.random(active)) < log_factor
        return candidate, moved

    def accepted(self, accept: np.ndarray) -> None:
        """Carry the accepted candidates' log weights to their chains."""
        self.state_weights[:accept.size][accept] = self.last[accept]


def _check_drawn(kernel: Kernel, candidates: object, log_weights: object, shape: tuple[int, int, int],
                 dtype: np.dtype) -> None:
    """Candidates drawn ahead must be finite points of the states' dtype, with one log weight each."""
    from scarce.errors import ScarceError

    _check_points(kernel, "draws_ahead", candidates, shape, dtype)
    if not isinstance(log_weights, np.ndarray) or log_weights.shape != shape[:2]:
        raise ScarceError(f"{type(kernel).__name__}.draws_ahead must return log weights of shape {shape[:2]}, got "
                          f"{getattr(log_weights, 'shape', type(log_weights).__name__)}")
    _refuse_nonfinite(kernel, "draws_ahead", candidates)  # type: ignore[arg-type]
