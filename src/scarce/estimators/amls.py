r"""Adaptive Multi-Level Splitting as published by Webb et al. (2019), reused by SAFARI.

This is the "Traditional SS" baseline of the SCARCE paper (Section 5, table
"Comparison on 100 held-out MNIST seeds"), reproduced as published, level jump
included, so that SCARCE can be compared with it on the same problems.  The
library's own estimator is :class:`~scarce.estimators.SubsetSimulation`; use
this class only to reproduce the baseline.

The published algorithm
-----------------------
Webb, Rainforth, Teh and Kumar, "A Statistical Approach to Assessing Neural
Network Robustness", ICLR 2019; public code ``oval-group/statistical-robustness``
(``multilevel_uniform`` in ``exp_6_3_mnist/run_exp.py``), copied by SAFARI
(Huang et al., "SAFARI: Versatile and Efficient Evaluations for Robustness of
Interpretability", ``havelhuang/Eval_XAI_Robustness``, ``multi_level.py``, run
by ``eval_ss.py`` with ``rho = 0.1``, ``count_particles = 1000``,
``count_mh_steps = 250``).  With ``N`` particles, ratio ``rho`` (our ``p0``),
``M`` Metropolis-Hastings steps and failure threshold ``T``:

1. Draw ``N`` particles from the prior; every particle gets the proposal
   half-width ``w_0``; ``L_0 = -inf``, ``log P = 0``.
2. Level ``k``: score the ``N`` particles (``N`` queries) and set
   ``L_k = min(s_(floor((1 - rho) N)), T)`` (ascending order statistic, 0-based).
3. **Level jump.** If ``L_k == L_{k-1}`` (the level cannot rise: ties), set
   ``L_k = T``, the failure threshold.
4. ``K_k = #{s >= L_k}``; if ``K_k = 0`` return ``P = 0``; else
   ``log P += log(K_k / N)``.
5. Replace every particle below ``L_k`` by a copy of a survivor drawn
   uniformly with replacement; copies inherit the survivor's width.
6. ``M`` Metropolis-Hastings steps on all ``N`` particles (``N`` queries each):
   a uniform box proposal of half-width ``w_i`` around particle ``i``, accepted
   with the prior/proposal ratio and only inside the level ``{s >= L_k}``.
7. Per particle, the acceptance rate ``a_i`` over the ``M`` steps adapts the
   width: ``w_i *= 1.02`` if ``a_i > 0.124``, ``w_i *= 0.5`` if ``a_i < 0.124``.
8. Stop when ``L_k >= T`` (checked at the top of the next level, so the moves
   of step 6 also run at the terminal level); at most 500 levels.

Estimate ``P_hat = prod_k K_k / N``; SAFARI reports the squared CoV
``sum_k (1 - K_k / N) / K_k`` (independent levels).

Adaptation to the latent space
------------------------------
The published prior is uniform on a box around the input and the proposal box
is truncated to it (hence its ``g(x | x') / g(x' | x)`` correction).  Here the
particles live in the latent space ``u`` with prior ``N(0, I_d)``, so the box
proposal ``u' = u + w_i V``, ``V ~ U(-1, 1)^d``, is symmetric and the
acceptance probability is the prior ratio restricted to the level,

.. math:: \alpha(u, u') = \min\bigl(1, \exp(-(|u'|^2 - |u|^2) / 2)\bigr)\,
          \mathbf 1\{s(u') \ge L_k\}.

The published initial width is ``sigma / 30`` with ``sigma`` the half-range of
the uniform prior; our prior has unit scale, so ``initial_width = 1 / 30``.
The failure threshold ``T`` is the problem's failure event: a particle that
truly fails has effective score ``+inf`` (the exact terminal event), so
``T = +inf`` and, for ``RareEventProblem.from_score`` problems with threshold
0, every level and jump coincides with the published ``T = 0`` on the score.

What the reproduction keeps and what it flags
----------------------------------------------
* The jump of step 3 is kept, counted in ``info["level_jumps"]``, marked
  ``stalled=True`` on the jumped level (so ``result.flags`` shows it) and
  announced by a :class:`~scarce.errors.StalledLevelWarning`.  After a jump the
  last factor is the failure fraction of ``N`` particles still sitting at the
  stalled level: the cascade collapses into crude Monte Carlo there, so the
  estimate is either 0 or at least ``P_hat_{k-1} / N``, which overshoots the
  truth whenever ``P(F | level) < 1 / N``.  Subset Simulation instead raises the
  threshold to the next distinct score, or flags a stall and stops.
* The query cost is the published one: the population is re-scored at the start
  of every level and the ``M`` moves also run at the terminal level (they give
  the published code its failure samples), so a run of ``K`` levels costs
  ``K N (M + 1)`` queries (``N`` fewer moves when the jump finds no failure).
  Webb et al.'s extra final scoring (only to report the maximum score) and
  SAFARI's floor ``log P >= -100`` are left out.

Examples
--------
>>> from scarce.problems import linear
>>> r = AMLS(n_samples=500, n_steps=20, initial_width=0.5).estimate(linear(dim=5, probability=1e-3), seed=0)
>>> r.method, r.reached_failure, r.info["level_jumps"], 3e-4 < r.probability < 3e-3
('amls-webb2019', True, 0, True)
>>> r.n_queries == (len(r.levels) - 1) * 500 * (20 + 1)
True
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from scarce.checks import check_in_interval, check_positive_int, warn_user
from scarce.errors import BudgetExhaustedWarning, ScarceError, StalledLevelWarning
from scarce.estimators.base import CountedEvaluation, Estimator, build_result, call_back, check_callback
from scarce.levels import check_level_sizes, exceeds_budget
from scarce.problem import RareEventProblem
from scarce.results import EstimateResult, LevelDiagnostics
from scarce.seeding import SeedLike

LevelCallback = Callable[[LevelDiagnostics], None]


def _check_positive_float(name: str, value: object, allowed: str = "a finite number > 0") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ScarceError(f"{name} must be {allowed}, got {value!r} ({type(value).__name__})")
    number = float(value)
    if not (math.isfinite(number) and number > 0.0):
        raise ScarceError(f"{name} must be {allowed}, got {value!r}")
    return number


class AMLS(Estimator):
    r"""Adaptive Multi-Level Splitting of Webb et al. (2019) as used by SAFARI ("Traditional SS").

    See the module docstring for the published algorithm, its adaptation to the
    standard-normal latent space and the level jump it performs.

    Parameters
    ----------
    n_samples : int
        ``N``, particles (published ``count_particles``; SAFARI uses 1000).
    level_probability : float
        ``rho`` in (0, 1): the level is the ``floor((1 - rho) N)``-th order
        statistic of the scores; ``N * rho >= 1`` (SAFARI uses 0.1).
    n_steps : int
        ``M``, Metropolis-Hastings steps per level (published ``count_mh_steps``;
        SAFARI uses 250).
    initial_width : float
        Initial half-width of the uniform box proposal in latent units
        (published ``sigma / 30``, see the module docstring).
    max_levels : int
        Stop (``status="max_levels"``) after this many levels (published 500).
    max_queries : int, optional
        Query budget; a level that would exceed it is not started and the partial
        result is returned with ``status="budget"``.  One level costs ``N (M + 1)``.
    target_acceptance : float
        Per-particle acceptance rate in (0, 1) above which the width grows and
        below which it shrinks (published 0.124).
    width_growth : float
        Factor ``> 1`` applied to the width of a particle accepting more often
        than ``target_acceptance`` (published 1.02).
    width_shrink : float
        Factor in (0, 1) applied to the width of a particle accepting less often
        (published 0.5).

    Notes
    -----
    ``result.info`` holds ``level_jumps`` (levels forced to the failure threshold
    because they could not rise), ``jumped`` (bool), ``widths`` (mean, min, max
    final half-width) and the provenance.  The reported CoV is SAFARI's
    independent-level formula ``sqrt(sum_k (1 - p_k) / (N p_k))``; it ignores
    the correlation between the particles (``correlation_factor = 0``).

    References
    ----------
    S. Webb, T. Rainforth, Y. W. Teh, M. P. Kumar, "A Statistical Approach to
    Assessing Neural Network Robustness", ICLR 2019.
    W. Huang, X. Zhao, G. Jin, X. Huang, "SAFARI: Versatile and Efficient
    Evaluations for Robustness of Interpretability", ICCV 2023.
    """

    method = "amls-webb2019"

    def __init__(
        self,
        n_samples: int = 1000,
        level_probability: float = 0.1,
        n_steps: int = 250,
        initial_width: float = 1.0 / 30.0,
        max_levels: int = 500,
        max_queries: int | None = None,
        *,
        target_acceptance: float = 0.124,
        width_growth: float = 1.02,
        width_shrink: float = 0.5,
    ) -> None:
        self.n_samples = n_samples
        self.level_probability = level_probability
        self.n_steps = n_steps
        self.initial_width = initial_width
        self.max_levels = max_levels
        self.max_queries = max_queries
        self.target_acceptance = target_acceptance
        self.width_growth = width_growth
        self.width_shrink = width_shrink

    def _validated(self) -> AMLS:
        """A copy holding the validated settings as plain Python values (NumPy scalars converted)."""
        n, p0 = check_level_sizes(self.n_samples, self.level_probability, high=1.0, high_open=True)
        steps = check_positive_int("n_steps", self.n_steps)
        growth = _check_positive_float("width_growth", self.width_growth, "a finite number > 1")
        if growth <= 1.0:
            raise ScarceError(f"width_growth must be a finite number > 1, got {self.width_growth!r}")
        max_queries = None
        if self.max_queries is not None:
            max_queries = check_positive_int("max_queries", self.max_queries)
            per_level = n * (steps + 1)
            if max_queries < per_level:
                raise ScarceError(
                    f"max_queries must be at least n_samples * (n_steps + 1) = {per_level} (one level), "
                    f"got {self.max_queries}"
                )
        return AMLS(
            n_samples=n,
            level_probability=p0,
            n_steps=steps,
            initial_width=_check_positive_float("initial_width", self.initial_width),
            max_levels=check_positive_int("max_levels", self.max_levels),
            max_queries=max_queries,
            target_acceptance=check_in_interval("target_acceptance", self.target_acceptance, 0.0, 1.0, high_open=True),
            width_growth=growth,
            width_shrink=check_in_interval("width_shrink", self.width_shrink, 0.0, 1.0, high_open=True),
        )

    def estimate(
        self,
        problem: RareEventProblem,
        seed: SeedLike = None,
        callback: LevelCallback | None = None,
    ) -> EstimateResult:
        """Estimate ``problem``'s failure probability with the published AMLS.

        Parameters
        ----------
        problem : RareEventProblem
        seed : int, SeedSequence, Generator or None
        callback : callable, optional
            Called with each finished level's :class:`LevelDiagnostics`.

        Returns
        -------
        EstimateResult
            ``method="amls-webb2019"``; ``info["level_jumps"]`` counts the levels
            forced to the failure threshold, and those levels have ``stalled=True``.
        """
        check_callback(callback)
        cfg, problem, rng = self._prepare(problem, seed)
        run = _Run(cfg, problem, rng, callback)
        out = run.execute()
        widths = run.width
        return build_result(
            self, problem.name, seed, out,
            n_samples=cfg.n_samples,
            level_probability=float(cfg.level_probability),
            interval="lognormal",
            info={
                "level_jumps": run.level_jumps,
                "jumped": run.level_jumps > 0,
                "n_steps": cfg.n_steps,
                "initial_width": float(cfg.initial_width),
                "widths": {"mean": float(widths.mean()), "min": float(widths.min()), "max": float(widths.max())},
                "max_queries": cfg.max_queries,
                "reference": "Webb et al. ICLR 2019 (oval-group/statistical-robustness); SAFARI (havelhuang/Eval_XAI_Robustness)",
            },
        )


class _Run:
    """One execution of AMLS (keeps ``estimate`` free of loop state)."""

    def __init__(self, config: AMLS, problem: RareEventProblem, rng: np.random.Generator, callback: LevelCallback | None) -> None:
        self.config, self.problem, self.rng, self.callback = config, problem, rng, callback
        self.n_samples = int(config.n_samples)
        self.rho = float(config.level_probability)
        self.steps = int(config.n_steps)
        self.width = np.full(self.n_samples, float(config.initial_width))
        self.counted = CountedEvaluation(problem)
        self.level_jumps = 0
        self.level_index = 0
        self.diagnostics: list[LevelDiagnostics] = []

    @property
    def n_queries(self) -> int:
        return self.counted.n_queries

    def evaluate(self, u: np.ndarray, step: int) -> np.ndarray:
        """Effective scores (``+inf`` where the point truly fails) of one batch; counts the queries."""
        return self.counted.effective(u, f"at AMLS level {self.level_index}" + (f", MH step {step}" if step else ""))

    def _emit(self, diag: LevelDiagnostics) -> None:
        self.diagnostics.append(diag)
        call_back(self.callback, diag)

    def execute(self) -> dict:
        start = time.perf_counter()
        cfg, n = self.config, self.n_samples
        u = self.rng.standard_normal((n, self.problem.dim))
        order_index = math.floor((1.0 - self.rho) * n)  # the published order statistic, 0-based
        log_p, level_covs, previous = 0.0, [], -math.inf
        status, reached = "max_levels", False
        scores: np.ndarray | None = None  # scores of the current particles, once known
        for _ in range(cfg.max_levels):
            if self._over_budget():
                status = "budget"
                break
            self.level_index += 1
            queries_before = self.n_queries
            scores = self.evaluate(u, 0)  # the published code re-scores the population at every level
            if self.level_index == 1:
                self._emit(LevelDiagnostics(0, -math.inf, 1.0, 1.0, 0, 0.0, 0.0, 0, int(np.isposinf(scores).sum())))
            level, jumped = self._next_level(scores, previous, order_index)
            keep = scores >= level
            n_keep = int(np.count_nonzero(keep))
            p = n_keep / n
            level_covs.append(math.sqrt((1.0 - p) / n_keep) if n_keep else math.inf)
            if n_keep == 0:  # only after a jump: no particle fails
                log_p = -math.inf
                self._emit(self._diag(level, 0.0, log_p, 0, level_covs[-1], queries_before, 0, math.nan, jumped))
                status, reached = "converged", True
                break
            log_p += math.log(p)
            u, scores, accept_rate, mean_width = self._resample_and_move(u, scores, keep, level)
            # the terminal level reports the failures it counted (K_L), as Subset Simulation does
            n_failed = n_keep if level == math.inf else int(np.isposinf(scores).sum())
            self._emit(self._diag(level, p, log_p, n_keep, level_covs[-1], queries_before, n_failed, accept_rate,
                                  jumped, mean_width))
            previous = level
            if level == math.inf:
                status, reached = "converged", True
                break
        return self._finish(log_p, level_covs, status, reached, scores, start)

    def _over_budget(self) -> bool:
        """Whether the next level (``N (T + 1)`` calls) would exceed ``max_queries``; warns if so."""
        cfg, per_level = self.config, self.n_samples * (self.steps + 1)
        if not exceeds_budget(self.n_queries, per_level, cfg.max_queries):
            return False
        warn_user(
            f"max_queries={cfg.max_queries} would be exceeded by AMLS level {self.level_index + 1} "
            f"({self.n_queries} used, {per_level} needed); returning a partial result",
            BudgetExhaustedWarning)
        return True

    def _next_level(self, scores: np.ndarray, previous: float, order_index: int) -> tuple[float, bool]:
        """The level ``min(S_(k), T)``, or a jump to the failure threshold when it cannot rise (ties)."""
        level = float(np.partition(scores, order_index)[order_index])  # min(., T) with T = +inf
        if level != previous:
            return level, False
        self.level_jumps += 1
        warn_user(
            f"AMLS level {self.level_index} cannot rise above {previous:.6g} (ties); jumping to the "
            "failure threshold as published (counted in info['level_jumps'])",
            StalledLevelWarning)
        return math.inf, True

    def _finish(self, log_p: float, level_covs: list[float], status: str, reached: bool,
                scores: np.ndarray | None, start: float) -> dict:
        """The result's fields; a run that did not reach the failure gives the last level's share of failures."""
        n = self.n_samples
        if status == "max_levels":
            warn_user(f"max_levels={self.config.max_levels} reached before the failure threshold",
                      BudgetExhaustedWarning)
        cumulative = math.exp(log_p)
        if reached:
            probability = cumulative
            n_failed = self.diagnostics[-1].n_failed if cumulative > 0 else 0
        else:
            n_failed = int(np.isposinf(scores).sum()) if scores is not None else 0
            probability = cumulative * n_failed / n
            level_covs.append(math.sqrt((1.0 - n_failed / n) / n_failed) if n_failed else math.inf)
        return {
            "probability": probability,
            "cov": math.sqrt(sum(c * c for c in level_covs)) if probability > 0 else math.inf,
            "n_queries": self.n_queries,
            "n_failed": n_failed,
            "reached_failure": reached,
            "status": status,
            "levels": tuple(self.diagnostics),
            "wall_time": time.perf_counter() - start,
        }

    def _diag(
        self, level: float, p: float, log_p: float, n_keep: int, cov: float, queries_before: int,
        n_failed: int, accept_rate: float, jumped: bool, mean_width: float = math.nan,
    ) -> LevelDiagnostics:
        return LevelDiagnostics(
            level=self.level_index,
            threshold=level,
            probability=p,
            cumulative_probability=math.exp(log_p),
            n_seeds=n_keep,
            correlation_factor=0.0,
            cov=cov,
            n_queries=self.n_queries - queries_before,
            n_failed=n_failed,
            acceptance_rate=accept_rate,
            kernel_scale=mean_width,
            stalled=jumped,
        )

    def _resample_and_move(
        self, u: np.ndarray, scores: np.ndarray, keep: np.ndarray, level: float
    ) -> tuple[np.ndarray, np.ndarray, float, float]:
        """Steps 5-7: clone survivors over the killed particles, ``M`` MH steps, adapt the widths."""
        cfg, rng, n = self.config, self.rng, self.n_samples
        survivors = np.flatnonzero(keep)
        killed = n - survivors.size
        parents = np.concatenate([survivors, survivors[rng.integers(0, survivors.size, size=killed)]])
        u, scores, width = u[parents], scores[parents], self.width[parents]
        mean_width = float(width.mean())
        sq_norm = np.einsum("ij,ij->i", u, u)
        accepted = np.zeros(n)
        for step in range(1, self.steps + 1):
            candidate = u + width[:, None] * rng.uniform(-1.0, 1.0, size=u.shape)
            cand_scores = self.evaluate(candidate, step)
            cand_sq = np.einsum("ij,ij->i", candidate, candidate)
            log_alpha = np.minimum(0.0, -0.5 * (cand_sq - sq_norm))
            accept = (np.log(rng.random(n)) <= log_alpha) & (cand_scores >= level)
            u[accept], scores[accept], sq_norm[accept] = candidate[accept], cand_scores[accept], cand_sq[accept]
            accepted += accept
        rate = accepted / self.steps
        width = np.where(rate > cfg.target_acceptance, width * cfg.width_growth, width)
        self.width = np.where(rate < cfg.target_acceptance, width * cfg.width_shrink, width)
        return u, scores, float(rate.mean()), mean_width
