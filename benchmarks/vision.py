"""Vision figures of issue 4: accuracy per query against dense Monte Carlo, and the engine's share.

For held-out seeds whose Monte Carlo ground truth has at least ``--min-failures`` failures, run
margin Subset Simulation and the SCARCE rulers ``--reps`` times each and print, per method:
the median relative error against Monte Carlo, the mean queries, the observed CoV across runs
and from it the queries needed for a 10% relative error (``queries * (CoV / 0.1)**2``), next to
the ``(1 - p) / (0.1**2 p)`` ~ 100/p that Monte Carlo needs. Then whether the error bars hold: per
method, the coverage of the 95% interval against the dense Monte Carlo truth (runs without a flag,
and all runs: a thin-evidence or unreached run's wide interval counts), and the reported CoV over
the CoV observed across runs of a seed. Then the time split: seconds inside
the classifier's forward passes, in the score (margin or ruler), in the noise transform, in the
aCS proposals, in level 0's draws and in the rest of the engine's work, as ratios to the forward
time, and the floor that the normal draws alone set.
On seeds where Monte Carlo saw no failure, it counts ruler-guided results that are positive
although flagged as not having reached the failure event (allowed) or positive and reached.

    python benchmarks/vision.py --run-dir runs/vision-quick --seeds 6 --reps 5

The Monte Carlo run that chooses a seed is its truth by default; ``--truth-samples`` replaces it
with a larger count on independent streams, so that the choice does not bias the truth and the
truth's own noise moves the coverage figures less; ``--truths`` hands in seeds and truths counted
before (by such a command), so that later commands measure more runs against them without
counting again. ``--first-rep`` numbers the runs from a later repetition (run seeds ``1000 x rep
+ seed index``, for seed indices below 1000, which it checks), so a setting chosen on some runs
can be measured again on fresh ones; the dump records each run's seed.

It reuses the run directory's offline stage (classifier, head, rulers) of ``scarce vision``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np
from scipy.stats import binomtest


class _Row(NamedTuple):
    """One method's figures: accuracy over all its runs, and seconds summed over them."""

    name: str
    median_rel_err: float
    queries: float  # mean per run
    cov: float
    queries_at_10pct: float
    wall: float
    forward: float
    score: float
    propose: float
    transform: float
    level0: float
    n_queries: int  # summed over runs


class _Clock:
    def __init__(self) -> None:
        self.seconds = {"propose": 0.0, "transform": 0.0, "level0": 0.0}

    def reset(self) -> None:
        self.seconds = dict.fromkeys(self.seconds, 0.0)

    def wrap(self, owner: type, attribute: str, key: str) -> None:
        original = getattr(owner, attribute)

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.seconds[key] += time.perf_counter() - start

        setattr(owner, attribute, timed)


def _component_clock() -> _Clock:
    """Time the aCS proposals, level 0's draws and the noise transform inside every run (wrapping
    their functions)."""
    import scarce.estimators.splitting as splitting
    import scarce.estimators.subset as subset
    from scarce.applications.vision.noise import GaussianNoise, UniformNoise
    from scarce.kernels import ConditionalSampling

    clock = _Clock()
    clock.wrap(ConditionalSampling, "propose", "propose")
    clock.wrap(subset, "standard_normal", "level0")
    clock.wrap(splitting, "standard_normal", "level0")  # splitting's first draws
    clock.wrap(GaussianNoise, "apply", "transform")
    clock.wrap(UniformNoise, "apply", "transform")
    return clock


def _draw_seconds(draw, reps: int = 20) -> float:
    draw()
    start = time.perf_counter()
    for _ in range(reps):
        draw()
    return (time.perf_counter() - start) / reps


def _print_draw_floor(rows, dim: int, dtype: str) -> None:
    """The least any aCS engine must spend per query: ``d`` standard normal draws (one batch of a
    typical MCMC step), against each method's forward time per query measured above."""
    from scarce.normals import standard_normal

    rng, batch = np.random.default_rng(0), 1800
    engine = _draw_seconds(lambda: standard_normal(rng, (batch, dim), dtype)) / batch
    ziggurat = _draw_seconds(lambda: rng.standard_normal((batch, dim))) / batch
    print(f"\nfloor: drawing the {dim} normals of one query costs {engine * 1e6:.1f} us with the engine's "
          f"{dtype} generator (numpy's float64 ziggurat: {ziggurat * 1e6:.1f} us); as a ratio to each "
          "method's forward time per query, before any other engine work:")
    for row in rows:
        per_query = row.forward / row.n_queries
        print(f"  {row.name:30s} forward {per_query * 1e6:6.1f} us per query   floor {engine / per_query:.3f}")


