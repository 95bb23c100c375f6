"""Subset Simulation's interval on the linear problem as the levels deepen and the chains a level thin out.

For each dimension, probability and ``N`` asked, ``--reps`` runs (seeds from ``--first-seed``, 0 by default) of
``SubsetSimulation(n_samples=N, level_probability=P0, cov_depth=D)`` on ``linear(dim, probability)``,
for each ``P0`` of ``--level-probabilities`` (``auto``, the default, or numbers) and each ``D`` of
``--cov-depths`` (the engine's ``auto`` by default; the runs are the same, only their CoV and
interval differ), print the mean
over the truth with its distance in standard errors, the 95% coverage (all runs, and the
unflagged ones), how many intervals lie below the truth and above it, and the root mean square
of the reported CoV over the observed one (all runs), with the same in medians (the median
reported CoV over the observed one), on the log scale (the mean reported log-variance
``log(1 + CoV^2)`` over the variance of ``log P_hat``, square-rooted) and the 99th percentile of the
reported CoV beside it, and the mean queries a run. At
``p0 = 0.1`` a probability of ``1e-k`` takes ``k`` levels of ``N / 10`` chains each.

    python benchmarks/depth_coverage.py --dims 4,20,100 --probabilities 1e-6 --n-samples 500,1000,2000 --reps 400
    python benchmarks/depth_coverage.py --n-samples 500 --level-probabilities auto,0.1
"""

from __future__ import annotations

import argparse
import math
import warnings

import numpy as np

import scarce
from scarce.problems import linear


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", default="20")
    parser.add_argument("--probabilities", default="1e-6")
    parser.add_argument("--n-samples", default="500,1000,2000")
    parser.add_argument("--level-probabilities", default="auto")
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--cov-depths", default="auto",
                        help="cov_depth values to run (comma-separated integers, 'all' or 'auto', the engine's default)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--by-reported", action="store_true",
                        help="also split each row's runs into fifths by their reported log-variance")
    args = parser.parse_args()
    depths = [d if d in ("all", "auto") else int(d) for d in args.cov_depths.split(",")]
    levels = [p0 if p0 == "auto" else float(p0) for p0 in args.level_probabilities.split(",")]
    for dim in map(int, args.dims.split(",")):
        for probability in map(float, args.probabilities.split(",")):
            for n in map(int, args.n_samples.split(",")):
                for p0 in levels:
                    for depth in depths:
                        estimator = scarce.SubsetSimulation(n_samples=n, level_probability=p0, cov_depth=depth)
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            runs = [estimator.estimate(linear(dim=dim, probability=probability), seed=s)
                                    for s in range(args.first_seed, args.first_seed + args.reps)]
                        _row(runs, dim, probability, n, p0, depth)
                        if args.by_reported:
                            _by_reported(runs, probability)


def _row(runs: list, dim: int, truth: float, n: int, p0: object, depth: object) -> None:
    """One line: queries, bias, coverage and where the misses lie, and the reported over the observed CoV."""
    p = np.array([r.probability for r in runs])
    ci = np.array([r.ci(0.95) for r in runs])
    cov = np.array([r.cov for r in runs])
    clean = np.array([not r.flags for r in runs])
    held = (ci[:, 0] <= truth) & (truth <= ci[:, 1])
    observed = float(p.std()) / truth
    ratio = math.sqrt(float(np.mean(cov**2))) / observed if observed > 0 else math.nan
    print(f"d={dim} P={truth:g} N={n} p0={p0} cov_depth={depth} levels {np.mean([len(r.levels) for r in runs]):.1f} ({runs[0].level_probability:.3g}, {runs[0].info['chains_per_level']} chains): "
          f"queries {np.mean([r.n_queries for r in runs]):.0f}, mean/truth {p.mean() / truth:.3f} z {(p.mean() - truth) / (p.std(ddof=1) / math.sqrt(p.size)):+.1f} "
          f"coverage {held.mean():.3f} (unflagged {held[clean].mean() if clean.any() else math.nan:.3f} of {int(clean.sum())}) "
          f"intervals below the truth {int((truth > ci[:, 1]).sum())}, above {int((truth < ci[:, 0]).sum())}; "
          f"reported/observed CoV {ratio:.2f} (medians {np.median(cov) / observed:.2f}; "
          f"log scale {_log_ratio(p, cov):.2f}; reported CoV 99th percentile {np.quantile(cov, 0.99):.2f})", flush=True)


def _by_reported(runs: list, truth: float) -> None:
    """The runs in fifths by reported log-variance ``s^2``: its mean, the mean squared error of
    ``log P_hat + s^2 / 2`` (the centre of the interval) about ``log P``, and the coverage.
    Whether a run's reported variance tells how far that run erred."""
    p = np.array([r.probability for r in runs])
    s2 = np.log1p(np.array([r.cov for r in runs]) ** 2)
    kept = np.flatnonzero((p > 0) & np.isfinite(s2))
    held = np.array([lo <= truth <= hi for lo, hi in (r.ci(0.95) for r in runs)])
    error = (np.log(p[kept] / truth) + 0.5 * s2[kept]) ** 2
    for fifth in np.array_split(np.argsort(s2[kept]), 5):
        print(f"    reported s^2 {s2[kept][fifth].mean():.3f}: squared log-error {error[fifth].mean():.3f}, "
              f"coverage {held[kept][fifth].mean():.3f} ({fifth.size} runs)", flush=True)


def _log_ratio(p: np.ndarray, cov: np.ndarray) -> float:
    """``sqrt(mean s^2 / var log P_hat)`` over the runs with an estimate, ``s^2 = log(1 + CoV^2)``.

    The reported log-variance against the observed one: the scale on which the interval is set,
    and on which a few runs' very large reported CoVs weigh as log-variances, not as squared CoVs.
    """
    kept = (p > 0) & np.isfinite(cov)
    observed = float(np.var(np.log(p[kept]))) if kept.sum() > 1 else 0.0
    return math.sqrt(float(np.mean(np.log1p(cov[kept] ** 2))) / observed) if observed > 0 else math.nan


if __name__ == "__main__":
    main()
