"""Crude Monte Carlo, with the same result type as Subset Simulation."""

from __future__ import annotations

import math
import time

import numpy as np

from scarce.checks import check_flag, check_positive_int
from scarce.errors import ScarceError
from scarce.estimators.base import (
    MAX_MONTE_CARLO_QUERIES,
    CountedEvaluation,
    Estimator,
    build_result,
    call_back,
    check_callback,
    check_memory,
)
from scarce.normals import check_dtype, standard_normal
from scarce.problem import RareEventProblem
from scarce.results import EstimateResult, LevelDiagnostics
from scarce.seeding import SeedLike


class MonteCarlo(Estimator):
    r"""Crude Monte Carlo: ``P_hat = K / n`` with an exact binomial interval.

    Parameters
    ----------
    n_samples : int
        Total samples (queries).
    batch_size : int
        Points per model call.
    dtype : {"float64", "float32"}
        Precision of the latent draws, as in :class:`SubsetSimulation`: float32 draws the
        normals several times faster (:mod:`scarce.normals`), which matters when the model is cheap
        next to ``d`` normal draws per query (784-pixel images).
    allow_large : bool
        Run more than :data:`~scarce.estimators.base.MAX_MONTE_CARLO_QUERIES` samples, or batches
        whose latent draws exceed :data:`~scarce.estimators.base.MAX_LEVEL_BYTES`. Without it such
        a configuration is refused before any model call: ``n_samples=1e13`` is a typo more often
        than a plan.

    Notes
    -----
    CoV ``sqrt((1 - p) / (n p))``; :meth:`EstimateResult.ci` is Clopper-Pearson.
    About ``100 / P_f`` samples give a 10% CoV.

    Examples
    --------
    >>> from scarce.problems import linear
    >>> r = MonteCarlo(n_samples=100_000).estimate(linear(dim=5, probability=1e-2), seed=1)
    >>> r.ci()[0] < 1e-2 < r.ci()[1]
    True
    """

    method = "monte_carlo"

    def __init__(self, n_samples: int = 100_000, batch_size: int = 10_000, dtype: str = "float64",
                 allow_large: bool = False) -> None:
        self.n_samples = n_samples
        self.batch_size = batch_size
        self.dtype = dtype
        self.allow_large = allow_large

    def estimate(self, problem: RareEventProblem, seed: SeedLike = None, callback=None) -> EstimateResult:
        """Estimate ``problem``'s failure probability from ``n_samples`` independent draws."""
        check_callback(callback)
        cfg, problem, rng = self._prepare(problem, seed)
        n, batch, dtype = cfg.n_samples, cfg.batch_size, np.dtype(cfg.dtype)
        check_memory(min(batch, n), problem.dim, dtype.name, cfg.allow_large, f"batch_size={batch}")
        start = time.perf_counter()
        counted, failures = CountedEvaluation(problem), 0
        for first in range(0, n, batch):
            size = min(batch, n - first)
            u = standard_normal(rng, (size, problem.dim), dtype)
            _, failed = counted(u, f"in Monte Carlo batch starting at sample {first}")
            failures += int(failed.sum())
        p = failures / n
        cov = math.sqrt((1 - p) / (n * p)) if failures else math.inf
        level = LevelDiagnostics(
            level=0, threshold=math.inf, probability=p, cumulative_probability=p, n_seeds=failures,
            correlation_factor=0.0, cov=cov, n_queries=n, n_failed=failures,
        )
        call_back(callback, level)
        outcome = {"probability": p, "cov": cov, "n_queries": counted.n_queries, "n_failed": failures,
                   "reached_failure": True, "status": "converged", "levels": (level,),
                   "wall_time": time.perf_counter() - start}
        return build_result(self, problem.name, seed, outcome, n_samples=n, level_probability=None,
                            interval="clopper-pearson", info={"batch_size": batch, "dtype": dtype.name})

    def _validated(self) -> MonteCarlo:
        """A copy holding the validated settings as plain Python values."""
        n = check_positive_int("n_samples", self.n_samples)
        allow_large = check_flag("allow_large", self.allow_large)
        if n > MAX_MONTE_CARLO_QUERIES and not allow_large:
            raise ScarceError(f"n_samples={n} is above the {MAX_MONTE_CARLO_QUERIES:,} queries a Monte Carlo run "
                              "may make without allow_large=True; lower it, or pass allow_large=True")
        return MonteCarlo(n_samples=n, batch_size=check_positive_int("batch_size", self.batch_size),
                          dtype=check_dtype(self.dtype).name, allow_large=allow_large)