class _Honesty:
    """Do a method's error bars hold?  95% coverage and reported over observed CoV, against dense Monte Carlo."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.runs: list[tuple[int, float, float, bool, bool, bool, float]] = []

        self.records: list[dict] = []

    def add(self, seed: int, result, truth: float, run_seed: int | None = None) -> None:
        lo, hi = result.ci(0.95)
        flagged = bool(result.flags)
        self.runs.append((seed, result.probability, result.cov, lo <= truth <= hi, flagged,
                          result.thin_evidence, truth))
        self.records.append({"method": self.name, "seed": seed, "run_seed": run_seed, "truth": truth,
                             "estimate": result.probability,
                             "cov": result.cov, "lo": lo, "hi": hi, "flags": list(result.flags),
                             "lineages": result.info.get("failure_lineages"),
                             "lineages_effective": result.info.get("failure_lineages_effective"),
                             "origin_chains": result.info.get("failure_origin_chains"),
                             "origin_level": result.info.get("failure_origin_level"), "n_queries": result.n_queries,
                             "levels": len(result.levels), "failures_below_boundary":
                             result.info.get("failures_below_boundary"),
                             "engine": result.method, "n_samples": result.n_samples,
                             "level_probability": [lv.probability for lv in result.levels],
                             "level_gamma": [float(lv.correlation_factor) for lv in result.levels]})

    @classmethod
    def from_records(cls, name: str, records: list[dict]) -> _Honesty:
        """The same error bars from ``--dump`` records (``benchmarks/vision_pool.py``)."""
        trust = cls(name)
        trust.runs = [(r["seed"], r["estimate"], r["cov"], r["lo"] <= r["truth"] <= r["hi"], bool(r["flags"]),
                       any(f.startswith("thin evidence") for f in r["flags"]), r["truth"]) for r in records]
        trust.records = list(records)
        return trust

    def row(self) -> str:
        seed, est, cov, covered, flagged, thin, truth = (np.array(c) for c in zip(*self.runs))
        plain = ~flagged
        cover_plain = covered[plain].mean() if plain.any() else math.nan
        p = binomtest(int(covered[plain].sum()), int(plain.sum()), 0.95).pvalue if plain.any() else math.nan
        ratios = [cov_ratio_interval(seed, est, cov, keep) for keep in (plain, np.ones_like(plain))]
        shown = " ".join(f"{r:5.2f} ({lo:4.2f}-{hi:4.2f})" for r, lo, hi in ratios)
        reported, error = reported_and_observed_cov(seed, est, cov, plain, truth=truth)
        # the standard error over the truth: the CoV times the run's own estimate, over the truth
        with np.errstate(divide="ignore", invalid="ignore"):
            standard, _ = reported_and_observed_cov(seed, est, cov * est / truth, plain, truth=truth)
        return (f"{self.name:30s} {len(est):5d} {plain.sum():9d} {thin.sum():5d} {(flagged & ~thin).sum():13d} "
                f"{cover_plain:10.3f} {p:6.3f} {covered.mean():9.3f} {shown} "
                f"{reported / error if error > 0 else math.nan:14.2f} "
                f"{standard / error if error > 0 else math.nan:13.2f}")


def cov_ratio_interval(seed: np.ndarray, est: np.ndarray, cov: np.ndarray, keep: np.ndarray,
                       draws: int = 1000) -> tuple[float, float, float]:
    """Reported over observed CoV (:func:`reported_and_observed_cov`) and its 95% bootstrap interval.

    The bootstrap resamples runs within each seed (generator seed 0), so every seed keeps its runs'
    number and the interval reflects only the runs' own scatter.
    """
    rep, obs = reported_and_observed_cov(seed, est, cov, keep)
    if not obs > 0:
        return math.nan, math.nan, math.nan
    rng, rows = np.random.default_rng(0), [np.flatnonzero(seed == s) for s in np.unique(seed)]
    boots = []
    for _ in range(draws):
        pick = np.concatenate([rng.choice(r, r.size) for r in rows])
        r, o = reported_and_observed_cov(seed[pick], est[pick], cov[pick], keep[pick])
        if o > 0:
            boots.append(r / o)
    lo, hi = np.percentile(boots, [2.5, 97.5]) if boots else (math.nan, math.nan)
    return rep / obs, float(lo), float(hi)


def reported_and_observed_cov(seed: np.ndarray, est: np.ndarray, cov: np.ndarray,
                              keep: np.ndarray, truth: np.ndarray | None = None) -> tuple[float, float]:
    """Reported and observed CoV over the same runs and seeds, each a root mean square over seeds.

    Per seed, over its kept runs with a finite CoV (at least 3, with a positive mean): the
    observed CoV is their spread over their mean, the reported one the root mean square of
    their CoVs. Every seed weighs the same in both, so a seed with many kept runs and a small CoV
    cannot pull the reported side alone. With ``truth`` (each run's), the observed side is their
    root mean square relative error about it instead: where the kept runs are a selection (the
    unflagged ones) whose mean is not the truth, their spread over their own mean understates how
    far they err. The truth's own Monte Carlo error adds its CoV in quadrature (about 2% at 10^7
    samples and p = 2e-4).
    """
    reported, observed = [], []
    for s in np.unique(seed):
        pick = (seed == s) & keep & np.isfinite(cov) & (True if truth is None else truth > 0)
        e = est[pick]
        if e.size > 2 and (truth is not None or e.mean() > 0):
            reported.append(np.mean(np.square(cov[pick])))
            observed.append((np.std(e, ddof=1) / np.mean(e)) ** 2 if truth is None
                            else np.mean(np.square(e / truth[pick] - 1.0)))
    if not observed:
        return math.nan, math.nan
    return float(np.sqrt(np.mean(reported))), float(np.sqrt(np.mean(observed)))


def _print_honesty(honesty: list[_Honesty], reps: int, n_seeds: int) -> None:
    print(f"\nError bars against dense Monte Carlo ({n_seeds} seeds x {reps} runs; unflagged = reached, "
          "no flag; thin = thin-evidence flag; coverage of the 95% interval, p: exact binomial test of the "
          "unflagged coverage against 0.95; reported over observed CoV, each a root mean square over seeds, "
          "with a 95% bootstrap interval, over the unflagged runs and over all runs; rep/err: the unflagged runs' "
          "reported CoV over their relative error about the truth, each a root mean square over seeds; SE/err: "
          "the same with each run's reported standard error, its CoV times its estimate, over the truth)")
    print(f"{'method':30s} {'runs':>5s} {'unflagged':>9s} {'thin':>5s} {'other flags':>13s} "
          f"{'cov. unfl.':>10s} {'p':>6s} {'cov. all':>9s} {'rep/obs, unflagged':>18s} {'rep/obs, all':>18s} "
          f"{'rep/err, unfl.':>14s} {'SE/err, unfl.':>13s}")
    for trust in honesty:
        print(trust.row())


def main() -> None:
    parser = _parser()
    args = parser.parse_args()
    args.explicit = _given_options(sys.argv[1:])
    _check_args(parser, args)

    import torch

    from scarce._allocator import keep_large_blocks
    from scarce.applications.vision.protocol import parse_overrides
    from scarce.experiments.executors import blas_threads

    keep_large_blocks()  # as every task process of a real run does (scarce.experiments.executors)
    torch.set_num_threads(args.threads)
    # one BLAS thread, as every task of a real run has: numpy's two OpenBLAS threads spin after a
    # ruler's score and slow torch's threads (ocsvm forward passes 131 against 40 us per query)
    with blas_threads(1):
        _measure(args, preset_overrides=parse_overrides(args.set, args.preset))


def _parser() -> argparse.ArgumentParser:
    """The command line: the options that choose seeds and truths, then those of the runs measured."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _add_seed_options(parser)
    _add_run_options(parser)
    return parser


