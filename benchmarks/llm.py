"""The whole LLM sweep (paper section 6) on cached embeddings: time, headline error, transfer.

Run: ``python benchmarks/llm.py [--corpus runs/llm/corpus.parquet] [--preset paper]
[--executor process] [--run-dir DIR]``.

The corpus is the embedded JailbreakBench table that ``benchmarks/llm_embed.py`` or
``scarce llm embed`` writes (all artifact records plus the benign behaviours, each with its
embedding). The sweep runs in a fresh temporary run directory (or ``--run-dir``; an existing one
resumes, which then times only what was left), through the same code as ``scarce llm sweep``.

Printed, all from this one run:

* the sweep's wall time against the 15-minute target (issue 5), cells and cascade runs, the
  time the cascades themselves took, and the per-cell overhead of the runner;
* the best family's mean relative error ``|r - 1|`` for ``eta >= 1e-3`` next to the reference's
  own mean bootstrap relative half-width over the same cells (the paper: 2.6% against 27.9%),
  with the error an unbiased estimate of the observed spread would show (the noise floor);
* the transfer table's refit-over-inherited improvement ``inherited |r - 1| / refit |r - 1|``.

Nothing is tuned on these numbers: the presets are fixed before the run.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

from scarce.applications.llm.analysis import analyse
from scarce.applications.llm.corpus import read_corpus
from scarce.applications.llm.sweep import LLMSweep, get_preset, parse_overrides
from scarce.experiments.executors import make_executor
from scarce.experiments.store import ResultStore
from scarce.reporting.llm import write_report
from scarce.reporting.tables import print_llm_tables


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="runs/llm/corpus.parquet", help="embedded corpus (Parquet/JSONL)")
    parser.add_argument("--preset", default="paper")
    parser.add_argument("--set", dest="settings", action="append", default=[], help="key=value override")
    parser.add_argument("--executor", default="process", help="serial, process or dask")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--run-dir", default=None, help="keep the run here (default: a temporary directory)")
    args = parser.parse_args(argv)

    corpus = read_corpus(args.corpus)
    config = get_preset(args.preset, **parse_overrides(args.settings, args.preset))
    print(f"# python {platform.python_version()}, {os.cpu_count()} cores; executor {args.executor}; "
          f"corpus {args.corpus}: {len(corpus)} records")
    with tempfile.TemporaryDirectory(prefix="scarce-llm-sweep-") as scratch:
        run_dir = Path(args.run_dir) if args.run_dir else Path(scratch) / "run"
        start = time.perf_counter()
        with make_executor(args.executor, n_workers=args.workers) as pool:
            sweep = LLMSweep(config, run_dir, corpus=corpus, executor=pool)
            outcome = sweep.run()
        wall = time.perf_counter() - start
        report_start = time.perf_counter()
        tables = analyse(ResultStore.open(run_dir))
        path = write_report(tables, run_dir / "report")
        report_s = time.perf_counter() - report_start
        cells = tables["cells"]
        _print_time(config, outcome, cells, wall, report_s, args.workers or os.cpu_count() or 1)
        print()
        print_llm_tables(tables)
        _print_paper_comparison(tables)
        if args.run_dir:
            print(f"\nreport: {path}")


def _print_time(config, outcome, cells, wall, report_s, workers) -> None:  # type: ignore[no-untyped-def]
    runs = int(cells.n_runs.sum())
    cascade = float((cells.seconds * cells.n_runs).sum())
    print(f"\n{'preset':>8s} {'cells':>6s} {'runs':>6s} {'wall s':>8s} {'cascade s':>10s} "
          f"{'overhead/cell ms':>17s} {'report s':>9s} {'wall / 15 min':>14s}")
    overhead = (wall * workers - cascade) / max(len(cells), 1) * 1e3
    print(f"{config.name:>8s} {outcome['finished']:>6d} {runs:>6d} {wall:8.1f} {cascade:10.1f} "
          f"{overhead:17.1f} {report_s:9.1f} {wall / 900:14.3f}")
    if outcome["errors"]:
        print(f"task errors: {sorted(outcome['errors'])[:5]}")


def _print_paper_comparison(tables) -> None:  # type: ignore[no-untyped-def]
    """The headline against the paper's (the tables themselves come from print_llm_tables)."""
    top = tables["headline"]
    if top:
        print(f"\nbest-family error over the reference's half-width: "
              f"{top['mean_error'] / top['reference_rel_half_width']:.3f} (paper: 2.6% against 27.9%, ratio 0.093)")
    selectors = tables["selectors"]
    if len(selectors):
        kl = selectors[(selectors.metric == "kl_good_bad") & (selectors.aggregation == "worst")].iloc[0]
        print(f"selector: worst-group KL(good||bad) rho = {kl.rho:.2f} (p perm. {kl.p_permutation:.3f})")


if __name__ == "__main__":
    main()
