"""Ruler fit and scoring speed: prints a table (run: ``python benchmarks/rulers.py``).

Targets (issue 3, two CPU cores): fitting all 13 vision rulers on 50,000 x 64 embeddings within
30 s in total; scoring 1,000,000 x 64 embeddings within 0.5 s with a linear ruler and within 2 s
with a Mahalanobis ruler. One-class SVM scoring is timed on fewer rows (``--ocsvm-rows``) because
its cost grows with the number of support vectors; its row says how many rows were scored.

Synthetic data: good ~ N(0, D) and bad ~ N(mu, D) with decaying variances (an anisotropic,
embedding-like spectrum), ``--bad-fraction`` of the rows bad, seeded.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from scarce.rulers import VISION_RULERS, make_ruler


def make_embeddings(n: int, d: int, bad_fraction: float, seed: int):
    rng = np.random.default_rng(seed)
    n_bad = round(n * bad_fraction)
    scales = 1.0 / np.sqrt(np.arange(1, d + 1))
    good = rng.standard_normal((n - n_bad, d)) * scales
    shift = np.zeros(d)
    shift[:4] = [1.5, -1.0, 0.5, 0.5]
    bad = rng.standard_normal((n_bad, d)) * scales + shift
    Z = np.vstack([good, bad])
    y = np.r_[np.zeros(n - n_bad, dtype=np.int8), np.ones(n_bad, dtype=np.int8)]
    return Z, y


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-fit", type=int, default=50_000)
    parser.add_argument("--n-score", type=int, default=1_000_000)
    parser.add_argument("--ocsvm-rows", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--bad-fraction", type=float, default=0.2)
    parser.add_argument("--repeats", type=int, default=3, help="scoring repeats (best is shown)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    Z, y = make_embeddings(args.n_fit, args.dim, args.bad_fraction, args.seed)
    Z_score = np.random.default_rng(args.seed + 1).standard_normal((args.n_score, args.dim))
    print(f"# {platform.python_version()} on {os.cpu_count()} cores; fit {Z.shape} "
          f"({int(y.sum())} bad), score {Z_score.shape} float64")
    print(f"{'ruler':22s} {'fit s':>8s} {'rows scored':>12s} {'score s':>8s} "
          f"{'per 1e6 s':>10s} {'AUC':>6s}  notes")
    total_fit = 0.0
    for name in VISION_RULERS:
        ruler = make_ruler(name)
        if "random_state" in ruler.get_params():
            ruler.set_params(random_state=0)
        t0 = time.perf_counter()
        ruler.fit(Z, y)
        fit_s = time.perf_counter() - t0
        total_fit += fit_s
        rows = Z_score if not name.startswith("ocsvm") else Z_score[:args.ocsvm_rows]
        best = np.inf
        for _ in range(args.repeats if not name.startswith("ocsvm") else 1):
            t0 = time.perf_counter()
            ruler.score_samples(rows)
            best = min(best, time.perf_counter() - t0)
        note = f"solver={ruler.solver_}" if hasattr(ruler, "solver_") else ""
        if hasattr(ruler, "n_floor_directions_"):
            note = f"floor dirs={ruler.n_floor_directions_}, cond={ruler.condition_number_:.3g}"
        print(f"{name:22s} {fit_s:8.2f} {rows.shape[0]:12,d} {best:8.3f} "
              f"{best * 1e6 / rows.shape[0]:10.3f} {ruler.separation_auc_:6.3f}  {note}")
    print(f"{'total fit (13 rulers)':22s} {total_fit:8.2f}")


if __name__ == "__main__":
    main()
