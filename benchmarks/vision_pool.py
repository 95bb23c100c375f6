"""Pool the ``--dump`` files of several ``benchmarks/vision.py`` commands and compare their methods.

A ratio of queries for a 10% error between two methods is known only roughly from a few hundred
runs a seed (the benchmark page gives the bootstrap intervals), and a setting chosen on one set
of runs must be measured again on fresh ones (``vision.py --first-rep``). This script reads the runs those commands dumped, groups them by a
label per setting (one command's dump may hold several methods), and prints, for every label and
method, over the pooled runs:

* queries for a 10% relative error, the benchmark's own formula: the mean queries per run times
  ``(c / 0.1)^2``, ``c`` the root mean square over seeds of each seed's observed CoV (spread over
  mean of its estimates);
* its ratio to the baseline (``--baseline LABEL:METHOD``), with a 95% bootstrap interval: each
  seed's runs resampled, both sides independently, ``--draws`` times (generator seed 0);
* the 95% interval's coverage of the truth over unflagged runs and over all runs, and the reported
  over observed CoV (``vision.py``'s ``reported_and_observed_cov``, over all runs).

Then, for the Subset Simulation rows whose dumps hold each level's probability and correlation
factor, where the queries go: the same figure from Au and Beck's variance of each run's levels,
``sum_l (1 - p_l)(1 + gamma_l) / (p_l N)`` over the levels after the first (a run that ended at
level 0 is Monte Carlo, ``(1 - P) / (P N)``), once with the measured ``gamma_l`` and once with
``gamma_l = 0``, which is Subset Simulation with independent samples at the same levels (for a
Latin-hypercube first level the formula keeps its independent draws' term); beside them the
splitting limit, ``100 ln(1/p) (1 + ln(1/p))`` averaged over the seeds' truths, and the mean
correlation factor of the levels of chains before the last, and of the last.

Last, the error bars of every label and method, ``vision.py``'s table over the pooled runs (unflagged,
thin-evidence and otherwise flagged runs; coverage of the unflagged ones with the exact binomial
test against 0.95; coverage of all; reported over observed CoV over the unflagged runs and over all,
with bootstrap intervals), beside the unflagged misses below and above the truth; and, for each
label, its rulers (the methods named ``SCARCE ...``) pooled, with Wilson's interval.

    python benchmarks/vision_pool.py --baseline 0.35:"Margin SS" \\
        --runs 0.35=a_035.jsonl,b_035.jsonl --runs 0.5=a_050.jsonl,b_050.jsonl

Every method keeps the seeds it ran on; a label whose dumps disagree on a seed's truth is refused,
since its runs would then not be runs of one problem. A run two dumps of a label both hold (every
command dumps its baseline) counts once; two different records of one run are refused.
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict

import numpy as np
from scipy.stats import binomtest
from vision import _Honesty, _parse_truths, reported_and_observed_cov


def read_runs(spec: list[str], truths: dict[int, float] | None = None) -> dict[tuple[str, str], list[dict]]:
    """The runs of every ``LABEL=FILE[,FILE...]``, keyed by (label, method); each distinct run once.

    Every ``vision.py`` command dumps its baseline too, so commands that shared repetitions hold
    the same baseline runs: a record equal to one already read (the same seed and run seed, the
    same numbers) is one run and is kept once. Two different records under one seed and run
    seed, or a file named twice under one label, are refused, and so is a label whose runs name
    two classifiers (the dumps' weights digests): a seed's truth holds for one classifier. With
    ``truths``, those seeds' runs are scored against them instead of the truth they were dumped with
    (truths recounted on the run directory's classifier, say).
    """
    runs: dict[tuple[str, str], list[dict]] = defaultdict(list)
    seen: dict[tuple[str, str, int, object], dict] = {}
    for item in spec:
        label, _, files = item.partition("=")
        if not label or not files:
            raise SystemExit(f"--runs must be LABEL=FILE[,FILE...], got {item!r}")
        paths = files.split(",")
        if len(set(paths)) != len(paths):
            raise SystemExit(f"--runs {label}: a file is named twice; its runs would count twice")
        for path in paths:
            for number, record in _records(path, label):
                key = (label, record["method"], record["seed"], record.get("run_seed"))
                if key[3] is not None and key in seen:
                    if seen[key] != record:
                        raise SystemExit(f"{path}, line {number}: {record['method']!r} seed {record['seed']} run seed "
                                         f"{key[3]} is already pooled with other numbers; pool runs of one engine only")
                    continue
                seen[key] = record
                if truths is not None and record["seed"] in truths:
                    record = {**record, "truth": truths[record["seed"]]}
                runs[(label, record["method"])].append(record)
    for (label, method), records in runs.items():
        seed_truths: dict[int, set[float]] = defaultdict(set)
        for r in records:
            seed_truths[r["seed"]].add(r["truth"])
        if any(len(t) > 1 for t in seed_truths.values()):
            raise SystemExit(f"{label} {method!r}: the dumps give one seed two truths; pool runs of one problem only")
        classifiers = {r["classifier"] for r in records if "classifier" in r}
        if len(classifiers) > 1:
            raise SystemExit(f"{label} {method!r}: the dumps ran on {len(classifiers)} classifiers "
                             f"({', '.join(sorted(classifiers))}); pool runs of one classifier only")
    return runs


def _records(path: str, label: str) -> list[tuple[int, dict]]:
    """The numbered records of one ``--dump`` file."""
    try:
        with open(path, encoding="utf-8") as lines:
            text = lines.readlines()
    except OSError as error:
        raise SystemExit(f"--runs {label}: cannot read {path!r} ({error.strerror})") from None
    out = []
    for number, line in enumerate(text, 1):
        try:
            record = json.loads(line)
            record["method"], record["seed"]  # noqa: B018 - a record must name both
        except (ValueError, KeyError, TypeError) as error:
            raise SystemExit(f"{path}, line {number}: not a vision.py --dump record ({error})") from None
        out.append((number, record))
    return out


def queries_for_10pct(seed: np.ndarray, estimate: np.ndarray, queries: np.ndarray) -> float:
    """Mean queries times ``(c / 0.1)^2``, ``c`` the RMS over seeds of each seed's spread over mean."""
    covs = []
    for s in np.unique(seed):
        e = estimate[seed == s]
        covs.append(np.std(e, ddof=1) / np.mean(e) if e.size > 1 and e.mean() > 0 else math.inf)
    return float(np.mean(queries) * np.mean(np.square(covs)) / 0.01)


class _Runs:
    """One (label, method)'s pooled runs as arrays, with a resampler that keeps each seed's run count."""

    def __init__(self, records: list[dict]) -> None:
        self.seed = np.array([r["seed"] for r in records])
        self.estimate = np.array([r["estimate"] for r in records], dtype=float)
        self.queries = np.array([r["n_queries"] for r in records], dtype=float)
        self.cov = np.array([r["cov"] for r in records], dtype=float)
        self.covered = np.array([r["lo"] <= r["truth"] <= r["hi"] for r in records])
        self.flagged = np.array([bool(r["flags"]) for r in records])
        self.rows = [np.flatnonzero(self.seed == s) for s in np.unique(self.seed)]

    def figure(self, pick: np.ndarray | None = None) -> float:
        pick = np.arange(self.seed.size) if pick is None else pick
        return queries_for_10pct(self.seed[pick], self.estimate[pick], self.queries[pick])

    def resample(self, rng: np.random.Generator) -> np.ndarray:
        return np.concatenate([rng.choice(r, r.size) for r in self.rows])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", action="append", required=True, metavar="LABEL=FILE[,FILE...]",
                        help="a label and the --dump files pooled under it (repeat for each setting)")
    parser.add_argument("--baseline", required=True, metavar="LABEL:METHOD",
                        help="the label and method name every ratio divides by, e.g. 0.35:'Margin SS'")
    parser.add_argument("--draws", type=int, default=1000, help="bootstrap draws for each ratio's interval")
    parser.add_argument("--truths", default=None, metavar="SEED=P,...",
                        help="score these seeds' runs against these truths instead of the dumped ones (vision.py's "
                             "--truths form)")
    args = parser.parse_args()
    if args.draws < 1:
        parser.error(f"--draws must be a positive integer, got {args.draws}")
    records = read_runs(args.runs, None if args.truths is None else _parse_truths(parser, args.truths))
    runs = {key: _Runs(rows) for key, rows in records.items()}
    base_key = tuple(args.baseline.split(":", 1))
    if base_key not in runs:
        parser.error(f"--baseline {args.baseline!r} names no label and method of the dumps; they hold "
                     f"{sorted(':'.join(k) for k in runs)}")
    base = runs[base_key]
    rng = np.random.default_rng(0)
    print(f"{'label':8s} {'method':32s} {'runs/seed':>9s} {'q@10%':>8s} {'ratio':>6s} {'95% bootstrap':>15s} "
          f"{'cov. unfl.':>10s} {'cov. all':>9s} {'rep/obs':>8s}")
    for (label, method), one in sorted(runs.items()):
        with np.errstate(divide="ignore", invalid="ignore"):  # a resample of identical runs has no spread
            boots = np.array([np.float64(one.figure(one.resample(rng))) / base.figure(base.resample(rng))
                              for _ in range(args.draws)])
        finite = boots[np.isfinite(boots) & (boots > 0)]
        lo, hi = np.percentile(finite, [2.5, 97.5]) if finite.size == boots.size else (math.nan, math.nan)
        plain = ~one.flagged
        rep, obs = reported_and_observed_cov(one.seed, one.estimate, one.cov, np.ones_like(plain))
        figure = one.figure()
        print(f"{label:8s} {method:32s} {one.seed.size // len(one.rows):9d} {figure:8.0f} "
              f"{figure / base.figure():6.3f} {f'{lo:.3f}-{hi:.3f}':>15s} "
              f"{one.covered[plain].mean() if plain.any() else math.nan:10.3f} {one.covered.mean():9.3f} "
              f"{rep / obs:8.2f}")
    _print_where_queries_go(records, runs)
    _print_error_bars(records)


def au_beck(record: dict, correlated: bool = True) -> float:
    """A Subset Simulation run's relative variance from its levels (Au and Beck), or with ``gamma = 0``."""
    probability, gamma, n = record["level_probability"], record["level_gamma"], record["n_samples"]
    if len(probability) == 1:  # ended at level 0: Monte Carlo on N draws
        estimate = record["estimate"]
        return (1.0 - estimate) / (estimate * n) if estimate > 0 else math.inf
    return sum((1.0 - p) * (1.0 + (g if correlated else 0.0)) / (p * n) for p, g in zip(probability[1:], gamma[1:]))


def _print_where_queries_go(records: dict[tuple[str, str], list[dict]], runs: dict[tuple[str, str], _Runs]) -> None:
    """Queries for a 10% error as observed, from Au and Beck's formula, and with independent samples."""
    rows = {k: v for k, v in records.items()
            if all(r.get("engine") == "subset_simulation" and "level_gamma" in r for r in v)}
    if not rows:
        return
    print(f"\nWhere the queries go (Au and Beck's variance of each run's levels; per seed the mean over its runs):\n"
          f"{'label':8s} {'method':32s} {'q@10%':>8s} {'Au-Beck':>8s} {'gamma=0':>8s} {'limit':>7s} "
          f"{'gamma, middle levels':>20s} {'gamma, last':>12s}")
    for (label, method), one in sorted(rows.items()):
        by_seed = {s: [r for r in one if r["seed"] == s] for s in sorted({r["seed"] for r in one})}
        queries = np.mean([r["n_queries"] for r in one]) / 0.01
        predicted = [np.mean([np.mean([au_beck(r, flag) for r in rs]) for rs in by_seed.values()]) for flag in (True, False)]
        logs = [math.log(1 / rs[0]["truth"]) for rs in by_seed.values() if rs[0]["truth"] > 0]
        limit = 100 * np.mean([x * (1 + x) for x in logs]) if logs else math.nan
        # level 1's population is level 0's draws; chains start at level 2, the last level may be the first of them
        middle = [x for r in one for x in r["level_gamma"][2:-1]]
        lasts = [r["level_gamma"][-1] for r in one if len(r["level_gamma"]) > 2]
        middle_gamma = np.mean(middle) if middle else math.nan
        last_gamma = np.mean(lasts) if lasts else math.nan
        print(f"{label:8s} {method:32s} {runs[(label, method)].figure():8.0f} {queries * predicted[0]:8.0f} "
              f"{queries * predicted[1]:8.0f} {limit:7.0f} {middle_gamma:20.2f} {last_gamma:12.2f}")


def _misses(records: list[dict]) -> tuple[int, int]:
    """Unflagged runs whose interval lies wholly below the truth, and wholly above it."""
    plain = [r for r in records if not r["flags"]]
    return sum(r["hi"] < r["truth"] for r in plain), sum(r["lo"] > r["truth"] for r in plain)


def _print_error_bars(records: dict[tuple[str, str], list[dict]]) -> None:
    """``vision.py``'s error-bar table over the pooled runs, the misses beside it, and each label's rulers pooled."""
    print("\nError bars over the pooled runs (unflagged = reached, no flag; thin = thin-evidence flag; p: exact "
          "binomial test of the unflagged coverage against 0.95; reported over observed CoV over the unflagged "
          "runs and over all, with 95% bootstrap intervals; rep/err: the unflagged runs' reported CoV over their "
          "relative error about the truth; SE/err: the same with each run's reported standard error (its CoV "
          "times its estimate) over the truth; misses: unflagged intervals below / above the truth)")
    print(f"{'label':8s} {'method':30s} {'runs':>5s} {'unflagged':>9s} {'thin':>5s} {'other flags':>13s} "
          f"{'cov. unfl.':>10s} {'p':>6s} {'cov. all':>9s} {'rep/obs, unflagged':>18s} {'rep/obs, all':>18s} "
          f"{'rep/err, unfl.':>14s} {'SE/err, unfl.':>13s} {'misses':>7s}")
    for (label, method), rows in sorted(records.items()):
        below, above = _misses(rows)
        print(f"{label:8s} {_Honesty.from_records(method, rows).row()} {f'{below}/{above}':>7s}")
    for label in sorted({label for label, _ in records}):
        rulers = [r for (lab, method), rows in records.items() if lab == label and method.startswith("SCARCE ")
                  for r in rows if not r["flags"]]
        if not rulers:
            continue
        covered = sum(r["lo"] <= r["truth"] <= r["hi"] for r in rulers)
        test = binomtest(covered, len(rulers), 0.95)
        ci = test.proportion_ci(0.95, method="wilson")
        below, above = _misses(rulers)
        wilson = f"Wilson {ci.low:.3f}-{ci.high:.3f}"
        print(f"{label:8s} {'rulers pooled':30s} {'':5s} {len(rulers):9d} {'':5s} {'':13s} {covered / len(rulers):10.3f} "
              f"{test.pvalue:6.3f} {'':9s} {wilson:35s} {f'{below}/{above}':>7s}")


if __name__ == "__main__":
    main()
