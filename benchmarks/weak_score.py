"""The weak score's error, split into its levels' part and its last count's part; and a shell estimator.

The weak score of ``benchmarks/hostile.py`` (score ``s = 0.6 u1 + 0.8 u2``, failure ``u1 >= 3.5``
in d = 2) has every probability in closed form, so each run's log error splits exactly. A run
that ends with ``m`` levels reports

.. math:: \\hat P = \\underbrace{\\textstyle\\prod_{l < m} \\hat p_l}_{\\hat P(L_{m-1})}
          \\cdot \\frac{K}{N}, \\qquad L_{m-1} = \\{s \\ge \\gamma_{m-1}\\} \\cup F,

so ``log P_hat - log P = A + B`` with the levels' part ``A = log P_hat(L_{m-1}) - log P(L_{m-1})``
and the last count's part ``B = log(K / N) - log P(F | L_{m-1})``. ``P(L) = P(s >= gamma) + P(F,
s < gamma)`` is one quadrature. Their variances are printed beside the mean of what the runs
report for the same parts (the squared Au-Beck terms of the intermediate levels, and of the last).

``--shells`` runs instead a different estimator on the same problem, as a comparator: Subset
Simulation on the raw score, its levels never holding the failure set, the failures counted shell
by shell (``sum_l P_hat(L_l) #(failures of level l with s < gamma_{l+1}) / N``, plus the last
level's failures). It needs no failure-set region below a level to be reached by the chains.

    python benchmarks/weak_score.py --n-samples 2000 --reps 3000
    python benchmarks/weak_score.py --n-samples 2000 --reps 2000 --shells
"""

from __future__ import annotations

import argparse
import math
import warnings

import numpy as np
from scipy.integrate import quad
from scipy.stats import norm

from scarce import RareEventProblem, SubsetSimulation
from scarce.envelope import chain_correlation_factor
from scarce.estimators.chains import Population, run_chains
from scarce.estimators.subset import latin_hypercube_normal
from scarce.kernels import ConditionalSampling
from scarce.levels import early_stop_allowed, failures_to_stop, n_seeds_target, next_threshold

TRUTH = norm.sf(3.5)


def _score(u: np.ndarray) -> np.ndarray:
    return 0.6 * u[:, 0] + 0.8 * u[:, 1]


def _failed(u: np.ndarray) -> np.ndarray:
    return u[:, 0] >= 3.5


def level_probability(gamma: float) -> float:
    """``P(s >= gamma or u1 >= 3.5)``: the level, failure set included (the exact terminal event)."""
    below = quad(lambda x: norm.pdf(x) * norm.cdf((gamma - 0.6 * x) / 0.8), 3.5, 12.0)[0]
    return float(norm.sf(gamma) + below)


def split_run(n_samples: int, seed: int) -> dict[str, float]:
    """One engine run's log error as the levels' part A and the last count's part B, with its reports."""
    problem = RareEventProblem(2, lambda u: (_score(u), _failed(u)), name="weak")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = SubsetSimulation(n_samples=n_samples).estimate(problem, seed=seed)
    levels, m = result.levels, len(result.levels) - 1
    p_level = level_probability(levels[m - 1].threshold) if m >= 2 else 1.0
    last = levels[m].probability
    return {
        "m": m, "estimate": result.probability, "cov": result.cov, "queries": result.n_queries,
        "A": math.log(levels[m - 1].cumulative_probability / p_level),
        "B": math.log(last / (TRUTH / p_level)) if last > 0 else -math.inf,
        "levels reported": sum(level.cov ** 2 for level in levels[1:m]), "last reported": levels[m].cov ** 2,
    }