def _given_options(argv: list[str]) -> set[str]:
    """The options ``argv`` names, whatever their values (a default given explicitly counts)."""
    parser = _parser()
    for action in parser._actions:  # every default left out: what parses is what was given
        action.default = argparse.SUPPRESS
    return set(vars(parser.parse_known_args(argv)[0]))


def _add_seed_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run-dir", default="runs/vision-quick")
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--smc-samples", type=int, default=100_000)
    parser.add_argument("--truth-samples", type=int, default=0,
                        help="with a positive count, each chosen seed's truth is a new Monte Carlo count of this many "
                             "samples on streams independent of the choosing run (default: the choosing run's count)")
    parser.add_argument("--min-failures", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=6, help="seeds with enough Monte Carlo failures")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="consider only seed indices from this one on (an independent set: seeds another "
                             "run did not choose from)")
    parser.add_argument("--max-p", type=float, default=None,
                        help="keep only seeds whose dense Monte Carlo probability is at most this (the label-only "
                             "figure asks for p <= 1e-4); candidates then include seeds the run's Monte Carlo never "
                             "saw fail")
    parser.add_argument("--truths", default=None, metavar="SEED=P,...",
                        help="measure these seed indices against these truths (for example an earlier command's "
                             "--truth-samples counts) instead of choosing seeds; the options that choose them "
                             "(--seeds, --first-seed, --max-p, --min-failures, --smc-samples, --truth-samples) are "
                             "refused beside it")
    parser.add_argument("--truth-classifier", default=None, metavar="DIGEST",
                        help="with --truths: the weights digest (its first 12 or more hex digits) of the classifier "
                             "the truths were counted on; a run directory whose classifier has other weights (trained "
                             "on another processor, say) is refused instead of being measured against them")


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--zero-seeds", type=int, default=4, help="seeds with no Monte Carlo failure")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--first-rep", type=int, default=0, metavar="R",
                        help="number the runs from repetition R (run seed 1000 x rep + seed index, rep from R "
                             "to R + reps - 1): runs no earlier command made need R at least its --first-rep + "
                             "--reps; for a setting chosen on earlier runs")
    parser.add_argument("--n-samples", type=int, default=2000, help="Subset Simulation N per level")
    parser.add_argument("--rulers", default="",
                        help="comma-separated rulers, 'all', or 'none' (default: the run's top 3)")
    parser.add_argument("--splitting", action="append", default=[], metavar="N,k,T,R[,KERNEL]",
                        help="also run adaptive multilevel splitting on the baseline's score (margin, or the "
                             "surrogate's margin with --set access=labels) with N particles, k killed, T moves "
                             "and R replicas, and the kernel of that registry name (default acs; repeat for "
                             "several settings)")
    parser.add_argument("--subset", action="append", default=[], metavar="N,KERNEL[,P0[,FIRST]]",
                        help="also run Subset Simulation on the baseline's score with N samples a level, the "
                             "kernel of that registry name (acs, mma, surface), level probability P0 "
                             "(default 0.1) and first level FIRST (mc or lhs; default the baseline's); repeat for "
                             "several settings")
    parser.add_argument("--target-acceptance", type=float, default=None, metavar="A",
                        help="acceptance rate the measured Subset Simulation runs (margin, rulers, zero seeds and "
                             "--subset rows with acs) steer their aCS scale toward (default: the preset's "
                             "methods.target_acceptance); the run directory's stored results are read as they are")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="preset overrides, as given to `scarce vision --set` for the run directory")
    parser.add_argument("--data-dir", default=None, help="MNIST IDX directory (preset paper)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or auto: where forward passes run")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--dump", default=None, help="write every run's estimate, interval, flags and each level's probability and "
                             "correlation factor here (JSON lines; benchmarks/vision_pool.py reads them)")


