"""Competitor adapters for the Subset Simulation benchmark.

Each adapter estimates ``P[score(U) >= threshold]`` with ``U ~ N(0, I_dim)`` using a
third-party Subset Simulation implementation and reports the estimate, the number of
performance-function evaluations (counted here, by wrapping ``score``), the wall time
and the method's own coefficient-of-variation estimate.

``score(u)`` takes an ``(n, dim)`` array and returns an ``(n,)`` array.

Competitors (imported lazily, so this module imports without them):

* OpenTURNS ``SubsetSampling`` (tested with openturns 1.27.post1).
* UQpy ``SubsetSimulation`` (tested with UQpy 4.2.1).

Run ``python benchmarks/competitors.py`` for a smoke test (needs both packages).
"""

from __future__ import annotations

import math
import sys
import time
import types
from dataclasses import dataclass
from typing import Callable

import numpy as np

Score = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class CompetitorRun:
    probability: float  # the method's estimate
    n_queries: int  # points at which the performance function was evaluated
    wall_time: float  # seconds (time.perf_counter) for the whole estimate
    reported_cov: float | None  # the method's own CoV estimate (None / NaN if absent)


class _CountingScore:
    """Wraps a vectorised score and counts the number of points evaluated."""

    def __init__(self, score: Score, dim: int) -> None:
        self._score = score
        self._dim = dim
        self.n_queries = 0

    def __call__(self, u: np.ndarray) -> np.ndarray:
        u = np.asarray(u, dtype=float).reshape(-1, self._dim)
        self.n_queries += u.shape[0]
        return np.asarray(self._score(u), dtype=float).reshape(-1)


def _check_args(dim: int, n_samples: int, level_probability: float) -> int:
    if dim < 1:
        raise ValueError("dim must be >= 1")
    if not 0.0 < level_probability < 1.0:
        raise ValueError("level_probability must be in (0, 1)")
    n_seeds = int(round(level_probability * n_samples))
    if n_seeds < 1 or n_seeds * round(1.0 / level_probability) != n_samples:
        # both libraries need N = n_seeds * chain_length exactly
        raise ValueError(
            f"n_samples ({n_samples}) must be a multiple of 1/level_probability "
            f"({1.0 / level_probability:g}) with level_probability*n_samples integer"
        )
    return n_seeds


# --------------------------------------------------------------------------- OpenTURNS


def run_openturns(
    score: Score,
    dim: int,
    threshold: float,
    n_samples: int,
    level_probability: float,
    seed: int,
) -> CompetitorRun:
    """OpenTURNS ``SubsetSampling`` on ``ot.Normal(dim)``, event ``score(U) >= threshold``.

    Settings: ``n_samples`` points per level evaluated in blocks of ``p0*N`` points
    (``setBlockSize(p0*N)``, ``setMaximumOuterSampling(N // blockSize)``).  The block
    size must not exceed the number of seeds ``p0*N``: OpenTURNS' ``generatePoints``
    advances point ``k`` of a level from point ``k - p0*N``, which must already have been
    evaluated, so a larger block breaks the chains.  With ``blockSize == p0*N`` each
    block is exactly one MCMC step of all ``p0*N`` chains.

    OpenTURNS defaults kept (openturns 1.27.post1):
      * proposal range 2.0 (``SubsetSampling-DefaultProposalRange``): component-wise
        modified Metropolis (Au & Beck 2001) with a uniform random walk U(-1, 1) per
        component, no adaptation of the proposal;
      * no i-subset (``betaMin``) variant, first level is crude Monte Carlo;
      * ``MinimumProbability`` default (~1.5e-154), no other stopping criterion;
      * reported CoV: sqrt of the sum over the *conditional* levels of
        (1 + gamma_i)(1 - p_i)/(p_i N) (Au & Beck correlation factor gamma_i).  Note that
        OpenTURNS leaves out the first (crude Monte Carlo) level's (1 - p0)/(p0 N) term
        whenever there is more than one level, so its CoV is slightly optimistic
        (e.g. 0.163 reported vs 0.177 with that term at P=1e-3, N=2000).  Reported as is.
    Every level evaluates all N points (the p0*N seeds are moved too), so n_queries is
    N * number_of_levels.
    """
    import openturns as ot

    n_seeds = _check_args(dim, n_samples, level_probability)
    counted = _CountingScore(score, dim)
    t0 = time.perf_counter()
    algo = _openturns_algorithm(ot, counted, dim, threshold, n_samples, level_probability, n_seeds, seed)
    try:
        algo.run()
    except (RuntimeError, TypeError, ValueError) as exc:
        # OpenTURNS 1.27 can also raise "variance estimate must be >= 0" inside run(), between
        # levels; the run is then abandoned (its stored estimate is 0). Counted as a failed run.
        if "variance" not in str(exc).lower():
            raise
        return CompetitorRun(math.nan, counted.n_queries, time.perf_counter() - t0, math.nan)
    result = algo.getResult()
    probability = float(result.getProbabilityEstimate())
    cov = _openturns_cov(result)
    wall = time.perf_counter() - t0
    return CompetitorRun(probability, counted.n_queries, wall, cov)


