"""Whole-conversation embeddings: how many JailbreakBench records the encoder's 512 word pieces
cut, and whether rulers fitted on PAIR see the other attack styles' jailbreaks once the response
is embedded.

Every record is embedded with the bundled all-MiniLM-L6-v2 over windows of word pieces
(:class:`scarce.encoders.text.SentenceEncoder`: nothing is truncated). Per attack style the table
gives the records, those longer than one window (which the truncating encoder cut before the
response, or inside it), and the jailbreaks. Then each LLM ruler family is fitted on the PAIR
records plus the benign behaviours, its threshold set at the p75 of the PAIR jailbreaks' scores,
and for every other style the recall at that threshold (the share of the style's jailbreaks
scoring at or above it) is printed for three embeddings: the whole conversation over windows,
the prompt and the response embedded apart and concatenated (``parts="separate"``), and, when
``--truncated`` names a corpus embedded by the truncating encoder (the Parquet written by
``benchmarks/llm_embed.py`` before windows existed), the truncated conversation.

    python benchmarks/llm_windows.py --data-dir ../shared/data --truncated runs/llm/corpus.parquet
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np

from scarce.applications.llm.embedding import embed_corpus, embedding_matrix
from scarce.datasets import load_jailbreakbench_corpus
from scarce.encoders.text import SentenceEncoder
from scarce.errors import ScarceWarning
from scarce.rulers import LLM_FAMILIES, make_ruler

SOURCE = "PAIR"


def recalls(frame, percentile: float = 75.0) -> dict[tuple[str, str], float]:
    """``(ruler, style) -> recall`` at the p``percentile`` of the PAIR jailbreak scores."""
    Z = embedding_matrix(frame)
    method, jailbroken = frame["method"].to_numpy(), frame["jailbroken"].to_numpy(bool)
    fit_rows = (method == SOURCE) | (method == "none")
    out = {}
    for family in LLM_FAMILIES:
        params = {"random_state": 0} if "random_state" in make_ruler(family).get_params() else {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ScarceWarning)
            ruler = make_ruler(family, **params).fit(Z[fit_rows], jailbroken[fit_rows].astype(int))
        tau = ruler.threshold(percentile)
        for style in sorted(set(method) - {SOURCE, "none"}):
            rows = (method == style) & jailbroken
            out[(family, style)] = float(np.mean(ruler.score_samples(Z[rows]) >= tau)) if rows.any() else float("nan")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.environ.get("SCARCE_DATA_DIR"))
    parser.add_argument("--cache-dir", default="runs/llm/cache-windows")
    parser.add_argument("--truncated", default=None, help="a corpus Parquet embedded by the truncating encoder")
    args = parser.parse_args()
    if not args.data_dir:
        parser.error("--data-dir (or SCARCE_DATA_DIR) must point at the shared data")
    corpus = load_jailbreakbench_corpus(args.data_dir)
    start = time.perf_counter()
    windowed = embed_corpus(corpus, SentenceEncoder("minilm", device="cpu", parts="conversation"),
                            cache_dir=args.cache_dir)
    print(f"{len(windowed)} records embedded in {time.perf_counter() - start:.0f} s; "
          f"{windowed.attrs['embedding']['windowed_records']} over more than one window\n")
    print("| style | records | longer than one window | jailbreaks |\n|---|---|---|---|")
    for style, group in windowed.groupby("method"):
        print(f"| {style} | {len(group)} | {int((group['windows'] > 1).sum())} | {int(group['jailbroken'].sum())} |")
    start = time.perf_counter()
    separate = embed_corpus(corpus, SentenceEncoder("minilm", device="cpu", parts="separate"), cache_dir=args.cache_dir)
    print(f"\nprompt and response apart: embedded in {time.perf_counter() - start:.0f} s")
    results = {"windowed": recalls(windowed), "separate": recalls(separate)}
    if args.truncated:
        import pandas as pd

        results["truncated"] = recalls(pd.read_parquet(args.truncated))
    styles = sorted({style for _, style in results["windowed"]})
    print(f"\nRecall at the p75 of the {SOURCE} jailbreak scores (rulers fitted on {SOURCE} + benign)\n")
    print("| ruler | " + " | ".join(f"{s} {kind}" for s in styles for kind in results) + " |")
    print("|---|" + "---|" * (len(styles) * len(results)))
    for family in LLM_FAMILIES:
        cells = [f"{results[kind][(family, s)]:.3f}" for s in styles for kind in results]
        print(f"| {family} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