def _check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse bad option values before any model or Monte Carlo work."""
    if args.first_rep < 0:
        parser.error(f"--first-rep must be 0 or more, got {args.first_rep}")
    args.given = _parse_truths(parser, args.truths) if args.truths is not None else None
    if args.given is not None:  # the options that choose seeds would be silently unused
        choosing = [f"--{name.replace('_', '-')}" for name in ("seeds", "first_seed", "max_p", "min_failures",
                                                               "smc_samples", "truth_samples")
                    if name in args.explicit]
        if choosing:
            parser.error(f"--truths hands in the seeds and their truths; {', '.join(choosing)} would choose them: "
                         "leave them out")
    digest = args.truth_classifier
    if digest is not None and (args.given is None or len(digest) < 12
                               or any(c not in "0123456789abcdef" for c in digest.lower())):
        parser.error(f"--truth-classifier takes the first 12 or more hex digits of a weights digest, beside --truths; "
                     f"got {digest!r}" + ("" if args.given is not None else " without --truths"))
    if args.reps < 2:
        parser.error(f"--reps must be at least 2 (a seed's CoV is measured across its runs), got {args.reps}")
    if args.truth_samples and args.truth_samples < args.smc_samples:
        parser.error(f"--truth-samples must be 0 (the choosing run's count) or at least --smc-samples "
                     f"({args.smc_samples}), got {args.truth_samples}")
    if args.target_acceptance is not None and not 0.0 < args.target_acceptance < 1.0:
        parser.error(f"--target-acceptance must lie strictly between 0 and 1, got {args.target_acceptance}")


def _splitting_method(baseline: str, spec: str, dtype: str) -> tuple[str, object, str]:
    """The ``--splitting N,k,T,R[,KERNEL]`` row: adaptive multilevel splitting on the baseline's score, its
    latents in the precision Subset Simulation uses."""
    from scarce.estimators.splitting import AdaptiveMultilevelSplitting

    fields = spec.split(",")
    try:
        n, k, t, r = (int(v) for v in fields[:4])
    except ValueError:
        raise SystemExit(f"--splitting must be four integers N,k,T,R, optionally followed by a kernel name, "
                         f"got {spec!r}") from None
    kernel = _kernel(fields[4:], spec, "--splitting")
    engine = AdaptiveMultilevelSplitting(n_samples=n, n_killed=k, n_steps=t, n_replicas=r, dtype=dtype,
                                         kernel=kernel)
    score = "surrogate margin" if baseline == "ss_surrogate" else "margin"
    label = f"Splitting N={n} k={k} T={t} R={r}" + (f" {kernel.name}" if len(fields) > 4 else "")
    return baseline, engine, label + ("" if score == "margin" else f" ({score})")


def _subset_method(baseline: str, spec: str, settings) -> tuple[str, object, str]:  # type: ignore[no-untyped-def]
    """The ``--subset N,KERNEL[,P0[,FIRST]]`` row: Subset Simulation on the baseline's score with that
    kernel, ``p0`` and first level (``mc`` or ``lhs``; default the baseline's).

    Its other settings are the baseline's (level cap, latent precision, stopping and
    seed-counting rules, and for ``acs`` the target acceptance), so the row differs from the
    baseline only in what its spec names.
    """
    from scarce import SubsetSimulation

    fields = spec.split(",")
    try:
        n = int(fields[0])
        p0 = float(fields[2]) if len(fields) > 2 else 0.1
        first = fields[3] if len(fields) > 3 else settings.first_level
        if len(fields) > 4 or first not in ("mc", "lhs"):
            raise ValueError(spec)
    except ValueError:
        raise SystemExit(f"--subset must be an integer N, a kernel name and optionally a level probability and a "
                         f"first level (mc or lhs), got {spec!r}") from None
    kernel = _kernel(fields[1:2], spec, "--subset")
    if kernel.name == "acs":  # the baseline's target acceptance (methods.target_acceptance)
        from scarce.kernels import ConditionalSampling

        kernel = ConditionalSampling(target_acceptance=settings.target_acceptance)
    score = "surrogate margin" if baseline == "ss_surrogate" else "margin"
    label = f"Subset N={n} {kernel.name}" + (f" p0={p0:g}" if len(fields) > 2 else "")
    label += f" {first}" if len(fields) > 3 else ""
    label += "" if score == "margin" else f" ({score})"
    engine = SubsetSimulation(n_samples=n, level_probability=p0, kernel=kernel, dtype=settings.latent_dtype,
                              first_level=first, max_levels=settings.max_levels,
                              stop_factor=settings.stop_factor, count_seeds=settings.count_seeds)
    return baseline, engine, label


def _kernel(fields: list[str], spec: str, option: str):  # type: ignore[no-untyped-def]
    """The kernel a row's spec names (adaptive conditional sampling when it names none)."""
    from scarce.kernels import KERNELS, make_kernel

    if len(fields) > 1 or (fields and fields[0] not in KERNELS):
        raise SystemExit(f"{option}: the last field must be one kernel name from {sorted(KERNELS)}, got {spec!r}")
    return make_kernel(fields[0] if fields else "acs")


