r"""Adaptive multilevel splitting, the generalised algorithm whose estimator is unbiased for any ``k``.

``N`` particles start as independent draws of N(0, I). At each iteration the level ``Z`` is the
``k``-th smallest effective score; **every** particle at or below it is killed (``K >= k`` of
them: ties are counted, as in the generalised algorithm of Bréhier, Gazeau, Goudenège, Lelièvre
and Rousset 2016), and each is replaced by a copy of a survivor drawn uniformly, which the
kernel then moves ``T`` steps inside ``{score > Z}`` (all copies in one batched model call per
step). The estimate is

.. math:: \hat P = \prod_q \Bigl(1 - \frac{K_q}{N}\Bigr)\; \frac{\#\{n : X_n \in F\}}{N},

taken when the level reaches the failure event. A particle that truly fails has score ``+inf``
(the exact terminal event), so it is never killed, and the run ends when fewer than ``k``
particles are still short of the failure. With exact resampling from the conditional law the
estimator is unbiased for every ``N`` and ``k`` (Bréhier, Lelièvre and Rousset 2015); the
kernel's ``T`` moves approach that law, as Subset Simulation's chains do.

``k`` is the lever between the number of model calls in a row and their batch size: ``k = 1``
is the "last particle" algorithm (``N ln(1/P)`` iterations of one particle each), ``k = (1 -
p_0) N`` keeps a fraction ``p_0`` and is Subset Simulation's schedule with resampling. The
number of iterations is about ``N ln(1/P) / k`` and each costs ``T K`` model calls.

**Error estimate.** ``n_replicas`` independent runs (each with its own child seed) are averaged;
the reported CoV is the replicas' standard error over their mean, and the interval uses
Student's ``t`` with ``R - 1`` degrees of freedom. No formula of the algorithm is trusted for it:
the moved copies stay correlated with their parents, which the idealised variance ignores.

**Lower bound.** The average of unbiased nonnegative estimates has mean ``P``, so Markov's
inequality gives ``P >= delta P_hat`` with probability at least ``1 - delta``
(:meth:`~scarce.results.EstimateResult.envelope`, over the one final estimate: the result keeps
no running levels). It holds exactly under exact resampling and as closely as the kernel's moves
approach it otherwise, as the unbiasedness itself does.

**Extinction.** When no particle lies above the level, a replica ends with the estimate 0, a
value the unbiased algorithm takes (copies of one point that the kernel could not move). A plateau
(distinct particles sharing one score) is different: the score gives no direction there, and
when no replica gets past it the result is flagged ``stalled``.

References: Cérou and Guyader (2007), Stochastic Analysis and Applications 25(2); Bréhier,
Lelièvre and Rousset (2015), ESAIM: P&S 19; Bréhier et al. (2016), Annals of Applied Probability
26(6).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from scarce.checks import check_flag, check_positive_int, warn_user
from scarce.errors import BudgetExhaustedWarning, FewParticlesWarning, ScarceError, StalledLevelWarning
from scarce.estimators.base import CountedEvaluation, Estimator, build_result, check_memory
from scarce.estimators.chains import checked_params, propose_moves
from scarce.kernels import ConditionalSampling, Kernel, KernelParams
from scarce.levels import MIN_PROBABILITY, below_floor_message, exceeds_budget
from scarce.normals import check_dtype, standard_normal
from scarce.problem import RareEventProblem
from scarce.results import EstimateResult, LevelDiagnostics
from scarce.seeding import SeedLike, spawn_generators

__all__ = ["AdaptiveMultilevelSplitting"]

#: Kernel moves a copy may take per iteration without ``allow_large=True`` (three is the default).
MAX_STEPS = 10_000

#: Fewest particles a replica may have, and the largest share of them killed at each iteration,
#: before a run warns and is flagged (:class:`~scarce.errors.FewParticlesWarning`).
MIN_PARTICLES = 100
MAX_KILLED_FRACTION = 0.9


def few_particles(n_samples: int, n_killed: int) -> bool:
    """Whether ``N`` particles with ``k`` killed an iteration lie outside the settings where the
    replicas' interval was measured to hold its level: ``N < 100`` or ``k > 0.9 N``.

    With tens of particles, or with nearly every particle a fresh copy at each iteration, a
    replica's estimate is skewed (mostly a little low, now and then far high) and the moves'
    bias shows (a copy moved ``T`` times stays near its parent); replicas that came out low
    also spread little, so Student's ``t`` on their spread falls short, and more replicas do not
    cure it: the skew is each replica's own (the splitting benchmark page, "Splitting's interval
    at the edges of its settings", has the coverage on both sides of the bar).

    >>> few_particles(1000, 500), few_particles(100, 99), few_particles(50, 25)
    (False, True, True)
    """
    return n_samples < MIN_PARTICLES or n_killed > MAX_KILLED_FRACTION * n_samples


class AdaptiveMultilevelSplitting(Estimator):
    """Adaptive multilevel splitting (generalised, unbiased) with the exact terminal event.

    Parameters
    ----------
    n_samples : int
        ``N``, particles per replica (>= 2).
    n_killed : int, optional
        ``k`` in ``[1, N - 1]``: the level is the ``k``-th smallest score (more are killed on
        ties). Default ``N // 2``. With few particles (tens) or ``k`` close to ``N`` a replica's
        estimate is skewed, the moves' bias shows, and the replicas' interval covers less than
        its level (the benchmark page on splitting): keep ``N`` at least 100 and ``k`` at most
        ``0.9 N``; a run outside them warns (:class:`~scarce.errors.FewParticlesWarning`) and
        is flagged (:func:`few_particles`). Each iteration also costs the engine a fixed amount
        of work besides its ``T K`` model calls (the kernel's adaptation, and with
        :class:`~scarce.kernels.ResponseSurfaceSampling` the check and proposal grid of the
        surface at the new level): with a model that costs little, a larger ``N`` at the same
        ``k / N`` spreads that work over more calls (the benchmark page on splitting compares
        ``N = 1000, k = 500`` with ``N = 2000, k = 1000`` under the surface kernel, one move a
        copy: the same CoV for the queries spent).
    n_steps : int
        ``T``, kernel moves of each copy (>= 1). One leaves the copies next to their parents; beyond
        three, more moves cost queries in proportion and lower the CoV little (the documentation's
        benchmark page on splitting).
    n_replicas : int
        ``R`` independent runs averaged (>= 2): their spread is the error estimate.
    kernel : Kernel, optional
        The move; :class:`~scarce.kernels.ConditionalSampling` by default.
    max_iterations : int
        Per replica; a replica that reaches it stops (flagged ``status="max_levels"``), as does one
        whose weight ``prod (1 - K_i / N)`` would fall below :data:`scarce.levels.MIN_PROBABILITY`.
    max_queries : int, optional
        Query budget over all replicas; an iteration that would exceed it is not started and
        the partial result is flagged ``status="budget"``.
    dtype : {"float64", "float32"}
        Precision of the latent particles, as in :class:`~scarce.estimators.subset.SubsetSimulation`:
        float32 draws the normals several times faster and halves the memory traffic, which
        matters for image-sized latents; scores and estimates stay float64.
    allow_large : bool
        Run a configuration whose particles (with one iteration's copies) take more than
        :data:`~scarce.estimators.base.MAX_LEVEL_BYTES`, or more than :data:`MAX_STEPS` moves a
        copy; refused before any model call without it.
    """

    method = "adaptive_multilevel_splitting"

    def __init__(self, n_samples: int = 1000, n_killed: int | None = None, n_steps: int = 3, n_replicas: int = 4,
                 kernel: Kernel | None = None, max_iterations: int = 100_000,
                 max_queries: int | None = None, dtype: str = "float64", allow_large: bool = False) -> None:
        self.n_samples = n_samples
        self.n_killed = n_killed
        self.n_steps = n_steps
        self.n_replicas = n_replicas
        self.kernel = kernel
        self.max_iterations = max_iterations
        self.max_queries = max_queries
        self.dtype = dtype
        self.allow_large = allow_large

    def _validated(self) -> AdaptiveMultilevelSplitting:
        n = check_positive_int("n_samples", self.n_samples, minimum=2)
        k = n // 2 if self.n_killed is None else check_positive_int("n_killed", self.n_killed)
        if not 1 <= k <= n - 1:
            raise ScarceError(f"n_killed must be in [1, n_samples - 1] = [1, {n - 1}] (at least one particle "
                              f"survives each iteration), got {self.n_killed!r}")
        kernel = ConditionalSampling() if self.kernel is None else self.kernel
        if not isinstance(kernel, Kernel):
            raise ScarceError(f"kernel must be a scarce.kernels.Kernel, got {type(kernel).__name__}")
        kernel.check_settings()
        replicas = check_positive_int("n_replicas", self.n_replicas, minimum=2)
        max_queries = None
        if self.max_queries is not None:
            max_queries = check_positive_int("max_queries", self.max_queries)
            if max_queries < n * replicas:
                raise ScarceError(f"max_queries must be at least n_samples * n_replicas = {n * replicas} (the "
                                  f"first draws of every replica), got {self.max_queries}")
        return AdaptiveMultilevelSplitting(
            n_samples=n, n_killed=k, n_steps=self._checked_steps(), n_replicas=replicas,
            kernel=kernel, max_iterations=check_positive_int("max_iterations", self.max_iterations),
            max_queries=max_queries, dtype=check_dtype(self.dtype).name,
            allow_large=check_flag("allow_large", self.allow_large),
        )

    def _checked_steps(self) -> int:
        """``n_steps`` in ``[1, MAX_STEPS]``, or above it with ``allow_large``: a copy moved 10^12 times is a typo."""
        steps = check_positive_int("n_steps", self.n_steps)
        if steps > MAX_STEPS and not check_flag("allow_large", self.allow_large):
            raise ScarceError(f"n_steps={steps} is above the {MAX_STEPS:,} kernel moves a copy may take without "
                              "allow_large=True; lower it, or pass allow_large=True")
        return steps

    def estimate(self, problem: RareEventProblem, seed: SeedLike = None) -> EstimateResult:
        """Estimate ``problem``'s failure probability: the mean of ``n_replicas`` independent runs.

        The replicas advance together: one model call holds every replica's first draws, and
        each kernel move evaluates every replica's moving copies in one call. Each replica draws
        from its own generator and adapts its own kernel, so the replicas stay independent.
        """
        cfg, problem, rng = self._prepare(problem, seed)
        check_memory(2 * cfg.n_samples * cfg.n_replicas, problem.dim, cfg.dtype, cfg.allow_large,
                     f"n_samples={cfg.n_samples} x n_replicas={cfg.n_replicas}")
        if few_particles(cfg.n_samples, cfg.n_killed):
            warn_user(f"n_samples={cfg.n_samples}, n_killed={cfg.n_killed}: with fewer than {MIN_PARTICLES} particles "
                      f"or more than {MAX_KILLED_FRACTION:g} of them killed an iteration, a replica's estimate is "
                      "skewed and the replicas' interval can cover less than its level; the result is flagged",
                      FewParticlesWarning)
        start = time.perf_counter()
        counted = CountedEvaluation(problem)
        share = None if cfg.max_queries is None else cfg.max_queries // cfg.n_replicas  # the same for each
        children = spawn_generators(rng, cfg.n_replicas)
        replicas = [_Replica(cfg, child, index, share) for index, child in enumerate(children)]
        first = [r.draw(problem.dim) for r in replicas]
        for replica, score in zip(replicas, _split(counted.effective(np.concatenate(first), "at the first draws"),
                                                   first)):
            replica.scored(score)
        iteration = 0
        while active := [r for r in replicas if r.next_iteration()]:
            iteration += 1
            for step in range(1, cfg.n_steps + 1):
                _move_together(active, counted, f"at splitting iteration {iteration}, move {step}", step)
            for replica in active:
                replica.end_iteration()
        outcome = _combine(cfg, replicas, counted.n_queries, time.perf_counter() - start)
        return build_result(self, problem.name, seed, outcome, n_samples=cfg.n_samples * cfg.n_replicas,
                            interval="lognormal", info=_info(cfg, replicas))


def _split(values: np.ndarray, parts: list[np.ndarray]) -> list[np.ndarray]:
    """``values`` cut into pieces as long as ``parts``."""
    return np.split(values, np.cumsum([len(p) for p in parts])[:-1])


def _move_together(active: list[_Replica], counted: CountedEvaluation, where: str, step: int) -> None:
    """One kernel move of every active replica's copies, the moved candidates in one model call."""
    proposals = [r.propose() for r in active]
    moving = [candidate[moved] for candidate, moved in proposals]
    scores = _split(counted.effective(np.concatenate(moving), where), moving) if sum(map(len, moving)) else \
        [np.empty(0) for _ in moving]
    for replica, (candidate, moved), score in zip(active, proposals, scores):
        replica.accept(candidate, moved, score, step)


@dataclass
class _Iteration:
    """What an iteration leaves for the result's info: the particles killed, the moves' acceptance rate."""

    killed: int
    acceptance: float


class _Replica:
    """One run of the splitting algorithm on ``N`` particles, advanced a step at a time by the estimator."""

    def __init__(self, cfg: AdaptiveMultilevelSplitting, rng: np.random.Generator, index: int,
                 budget: int | None) -> None:
        self.cfg, self.rng, self.index, self.budget = cfg, rng, index, budget
        self.iterations: list[_Iteration] = []
        self.status, self.log_weight, self.first_failed, self.n_failed = "max_levels", 0.0, 0, 0
        self.queries, self.scale, self.ended = 0, cfg.kernel.initial_scale, False
        self.params: KernelParams | None = None  # the last iteration's kernel parameters (a fit may carry over)
        self.floored = False  # stopped where the weight would fall below MIN_PROBABILITY

    def draw(self, dim: int) -> np.ndarray:
        """The ``N`` first particles, independent draws of N(0, I)."""
        self.u = standard_normal(self.rng, (self.cfg.n_samples, dim), self.cfg.dtype)
        return self.u

    def scored(self, score: np.ndarray) -> None:
        self.score, self.queries = score, self.cfg.n_samples
        self.first_failed = self.n_failed = int(np.isposinf(score).sum())

    def next_iteration(self) -> bool:
        """Set up the next iteration's copies; False (with the status) when the run has ended."""
        if self.ended:  # the other replicas run on; this one's status and estimate are final
            return False
        self.ended = True  # until the copies below are set up
        cfg, n = self.cfg, self.cfg.n_samples
        level = float(np.partition(self.score, cfg.n_killed - 1)[cfg.n_killed - 1])
        if math.isinf(level):  # fewer than k particles short of the failure: the last level
            self.status = "converged"
            return False
        killed = self.score <= level
        n_killed = int(killed.sum())
        if n_killed == n:  # no particle above the level: the algorithm's estimate is 0
            self._extinct()
            return False
        if len(self.iterations) == cfg.max_iterations:
            return False  # status stays "max_levels"
        if self.log_weight + math.log1p(-n_killed / n) < math.log(MIN_PROBABILITY):  # float64 would round it to 0
            self.floored = True
            return False  # status stays "max_levels"
        if self.budget is not None and exceeds_budget(self.queries, cfg.n_steps * n_killed, self.budget):
            self.status = "budget"
            return False
        survivors = np.flatnonzero(~killed)
        parents = survivors[self.rng.integers(0, survivors.size, size=n_killed)]
        self.level, self.killed, self.accepted = level, killed, 0
        self.cur_u, self.cur_s = self.u[parents].copy(), self.score[parents].copy()
        previous, self.params = self.params, checked_params(cfg.kernel, "tune", cfg.kernel.tune(self.cur_u, self.scale))
        if cfg.kernel.can_fit(*self.u.shape):  # a kernel that fits its proposal reads every particle
            self.params = checked_params(cfg.kernel, "fit", cfg.kernel.refit(previous, self.params, self.cur_u, self.u,
                                                                             self.score, level))
        self.ended = False
        return True

    def propose(self) -> tuple[np.ndarray, np.ndarray]:
        """Candidates for the copies, and which of them differ from their state (only those are evaluated)."""
        return propose_moves(self.cfg.kernel, self.params, self.cur_u, self.rng)

    def accept(self, candidate: np.ndarray, moved: np.ndarray, score: np.ndarray, step: int) -> None:
        """Keep the moved candidates above the level (strictly: ties with it stay out)."""
        self.queries += len(score)
        accept = np.zeros(len(candidate), dtype=bool)
        accept[moved] = score > self.level
        self.cur_u[accept] = candidate[accept]
        self.cur_s[accept] = score[accept[moved]]
        self.accepted += int(accept.sum())
        self.params = checked_params(self.cfg.kernel, "adapted",
                                     self.cfg.kernel.adapted(self.params, float(accept.mean()), step))

    def end_iteration(self) -> None:
        """The moved copies replace the killed particles; the weight takes its factor ``1 - K / N``."""
        cfg, n_killed = self.cfg, int(self.killed.sum())
        self.u[self.killed], self.score[self.killed] = self.cur_u, self.cur_s
        self.scale = self.params.scale
        self.log_weight += math.log1p(-n_killed / cfg.n_samples)
        self.n_failed = int(np.isposinf(self.score).sum())
        self.iterations.append(_Iteration(n_killed, self.accepted / (n_killed * cfg.n_steps)))

    def _extinct(self) -> None:
        """Every particle at or below the level, the top ones tied at it. If those tied ones are
        copies of one point that never moved (the kernel's rejections), the run ends with the
        estimate 0, a value the unbiased algorithm takes; distinct points tied at one score are a
        plateau the score cannot rise from, which is flagged. Particles below the tie say nothing
        of a plateau: on a continuous score they are distinct whatever happened at the top."""
        self.log_weight = -math.inf
        top = self.score == self.score.max()
        distinct = np.unique(self.u[top], axis=0).shape[0]
        self.status = "stalled" if distinct > 1 else "extinct"

    @property
    def probability(self) -> float:
        """``prod (1 - K_q / N)`` times the failed fraction (0 after a stall)."""
        return math.exp(self.log_weight) * self.n_failed / self.cfg.n_samples if self.log_weight > -math.inf else 0.0


def _combine(cfg: AdaptiveMultilevelSplitting, replicas: list[_Replica], n_queries: int, seconds: float) -> dict:
    """The replicas' mean, its CoV from their spread, and the result's levels.

    An extinct replica counts with its estimate 0. Identical replicas (a discrete score can give
    them) leave the error unmeasured: the CoV is then infinite and the interval falls back on the
    first draws, never a zero-width one.
    """
    values = np.array([r.probability for r in replicas])
    statuses = {"converged" if r.status == "extinct" else r.status for r in replicas}
    mean = float(values.mean())
    reached = statuses == {"converged"} and mean > 0
    status = "converged" if reached else next((s for s in ("stalled", "budget", "max_levels") if s in statuses),
                                              "stalled")
    _warn(status, replicas)
    spread = float(values.std(ddof=1))
    cov = spread / math.sqrt(values.size) / mean if mean > 0 and spread > 0 else math.inf
    first = sum(r.first_failed for r in replicas)
    n_failed = sum(r.n_failed for r in replicas)
    levels = (LevelDiagnostics(0, -math.inf, 1.0, 1.0, 0, 0.0, 0.0, cfg.n_samples * cfg.n_replicas, first),
              LevelDiagnostics(1, math.inf if reached else math.nan, mean, mean, n_failed, 0.0, cov,
                               n_queries - cfg.n_samples * cfg.n_replicas, n_failed,
                               stalled=status == "stalled"))
    return {"probability": mean, "cov": cov, "n_queries": n_queries, "n_failed": n_failed,
            "reached_failure": reached, "status": status, "levels": levels, "wall_time": seconds}


def _warn(status: str, replicas: list[_Replica]) -> None:
    if status == "stalled":
        warn_user("no splitting replica got above its level (distinct particles tied at one score, or every "
                  "replica extinct); the result is flagged and its interval rests on the first draws",
                  StalledLevelWarning)
    elif status == "budget":
        warn_user("max_queries reached before every replica reached the failure event; returning a partial "
                  "result", BudgetExhaustedWarning)
    elif status == "max_levels" and any(r.floored for r in replicas):
        warn_user(below_floor_message("a replica's weight"), BudgetExhaustedWarning)
    elif status == "max_levels":
        warn_user("max_iterations reached before the failure event", BudgetExhaustedWarning)


def _info(cfg: AdaptiveMultilevelSplitting, replicas: list[_Replica]) -> dict:
    return {
        "n_killed": cfg.n_killed, "n_steps": cfg.n_steps, "n_replicas": cfg.n_replicas,
        "kernel": repr(cfg.kernel), "max_queries": cfg.max_queries, "dtype": cfg.dtype,
        "cov_degrees_of_freedom": cfg.n_replicas - 1,
        "few_particles": few_particles(cfg.n_samples, cfg.n_killed),
        "extinct_replicas": sum(r.status == "extinct" for r in replicas),
        "replicas": [{"probability": r.probability, "status": r.status, "iterations": len(r.iterations),
                      "n_queries": r.queries, "n_failed": r.n_failed,
                      "tied_iterations": sum(i.killed > cfg.n_killed for i in r.iterations),
                      "acceptance": float(np.mean([i.acceptance for i in r.iterations])) if r.iterations else math.nan}
                     for r in replicas],
    }