def _openturns_algorithm(ot, counted: _CountingScore, dim: int, threshold: float, n_samples: int,
                         level_probability: float, n_seeds: int, seed: int):
    """Seed OpenTURNS and set up its ``SubsetSampling`` of ``counted(U) >= threshold``, ``p0*N`` points a block."""

    def func_sample(x):
        return counted(np.asarray(x)).reshape(-1, 1)

    ot.RandomGenerator.SetSeed(int(seed))
    model = ot.PythonFunction(dim, 1, func_sample=func_sample)
    output = ot.CompositeRandomVector(model, ot.RandomVector(ot.Normal(dim)))
    event = ot.ThresholdEvent(output, ot.GreaterOrEqual(), float(threshold))
    algo = ot.SubsetSampling(event)
    algo.setConditionalProbability(level_probability)
    algo.setBlockSize(n_seeds)
    algo.setMaximumOuterSampling(n_samples // n_seeds)
    return algo


def _openturns_cov(result) -> float:
    """OpenTURNS' reported CoV of a finished run, NaN where its variance estimate goes negative."""
    try:
        return float(result.getCoefficientOfVariation())
    except (RuntimeError, TypeError, ValueError) as exc:
        # OpenTURNS 1.27 raises "variance estimate must be >= 0" when its Au-Beck sum goes
        # negative (negative correlation factors on a short chain); the estimate itself is fine.
        if "variance" not in str(exc).lower():
            raise
        return math.nan


# --------------------------------------------------------------------------- UQpy

_UQPY_MODULE = "_scarce_uqpy_performance"  # in-memory module handed to PythonModel


def _uqpy_performance(samples, g):
    """UQpy model: one sample (1, dim) in, scalar performance g <= 0 is failure."""
    return float(g(samples)[0])


def _uqpy_model_module() -> str:
    # UQpy's PythonModel imports its model with __import__(model_script[:-3]); an
    # in-memory module registered in sys.modules avoids writing a script to disk.
    if _UQPY_MODULE not in sys.modules:
        module = types.ModuleType(_UQPY_MODULE)
        module.performance = _uqpy_performance
        sys.modules[_UQPY_MODULE] = module
    return _UQPY_MODULE + ".py"


def run_uqpy(
    score: Score,
    dim: int,
    threshold: float,
    n_samples: int,
    level_probability: float,
    seed: int,
) -> CompetitorRun:
    """UQpy ``SubsetSimulation`` with ``ModifiedMetropolisHastings``, run as documented.

    * performance function ``g(u) = threshold - score(u)`` (UQpy: failure iff g <= 0),
      wrapped in ``PythonModel``/``RunModel`` (serial, one sample per call);
    * ``samples_init``: N standard-normal samples from ``np.random.default_rng(seed)``;
    * sampler: component-wise MMH (Au & Beck) with standard-normal *marginal* targets
      (``log_pdf_target=[Normal().log_pdf] * dim``) and UQpy's default proposal
      (a standard normal random walk per component, symmetric);
    * MCMC ``random_state``: a ``np.random.RandomState`` *object* seeded from the same
      generator.  (An int would be re-expanded into a fresh RandomState at every level by
      SubsetSimulation, replaying the same proposal stream at each level.)
    * ``conditional_probability=p0``, ``nsamples_per_subset=N``, default ``max_level=10``.

    Reported CoV is UQpy's ``dependent_chains_CoV`` (``independent_chains_CoV`` also
    exists).  UQpy's estimator is known to be biased low; it is not corrected here.
    Cost: the marginal-target MMH path is slow in UQpy (a Python loop over chains and
    components with an ``np.sum`` per accepted component): ~13-18 s (P=1e-3) and ~40 s
    (P=1e-6) per run at N=2000, d=100 on our 2-core box; the joint-target MMH path is
    slower still and also has a candidate-reset bug, and ``Stretch`` is fast but far more
    biased.  UQpy skips evaluating a proposal whose first two coordinates are unchanged,
    so n_queries is a little below N + (levels - 1) * (N - p0*N).
    """
    uqpy = _uqpy_classes()
    n_seeds = _check_args(dim, n_samples, level_probability)
    if dim < 2:
        raise ValueError("UQpy 4.2.1 SubsetSimulation needs dim >= 2")
    counted = _CountingScore(score, dim)
    thr = float(threshold)

    def g(u):
        return thr - counted(u)

    t0 = time.perf_counter()
    ss = _uqpy_subset_simulation(uqpy, g, dim, n_samples, level_probability, n_seeds, seed)
    probability = float(ss.failure_probability)
    cov = getattr(ss, "dependent_chains_CoV", None)
    cov = float(cov) if cov is not None else None
    wall = time.perf_counter() - t0
    return CompetitorRun(probability, counted.n_queries, wall, cov)


def _uqpy_classes() -> types.SimpleNamespace:
    """Import the UQpy classes :func:`run_uqpy` uses (lazily: UQpy is optional)."""
    from UQpy.distributions import Normal
    from UQpy.reliability import SubsetSimulation
    from UQpy.run_model.RunModel import RunModel
    from UQpy.run_model.model_execution.PythonModel import PythonModel
    from UQpy.sampling import ModifiedMetropolisHastings

    return types.SimpleNamespace(Normal=Normal, SubsetSimulation=SubsetSimulation, RunModel=RunModel,
                                 PythonModel=PythonModel, ModifiedMetropolisHastings=ModifiedMetropolisHastings)


def _uqpy_subset_simulation(uqpy: types.SimpleNamespace, g: Callable, dim: int, n_samples: int,
                            level_probability: float, n_seeds: int, seed: int):
    """Run UQpy's ``SubsetSimulation`` of ``g`` (MMH, marginal normal targets), seeded from ``seed``."""
    rng = np.random.default_rng(seed)
    samples_init = rng.standard_normal((n_samples, dim))
    mcmc_state = np.random.RandomState(int(rng.integers(2**31 - 1)))
    model = uqpy.PythonModel(model_script=_uqpy_model_module(), model_object_name="performance", g=g)
    runmodel = uqpy.RunModel(model=model)
    sampler = uqpy.ModifiedMetropolisHastings(
        dimension=dim,
        log_pdf_target=[uqpy.Normal().log_pdf] * dim,
        n_chains=n_seeds,
        random_state=mcmc_state,
    )
    return uqpy.SubsetSimulation(
        runmodel_object=runmodel,
        sampling=sampler,
        samples_init=samples_init,
        conditional_probability=level_probability,
        nsamples_per_subset=n_samples,
    )


# --------------------------------------------------------------------------- smoke test


def _linear_problem(dim: int, p_exact: float):
    from scipy.stats import norm

    beta = -norm.ppf(p_exact)

    def score(u):
        return u.sum(axis=1) / math.sqrt(dim) - beta

    return score, 0.0


def _four_branch(k: float = 7.0):
    def score(u):
        u1, u2 = u[:, 0], u[:, 1]
        a = 3.0 + (u1 - u2) ** 2 / 10.0
        b = (u1 + u2) / math.sqrt(2.0)
        c = k / math.sqrt(2.0)
        g = np.stack([a - b, a + b, (u1 - u2) + c, -(u1 - u2) + c], axis=1)
        return -g.min(axis=1)

    return score, 0.0


def _smoke(n_runs: int = 3, n_samples: int = 2000, p0: float = 0.1) -> None:
    problems = [
        ("linear d=100 P=1e-3", *_linear_problem(100, 1e-3), 100, 1e-3),
        ("linear d=100 P=1e-6", *_linear_problem(100, 1e-6), 100, 1e-6),
        ("four-branch d=2 k=7", *_four_branch(7.0), 2, 2.22e-3),
    ]
    adapters = [("openturns", run_openturns), ("uqpy", run_uqpy)]
    if len(sys.argv) > 1:
        adapters = [a for a in adapters if a[0] in sys.argv[1:]]
    for pname, score, thr, dim, p_ref in problems:
        for aname, fn in adapters:
            runs = [fn(score, dim, thr, n_samples, p0, seed) for seed in range(n_runs)]
            p = np.array([r.probability for r in runs])
            covs = [r.reported_cov for r in runs]
            print(
                f"{pname:22s} {aname:9s} mean P={p.mean():.3e} (ref {p_ref:.3e}, "
                f"rel.bias {p.mean() / p_ref - 1:+.2f}) runs=[{', '.join(f'{x:.2e}' for x in p)}] "
                f"emp.CoV={p.std(ddof=1) / p.mean() if p.mean() > 0 else float('nan'):.2f} "
                f"rep.CoV=[{', '.join(f'{c:.2f}' if c is not None else 'None' for c in covs)}] "
                f"queries/run={np.mean([r.n_queries for r in runs]):.0f} "
                f"time/run={np.mean([r.wall_time for r in runs]):.3f}s",
                flush=True,
            )


if __name__ == "__main__":
    _smoke()