#: Samples per independent stream of ``--truth-samples``: each chunk has its own seed, so chunks
#: can run apart (or in parallel processes) and pool to the same count.
TRUTH_CHUNK = 5_000_000
#: First entropy word of the ``--truth-samples`` streams (chunk ``c`` uses ``_TRUTH_STREAM + c``): above
#: every word :func:`_stream` uses, so the independent truth shares no draws with choosing the seed.
_TRUTH_STREAM = 30_000


def _parse_truths(parser: argparse.ArgumentParser, spec: str) -> dict[int, float]:
    """``--truths SEED=P,...`` as {seed index: probability}; each index once, each P in (0, 1)."""
    given: dict[int, float] = {}
    for item in spec.split(","):
        seed, _, value = item.partition("=")
        try:
            index, p = int(seed), float(value)
        except ValueError:
            parser.error(f"--truths must be SEED=P pairs separated by commas, got {item!r}")
        if index < 0 or index in given or not 0.0 < p < 1.0:
            parser.error(f"--truths: {item!r} needs a new seed index >= 0 and a probability strictly between 0 and 1")
        given[index] = p
    return given


def _refuse_shared_run_seeds(indices: list[int]) -> None:
    """Stop on a seed index of 1000 or more: its runs' seeds ``1000 x rep + index`` are another seed's at a later rep.

    Two seeds' runs on one random stream draw the same noise on two images, so their errors
    would be correlated and the figures pooled over seeds would count them as independent.
    """
    wide = sorted(i for i in indices if i >= 1000)
    if wide:
        raise SystemExit(f"seed indices {wide} are 1000 or more: their runs' seeds (1000 x rep + seed index) would "
                         f"repeat those of seed index {wide[0] - 1000} at the next repetition; measure seed indices "
                         f"below 1000")


def _given_seeds(given: dict[int, float], context) -> tuple[list[int], dict[int, float]]:  # type: ignore[no-untyped-def]
    """The seeds and truths ``--truths`` hands in, each index checked against the run's seed images."""
    count = len(context.seed_images)
    if any(i >= count for i in given):
        raise SystemExit(f"--truths names seed indices {sorted(i for i in given if i >= count)}; the run has {count} "
                         f"seed images (indices 0-{count - 1})")
    print(f"seeds and truths handed in by --truths: {len(given)} {[f'{i}: {p:.4e}' for i, p in given.items()]}",
          flush=True)
    return list(given), dict(given)


