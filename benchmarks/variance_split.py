"""Where a hostile score's spread comes from: level 0's draws, or the Markov chains after them.

For ``--draws`` first levels (each a seeded Latin hypercube, as in ``benchmarks/hostile.py``), run
``--continuations`` Subset Simulation runs that share that first level and differ only in the
chains' random stream. The spread of the estimates then splits (law of total variance) into

* the chains' part: the mean over first levels of the variance across their continuations;
* level 0's part: the variance of the continuations' means, less the chains' part over the
  number of continuations (the mean's own noise);

printed beside the mean of what each run reports, on the log scale the interval uses
(``log(1 + CoV^2)`` against the variance of ``log P_hat``) and on the linear scale (``CoV^2``
against the relative variance of ``P_hat``), for all reached runs and split by the level whose
population first held a failure; then how broad the shortfall is, per first level.

    python benchmarks/variance_split.py --scenario weak --n-samples 2000
    python benchmarks/variance_split.py --scenario plain --n-samples 2000 --cov-depth 50

The chains' stream is swapped in after level 0 by a subclass hook on the engine's run: a
measuring device for this script, not an engine option.
"""

from __future__ import annotations

import argparse
import math
import warnings
from collections import defaultdict

import numpy as np

import scarce.estimators.subset as subset
from scarce import SubsetSimulation

from hostile import SCENARIOS


class _SplitRun(subset._Run):
    """The engine's run, its generator replaced by the continuation's right after level 0."""

    continuation: list[int] = [0]

    def _first_level(self):
        level = super()._first_level()
        self.rng = np.random.default_rng(self.continuation)
        return level


def _runs(args: argparse.Namespace) -> list[dict]:
    """Every (first level, continuation) run's estimate, reported CoV and origin level."""
    original, subset._Run = subset._Run, _SplitRun
    out = []
    try:
        for draw in range(args.draws):
            problem, truth = SCENARIOS[args.scenario](draw)
            for cont in range(args.continuations):
                _SplitRun.continuation = [draw, cont, 777]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    result = SubsetSimulation(n_samples=args.n_samples, cov_depth=args.cov_depth,
                                              stop_factor=args.stop_factor, kernel=_kernel(args)).estimate(
                        problem, seed=draw)
                if result.reached_failure and result.probability > 0 and math.isfinite(result.cov):
                    out.append({"draw": draw, "p": result.probability, "cov": result.cov, "levels": len(result.levels),
                                "origin": result.info.get("failure_origin_level")})
    finally:
        subset._Run = original
    return out


def _kernel(args: argparse.Namespace):
    """The engine's default kernel, or aCS at a fixed scale (``--fixed-scale``): no adaptation
    shared by a level's chains."""
    from scarce.kernels.conditional import ConditionalSampling

    if args.fixed_scale is None:
        return ConditionalSampling()
    return ConditionalSampling(initial_scale=args.fixed_scale, adapt=False)


