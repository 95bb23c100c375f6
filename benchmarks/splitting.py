"""Adaptive multilevel splitting beside Subset Simulation on a problem with an exact answer.

For each setting ``N,k,T`` (particles per replica, killed per iteration, kernel moves per copy)
``--runs`` seeded runs of ``AdaptiveMultilevelSplitting(N, k, T, n_replicas=R)`` and of the
default ``SubsetSimulation(n_samples=--ss-n)`` print, from one run of this script: the mean over
the truth with its standard error, the observed CoV, the mean queries, the efficiency
``CoV^2 x queries`` (lower is better; a CoV falls as one over the square root of the queries) and
its ratio to Subset Simulation's and to the splitting limit ``ln(1/P) (1 + ln(1/P))`` (Guyader
et al. 2011), the mean reported over the observed CoV, and the 95% interval coverage.

    python benchmarks/splitting.py --runs 100 --settings "500,250,3;500,50,3;1000,500,3"
    python benchmarks/splitting.py --runs 300 --settings "" --ss-n 1000 --ss-p0 0.1,0.15,0.2,0.25,0.3
    python benchmarks/splitting.py --runs 300 --kernel surface --ss-p0 0.1,0.2,adaptive --settings "1000,500,1"

The second form measures Subset Simulation alone at several level probabilities ``p0`` (the
first row is the reference of the ratio column).  ``--ss-p0 adaptive`` measures a rule that
chooses ``p0`` per level from the population's own chains (:func:`adaptive_level_probability`);
it lives here, not in the engine, because it was measured no more efficient than a fixed ``p0``
and biased (the documentation's benchmark page on splitting).

``--allocation`` prints, from ``--runs`` default Subset Simulation runs, each level's variance
term ``(1 - p)(1 + gamma) / p`` and the variance an optimal split of the same queries across
levels (``N_l`` proportional to the square root of the term) would leave: an upper bound on what
spending more of a budget on some levels can gain.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import time
import warnings

import numpy as np

from scarce import AdaptiveMultilevelSplitting, SubsetSimulation
from scarce.kernels import KERNELS, make_kernel
from scarce.problems import make_problem


#: Level probabilities the adaptive rule chooses from.
CANDIDATES = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)
#: Fewest seeds a candidate must give: with fewer chains ``gamma`` is too noisy to choose by.
MIN_SEEDS = 100


def cost_per_log_probability(p: float, gamma: float) -> float:
    """``h(p) = (1 - p)(1 + gamma) / (p ln^2(1/p))``.

    A level of conditional probability ``p`` costs about N calls, adds ``(1 - p)(1 + gamma) / (p N)``
    to the squared CoV (Au and Beck 2001) and covers ``ln(1/p)`` of ``L = ln(1/P)``; a run of such
    levels has squared CoV times calls ``L^2 h(p)``.
    """
    return math.inf if not 0.0 < p < 1.0 else (1.0 - p) * (1.0 + gamma) / (p * math.log(p) ** 2)


def adaptive_level_probability(score: np.ndarray, key: np.ndarray, mask: np.ndarray, min_seeds: int) -> float:
    """The candidate ``p`` with the smallest ``h(p)``, ``gamma`` measured on the population's chains
    for the boundary each candidate would give (greedy: the next level's chains are not predicted)."""
    from scarce.envelope import chain_correlation_factor
    from scarce.levels import in_level, n_seeds_target, next_threshold

    scores, keys = score[mask], key[mask]
    usable = [p for p in CANDIDATES if n_seeds_target(scores.size, p) >= min_seeds] or [max(CANDIDATES)]
    best, best_cost = usable[0], math.inf
    for p in usable:
        choice = next_threshold(scores, p, keys=keys)
        if choice.is_failure_level or choice.n_above == 0:
            continue
        indicator = in_level(score, key, choice.threshold, choice.key) & mask
        cost = cost_per_log_probability(choice.probability, chain_correlation_factor(indicator, mask))
        if cost < best_cost:
            best, best_cost = p, cost
    return best


@contextlib.contextmanager
def adaptive_levels():
    """Subset Simulation with the adaptive rule in place of the fixed ``p0`` while inside.

    The run still stops by the fixed ``p0``'s failure count, and no candidate may give fewer
    seeds than that count (its boundary could otherwise fail on fewer failures)."""
    from scarce.estimators import subset
    from scarce.levels import n_seeds_target, next_threshold

    fixed = subset._Run._choose_level

    def choose(run, pop, min_failures):
        choice = fixed(run, pop, min_failures)
        if choice.is_failure_level or choice.stalled:
            return choice
        failed = int(np.count_nonzero(np.isposinf(np.where(pop.mask, pop.score, 0.0))))
        if failed >= min_failures:  # the engine refused an early stop: the classic rule alone, as it did
            min_failures = n_seeds_target(run.n_samples, run.config.level_probability) + 1
        p = adaptive_level_probability(pop.score, pop.key, pop.mask, max(MIN_SEEDS, min_failures))
        return next_threshold(pop.flat_scores(), p, min_failures, keys=pop.flat_keys())

    subset._Run._choose_level = choose
    try:
        yield
    finally:
        subset._Run._choose_level = fixed


def allocation(problem, n_samples: int, runs: int, first_seed: int, kernel: str = "acs") -> None:
    """Each level's variance term, and the variance left by the optimal split of the same queries.

    Intermediate levels are averaged by their index; every run's last factor (its failed
    fraction, which the stop rule leaves between ``p0 / 2`` and ``p0``) forms its own row. Runs
    that did not reach the failure event are left out.
    """
    terms: dict[object, list[tuple[float, float]]] = {}
    reached = 0
    for seed in range(first_seed, first_seed + runs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = SubsetSimulation(n_samples=n_samples, kernel=make_kernel(kernel)).estimate(problem, seed=seed)
        if not result.reached_failure:
            continue
        reached += 1
        for d in result.levels[1:]:
            key = "last" if d is result.levels[-1] else d.level - 1
            terms.setdefault(key, []).append(((1 - d.probability) / d.probability * (1 + d.correlation_factor),
                                              d.correlation_factor))
    levels = sorted((k for k, v in terms.items() if k != "last" and len(v) >= reached // 2), key=int) + ["last"]
    c = np.array([np.mean([t[0] for t in terms[level]]) for level in levels])
    gamma = [np.mean([t[1] for t in terms[level]]) for level in levels]
    print(f"{problem.name}, N = {n_samples}, {reached} of {runs} runs reached the failure; intermediate levels "
          "that at least half of them passed, numbered from 0 (the independent draws), and the last factor")
    print("| level | mean gamma | (1 - p)(1 + gamma) / p |\n|---|---|---|")
    for level, g, term in zip(levels, gamma, c):
        print(f"| {level} | {g:.2f} | {term:.1f} |")
    ratio = np.sum(np.sqrt(c)) ** 2 / (len(c) * np.sum(c))
    print(f"\noptimal allocation / equal allocation, variance at equal queries: {ratio:.3f}")


def measure(make, problem, runs: int, first_seed: int) -> dict[str, float]:
    """``runs`` seeded estimates of one estimator: the columns of the table."""
    truth = problem.exact_probability
    est, cov, queries, covered = [], [], [], []
    start = time.perf_counter()
    for seed in range(first_seed, first_seed + runs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = make().estimate(problem, seed=seed)
        low, high = result.ci(0.95)
        est.append(result.probability), cov.append(result.cov), queries.append(result.n_queries)
        covered.append(low <= truth <= high)
    values = np.array(est)
    observed = values.std(ddof=1) / values.mean()
    q = float(np.mean(queries))
    return {"mean": values.mean() / truth, "se": values.std(ddof=1) / math.sqrt(runs) / truth, "cov": observed,
            "queries": q, "efficiency": observed**2 * q, "reported": math.sqrt(np.mean(np.square(cov))) / observed,
            "coverage": float(np.mean(covered)), "seconds": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", default="linear", help="a scarce.problems name with an exact answer")
    parser.add_argument("--dim", type=int, default=100)
    parser.add_argument("--probability", type=float, default=1e-6)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--settings", default="500,250,3;500,50,3;1000,500,3", help="N,k,T;N,k,T;...")
    parser.add_argument("--ss-n", type=int, default=2000)
    parser.add_argument("--ss-p0", default="0.1",
                        help="Subset Simulation's level probabilities, comma-separated; 'adaptive' (or "
                             "'adaptive:P0', P0 setting the stop rule) chooses them per level")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--kernel", default="acs", choices=sorted(KERNELS),
                        help="the MCMC kernel of every row (registry name, default settings)")
    parser.add_argument("--allocation", action="store_true",
                        help="print the per-level variance terms and the optimal-allocation bound instead")
    args = parser.parse_args()
    problem = make_problem(args.problem, dim=args.dim, probability=args.probability)
    limit = math.log(1 / args.probability) * (1 + math.log(1 / args.probability))
    rows = []
    if args.allocation:
        allocation(problem, args.ss_n, args.runs, args.first_seed, args.kernel)
        return
    for spec in args.ss_p0.split(","):
        # "adaptive" (or "adaptive:P0", P0 setting the stop rule): p0 chosen per level
        adaptive = spec.startswith("adaptive")
        p0 = float(spec.partition(":")[2] or 0.1) if adaptive else float(spec)
        make_ss = lambda p0=p0: SubsetSimulation(n_samples=args.ss_n, level_probability=p0,  # noqa: E731
                                                 kernel=make_kernel(args.kernel))
        with adaptive_levels() if adaptive else contextlib.nullcontext():
            row = measure(make_ss, problem, args.runs, args.first_seed)
        rows.append((f"subset_simulation N={args.ss_n} " + (f"adaptive (stop p0={p0:g})" if adaptive else f"p0={p0:g}"), row))
    for spec in filter(None, args.settings.split(";")):
        n, k, t = (int(v) for v in spec.split(","))
        make = lambda n=n, k=k, t=t: AdaptiveMultilevelSplitting(  # noqa: E731
            n, k, t, n_replicas=args.replicas, kernel=make_kernel(args.kernel))
        rows.append((f"splitting N={n} k={k} T={t} R={args.replicas}", measure(make, problem, args.runs, args.first_seed)))
    print(f"{problem.name}, P = {args.probability:g}, {args.runs} runs each, kernel {args.kernel}; splitting limit "
          f"CoV^2 x queries = {limit:.0f}\n")
    print("| method | mean / truth | CoV | queries | CoV^2 x queries | / Subset Simulation | / limit | "
          "reported / observed CoV | 95% coverage | seconds |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    base = rows[0][1]["efficiency"]
    for name, r in rows:
        print(f"| {name} | {r['mean']:.3f} +- {r['se']:.3f} | {r['cov']:.3f} | {r['queries']:,.0f} | {r['efficiency']:,.0f} "
              f"| {r['efficiency'] / base:.2f} | {r['efficiency'] / limit:.2f} | {r['reported']:.2f} | {r['coverage']:.3f} "
              f"| {r['seconds']:.1f} |")


if __name__ == "__main__":
    main()
