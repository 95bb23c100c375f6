"""Issue figures of the LLM leave-one-style-out transfer: refit within 10%, refit vs inherited, recall 0.

Fits the rulers on each attack style plus the benign records and applies them to every other
style (pooled and per target model with >= 20 records and 5 jailbreaks), as
``scarce llm transfer`` does, then prints per fitted -> applied pair the best refit ruler, its
``|r - 1|`` refit and inherited, its recall and the exact ``P(A_tau) C_tau / p_ref``, and the
verdicts: pairs whose best refit ruler is within 10% of ``p_ref``, pairs where refit beats
inherited, and pairs where no ruler's threshold is reached by any jailbreak (recall 0).

    python benchmarks/llm_transfer.py --corpus runs/llm/corpus-separate.parquet --n-runs 10
    python benchmarks/llm_transfer.py --corpus runs/llm/corpus-separate.parquet --n-runs 10 --view conversation
    python benchmarks/llm_transfer.py --corpus runs/llm/corpus-separate.parquet --n-runs 10 --no-tie-break
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from scarce.applications.llm.corpus import read_corpus
from scarce.applications.llm.transfer import TransferConfig, best_per_pair, transfer_matrix


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="runs/llm/corpus-separate.parquet")
    parser.add_argument("--n-samples", type=int, default=20_000)
    parser.add_argument("--n-runs", type=int, default=10)
    parser.add_argument("--eta", type=float, default=1e-3)
    parser.add_argument("--view", default="auto", help="what the rulers see: auto, response or conversation")
    parser.add_argument("--tolerance", type=float, default=0.1, help="the issue's bound on the refit |r - 1|")
    parser.add_argument("--no-tie-break", action="store_true",
                        help="cascade levels on the record score alone, as before the fleet's tie-break")
    args = parser.parse_args()

    start = time.perf_counter()
    config = TransferConfig(n_samples=args.n_samples, n_runs=args.n_runs, etas=(args.eta,), view=args.view,
                            tie_break=not args.no_tie_break)
    table = transfer_matrix(read_corpus(args.corpus), config)
    summary = best_per_pair(table)
    print(f"{len(table)} cells, {len(summary)} fitted -> applied pairs, {time.perf_counter() - start:.0f} s "
          f"(N = {args.n_samples:,}, {args.n_runs} runs per cell, eta = {args.eta:g}, rulers on the "
          f"{table.view.iloc[0] if len(table) else args.view})\n")
    pd.set_option("display.width", 220)
    cols = ["fitted", "applied", "jailbreaks", "best", "recall", "best_error_refit", "best_error_inherited",
            "exact_refit", "exact_inherited", "n_recall_zero", "n_variants"]
    print(summary[cols].round(3).to_string(index=False))
    ok = summary.best_error_refit <= args.tolerance
    better = summary.refit_better.fillna(False).astype(bool)
    print(f"\nbest refit ruler within {args.tolerance:.0%} of p_ref: {int(ok.sum())} of {len(summary)} pairs")
    for _, row in summary[~ok].iterrows():
        print(f"  miss: {row.fitted} -> {row.applied}: best {row.best} refit |r-1| {row.best_error_refit:.3g}, "
              f"recall {row.recall if isinstance(row.recall, str) else f'{row.recall:.3f}'}, "
              f"{row.n_recall_zero} of {row.n_variants} rulers with recall 0")
    print(f"refit better than inherited (best ruler): {int(better.sum())} of {len(summary)} pairs")
    zero = summary[summary.n_recall_zero == summary.n_variants]
    print(f"pairs where every ruler has recall 0: {len(zero)} "
          + ", ".join(f"{r.fitted} -> {r.applied}" for _, r in zero.iterrows()))
    by_family = table.assign(family=table.variant.str.rpartition("_p")[0]).groupby("family").recall
    print("share of cells with recall 0, by ruler family: "
          + ", ".join(f"{f} {np.mean(v == 0):.2f}" for f, v in by_family))


if __name__ == "__main__":
    main()
