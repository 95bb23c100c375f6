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

The second form measures Subset Simulation alone at several level probabilities ``p0`` (the
first row is the reference of the ratio column).
"""

from __future__ import annotations

import argparse
import math
import time
import warnings

import numpy as np

from scarce import AdaptiveMultilevelSplitting, SubsetSimulation
from scarce.problems import make_problem


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
    parser.add_argument("--ss-p0", default="0.1", help="Subset Simulation's level probabilities, comma-separated")
    parser.add_argument("--first-seed", type=int, default=0)
    args = parser.parse_args()
    problem = make_problem(args.problem, dim=args.dim, probability=args.probability)
    limit = math.log(1 / args.probability) * (1 + math.log(1 / args.probability))
    rows = []
    for p0 in (float(v) for v in args.ss_p0.split(",")):
        make_ss = lambda p0=p0: SubsetSimulation(n_samples=args.ss_n, level_probability=p0)  # noqa: E731
        rows.append((f"subset_simulation N={args.ss_n} p0={p0:g}", measure(make_ss, problem, args.runs, args.first_seed)))
    for spec in filter(None, args.settings.split(";")):
        n, k, t = (int(v) for v in spec.split(","))
        make = lambda n=n, k=k, t=t: AdaptiveMultilevelSplitting(n, k, t, n_replicas=args.replicas)  # noqa: E731
        rows.append((f"splitting N={n} k={k} T={t} R={args.replicas}", measure(make, problem, args.runs, args.first_seed)))
    print(f"{problem.name}, P = {args.probability:g}, {args.runs} runs each; splitting limit CoV^2 x queries = {limit:.0f}\n")
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