def _choose_seeds(args: argparse.Namespace, context, truth, preset) -> tuple[list[int], dict[int, float]]:
    """The held-out seeds to measure and each one's Monte Carlo truth.

    Seeds are chosen on a dense Monte Carlo run of ``--smc-samples``: at least ``--min-failures``
    failures and, with ``--max-p``, a probability at most that. That run is also the truth unless
    ``--truth-samples`` asks for more: then every chosen seed's truth is a new count on streams
    that played no part in choosing it, in chunks of :data:`TRUTH_CHUNK` samples, each on its own
    stream. Its relative standard error ``1 / sqrt(failures)`` should sit well below the runs' CoV,
    because a truth off by a fraction of the runs' spread moves every coverage figure of its seed.
    """
    from scarce.applications.vision.methods import MethodSettings, run_method

    smc = MethodSettings(smc_samples=args.smc_samples)
    flipped = truth.p_hat > 0 if args.max_p is None else truth.p_hat <= args.max_p
    candidates = truth[flipped & (truth.p_hat <= preset.max_probability)
                       & (truth.index >= args.first_seed)].index.tolist()
    if args.max_p is not None:
        candidates = _rank_rare_candidates(args, context, candidates)
    chosen, dense = [], {}
    for i in candidates:
        if len(chosen) >= args.seeds:
            break
        image, label = context.seed_images[i], int(context.seed_labels[i])
        result, _ = run_method("smc", context.model, image, label, context.noise, smc, seed=_stream("truth", i))
        if result.n_failed >= args.min_failures and (args.max_p is None or result.probability <= args.max_p):
            chosen.append(i)
            dense[i] = result.probability
    print(f"seeds with >= {args.min_failures} failures in {args.smc_samples} Monte Carlo samples: "
          f"{len(chosen)} {[f'{dense[i]:.2e}' for i in chosen]}", flush=True)
    if args.truth_samples > 0:
        for i in chosen:
            failed, total = _independent_truth(args.truth_samples, context, i)
            if failed < args.min_failures:  # refused, not dropped: dropping would choose seeds on this count
                raise SystemExit(f"seed {i}: the independent truth saw {failed} failures in {total} samples, fewer "
                                 f"than --min-failures {args.min_failures}; raise --truth-samples")
            print(f"  seed {i}: truth {failed / total:.4e} from {failed} failures in {total} samples (relative "
                  f"SE {1 / math.sqrt(failed):.3f}; the choosing run said {dense[i]:.3e})", flush=True)
            dense[i] = failed / total
    return chosen, dense