def _split(runs: list[dict], value, reported) -> tuple[float, float, float, float]:
    """Total variance, the chains' part, level 0's part, and the mean reported variance.

    Over first levels with at least two continuations: the chains' part is the mean of their
    variances; level 0's part is the variance of their means less each mean's own noise
    (``s_g^2 / n_g``, averaged), which holds for groups of unequal size too.
    """
    groups = defaultdict(list)
    for r in runs:
        groups[r["draw"]].append(value(r))
    kept = [np.asarray(v, dtype=float) for v in groups.values() if len(v) > 1]
    values = np.concatenate(kept)
    within = [float(np.var(v, ddof=1)) for v in kept]
    means = np.array([v.mean() for v in kept])
    level0 = float(np.var(means, ddof=1)) - float(np.mean([w / v.size for w, v in zip(within, kept)]))
    return float(np.var(values, ddof=1)), float(np.mean(within)), level0, float(np.mean([reported(r) for r in runs]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="weak", choices=sorted(SCENARIOS))
    parser.add_argument("--n-samples", type=int, default=2000)
    parser.add_argument("--draws", type=int, default=200, help="first levels (independent Latin hypercubes)")
    parser.add_argument("--continuations", type=int, default=20, help="chain streams per first level")
    parser.add_argument("--cov-depth", default="auto", help="the engine's cov_depth: an integer, 'all' or 'auto' (default)")
    parser.add_argument("--stop-factor", type=float, default=0.5, help="the engine's stop_factor")
    parser.add_argument("--fixed-scale", type=float, default=None,
                        help="aCS at this scale without adaptation (default: the engine's adaptive kernel)")
    args = parser.parse_args()
    args.cov_depth = args.cov_depth if args.cov_depth in ("all", "auto") else int(args.cov_depth)
    if args.draws < 2 or args.continuations < 2:
        parser.error(f"--draws and --continuations must be at least 2, got {args.draws} and {args.continuations}")
    runs = _runs(args)
    kernel = "adaptive" if args.fixed_scale is None else f"fixed scale {args.fixed_scale}"
    print(f"{args.scenario}, N = {args.n_samples}, {args.draws} first levels x {args.continuations} chain streams, "
          f"cov_depth {args.cov_depth}, stop_factor {args.stop_factor}, kernel {kernel}: {len(runs)} reached runs")
    print(f"{'runs':18s} {'n':>5s} {'scale':>7s} {'total':>8s} {'chains':>8s} {'level 0':>8s} {'reported':>9s}")
    for label, keep in (("all", lambda r: True), ("origin level 0", lambda r: r["origin"] == 0),
                        ("origin level >= 1", lambda r: r["origin"] != 0)):
        part = [r for r in runs if keep(r)]
        if len({r["draw"] for r in part}) < 2:
            continue
        mean_p = float(np.mean([r["p"] for r in part]))  # the linear scale is relative to the rows' own mean
        scales = {"log": (lambda r: math.log(r["p"]), lambda r: math.log1p(r["cov"] ** 2)),
                  "linear": (lambda r: r["p"] / mean_p, lambda r: r["cov"] ** 2)}
        for scale, (value, reported) in scales.items():
            total, chains, level0, rep = _split(part, value, reported)
            print(f"{label:18s} {len(part):5d} {scale:>7s} {total:8.4f} {chains:8.4f} {level0:8.4f} {rep:9.4f}")
    _per_draw(runs)


def _by_levels(groups: dict[int, list[dict]]) -> None:
    """Runs grouped by how many levels they took: the spread among a first level's continuations
    that stopped at the same level, against what those runs report (log scale)."""
    counts = sorted({r["levels"] for group in groups.values() for r in group})
    mean = {draw: np.mean(np.log([r["p"] for r in group])) for draw, group in groups.items()}
    print("\nby levels taken (level 0 and the failure level included): runs, mean log distance from their "
          "first level's mean, spread among same-level siblings, mean reported log-variance")
    for levels in counts:
        same = [[math.log(r["p"]) for r in group if r["levels"] == levels] for group in groups.values()]
        spread = [np.var(x, ddof=1) for x in same if len(x) > 2]
        runs = [r for group in groups.values() for r in group if r["levels"] == levels]
        shift = np.mean([math.log(r["p"]) - mean[r["draw"]] for r in runs])
        reported = np.mean([math.log1p(r["cov"] ** 2) for r in runs])
        print(f"  {levels:2d} levels: {len(runs):5d} runs, shift {shift:+.2f}, same-level spread "
              f"{np.mean(spread) if spread else math.nan:.3f}, reported {reported:.3f}")


def _per_draw(runs: list[dict]) -> None:
    """How broad the log-scale shortfall is: per first level, and by a run's place among its siblings."""
    groups = defaultdict(list)
    for r in runs:
        groups[r["draw"]].append(r)
    ratios, spreads, deviations, reported = [], [], [], []
    for group in groups.values():
        if len(group) < 2:
            continue
        logs = np.log([r["p"] for r in group])
        reports = [math.log1p(r["cov"] ** 2) for r in group]
        spreads.append(float(np.var(logs, ddof=1)))
        ratios.append(float(np.mean(reports)) / spreads[-1] if spreads[-1] > 0 else math.nan)
        deviations += list(logs - logs.mean())
        reported += reports
    _by_levels(groups)
    q = np.nanpercentile(ratios, [25, 50, 75])
    top = np.sort(spreads)[::-1][: max(len(spreads) // 10, 1)]
    print(f"\nper first level, mean reported over observed log-variance: quartiles {q[0]:.2f} {q[1]:.2f} {q[2]:.2f}; "
          f"the tenth with the largest spread carries {top.sum() / np.sum(spreads):.2f} of the chains' part")
    deviations, reported = np.array(deviations), np.array(reported)
    print("by a run's log distance from its first level's mean: mean reported log-variance")
    for low, high in ((-np.inf, -1.0), (-1.0, -0.3), (-0.3, 0.3), (0.3, 1.0), (1.0, np.inf)):
        keep = (deviations >= low) & (deviations < high)
        if keep.any():
            print(f"  [{low:5.1f}, {high:5.1f}): {keep.sum():5d} runs, {reported[keep].mean():.3f}")


if __name__ == "__main__":
    main()
