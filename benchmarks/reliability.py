"""Reliability benchmark: this engine against OpenTURNS, UQpy and Monte Carlo.

Every problem of :data:`scarce.problems.BENCHMARK_SUITE` has an exact answer.
Each method runs ``--reps`` times with N samples per level and p0 = 0.1; Monte
Carlo gets the same number of queries as our run of the same repetition.  The
methods are interleaved repetition by repetition so machine load affects all of
them alike, and all ratios come from one run of this script.

Columns: mean/truth (relative bias), |bias| in standard errors of the mean,
CoV across runs, ratio of CoV to the independent-sample (Au-Beck gamma = 0)
bound, mean reported CoV / observed CoV, 95% interval coverage (log-normal from
the reported CoV for scarce; normal from the reported CoV for OpenTURNS and
UQpy, which report no interval; Clopper-Pearson for Monte Carlo), mean queries,
median wall time, the ratios to OpenTURNS: CoV, CoV at equal queries
(``CoV * sqrt(queries)`` over OpenTURNS's, since a CoV falls as one over the square root
of the queries) and median time, and the CoV over the splitting limit at the row's own
budget, ``CoV / sqrt(ln(1/P) (1 + ln(1/P)) / queries)`` (Guyader et al. 2011: no splitting
method does better at that many model calls).

``--splitting N,k,T,R[,KERNEL]`` (repeatable) adds :class:`scarce.AdaptiveMultilevelSplitting`
with those particles, kills, moves and replicas, and the kernel of that registry name (adaptive
conditional sampling by default); ``--kernel NAME`` (repeatable) adds our Subset Simulation with
that kernel. Every row also reads as a ratio to our default Subset Simulation at equal queries
(``CoV x sqrt(queries)`` over the default's), the measure of issue 24.

    python benchmarks/reliability.py --reps 300 --methods openturns --problems 1,2,4 \
        --kernel surface --splitting 1000,500,1,4,surface

    python benchmarks/reliability.py                 # 50 repetitions (UQpy: --uqpy-reps)
    python benchmarks/reliability.py --reps 5 --uqpy-reps 1   # a quick look
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scarce  # noqa: E402
from scarce.estimators.subset import COUNT_SEEDS_RULES  # noqa: E402
from scarce.kernels import KERNELS  # noqa: E402
from scarce.problems import BENCHMARK_SUITE, make_problem  # noqa: E402


@dataclass
class Runs:
    estimates: list[float] = field(default_factory=list)
    reported_cov: list[float] = field(default_factory=list)
    queries: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    covered: list[bool] = field(default_factory=list)
    failures: int = 0  # runs that ended in an error instead of an estimate (OpenTURNS, rarely)

    def add(self, estimate, cov, queries, wall, covered):
        if not math.isfinite(estimate):
            self.failures += 1
            return
        self.estimates.append(float(estimate))
        self.reported_cov.append(float(cov) if cov is not None else math.nan)
        self.queries.append(int(queries))
        self.times.append(float(wall))
        self.covered.append(bool(covered))


def independent_bound(probability: float, n: int, p0: float) -> float:
    """Au-Beck CoV with gamma = 0: k intermediate levels at p0 and a last level P / p0^k in [p0, 1)."""
    k = max(0, math.ceil(math.log(probability) / math.log(p0) - 1e-12) - 1)
    last = probability / p0**k
    return math.sqrt(k * (1 - p0) / (n * p0) + (1 - last) / (n * last))


def normal_covers(estimate, cov, truth, z=1.959964):
    if not (cov is not None and math.isfinite(cov)):
        return False
    return abs(estimate - truth) <= z * cov * estimate


def run_problem(name, params, args, competitors):
    problem = make_problem(name, **params)
    truth = problem.exact_probability
    threshold = 0.0

    def plain_score(u):
        return problem.evaluate(u)[0]

    ss = scarce.SubsetSimulation(n_samples=args.n_samples, level_probability=args.p0, stop_factor=args.stop_factor,
                                 count_seeds=args.count_seeds)
    ours = {"scarce": ss, **_kernel_rows(args), **_splitting_rows(args.splitting)}
    runs = {m: Runs() for m in (*ours, "openturns", "uqpy", "monte_carlo")}
    for rep in range(args.reps):
        seed = args.seed_base + rep
        for method, engine in ours.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", scarce.ScarceWarning)
                a = engine.estimate(problem, seed=seed)
            lo, hi = a.ci(0.95)
            runs[method].add(a.probability, a.cov, a.n_queries, a.wall_time, lo <= truth <= hi)
            if method == "scarce":
                r = a
        if competitors is not None and "openturns" in args.methods:
            o = competitors.run_openturns(plain_score, problem.dim, threshold, args.n_samples, args.p0, seed)
            runs["openturns"].add(o.probability, o.reported_cov, o.n_queries, o.wall_time, normal_covers(o.probability, o.reported_cov, truth))
        if competitors is not None and "uqpy" in args.methods and rep < args.uqpy_reps:
            q = competitors.run_uqpy(plain_score, problem.dim, threshold, args.n_samples, args.p0, seed)
            runs["uqpy"].add(q.probability, q.reported_cov, q.n_queries, q.wall_time, normal_covers(q.probability, q.reported_cov, truth))
        mc = scarce.MonteCarlo(n_samples=r.n_queries, batch_size=20_000).estimate(problem, seed=seed)
        lo, hi = mc.ci(0.95)
        runs["monte_carlo"].add(mc.probability, mc.cov, mc.n_queries, mc.wall_time, lo <= truth <= hi)
        print(f"  {problem.name} rep {rep + 1}/{args.reps}", file=sys.stderr, end="\r")
    print(file=sys.stderr)
    return problem, runs


def _splitting_rows(specs: list[str]) -> dict:
    """``AdaptiveMultilevelSplitting`` rows by label from ``"N,k,T,R[,KERNEL]"`` specs."""
    from scarce.kernels import make_kernel

    rows = {}
    for spec in specs:
        fields = spec.split(",")
        try:
            if len(fields) not in (4, 5):
                raise ValueError(spec)
            n, k, t, r = (int(v) for v in fields[:4])
        except ValueError:
            raise SystemExit(f"--splitting takes four integers N,k,T,R and optionally a kernel name, "
                             f"got {spec!r}") from None
        kernel = make_kernel(fields[4]) if len(fields) > 4 else None
        label = f"splitting {n},{k},{t},{r}" + (f" {fields[4]}" if kernel is not None else "")
        rows[label] = scarce.AdaptiveMultilevelSplitting(n_samples=n, n_killed=k, n_steps=t, n_replicas=r,
                                                         kernel=kernel)
    return rows


def _kernel_rows(args) -> dict:
    """Our Subset Simulation, as configured, with each ``--kernel``."""
    from scarce.kernels import make_kernel

    return {f"scarce {name}": scarce.SubsetSimulation(
        n_samples=args.n_samples, level_probability=args.p0, stop_factor=args.stop_factor,
        count_seeds=args.count_seeds, kernel=make_kernel(name)) for name in args.kernel}


def splitting_limit_cov(probability: float, queries: float) -> float:
    """The smallest CoV any splitting method reaches with ``queries`` model calls (Guyader et al. 2011)."""
    log_inverse = math.log(1.0 / probability)
    return math.sqrt(log_inverse * (1.0 + log_inverse) / queries)


def summarise(problem, runs, args):
    truth = problem.exact_probability
    bound = independent_bound(truth, args.n_samples, args.p0)
    rows = {}
    for method, r in runs.items():
        if not r.estimates:
            continue
        est = np.array(r.estimates)
        n = est.size
        mean = est.mean()
        se = est.std(ddof=1) / math.sqrt(n) if n > 1 else math.nan
        cov = est.std(ddof=1) / mean if n > 1 and mean > 0 else math.nan
        reported = float(np.nanmean(r.reported_cov)) if np.isfinite(r.reported_cov).any() else math.nan
        rows[method] = {
            "reps": n,
            "failed_runs": r.failures,
            "mean_over_truth": mean / truth,
            "bias_in_se": abs(mean - truth) / se if se and se > 0 else math.nan,
            "cov": cov,
            "cov_over_bound": cov / bound,
            "reported_over_observed": reported / cov if cov and cov > 0 else math.nan,
            "coverage": float(np.mean(r.covered)),
            "queries": float(np.mean(r.queries)),
            "median_time": float(np.median(r.times)),
            "cov_over_limit": cov / splitting_limit_cov(truth, float(np.mean(r.queries))),
        }
    ref = rows.get("openturns")
    boot = {m: _bootstrap_cov(r.estimates, seed=k) for k, (m, r) in enumerate(runs.items()) if len(r.estimates) > 1}
    for method, row in rows.items():
        row["cov_ratio_ot"] = row["cov"] / ref["cov"] if ref else math.nan
        # at equal queries: a CoV scales as 1/sqrt(queries), so compare CoV * sqrt(queries)
        scale = math.sqrt(row["queries"] / ref["queries"]) if ref else math.nan
        row["cov_ratio_ot_equal_queries"] = row["cov_ratio_ot"] * scale
        if ref and method != "openturns" and method in boot and "openturns" in boot:
            # the methods' runs are independent: resample each on its own
            ratios = boot[method] / boot["openturns"] * scale
            row["cov_ratio_ot_equal_queries_95"] = [float(q) for q in np.quantile(ratios, [0.025, 0.975])]
        row["time_ratio_ot"] = row["median_time"] / ref["median_time"] if ref else math.nan
        ours = rows["scarce"]
        row["cov_ratio_ss_equal_queries"] = row["cov"] / ours["cov"] * math.sqrt(row["queries"] / ours["queries"])
        row["time_per_query_ratio_ss"] = (row["median_time"] / row["queries"]) / (ours["median_time"] / ours["queries"])
    return {"problem": problem.name, "exact": truth, "independent_bound": bound, "methods": rows}


def _bootstrap_cov(estimates, seed: int, n_boot: int = 2000) -> np.ndarray:
    """Bootstrap replicates of the CoV across runs (for the interval of a CoV ratio)."""
    est = np.asarray(estimates, dtype=float)
    rng = np.random.default_rng(seed)
    samples = est[rng.integers(0, est.size, size=(n_boot, est.size))]
    return samples.std(axis=1, ddof=1) / samples.mean(axis=1)


def _ratio_cell(row) -> str:
    low_high = row.get("cov_ratio_ot_equal_queries_95")
    if not low_high:  # the reference itself, or too few runs
        return f"{row['cov_ratio_ot_equal_queries']:.3f}"
    return f"{row['cov_ratio_ot_equal_queries']:.3f} [{low_high[0]:.2f}, {low_high[1]:.2f}]"


def _runs_label(row) -> str:
    failed = row.get("failed_runs", 0)
    return f"{row['reps']} (+{failed} failed)" if failed else str(row["reps"])


def markdown(summaries, args) -> str:
    head = (
        "| problem | method | runs | mean/truth | bias (SE) | CoV | CoV/bound | reported/observed CoV | 95% coverage "
        "| queries | median time (s) | CoV / OT | CoV / OT, equal queries [95%] | time / OT | CoV / splitting limit "
        "| CoV / SS, equal queries | time per query / SS |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for s in summaries:
        for method, row in s["methods"].items():
            lines.append(
                f"| {s['problem']} | {method} | {_runs_label(row)} | {row['mean_over_truth']:.3f} | {row['bias_in_se']:.1f} | "
                f"{row['cov']:.3f} | {row['cov_over_bound']:.2f} | {row['reported_over_observed']:.2f} | "
                f"{row['coverage']:.0%} | {row['queries']:,.0f} | {row['median_time']:.4f} | "
                f"{row['cov_ratio_ot']:.2f} | {_ratio_cell(row)} | {row['time_ratio_ot']:.2f} | "
                f"{row['cov_over_limit']:.2f} | {row['cov_ratio_ss_equal_queries']:.3f} | "
                f"{row['time_per_query_ratio_ss']:.2f} |"
            )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--uqpy-reps", type=int, default=50, help="UQpy takes seconds per run; fewer repetitions keep the run short")
    parser.add_argument("--n-samples", type=int, default=2000)
    parser.add_argument("--p0", type=float, default=0.1)
    parser.add_argument("--stop-factor", type=float, default=0.5, help="our engine's stop_factor (1: the classic rule)")
    parser.add_argument("--count-seeds", default="independent", choices=COUNT_SEEDS_RULES,
                        help="our engine's count_seeds rule (always: Au and Beck; never: OpenTURNS)")
    parser.add_argument("--methods", default="openturns,uqpy", help="competitors to run (comma separated)")
    parser.add_argument("--splitting", action="append", default=[], metavar="N,k,T,R[,KERNEL]",
                        help="also run AdaptiveMultilevelSplitting (e.g. 1000,500,3,4 or 1000,500,1,4,surface); "
                             "repeatable")
    parser.add_argument("--kernel", action="append", default=[], metavar="NAME", choices=sorted(KERNELS),
                        help="also run our Subset Simulation with this registered kernel (e.g. surface); repeatable")
    parser.add_argument("--problems", default="all", help="comma-separated indices into BENCHMARK_SUITE, or 'all'")
    parser.add_argument("--seed-base", type=int, default=1000, help="repetition r runs every method with seed seed_base + r")
    parser.add_argument("--out", default="benchmarks/results/reliability.json")
    args = parser.parse_args(argv)
    args.methods = [m for m in args.methods.split(",") if m]
    try:
        import competitors
    except ImportError:  # pragma: no cover
        competitors = None
    suite = BENCHMARK_SUITE if args.problems == "all" else [BENCHMARK_SUITE[int(i)] for i in args.problems.split(",")]
    modules = {"openturns": "openturns", "uqpy": "UQpy"}
    unknown = [m for m in args.methods if m not in modules]
    if unknown:
        parser.error(f"--methods takes competitors among {', '.join(modules)} (scarce and Monte Carlo "
                     f"always run), got {', '.join(unknown)}")
    if args.methods:
        missing = [m for m in args.methods if not _importable(modules[m])]
        if missing:
            print(f"competitors not installed: {missing} (pip install -e '.[bench]'); running without them", file=sys.stderr)
            args.methods = [m for m in args.methods if m not in missing]
    start = time.perf_counter()
    summaries, raw = [], {}
    for name, params in suite:
        problem, runs = run_problem(name, params, args, competitors)
        summaries.append(summarise(problem, runs, args))
        # per-run estimates and queries, so runs over other seed sets can be pooled later
        raw[problem.name] = {m: {"estimates": r.estimates, "queries": r.queries} for m, r in runs.items() if r.estimates}
    table = markdown(summaries, args)
    print(f"N = {args.n_samples}, p0 = {args.p0}, {args.reps} repetitions (UQpy: {min(args.uqpy_reps, args.reps)}), "
          f"numpy {np.__version__}, scarce {scarce.__version__}; total {time.perf_counter() - start:.0f} s\n")
    print(table)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"settings": vars(args), "summaries": summaries, "runs": raw}, indent=2, default=str))
    out.with_suffix(".md").write_text(table + "\n")
    return 0


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


if __name__ == "__main__":
    raise SystemExit(main())