def shell_run(n_samples: int, seed: int, p0: float = 0.1, max_levels: int = 30) -> tuple[float, int]:
    """The shell estimator's estimate and model calls (same level rule, sampler and first level)."""
    rng, kernel = np.random.default_rng(seed), ConditionalSampling()
    u0 = latin_hypercube_normal(n_samples, 2, rng)
    population = Population.from_independent(u0, _score(u0), rng.random(n_samples))
    min_failures, m = failures_to_stop(n_samples, p0, 0.5), n_seeds_target(n_samples, p0)
    cumulative, estimate, scale, queries = 1.0, 0.0, kernel.initial_scale, n_samples
    for _ in range(max_levels):
        u, s, k = population.flat_u(), population.flat_scores(), population.flat_keys()
        failed = _failed(u)
        if failed.sum() >= min_failures and _stop_allowed(population, failed, n_samples, p0, m):
            return estimate + cumulative * failed.sum() / n_samples, queries
        choice = next_threshold(s, p0, None, keys=k)
        above = choice.contains(s, k)
        estimate += cumulative * np.count_nonzero(failed & ~above) / n_samples
        pick = np.flatnonzero(above)
        population, stats = run_chains(
            kernel, population.take_u(pick), s[pick], choice.threshold, n_samples, scale,
            lambda x, step: _score(x), rng, seeds_parent=population.chain_of_flat()[pick],
            count_seeds=population.independent, seeds_key=k[pick], threshold_key=choice.key)
        scale, queries, cumulative = stats.scale, queries + stats.n_queries, cumulative * choice.probability
    return estimate, queries


def _stop_allowed(population: Population, failed: np.ndarray, n_samples: int, p0: float, m: int) -> bool:
    """The engine's early-stop rule: below ``m`` failures, enough of them in effective draws along the chains."""
    if failed.sum() >= m:
        return True
    along = np.zeros(population.mask.shape, dtype=bool)
    along[population.mask] = failed
    return early_stop_allowed(int(failed.sum()), chain_correlation_factor(along, population.mask), n_samples, p0)


def _print_split(rows: list[dict[str, float]]) -> None:
    rows = [r for r in rows if math.isfinite(r["B"])]
    a, b = np.array([r["A"] for r in rows]), np.array([r["B"] for r in rows])
    print(f"{len(rows)} runs: variance of log P_hat / P {np.var(a + b):.4f}, reported log(1 + CoV^2) "
          f"{np.mean([math.log1p(r['cov'] ** 2) for r in rows]):.4f}")
    print("| levels m | runs | mean A | var A | reported, levels | mean B | var B | reported, last |")
    print("|---|---|---|---|---|---|---|---|")
    for m in sorted({r["m"] for r in rows}) + [None]:
        pick = [i for i, r in enumerate(rows) if m is None or r["m"] == m]
        if len(pick) < 10:
            continue
        levels = np.mean([rows[i]["levels reported"] for i in pick])
        last = np.mean([rows[i]["last reported"] for i in pick])
        print(f"| {'all' if m is None else m} | {len(pick)} | {a[pick].mean():+.3f} | {a[pick].var():.4f} | "
              f"{levels:.4f} | {b[pick].mean():+.3f} | {b[pick].var():.4f} | {last:.4f} |")
    print(f"covariance term 2 cov(A, B): {2 * np.cov(a, b)[0, 1]:.4f}")
    e = np.array([r["estimate"] for r in rows]) / TRUTH
    cov = np.array([r["cov"] for r in rows])
    print(f"linear scale, over the truth squared: Var(P_hat) {np.var(e):.3f}, mean reported (P_hat CoV)^2 "
          f"{np.mean((e * cov) ** 2):.3f}; relative variance {np.var(e) / np.mean(e) ** 2:.3f}, mean reported CoV^2 "
          f"{np.mean(cov ** 2):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-samples", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=3000)
    parser.add_argument("--shells", action="store_true", help="compare the shell estimator with the engine")
    args = parser.parse_args()
    if not args.shells:
        _print_split([split_run(args.n_samples, seed) for seed in range(args.reps)])
        return
    engine = [split_run(args.n_samples, seed) for seed in range(args.reps)]
    shells = [shell_run(args.n_samples, seed) for seed in range(args.reps)]
    print("| estimator | mean / truth | relative SD | variance of log (estimates > 0) | model calls, mean |")
    print("|---|---|---|---|---|")
    for name, runs in (("engine (exact terminal event)", [(r["estimate"], r["queries"]) for r in engine]),
                       ("shells", shells)):
        e = np.array([x for x, _ in runs]) / TRUTH
        calls = np.mean([q for _, q in runs])
        print(f"| {name} | {e.mean():.3f} | {e.std() / e.mean():.3f} | {np.var(np.log(e[e > 0])):.3f} | {calls:.0f} |")


if __name__ == "__main__":
    main()
