r"""Subset Simulation with the exact terminal event and tie-aware levels.

.. math:: \hat P_f = \prod_{l=1}^{L-1} \hat p_l \cdot \frac{K_L}{N},
          \qquad \hat p_l = \frac{\#\{\text{score} \ge \gamma_l\}}{N}.

Decisions (the documentation's Concepts page, "What makes the estimate correct"): a sample
that truly failed gets the effective score ``+inf``, so it always survives and the last level is
the failure event itself; the level boundary is the ``(p0 N + 1)``-th largest sample, ties split
by an independent uniform key per evaluated point, and the level probability is the counted
fraction above it (:mod:`scarce.levels` says why this makes the product of fractions unbiased
where a threshold at the ``p0 N``-th sample is not); a level whose samples all share one score
(a plateau) cannot rise, so the failure event is its next level and the run ends there with the
failures it holds, flagged ``status="stalled"`` when there are none (never resampled until a
failure appears: that retry selects the runs that found one and biases the estimate upward);
all chains advance together with one batched model call per MCMC step.

Level 0 is a Latin hypercube in the latent space (``first_level="lhs"``): each point is exactly
N(0, I), so nothing downstream changes, but the first threshold is placed more precisely. The
gain is largest for nearly additive scores; Latin hypercube sampling is never much worse than
independent sampling (Owen 1997). The reported CoV follows: level 1's term uses the residual
variance the design leaves (the indicator's variance less its main effects, Stein 1987), estimated
from level 0 itself by :func:`scarce.envelope.latin_hypercube_variance` and never above the
independent-sample term.

The last level (``stop_factor``). The classic rule runs levels until ``p0 * N`` samples have
failed. When a level's failure fraction ``f`` falls just short of ``p0``, one more level costs
``N - p0 N`` model calls to estimate a factor near 1, while stopping adds
``(1 - f) / (N f) (1 + gamma)`` to the variance of ``log P_hat``, hardly more than any intermediate level
adds. So a run ends as soon as ``stop_factor * p0 * N`` samples have failed (default 0.5), but
never on fewer than 50 failures (:func:`scarce.levels.failures_to_stop`), counted as effective
draws: failures along Markov chains cluster (a chain that enters the failure set tends to stay,
and a score that orders the failures only partly leaves them in a few lineages), and a clustered
count can reach the bar on a level whose failure probability is far below it, which then ends
the run on an estimate several times the truth. An early stop therefore needs
``n_failed / (1 + max(gamma, 0)) >= min(p0 N, 50)``, ``gamma`` the chains' Au-Beck factor of the
failure indicator (:func:`scarce.levels.early_stop_allowed`); a level with ``p0 N`` failures or more
stops as in the classic rule.

Which samples a level counts (``count_seeds``). A level's ``p0 N`` seeds are its chains'
starting points. Au and Beck count each seed as its chain's first state (``N - p0 N`` model
calls a level); OpenTURNS moves every seed once and counts only the moves (``N`` calls). The
seeds of level 1 are independent draws of level 0, so counting them is free; from level 2 on
they are Markov chain states that already counted one level down, often several copies of one
state (a rejected move repeats it), and counting them again carries that level's clumps into
the next threshold. The default ``"independent"`` counts seeds only when they are independent
draws.

The reported CoV (``cov_depth``, :func:`scarce.envelope.lineage_variance`) groups chains by
their ancestor one level up: chains grown from seeds of the same parent chain start close
together, which the Au-Beck formula (chains independent, levels uncorrelated) ignores. A deep
run carries correlation further: where the population leans towards one route to the failure
more than its share, the lean passes from level to level, and the cross terms between levels
far apart add up. Depth 1 misses them; grouping every chain by its level-0 ancestor sees them,
with the jackknife's correction for the few ancestors a deep genealogy keeps. On a short run
there is little of that correlation, and the ancestors' sums only add noise, so the default
``"auto"`` groups by level-0 ancestors once the intermediate levels reach
:data:`DEEP_RUN_PROBABILITY`, ten levels at ``p0 = 0.1`` (at 0.2 and 0.5, whose levels are
more and whose genealogies coalesce sooner, the jackknife over-reports on the linear problem
at ten levels, while depth 1 holds there). The ancestors' variance is a sum over those few
ancestors, so it is an estimate of one or two degrees of freedom on a deep run, and it falls
below depth 1's about as often as such an estimate lies well below its mean: the run then
reports depth 1's, and what the ancestors add above depth 1's takes their degrees of freedom
(:func:`scarce.envelope.ancestor_degrees_of_freedom`; Satterthwaite's combination with depth
1's). That variance, like Au and Beck's sum, is one of ``log P_hat`` (each level adds a relative error),
and the CoV reported is the one it implies for ``P_hat``, ``sqrt(exp(s^2) - 1)``
(:func:`scarce.envelope.lognormal_cov`). Its level terms need enough chains, hence the default
level probability (:func:`scarce.levels.auto_level_probability`).

Failures below a boundary. Where the score orders the failure set only partly, a chain can
find a failure whose own score lies below the next level's boundary. That part of the failure
set is then in every later level only through those failures and their copies, so the estimate
inherits their count's sampling error, which neither the level fractions (fixed at ``p0`` by
the quantile) nor the genealogy shows. For each Markov-chain level ``j`` whose chains, started
from non-failed seeds, found ``b_j`` such failures, the count's variance
``(P_hat(L_j) / N)^2 b_j (1 + gamma_b)`` is summed; the reported CoV is the larger of the
genealogy's and ``sqrt(sum) / P_hat`` (``info["cov_below_boundary"]``). A score that orders the
failures never has one below a boundary, and its CoV is unchanged.

The measurements behind each default are on the documentation's benchmark page "The engine
under hostile scores, and its sampler".

References: Au and Beck (2001), Probabilistic Engineering Mechanics 16(4);
Papaioannou et al. (2015), Probabilistic Engineering Mechanics 41; the SCARCE
paper, Algorithm 1 and Section 4.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from scarce._rows import row_keys
from scarce.envelope import (
    ancestor_degrees_of_freedom,
    chain_correlation_factor,
    combine_cov,
    kish_effective_number,
    latin_hypercube_variance,
    level_cov,
    lineage_variance,
    lognormal_cov,
    satterthwaite_degrees_of_freedom,
)
from scarce.checks import check_choice, check_flag, check_in_interval, check_positive_int, warn_user
from scarce.errors import (
    BudgetExhaustedWarning,
    FewChainsWarning,
    LowAcceptanceWarning,
    ScarceError,
    StalledLevelWarning,
    ThinEvidenceWarning,
)
from scarce.estimators.base import (
    MAX_LEVEL_BYTES,
    CountedEvaluation,
    Estimator,
    build_result,
    call_back,
    check_callback,
    check_memory,
    effective_scores,
)
from scarce.estimators.chains import ChainStats, Population, run_chains
from scarce.kernels import ConditionalSampling, Kernel
from scarce.levels import (
    MIN_CHAINS_PER_LEVEL,
    MIN_PROBABILITY,
    ThresholdChoice,
    below_floor_message,
    check_level_sizes,
    early_stop_allowed,
    failures_to_stop,
    n_seeds_target,
    next_threshold,
    resolve_level_probability,
    stop_before_level,
)
from scarce.normals import check_dtype, standard_normal
from scarce.problem import RareEventProblem
from scarce.results import EstimateResult, LevelDiagnostics, LevelState
from scarce.seeding import SeedLike

LevelCallback = Callable[[LevelDiagnostics], None]

_FIRST_LEVELS = ("lhs", "mc")
#: Values of ``SubsetSimulation(count_seeds=...)``.
COUNT_SEEDS_RULES = ("independent", "always", "never")


def latin_hypercube_normal(n: int, dim: int, rng: np.random.Generator, block: int = 1 << 22) -> np.ndarray:
    """``n`` Latin-hypercube points of N(0, I_dim): each coordinate takes one value in each of ``n``
    equiprobable strata, in random order; every point is exactly N(0, I) distributed.

    Built in blocks of coordinates so the temporary arrays stay near ``block`` entries.
    """
    from scipy.special import ndtri

    u = np.empty((n, dim))
    width = max(1, block // max(n, 1))
    for lo in range(0, dim, width):
        hi = min(dim, lo + width)
        strata = rng.permuted(np.tile(np.arange(n, dtype=float), (hi - lo, 1)), axis=1).T
        strata += rng.random((n, hi - lo))
        strata /= n
        # a uniform draw of exactly 0 would give -inf
        np.clip(strata, np.nextafter(0.0, 1.0), np.nextafter(1.0, 0.0), out=strata)
        u[:, lo:hi] = ndtri(strata)
    return u


#: Under ``cov_depth="auto"`` a run reports the variance over level-0 ancestors (``"all"``) when its
#: intermediate levels reach this probability, ``p0^K <= DEEP_RUN_PROBABILITY`` for ``K`` levels
#: between level 0 and the failure level (or the last level of a run stopped short of it): ten
#: levels in all at ``p0 = 0.1``. Shorter runs: depth 1.
DEEP_RUN_PROBABILITY = 1e-8


def check_cov_depth(depth: object) -> int | str:
    """Validate ``cov_depth``: an integer >= 0, ``"all"`` (the whole genealogy, with the jackknife) or ``"auto"``."""
    if isinstance(depth, str):
        if depth not in ("all", "auto"):
            raise ScarceError(f"cov_depth must be an integer >= 0, 'all' or 'auto', got {depth!r}")
        return str(depth)  # a plain str, also for a numpy string
    try:
        return check_positive_int("cov_depth", depth, minimum=0)
    except ScarceError as error:
        raise ScarceError(f"{error} (or 'all' or 'auto')") from None


def check_count_seeds(rule: object) -> str:
    """Validate a ``count_seeds`` rule (one of :data:`COUNT_SEEDS_RULES`) and return it."""
    return check_choice("count_seeds", rule, COUNT_SEEDS_RULES)


class SubsetSimulation(Estimator):
    """Subset Simulation estimator of a rare failure probability.

    Parameters
    ----------
    n_samples : int
        ``N``, samples per level.
    level_probability : float or "auto"
        Target conditional probability ``p0`` in (0, 0.5]; ``N * p0 >= 1``. ``"auto"`` (default)
        keeps at least 100 Markov chains a level: ``min(0.5, max(0.1, 100 / N))``, which is the
        classic 0.1 from ``N = 1000`` on (:func:`scarce.levels.auto_level_probability` says why).
        A run with fewer than 100 chains a level warns (:class:`~scarce.errors.FewChainsWarning`)
        and is flagged: its reported CoV can fall short on deep runs.
    kernel : Kernel, optional
        MCMC move; :class:`~scarce.kernels.ConditionalSampling` by default.
    max_levels : int
        Stop (flagged, ``status="max_levels"``) after this many levels, or before a level whose
        running probability would fall below :data:`scarce.levels.MIN_PROBABILITY` (1e-305).
    max_queries : int, optional
        Query budget; a level that would exceed it is not started and the partial
        result is returned, flagged ``status="budget"``.
    first_level : {"lhs", "mc"}
        How the ``N`` samples of level 0 are drawn: a Latin hypercube in the latent
        space (default; every sample is still exactly N(0, I); for nearly additive
        scores the first threshold is much more precise, otherwise about as precise
        as with independent draws), or plain independent Monte Carlo.
    dtype : {"float64", "float32"}
        Precision of the latent states. float32 halves the memory traffic of the chains and
        draws the normals by a vectorised Box-Muller transform several times faster than numpy's
        ziggurat (:mod:`scarce.normals`); meant for high-dimensional latents such as images,
        where those draws dominate the engine's own time. The problem's ``transform`` and
        ``evaluate`` then receive float32 arrays; levels, scores and estimates stay float64.
    cov_depth : int, "all" or "auto"
        Genealogy depth of the reported CoV (:func:`scarce.envelope.lineage_variance`):
        chains grown from a common ancestor up to ``cov_depth`` levels back are
        treated as correlated, within a level and across levels; and at least back to the
        level whose population held the first failure, whose descendants the last level's
        failures are.  0 gives the variance of the
        Au-Beck formula (chains independent, levels uncorrelated; its square root is
        ``info["cov_au_beck"]``, on the scale of ``log P_hat``; level 1's term from the Latin
        hypercube when level 0 is one, as in every CoV this class reports).
        ``"all"`` groups every chain by its level-0 ancestor, the only independent draws of a
        run, with the jackknife's correction for groups that hold much of a level: it sees
        correlation that a run carries over many levels (a population that keeps more or
        fewer states on one route to the failure than its share, level after level).
        ``"auto"`` (default) takes ``"all"`` for runs whose intermediate levels reach
        :data:`DEEP_RUN_PROBABILITY` (ten levels at ``p0 = 0.1``) and 1 for shorter ones: over a
        few levels there is little such correlation to see and
        the ancestors' sums are noisier than depth 1's, while on a run a dozen levels deep on a
        real network depth 1 falls well short of the spread (module notes; the engine benchmark
        page, "The whole genealogy by default on deep runs").
        ``info["cov_depth_used"]`` says which a run took. Over the whole genealogy the variance is
        at least depth 1's, and its part above depth 1's takes the degrees of freedom of the few
        level-0 ancestors that carry it, which widens the interval of a deep run whose
        ancestors' sum came out large. Either way the CoV is at least that of the failures
        found below a level's boundary (module notes).
    stop_factor : float
        In (0, 1]. The run ends at the first level at which at least
        ``stop_factor * p0 * N`` samples have failed, and never fewer than 50 (or
        ``p0 * N`` where that is smaller: a stop at a handful of failures selects the
        populations whose count came out high) in effective draws along the chains below ``p0 * N`` failures
        (:func:`scarce.levels.early_stop_allowed`); their fraction is the last factor of
        the estimate. 1 is the classic rule; the default 0.5 saves a level of model
        calls in some runs (module notes). A stop refused for too few effective draws goes on
        with an ordinary level, and under ``max_queries`` that level can be the one the budget
        refuses: the run then ends as a flagged partial result where the count alone would
        have ended it converged.
    count_seeds : {"independent", "always", "never"}
        Whether a level's seeds count among its ``N`` samples. ``"always"``: each seed
        is its chain's first state and the level costs ``N - p0 N`` model calls (Au and
        Beck; Papaioannou et al.). ``"never"``: every counted state is an MCMC move, ``N``
        calls (OpenTURNS). ``"independent"`` (default): seeds count when they are
        independent draws (level 1, seeded from level 0) and are only moved from when
        they are Markov chain states (module notes).

    allow_large : bool
        Run a configuration whose latent states need more than :data:`MAX_LEVEL_BYTES` per level
        (refused by default, before any model call, so a typo in ``n_samples`` cannot exhaust
        the machine's memory).

    Examples
    --------
    >>> from scarce.problems import linear
    >>> result = SubsetSimulation(n_samples=1000).estimate(linear(dim=10, probability=1e-4), seed=0)
    >>> result.reached_failure, 3e-5 < result.probability < 3e-4
    (True, True)
    """

    method = "subset_simulation"

    def __init__(
        self,
        n_samples: int = 2000,
        level_probability: float | str = "auto",
        kernel: Kernel | None = None,
        max_levels: int = 50,
        max_queries: int | None = None,
        first_level: str = "lhs",
        cov_depth: int | str = "auto",
        dtype: str = "float64",
        stop_factor: float = 0.5,
        count_seeds: str = "independent",
        allow_large: bool = False,
    ) -> None:
        self.n_samples = n_samples
        self.level_probability = level_probability
        self.kernel = kernel
        self.max_levels = max_levels
        self.max_queries = max_queries
        self.first_level = first_level
        self.cov_depth = cov_depth
        self.dtype = dtype
        self.stop_factor = stop_factor
        self.count_seeds = count_seeds
        self.allow_large = allow_large

    def _validated(self) -> SubsetSimulation:
        """A copy holding the validated settings as plain Python values and the kernel resolved.

        NumPy scalars pass the validators but would overflow in small dtypes (``np.int16``) or
        break JSON; the copy keeps what the validators return.
        """
        n, p0 = check_level_sizes(self.n_samples, resolve_level_probability(self.n_samples, self.level_probability))
        first_level = check_choice("first_level", self.first_level, _FIRST_LEVELS)
        max_queries = None
        if self.max_queries is not None:
            max_queries = check_positive_int("max_queries", self.max_queries)
            if max_queries < n:
                raise ScarceError(f"max_queries must be at least n_samples={n} (the first level), got {max_queries}")
        kernel = ConditionalSampling() if self.kernel is None else self.kernel
        if not isinstance(kernel, Kernel):
            raise ScarceError(f"kernel must be a scarce.kernels.Kernel, got {type(kernel).__name__}")
        kernel.check_settings()
        return SubsetSimulation(
            n_samples=n,
            level_probability=p0,
            kernel=kernel,
            max_levels=check_positive_int("max_levels", self.max_levels),
            max_queries=max_queries,
            first_level=first_level,
            cov_depth=check_cov_depth(self.cov_depth),
            dtype=check_dtype(self.dtype).name,
            stop_factor=check_in_interval("stop_factor", self.stop_factor, 0.0, 1.0),
            count_seeds=check_count_seeds(self.count_seeds),
            allow_large=check_flag("allow_large", self.allow_large),
        )

    def _check_memory(self, dim: int) -> None:
        """Refuse a level whose latent states alone exceed :data:`MAX_LEVEL_BYTES` (unless ``allow_large``)."""
        # a level's states, plus the candidates and seeds of one MCMC step
        check_memory(2 * self.n_samples, dim, self.dtype, self.allow_large, f"n_samples={self.n_samples}")

    def iter_levels(self, problem: RareEventProblem, seed: SeedLike = None) -> Iterator[LevelState]:
        """Run level by level: a frozen :class:`~scarce.results.LevelState` after each level.

        The first state is level 0 (the independent draws); the last has ``done=True`` and the
        run's :class:`EstimateResult` in ``result``.  Between states nothing runs, so a caller
        may watch the running estimate and Ville's anytime-valid bound
        (``state.envelope_lower(delta)``) and stop early; the bound stays valid whenever it stops.
        The settings and the problem are checked here, before any model call.

        >>> from scarce.problems import linear
        >>> states = list(SubsetSimulation(n_samples=500).iter_levels(linear(dim=5, probability=1e-3), seed=0))
        >>> [s.level for s in states][:3], states[-1].done, states[-1].result.reached_failure
        ([0, 1, 2], True, True)
        """
        cfg, problem, rng = self._prepare(problem, seed)
        cfg._check_memory(problem.dim)
        return self._states(cfg, problem, rng, seed)

    def _states(self, cfg: SubsetSimulation, problem: RareEventProblem, rng: np.random.Generator,
                seed: SeedLike) -> Iterator[LevelState]:
        run = _Run(cfg, problem, rng)
        for diagnostics, n_queries, last in run.levels():
            result = self._result(run, cfg, problem, seed) if last else None
            yield LevelState(diagnostics, n_queries, cfg.n_samples, done=last, result=result)

    def estimate(
        self,
        problem: RareEventProblem,
        seed: SeedLike = None,
        callback: LevelCallback | None = None,
    ) -> EstimateResult:
        """Estimate ``problem``'s failure probability: :meth:`iter_levels` run to its end.

        Parameters
        ----------
        problem : RareEventProblem
        seed : int, SeedSequence, Generator or None
        callback : callable, optional
            Called with each finished level's :class:`LevelDiagnostics` (progress bars).

        Returns
        -------
        EstimateResult
            ``status`` says why the run stopped; ``reached_failure`` is False for a
            partial result, whose ``probability`` is the last level's probability
            times its failure fraction (0 when it holds no failure).
        """
        check_callback(callback)
        for state in self.iter_levels(problem, seed):
            call_back(callback, state.diagnostics)
        assert state.result is not None  # the last state carries it
        return state.result

    def _result(self, run: _Run, cfg: SubsetSimulation, problem: RareEventProblem, seed: SeedLike) -> EstimateResult:
        """The finished run as an :class:`EstimateResult` (warns when its evidence is thin)."""
        out = build_result(
            self, problem.name, seed, run.outcome,
            n_samples=cfg.n_samples,
            level_probability=cfg.level_probability,
            interval="lognormal",
            info={
                "kernel": repr(cfg.kernel),
                "max_queries": cfg.max_queries,
                "first_level": cfg.first_level,
                "cov_depth": cfg.cov_depth,
                "cov_depth_used": run.cov_depth_used,
                "dtype": cfg.dtype,
                "stop_factor": cfg.stop_factor,
                "count_seeds": cfg.count_seeds,
                "cov_au_beck": run.cov_au_beck,
                "failure_lineages": run.failure_lineages,
                "failure_origin_chains": run.origin_chains,
                "failure_origin_level": run.origin_level,
                "failure_lineages_effective": run.effective_lineages,
                "failures_found": run.failures_found,
                "failures_below_boundary": run.failures_below,
                "cov_below_boundary": run.cov_below_boundary,
                "cov_degrees_of_freedom": run.degrees_of_freedom,
                "chains_per_level": n_seeds_target(cfg.n_samples, cfg.level_probability),
            },
        )
        if out.few_chains:
            warn_user(
                f"{out.info['chains_per_level']} Markov chains a level (n_samples={cfg.n_samples} x "
                f"level_probability={cfg.level_probability:g}), fewer than {MIN_CHAINS_PER_LEVEL}: on a run several "
                "levels deep the reported CoV can fall short of the estimate's spread; level_probability='auto' "
                f"keeps {MIN_CHAINS_PER_LEVEL} where n_samples >= {2 * MIN_CHAINS_PER_LEVEL}, or raise n_samples",
                FewChainsWarning)
        if out.thin_evidence:
            _warn_thin(run, out.thin_evidence_reason)
        return out


def _raw_scores(stored_u: list[np.ndarray], stored_raw: list[np.ndarray], points: np.ndarray) -> np.ndarray:
    """The model's own score of each of ``points`` (failed states), looked up among the stored failed
    points by their bytes (``+inf`` for one not found); sorting and binary search, no Python loop."""
    if not points.size or not stored_u:
        return np.full(points.shape[0], math.inf)
    known, raw = np.concatenate(stored_u), np.concatenate(stored_raw)
    known_keys, point_keys = row_keys(known), row_keys(points.astype(known.dtype, copy=False))
    order = np.argsort(known_keys, kind="stable")
    sorted_keys = known_keys[order]
    at = np.minimum(np.searchsorted(sorted_keys, point_keys), sorted_keys.size - 1)
    return np.where(sorted_keys[at] == point_keys, raw[order][at], math.inf)


def _warn_thin(run: _Run, reason: str | None) -> None:
    if reason == "order":
        why = (f"{run.failures_below} of the {run.failures_found} failures the chains found scored below the "
               f"boundary of their level, and the first appeared at level {run.origin_level}: the score does not "
               "order the failure set, so the earlier levels could hold failures their chains did not find, and "
               "how many a run misses cannot be measured from it (more samples a level, n_samples, or a score "
               "that orders the failures leave fewer runs in this state)")
    else:
        why = (f"the failures of the last level descend from {run.failure_lineages} of the {run.origin_chains} "
               f"chain(s) of level {run.origin_level}, the first that held one: the estimate rests on a few lucky "
               "chains, not on a score that led the chains to the failure, and its error cannot be measured from "
               "this run")
    warn_user(why + "; its interval falls back on the first level's independent draws", ThinEvidenceWarning)


def _stall_message(level: int, population: Population) -> str:
    """Why a level could not rise, for the warning of a run that ends with estimate 0."""
    scores = population.flat_scores()
    if scores.min() == scores.max():
        why = f"every sample shares the score {scores[0]:.6g}"
    else:
        why = f"its highest samples are copies of one state (score {scores.max():.6g}) the chains could not leave"
    return (
        f"Subset Simulation stalled at level {level}: {why}, so no level can rise, and none of its "
        f"{scores.size} samples failed; the estimate is 0 and the interval rests on the first level's independent draws"
    )


@dataclass
class _Level:
    """Bookkeeping of the level being built."""

    threshold: float
    population: Population
    stats: ChainStats | None


class _Run:
    """One execution of Subset Simulation (keeps ``estimate`` free of loop state)."""

    def __init__(
        self,
        config: SubsetSimulation,
        problem: RareEventProblem,
        rng: np.random.Generator,
    ) -> None:
        self.config, self.kernel, self.problem, self.rng = config, config.kernel, problem, rng
        self.n_samples = config.n_samples
        self.counted = CountedEvaluation(problem)
        self.level_index = 0
        self.diagnostics: list[LevelDiagnostics] = []
        self.level_covs: list[float] = []
        self.cov_au_beck = math.inf
        # squared-CoV change of level 1 when level 0 is a Latin hypercube (<= 0; see _level_cov)
        self.first_level_correction = 0.0
        # per level: (residual hits per chain, parent chain per chain or None, level probability)
        self.lineage: list[tuple[np.ndarray, np.ndarray | None, float]] = []
        # the boundary of the level being populated, and the failures the chains found there:
        # all of them, and those whose own score lies below that boundary (_count_failures)
        self.boundary = -math.inf
        self.failures_found = self.failures_below = 0
        # the failed points evaluated since the last level ended, and the current population's
        # failures, with the model's own scores (a failure's effective score is +inf)
        self.failed_u: list[np.ndarray] = []
        self.failed_raw: list[np.ndarray] = []
        # sum over Markov-chain levels of (P_hat(L_j) / N)^2 b_j (1 + gamma_b): the sampling
        # variance of the failures found below the next boundary (_below_boundary_term)
        self.below_boundary_variance = 0.0
        self.cov_below_boundary = 0.0
        # the genealogy's variance and depth 1's part of it (_reported_genealogy_variance)
        self.genealogy_variance = self.short_variance = 0.0

    def _record_lineage(self, population: Population, indicator: np.ndarray, probability: float) -> None:
        hits = np.where(population.mask, indicator, False).sum(axis=1)
        residual = hits - probability * population.mask.sum(axis=1)
        self.lineage.append((residual, population.parent, probability))

    @property
    def n_queries(self) -> int:
        return self.counted.n_queries

    def evaluate(self, u: np.ndarray, step: int) -> np.ndarray:
        """Effective scores of one batch (one model call, counted): ``+inf`` where the point failed."""
        score, failed = self.counted(u, f"at level {self.level_index}" + (f", MCMC step {step}" if step else ""))
        if self.level_index > 0:
            self._count_failures(score, failed)
        failed = np.asarray(failed, dtype=bool)
        if failed.any():
            self.failed_u.append(u[failed])
            self.failed_raw.append(np.asarray(score, dtype=float)[failed])
        return effective_scores(score, failed)

    def _count_failures(self, score: np.ndarray, failed: np.ndarray) -> None:
        """Count the failures a Markov-chain level found, and those its boundary alone would have refused.

        A failure whose own score lies below the boundary of the level its chain moves in is in that
        level only as the exact terminal event: the score does not order the failure set (it reaches
        below the levels), so earlier levels could have held failures that their chains did not find.
        """
        found = np.asarray(failed, dtype=bool)
        if found.any():
            self.failures_found += int(np.count_nonzero(found))
            self.failures_below += int(np.count_nonzero(np.asarray(score)[found] < self.boundary))

    def _first_level(self) -> _Level:
        """Level 0: ``N`` independent (or Latin-hypercube) draws, evaluated in one call."""
        n, dtype = self.n_samples, check_dtype(self.config.dtype)
        if self.config.first_level == "lhs":
            u0 = latin_hypercube_normal(n, self.problem.dim, self.rng).astype(dtype, copy=False)
        else:
            u0 = standard_normal(self.rng, (n, self.problem.dim), dtype)
        s0 = self.evaluate(u0, 0)
        population = Population.from_independent(u0, s0, self.rng.random(n))
        level = _Level(threshold=-math.inf, population=population, stats=ChainStats(math.nan, math.nan, n))
        # ancestor of each chain at the first level whose population held a failure (the reference)
        self.origin, self.origin_fixed = np.arange(n), level.population.n_failed() > 0
        self.origin_chains, self.origin_level = n, 0  # chains and index of the reference level
        self.diagnostics.append(LevelDiagnostics(0, -math.inf, 1.0, 1.0, 0, 0.0, 0.0, n, level.population.n_failed()))
        return level

    def _stop_reason(self, cost: int, probability: float) -> str | None:
        """Why the next level, of running ``probability``, must not start (``max_levels``, also below
        :data:`~scarce.levels.MIN_PROBABILITY`, or the query budget), with a warning."""
        cfg = self.config
        if probability < MIN_PROBABILITY:
            warn_user(below_floor_message(f"the next level's probability, {probability:.3g},") + ", with its upper bound",
                      BudgetExhaustedWarning)
            return "max_levels"
        reason = stop_before_level(self.level_index + 1, cfg.max_levels, self.n_queries, cost, cfg.max_queries)
        if reason == "max_levels":
            warn_user(f"max_levels={cfg.max_levels} reached before the failure event, the levels risen to a "
                      f"score of {self.diagnostics[-1].threshold:.6g}: check that the score grows towards the "
                      f"failure (larger is closer), or, for a failure rarer than level_probability**max_levels "
                      f"= {cfg.level_probability ** cfg.max_levels:.2g}, raise max_levels",
                      BudgetExhaustedWarning)
        elif reason == "budget":
            warn_user(
                f"max_queries={cfg.max_queries} would be exceeded by level {self.level_index + 1} "
                f"({self.n_queries} used, {cost} needed); returning a partial result",
                BudgetExhaustedWarning)
        return reason

    def levels(self) -> Iterator[tuple[LevelDiagnostics, int, bool]]:
        """Build the levels one at a time: ``(diagnostics, model calls so far, last)`` for each.

        A level is handed out once the next threshold is chosen (no model call), so whether it is
        the last is known, and the next level's model calls are made only when the caller asks
        for it.  Before the last one is handed out, :attr:`outcome` holds the result's fields.
        """
        start = time.perf_counter()
        cfg, n = self.config, self.n_samples
        level = self._first_level()
        min_failures = failures_to_stop(n, cfg.level_probability, cfg.stop_factor)
        cumulative, scale = 1.0, self.kernel.initial_scale
        while True:
            pop = level.population
            built = (self.diagnostics[-1], self.n_queries)
            choice = self._choose_level(pop, min_failures)
            indicator = choice.contains(pop.score, pop.key)
            gamma = chain_correlation_factor(indicator, level.population.mask)
            delta = self._level_cov(level, indicator, choice.probability, gamma)
            if choice.is_failure_level:
                cumulative *= choice.probability
                self._add_level(choice, level, cumulative, gamma, delta, final=True)
                status = "converged"
                if choice.stalled and choice.n_above == 0:
                    status = "stalled"
                    warn_user(_stall_message(self.level_index - 1, pop), StalledLevelWarning)
                else:
                    self._record_lineage(level.population, indicator, choice.probability)
                self.outcome = self._finish(level, cumulative, status, start)
                yield (*built, False)
                yield self.diagnostics[-1], self.n_queries, True
                return
            reason = self._stop_reason(n - choice.n_above if self._counts_seeds(level.population) else n,
                                       cumulative * choice.probability)
            if reason is not None:
                self.outcome = self._finish(level, cumulative, reason, start)
                yield (*built, True)
                return
            yield (*built, False)
            self._below_boundary_term(level.population, choice.threshold, cumulative)
            self._record_lineage(level.population, indicator, choice.probability)
            level, scale = self._next_level(level, choice, scale)
            cumulative *= choice.probability
            self._add_level(choice, level, cumulative, gamma, delta)

    def _below_boundary_term(self, population: Population, boundary: float, probability: float) -> None:
        r"""Add the sampling variance of the failures found below the next boundary.

        A failure is in every later level only as the exact terminal event. When its own score
        lies below the next boundary, no later level's chains start near it but its own, so the
        failure set's mass there is represented from here on by the ``b_j`` such failures this
        level's chains found and by their copies: the later levels copy that count rather than
        sample it afresh, and the estimate inherits its sampling error, which neither the level's
        fraction (fixed at ``p0`` by the quantile) nor the genealogy of the last failures shows.
        Its variance is Au and Beck's term for the count, ``(P_hat(L_j) / N)^2 b_j (1 + gamma_b)``,
        ``gamma_b`` the correlation factor of the indicator along the chains. Only failures found by
        chains that did not start from a failure count: a failure's own chain carries copies of its
        mass, not a new sample of it. Level 0 adds no term: its failures are independent draws that
        level 1's chains sample afresh (most of level 1's failures are new finds). :meth:`_finish`
        reports the larger of this CoV and the genealogy's. A score that orders the failures never
        has one below a boundary, so its runs are unchanged.
        """
        failed = np.isposinf(np.where(population.mask, population.score, 0.0))
        points = population.u[failed]
        raw = _raw_scores(self.failed_u, self.failed_raw, points)
        self.failed_u, self.failed_raw = [points], [raw]  # what the next level's seeds can carry
        if self.level_index == 0 or population.seed_score is None or not points.size:
            return
        below = np.zeros_like(failed)
        below[failed] = raw < boundary
        below &= ~np.isposinf(population.seed_score)[:, None]
        if below.any():
            gamma = chain_correlation_factor(below, population.mask)
            self.below_boundary_variance += (probability / self.n_samples) ** 2 * int(below.sum()) * (1.0 + gamma)

    def _level_cov(self, level: _Level, indicator: np.ndarray, probability: float, gamma: float) -> float:
        """The CoV ``delta_l`` of the fraction of ``level``'s population above the next boundary.

        Au-Beck's term, except above a Latin-hypercube level 0: there the first boundary is
        placed more precisely than independent draws would place it, by as much as the
        indicator's main effects explain (:func:`scarce.envelope.latin_hypercube_variance`), and
        the binomial ``p (1 - p)`` is replaced by that estimate of the residual variance. Level
        0's error is uncorrelated with the later levels' (their lineage terms against it sum to
        zero), so the same change applies to the genealogy's variance
        (:attr:`first_level_correction`).
        """
        n = self.n_samples
        if self.level_index > 0:
            return level_cov(probability, n, gamma)
        # level 0: this indicator's term replaces any earlier one (a run stopped here counts failures)
        self.first_level_correction = 0.0
        if self.config.first_level != "lhs" or not 0.0 < probability < 1.0:  # the binomial term
            return level_cov(probability, n, gamma)
        pop = level.population  # level 0: independent draws, one state a chain; a view, not a copy of N x d
        variance = latin_hypercube_variance(pop.u[:, 0] if pop.independent else pop.flat_u(), indicator.ravel())
        self.first_level_correction = (variance - probability * (1.0 - probability)) / (n * probability**2)
        return math.sqrt(variance / (n * probability**2))

    def _choose_level(self, pop: Population, min_failures: int) -> ThresholdChoice:
        """The next level of ``pop``: the rule of :func:`scarce.levels.next_threshold` at ``p0``.

        An early stop (at least ``min_failures`` failures but fewer than ``m = p0 N``, so that
        ``stop_factor = 1`` stays the classic rule) needs ``min(m, 50)`` failures in effective
        draws along the chains (:func:`scarce.levels.early_stop_allowed`); without them the level is an ordinary one,
        unless every sample that did not fail shares one score: no boundary can then rise, and
        the failures' fraction is the last factor either way (refusing the stop would only
        mark the level stalled). One seam for the level rule: the splitting benchmark replaces
        it with a rule that picks ``p0`` per level from the population's chains, to measure that
        rule against this one.
        """
        scores, p0 = pop.flat_scores(), self.config.level_probability
        failed = np.isposinf(np.where(pop.mask, pop.score, 0.0))
        n_failed, m = int(np.count_nonzero(failed)), n_seeds_target(self.n_samples, p0)
        if min_failures <= n_failed < m < scores.size:  # m failures or more: the classic rule's stop
            finite = scores[~np.isposinf(scores)]
            if finite.min() < finite.max() and not early_stop_allowed(
                    n_failed, chain_correlation_factor(failed, pop.mask), self.n_samples, p0):
                min_failures = m + 1  # the classic rule alone
        return next_threshold(scores, p0, min_failures, keys=pop.flat_keys())

    def _finish(self, level: _Level, cumulative: float, status: str, start: float) -> dict:
        """The estimate, its CoV and the evidence behind it, from the last population."""
        cfg, n, last = self.config, self.n_samples, level.population
        converged = status == "converged"
        n_failed = self.diagnostics[-1].n_failed if converged else last.n_failed()
        probability = cumulative * (1.0 if converged or status == "stalled" else n_failed / n)
        if not converged and status != "stalled":
            failed = np.isposinf(last.score)
            # a run stopped at level 0 counts its failures there: the Latin-hypercube term is theirs
            gamma = chain_correlation_factor(failed, last.mask)
            self.level_covs.append(self._level_cov(level, failed, n_failed / n, gamma))
            self._record_lineage(last, failed, max(n_failed, 1) / n)
        self.cov_au_beck = combine_cov(self.level_covs) if probability > 0 else math.inf
        variance = self.cov_au_beck**2  # of log P_hat, to first order (envelope.lognormal_cov)
        if probability > 0 and cfg.cov_depth != 0:
            variance = self._reported_genealogy_variance()
        if probability > 0 and self.below_boundary_variance > 0:
            # a CoV of P_hat itself (the estimate is proportional to that count), so its log-variance is log(1 + CoV^2)
            self.cov_below_boundary = math.sqrt(self.below_boundary_variance) / probability
            variance = max(variance, math.log1p(self.cov_below_boundary**2))
        cov = lognormal_cov(variance)
        self.failure_lineages, self.effective_lineages = self._failure_lineages(last) if n_failed else (0, 0.0)
        self.degrees_of_freedom = self._degrees_of_freedom(variance) if converged and math.isfinite(cov) else None
        return {
            "probability": probability,
            "cov": cov,
            "n_queries": self.n_queries,
            "n_failed": n_failed,
            "reached_failure": converged,
            "status": status,
            "levels": tuple(self.diagnostics),
            "wall_time": time.perf_counter() - start,
        }

    @property
    def cov_depth_used(self) -> int | str:
        """The genealogy depth this run's CoV takes: ``cov_depth``, with ``"auto"`` resolved by how
        far its intermediate levels reach (:data:`DEEP_RUN_PROBABILITY`)."""
        depth = self.config.cov_depth
        if depth != "auto":
            return depth
        intermediate = sum(math.isfinite(level.threshold) for level in self.diagnostics)  # not level 0, nor the failure
        reach = intermediate * math.log(1.0 / self.config.level_probability)
        return "all" if reach >= math.log(1.0 / DEEP_RUN_PROBABILITY) * (1.0 - 1e-12) else 1

    def _reported_genealogy_variance(self) -> float:
        """The genealogy's variance of ``log P_hat`` at the depth this run takes, with level 1's
        Latin-hypercube correction; over the whole genealogy, at least depth 1's.

        The whole genealogy's sum rests on the few level-0 ancestors a deep run keeps
        (:func:`scarce.envelope.ancestor_degrees_of_freedom`): an estimate of one or two degrees of
        freedom, which falls below depth 1's as often as a chi-square of that many lies below its
        mean, while depth 1's sum over many parent chains measures each level's own variance well.
        What the ancestors add is the correlation beyond one level, and on every problem measured
        (the engine benchmark page, "Thirty levels") the spread of ``log P_hat`` exceeds depth 1's
        variance, so a sum below depth 1's is taken as depth 1's: the positive part of the
        difference, to which :meth:`_degrees_of_freedom` gives the ancestors' degrees of freedom.
        :attr:`short_variance` keeps depth 1's.
        """
        variance = max(self._genealogy_variance(self.lineage) + self.first_level_correction, 0.0)
        self.short_variance = variance
        if self.cov_depth_used == "all":
            self.short_variance = max(self._genealogy_variance(self.lineage, depth=1) + self.first_level_correction, 0.0)
            variance = max(variance, self.short_variance)
        self.genealogy_variance = variance
        return variance

    def _genealogy_variance(self, lineage: list, origin: bool = True, depth: int | str | None = None) -> float:
        """:func:`scarce.envelope.lineage_variance` of ``lineage`` at ``depth`` (by default the depth
        this run takes).

        ``"all"`` groups every chain by its level-0 ancestor, with the jackknife. An integer depth
        reaches, when ``origin``, at least back to the origin level: failures that appeared some
        levels before the last and multiplied since are correlated through the chain they
        appeared in.
        """
        depth = self.cov_depth_used if depth is None else depth
        if depth == "all":
            return lineage_variance(lineage, self.n_samples, len(lineage), jackknife=True)
        depth = max(depth, len(lineage) - 1 - self.origin_level) if origin else depth
        return lineage_variance(lineage, self.n_samples, depth)

    def _degrees_of_freedom(self, variance: float) -> float | None:
        """:meth:`_lineage_degrees_of_freedom`; over the whole genealogy (``"all"``), Satterthwaite's
        combination of depth 1's part (:attr:`short_variance`, with the degrees of freedom
        depth 1 would give it) and the rest, which rests on the level-0 ancestors
        (:func:`scarce.envelope.ancestor_degrees_of_freedom`; one or two on a deep run):
        ``nu = min(V^2 / (V_1^2 / nu_1 + (V - V_1)^2 / nu_0), nu_1)``. A heuristic: the two parts
        come from one genealogy and the rest is a truncated difference, not the independent
        chi-squares Satterthwaite assumed; the coverage tables of the engine benchmark page
        ("Thirty levels") are what calibrate it. A run whose CoV is the floor of the failures
        below a boundary takes depth 1's rule for it, as a depth-1 run does."""
        if self.cov_depth_used != "all":
            return self._lineage_degrees_of_freedom(variance)
        rest = self.genealogy_variance - self.short_variance  # what the ancestors add above depth 1's
        if variance > self.genealogy_variance or rest <= 0.0:
            # the floor from the failures below a boundary (_finish), or depth 1's variance: as at depth 1
            return self._lineage_degrees_of_freedom(variance, depth=1)
        short = variance - rest
        nu_short = self._lineage_degrees_of_freedom(short, depth=1) if short > 0.0 else None
        if nu_short is None:
            return None
        nu_rest = ancestor_degrees_of_freedom(self.lineage, self.n_samples)
        # Satterthwaite's combination can exceed nu_short when the rest is small; what the ancestors
        # add never earns the interval more degrees of freedom than depth 1's part has
        return min(satterthwaite_degrees_of_freedom(variance, [(short, nu_short), (rest, nu_rest)]), nu_short)

    def _lineage_degrees_of_freedom(self, variance: float, depth: int | str | None = None) -> float | None:
        """Satterthwaite's degrees of freedom of the reported variance; None leaves the result's rule.

        The variance has two parts. The levels before the origin level (the first whose
        population held a failure) measure the score's own levels: their part is a sum over
        each level's chains, and takes the fewest of them less one (``N - 1`` when only level
        0's independent draws come before, ``N p0 - 1`` when Markov-chain levels do). From the
        origin on, it rests on the failures' lineages: ``G - 1`` degrees of freedom for ``G``
        lineages, the usual rule for a cluster-robust variance, where the score ordered the
        failures (the chains found none below a level's boundary, so every level resamples the
        failure set afresh and unequal lineages are the chains' ordinary branching); Kish's
        ``G_eff - 1`` where it did not, since a few lineages that stumbled into the failure set
        then hold most failures and the variance rests on those few
        (:meth:`scarce.results.EstimateResult.ci`). Satterthwaite (1946) combines the parts:
        ``nu = V^2 / (V_b^2 / nu_b + V_a^2 / nu_a)``. A run whose failures appeared at level 0
        has only the second part.
        """
        k, cfg = self.origin_level, self.config
        if self.effective_lineages <= 0 or not variance > 0.0 or len(self.lineage) < k:
            return None
        count = self.failure_lineages if self.failures_below == 0 else self.effective_lineages
        lineages = max(count - 1.0, 1.0)
        if k < 1:
            return lineages
        if cfg.cov_depth != 0:
            before = self._genealogy_variance(self.lineage[:k], origin=False, depth=depth) + self.first_level_correction
        else:
            before = sum(c * c for c in self.level_covs[:k])
        before = min(max(before, 0.0), variance)
        after = variance - before
        chains = max(min(self.lineage[l][0].size for l in range(k)) - 1.0, 1.0)
        return satterthwaite_degrees_of_freedom(variance, [(before, chains), (after, lineages)])

    def _failure_lineages(self, population: Population) -> tuple[int, float]:
        """Chains of the first level that held a failure that the last failures descend from.

        Returns ``(G, G_eff)``: the number of distinct such chains, and Kish's effective number
        ``(sum w)^2 / sum w^2`` with ``w`` the last level's failures in each lineage.

        Where the score leads to the failure, failures appear in many chains near the failure
        boundary, in similar numbers (``G_eff`` close to ``G``).  Where it does not, one chain
        stumbles into the failure set and its copies fill the last levels: one lineage; a weak
        score sits in between, a few lineages holding most failures (``G_eff`` well below
        ``G``).  Counting from the first level with a failure, not from level 0, keeps the
        ordinary coalescence of a deep run's genealogy out of the count.
        """
        per_chain = np.isposinf(np.where(population.mask, population.score, 0.0)).sum(axis=1)
        weights = np.bincount(self.origin, weights=per_chain)
        weights = weights[weights > 0]
        effective = kish_effective_number(weights)
        return (0, 0.0) if effective is None else (int(weights.size), effective)

    def _counts_seeds(self, population: Population) -> bool:
        """Whether seeds taken from ``population`` count among the next level's samples."""
        rule = self.config.count_seeds
        return rule == "always" or (rule == "independent" and population.independent)

    def _fit_sample(self, population: Population) -> tuple[np.ndarray, np.ndarray] | None:
        """The population's points and scores for a kernel that fits its proposal to them (None for one that does not)."""
        if not self.kernel.can_fit(population.n_samples, self.problem.dim):
            return None  # the kernel learns nothing from them (or not from so few): no copy of the population
        return population.flat_u(), population.flat_scores()

    def _next_level(self, level: _Level, choice: ThresholdChoice, scale: float) -> tuple[_Level, float]:
        flat_s, flat_k = level.population.flat_scores(), level.population.flat_keys()
        pick = np.flatnonzero(choice.contains(flat_s, flat_k))
        self.level_index += 1
        self.boundary = choice.threshold
        population, stats = run_chains(
            self.kernel, level.population.take_u(pick), flat_s[pick], choice.threshold, self.n_samples, scale, self.evaluate,
            self.rng, seeds_parent=level.population.chain_of_flat()[pick], count_seeds=self._counts_seeds(level.population),
            seeds_key=flat_k[pick], threshold_key=choice.key, sample=self._fit_sample(level.population),
            previous=level.stats.params,
        )
        if self.origin_fixed:
            self.origin = self.origin[population.parent]
        else:
            self.origin, self.origin_fixed = np.arange(population.parent.size), population.n_failed() > 0
            self.origin_chains, self.origin_level = population.parent.size, self.level_index
        if stats.acceptance_rate < 0.05:
            warn_user(
                f"MCMC acceptance {stats.acceptance_rate:.3f} at level {self.level_index}: chains barely move; "
                "the CoV accounts for it but consider a different kernel or scale",
                LowAcceptanceWarning)
        return _Level(choice.threshold, population, stats), stats.scale

    def _add_level(
        self, choice: ThresholdChoice, level: _Level, cumulative: float, gamma: float, delta: float, final: bool = False
    ) -> None:
        probability = choice.probability
        self.level_covs.append(delta)
        if final:
            self.level_index += 1
        stats = None if final else level.stats
        diag = LevelDiagnostics(
            level=self.level_index,
            threshold=math.inf if final else level.threshold,
            probability=probability,
            cumulative_probability=cumulative,
            n_seeds=choice.n_above,
            correlation_factor=gamma,
            cov=delta,
            n_queries=0 if stats is None else stats.n_queries,
            n_failed=choice.n_above if final else level.population.n_failed(),
            acceptance_rate=math.nan if stats is None else stats.acceptance_rate,
            kernel_scale=math.nan if stats is None else stats.scale,
            stalled=choice.stalled,
        )
        self.diagnostics.append(diag)
