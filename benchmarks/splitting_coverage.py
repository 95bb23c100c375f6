"""Coverage of adaptive multilevel splitting's interval at chosen settings, on a linear problem with a known answer.

Runs ``AdaptiveMultilevelSplitting(n_samples=N, n_killed=K, n_steps=T, n_replicas=R)`` on
``linear(dim, probability)`` for seeds ``0 .. reps - 1`` (or until ``--minutes`` have passed)
and prints the mean estimate over the truth with its distance in standard errors, the share of
95% intervals holding the truth, how many missed on each side, the CoV observed over the runs
and the median CoV the runs reported.

    python benchmarks/splitting_coverage.py --n-samples 100 --n-killed 90 --reps 1500
"""

from __future__ import annotations

import argparse
import math
import time
import warnings

import numpy as np

from scarce import AdaptiveMultilevelSplitting
from scarce.problems import linear


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-samples", type=int, default=100)
    parser.add_argument("--n-killed", type=int, default=None, help="default N // 2")
    parser.add_argument("--n-steps", type=int, default=3)
    parser.add_argument("--n-replicas", type=int, default=4)
    parser.add_argument("--dim", type=int, default=10)
    parser.add_argument("--probability", type=float, default=1e-3)
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--minutes", type=float, default=math.inf, help="stop starting runs after this long")
    args = parser.parse_args()
    problem = linear(dim=args.dim, probability=args.probability)
    estimator = AdaptiveMultilevelSplitting(n_samples=args.n_samples, n_killed=args.n_killed,
                                            n_steps=args.n_steps, n_replicas=args.n_replicas)
    rows, start = [], time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(args.reps):
            if time.perf_counter() - start > 60.0 * args.minutes:
                break
            result = estimator.estimate(problem, seed=seed)
            rows.append((result.probability, result.cov, *result.ci(0.95)))
    _report(np.array(rows), args.probability)


def _report(rows: np.ndarray, truth: float) -> None:
    """One line: bias, coverage, misses on each side and the CoV, observed and reported."""
    estimate, reported, low, high = rows.T
    error = estimate.std(ddof=1) / math.sqrt(estimate.size)
    held = (low <= truth) & (truth <= high)
    finite = reported[np.isfinite(reported)]
    print(f"runs {estimate.size}  mean/truth {estimate.mean() / truth:.4f}  z {(estimate.mean() - truth) / error:+.2f}  "
          f"95% coverage {held.mean():.3f}  truth above {int((truth > high).sum())} / below {int((truth < low).sum())}  "
          f"CoV observed {estimate.std() / estimate.mean():.3f}  reported (median) "
          f"{np.median(finite) if finite.size else math.inf:.3f}")


if __name__ == "__main__":
    main()