def _independent_truth(samples: int, context, i: int) -> tuple[int, int]:
    """Failures and samples of seed ``i``'s Monte Carlo truth on the ``--truth-samples`` streams."""
    from scarce.applications.vision.methods import MethodSettings, run_method

    image, label = context.seed_images[i], int(context.seed_labels[i])
    failed = total = 0
    for chunk in range(-(-samples // TRUTH_CHUNK)):
        size = min(TRUTH_CHUNK, samples - chunk * TRUTH_CHUNK)
        result, _ = run_method("smc", context.model, image, label, context.noise, MethodSettings(smc_samples=size),
                               seed=_words(_TRUTH_STREAM + chunk, i))
        failed, total = failed + result.n_failed, total + result.n_samples
    return failed, total


def _stream(purpose: str, seed_index: int) -> np.random.SeedSequence:
    """The random stream of a seed's dense Monte Carlo truth or probe (:func:`_words`)."""
    return _words({"truth": 10_000, "probe": 20_000}[purpose], seed_index)


def _words(first: int, seed_index: int) -> np.random.SeedSequence:
    """A two-word entropy ``[first, seed_index]`` that no method run's integer seed (``1000 * rep + i``)
    can equal, at any number of repetitions.

    NumPy's ``SeedSequence`` drops trailing zero words, so ``[first, 0]`` would be the integer seed
    ``first`` itself, the seed of a method run on seed index 0; that index gets a third word, 1.
    """
    return np.random.SeedSequence([first, seed_index] if seed_index else [first, 0, 1])


def _rank_rare_candidates(args: argparse.Namespace, context, candidates: list[int]) -> list[int]:
    """Candidates for ``--max-p``, probed and ordered so the dense runs (minutes a seed) go where
    they can succeed.

    Every candidate first gets a probe of a twentieth of the dense budget, on its own random
    seed (so choosing on it does not bias the dense count). A probe expecting fewer than half of
    ``--min-failures`` in the dense run, or above three times ``--max-p``, is dropped. The rest are
    ordered: probes inside ``[1.5 min_failures / budget, max_p]`` first, most failures first (the
    densest truth), then the others by their distance from that range in log-probability.
    """
    from scarce.applications.vision.methods import MethodSettings, run_method

    probe = MethodSettings(smc_samples=max(args.smc_samples // 20, 1))
    low, high = max(1.5 * args.min_failures, 1) / args.smc_samples, args.max_p
    if low > high:
        print(f"warning: --max-p {high:g} is below 1.5 x --min-failures / --smc-samples = {low:g}: no seed can "
              "reach the failures asked for; raise --smc-samples", flush=True)
    kept = []
    start = time.perf_counter()
    for i in candidates:
        first, _ = run_method("smc", context.model, context.seed_images[i], int(context.seed_labels[i]),
                              context.noise, probe, seed=_stream("probe", i))
        expected = first.n_failed * args.smc_samples / probe.smc_samples
        if expected >= args.min_failures / 2 and first.probability <= 3 * args.max_p:
            p = first.probability
            distance = 0.0 if low <= p <= high else min(abs(math.log(p / low)), abs(math.log(p / high)))
            kept.append((distance, -p, i))
    print(f"probed {len(candidates)} candidates with {probe.smc_samples} samples each "
          f"({time.perf_counter() - start:.0f} s): {len(kept)} may hold p <= {args.max_p:g} with enough failures",
          flush=True)
    return [i for _, _, i in sorted(kept)]


def _measure(args: argparse.Namespace, preset_overrides: dict) -> None:
    """Run the baseline, the rulers and any splitting on the chosen seeds and print every table."""
    from scarce.applications.vision.methods import MethodSettings
    from scarce.applications.vision.pipeline import build_context
    from scarce.applications.vision.protocol import VisionRun, get_preset
    from scarce.errors import ScarceWarning
    from scarce.applications.vision.analysis import result_rows

    warnings.simplefilter("ignore", ScarceWarning)
    preset = get_preset(args.preset, **preset_overrides)
    context = build_context(preset, args.run_dir, data_dir=args.data_dir, log=lambda *_: None, device=args.device)
    weights = context.info["classifier_sha256"]
    print(f"device {context.model.device}; data {context.info['data']}; classifier test accuracy "
          f"{context.info['test_accuracy']:.4f}, weights {weights[:16]}; repetitions "
          f"{args.first_rep}-{args.first_rep + args.reps - 1}")
    if args.truth_classifier and not weights.startswith(args.truth_classifier.lower()):
        raise SystemExit(f"--truths were counted on the classifier {args.truth_classifier}, and {args.run_dir}'s has "
                         f"the weights {weights[:16]}: count the truths on this one (--truth-samples)")
    run = VisionRun(preset, Path(args.run_dir), context)
    frame = result_rows(run.store)
    rulers = _choose_rulers(args.rulers, frame)
    truth = frame[frame.stage == "smc"].set_index("seed_index")
    settings = MethodSettings(ss_samples=args.n_samples, max_levels=12,
                              target_acceptance=preset.methods.target_acceptance if args.target_acceptance is None
                              else args.target_acceptance)

    chosen, dense = _given_seeds(args.given, context) if args.given else _choose_seeds(args, context, truth, preset)
    _refuse_shared_run_seeds(chosen)

    clock = _component_clock()
    methods = _methods(preset, rulers, args.splitting, settings, args.subset)
    per_seed_ratio: dict[str, list[float]] = {}
    rows, honesty = [], []
    for method in methods:
        row, trust = _run_over_seeds(args, context, settings, clock, method, chosen, dense, per_seed_ratio)
        honesty.append(trust)
        if args.dump:
            _dump_records(args.dump, trust, weights[:16])
        rows.append(row)
    _print_accuracy(rows, per_seed_ratio, chosen, dense)
    _print_honesty(honesty, args.reps, len(chosen))
    _print_time_split(rows)
    _print_draw_floor(rows, int(np.asarray(context.seed_images[0]).size), settings.latent_dtype)
    _check_zero_seeds(args, context, truth, rulers, settings.target_acceptance)


def _choose_rulers(spec: str, frame) -> list[str]:
    """The rulers ``--rulers`` names: a comma-separated list, 'all', 'none', or (empty) the run's top 3."""
    from scarce.applications.vision.analysis import rank_rulers

    if spec == "all":
        return list(rank_rulers(frame).ruler)
    if spec == "none":
        return []
    return [r for r in spec.split(",") if r] or list(rank_rulers(frame).ruler[:3])


def _methods(preset, rulers: list[str], splitting: list[str], settings,
             subset: list[str] = ()) -> list[tuple[str, object, str]]:
    """The methods to measure, as (method key: the score; engine, None for the settings' own; name)."""
    from scarce.applications.vision.methods import display_name

    # without logits (access=labels) the baseline is Subset Simulation on the surrogate's margin
    baseline = "ss_surrogate" if getattr(preset, "access", "logits") == "labels" else "ss_margin"
    methods = [(key, None, display_name(key)) for key in (baseline, *(f"scarce:{r}" for r in rulers))]
    return (methods + [_splitting_method(baseline, spec, settings.latent_dtype) for spec in splitting]
            + [_subset_method(baseline, spec, settings) for spec in subset])


def _run_over_seeds(args: argparse.Namespace, context, settings, clock: _Clock, method: tuple[str, object, str],
                    chosen: list[int], dense: dict[int, float],
                    per_seed_ratio: dict[str, list[float]]) -> tuple[_Row, _Honesty]:
    """Run one method ``--reps`` times on every chosen seed: its row of figures and its error-bar record.

    Each seed's queries for a 10% error over Monte Carlo's goes to ``per_seed_ratio`` under the method's name.
    """
    from scarce.applications.vision.methods import run_method

    key, engine, name = method
    rel, queries, walls, forwards, scores, log_ratio = [], [], [], [], [], []
    trust = _Honesty(name)
    clock.reset()
    for i in chosen:
        image, label = context.seed_images[i], int(context.seed_labels[i])
        estimates = []
        for rep in range(args.first_rep, args.first_rep + args.reps):
            result, timing = run_method(key, context.model, image, label, context.noise, settings,
                                        rulers=context.rulers, seed=1000 * rep + i, estimator=engine)
            trust.add(i, result, dense[i], run_seed=1000 * rep + i)
            estimates.append(result.probability)
            rel.append(abs(result.probability / dense[i] - 1))
            queries.append(result.n_queries)
            walls.append(timing["wall"])
            forwards.append(timing["forward"])
            scores.append(timing["score"])
        estimates = np.array(estimates)
        seed_cov = np.std(estimates, ddof=1) / np.mean(estimates) if estimates.mean() > 0 else math.inf
        log_ratio.append(seed_cov)
        # this seed's queries for a 10% error over Monte Carlo's (1 - p) / (0.01 p)
        seed_queries = float(np.mean(queries[-args.reps:])) * (seed_cov / 0.1) ** 2
        per_seed_ratio.setdefault(name, []).append(
            seed_queries / ((1 - dense[i]) / (0.01 * dense[i])))
    cov = float(np.sqrt(np.mean(np.square(log_ratio))))
    q = float(np.mean(queries))
    row = _Row(name, float(np.median(rel)), q, cov, q * (cov / 0.1) ** 2,
               float(np.sum(walls)), float(np.sum(forwards)), float(np.sum(scores)),
               clock.seconds["propose"], clock.seconds["transform"], clock.seconds["level0"],
               int(np.sum(queries)))
    return row, trust


def _dump_records(path: str, trust: _Honesty, classifier: str) -> None:
    """Append a method's runs (estimate, interval, flags) to the ``--dump`` file, one JSON line each,
    with the classifier's weights digest (the truths hold for that classifier only)."""
    import json

    with open(path, "a", encoding="utf-8") as out:
        out.writelines(json.dumps({**record, "classifier": classifier}, default=float) + "\n"
                       for record in trust.records)


def _print_accuracy(rows: list[_Row], per_seed_ratio: dict[str, list[float]], chosen: list[int],
                    dense: dict[int, float]) -> None:
    """Print the accuracy table against Monte Carlo's 100/p, and each seed's queries over Monte Carlo's."""
    p_mean = float(np.mean([dense[i] for i in chosen]))
    print()
    print(f"{'method':30s} {'median rel err':>14s} {'queries':>9s} {'CoV':>6s} {'queries@10%':>12s}")
    for row in rows:
        print(f"{row.name:30s} {row.median_rel_err:14.3f} {row.queries:9.0f} {row.cov:6.3f} "
              f"{row.queries_at_10pct:12.0f}")
    smc_q10 = np.mean([(1 - dense[i]) / (0.01 * dense[i]) for i in chosen])
    print(f"{'SMC (100/p)':30s} {'':14s} {'':9s} {'':6s} {smc_q10:12.0f}   (mean p {p_mean:.2e})")
    print("\nqueries for a 10% error over Monte Carlo's 100/p, per seed (seed order as above), and their median:")
    for name, ratios in per_seed_ratio.items():
        print(f"{name:30s} median {np.median(ratios):7.3f}   " + " ".join(f"{r:.3f}" for r in ratios))


def _print_time_split(rows: list[_Row]) -> None:
    """Print each method's seconds per component as ratios to its forward-pass time."""
    print("\nTime split, as ratios to the classifier's forward-pass time (sums over all runs):")
    print(f"{'method':30s} {'forward s':>10s} {'score':>7s} {'input transform':>16s} {'aCS proposals':>14s} "
          f"{'level-0 draws':>14s} {'engine other':>13s} {'engine total':>13s}")
    for row in rows:
        fwd = row.forward
        other = row.wall - fwd - row.score - row.propose - row.transform - row.level0
        engine = row.propose + row.level0 + other
        print(f"{row.name:30s} {fwd:10.2f} {row.score / fwd:7.3f} {row.transform / fwd:16.3f} "
              f"{row.propose / fwd:14.3f} {row.level0 / fwd:14.3f} {other / fwd:13.3f} {engine / fwd:13.3f}")
    print("(input transform: x = clip(x0 + sigma*u); aCS proposals: 784 normal draws per point and the "
          "update; level-0 draws: the first level's N samples; engine other: levels, chains, bookkeeping)")


def _check_zero_seeds(args: argparse.Namespace, context, truth, rulers: list[str], target: float) -> None:
    """Print how ruler-guided runs end on seeds with no Monte Carlo failure: they must give 0 or a flagged
    partial result."""
    from scarce.applications.vision.methods import MethodSettings, run_method

    zero = truth[truth.n_failed == 0].index.tolist()[: args.zero_seeds]
    _refuse_shared_run_seeds(zero)
    counts = {"zero": 0, "positive, flagged not reached": 0, "positive, reached": 0}
    start = time.perf_counter()
    for i in zero:
        image, label = context.seed_images[i], int(context.seed_labels[i])
        for r in rulers:
            result, _ = run_method(f"scarce:{r}", context.model, image, label, context.noise,
                                   MethodSettings(ss_samples=1000, max_levels=8, target_acceptance=target),
                                   rulers=context.rulers,
                                   seed=1000 * args.first_rep + i)
            if result.probability == 0:
                counts["zero"] += 1
            elif not result.reached_failure:
                counts["positive, flagged not reached"] += 1
            else:
                counts["positive, reached"] += 1
    print(f"\nseeds with no Monte Carlo failure ({len(zero)} seeds x {len(rulers)} rulers, "
          f"{time.perf_counter() - start:.0f} s): {counts}")


if __name__ == "__main__":
    main()
