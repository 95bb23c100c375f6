"""Embedding the JailbreakBench corpus with the sentence encoder: cold, then from the cache.

Run: ``python benchmarks/llm_embed.py [--data-dir DIR] [--cache-dir DIR] [--out PATH]``.

The corpus is every attack artifact (all methods and target models, failed entries without a
prompt dropped) plus the benign JBB behaviours, read from ``--data-dir`` (default
``$SCARCE_DATA_DIR``; the JailbreakBench directory or a data directory holding
``jailbreakbench/``). Each record is embedded with the bundled all-MiniLM-L6-v2
(:class:`scarce.encoders.text.SentenceEncoder`) on the CPU.

* **cold**: an empty cache directory (a fresh temporary one unless ``--cache-dir`` is given, in
  which case whatever it already holds is reused); the time includes loading the model.
* **from cache**: a new encoder on the same cache directory (the model is not loaded when every
  text is cached); **new process**: the same in a fresh interpreter, imports and corpus reading
  included.

Targets (issue 5, two CPU cores): cold within 3 minutes, from the cache within 5 seconds. The
embedded corpus is written as Parquet to ``--out`` (default ``runs/llm/corpus.parquet``).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scarce.applications.llm.embedding import embed_corpus, embedding_matrix
from scarce.datasets import load_jailbreakbench_corpus, summarize_counts
from scarce.encoders.text import SentenceEncoder


def _timed_embed(corpus, cache_dir: Path, batch_size: int):
    encoder = SentenceEncoder("minilm", device="cpu")
    start = time.perf_counter()
    frame = embed_corpus(corpus, encoder, cache_dir=cache_dir, batch_size=batch_size)
    return frame, time.perf_counter() - start, encoder._model is not None


_NEW_PROCESS = """
import sys, time
start = time.perf_counter()
from scarce.applications.llm.embedding import embed_corpus
from scarce.datasets import load_jailbreakbench_corpus
from scarce.encoders.text import SentenceEncoder
frame = embed_corpus(load_jailbreakbench_corpus(sys.argv[1]), SentenceEncoder("minilm", device="cpu"),
                     cache_dir=sys.argv[2], batch_size=int(sys.argv[3]))
print(time.perf_counter() - start, len(frame))
"""


def _new_process_from_cache(data_dir: str, cache_dir: Path, batch_size: int) -> float:
    """Seconds for a new interpreter to import scarce, read the corpus and embed it from the cache."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", _NEW_PROCESS, data_dir, str(cache_dir), str(batch_size)],
                   check=True, capture_output=True, text=True)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None, help="JailbreakBench or data directory")
    parser.add_argument("--cache-dir", default=None, help="embedding cache (default: a fresh temporary one)")
    parser.add_argument("--out", default="runs/llm/corpus.parquet", help="embedded corpus (Parquet)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    args = parser.parse_args(argv)

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    corpus = load_jailbreakbench_corpus(args.data_dir)
    read_s = time.perf_counter() - start
    counts = corpus.attrs["counts"]
    print(f"# python {platform.python_version()}, {os.cpu_count()} cores; corpus read in {read_s:.2f} s")
    print(f"# {counts['attack_records']} attack records ({counts['dropped_no_prompt']} artifact entries "
          f"without a prompt dropped, {counts['jailbreaks']} jailbroken) + {counts['benign_records']} "
          f"benign = {counts['records']} records")
    print(summarize_counts(corpus).to_string(index=False))

    with tempfile.TemporaryDirectory(prefix="scarce-llm-cache-") as scratch:
        cache_dir = Path(args.cache_dir) if args.cache_dir else Path(scratch)
        frame, cold_s, loaded = _timed_embed(corpus, cache_dir, args.batch_size)
        _, cached_s, reloaded = _timed_embed(corpus, cache_dir, args.batch_size)
        data_dir = args.data_dir or os.environ.get("SCARCE_DATA_DIR", "")
        process_s = _new_process_from_cache(data_dir, cache_dir, args.batch_size)
    dim = embedding_matrix(frame).shape[1]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(out, index=False)

    print(f"\n{'records':>8s} {'dim':>5s} {'cold s':>8s} {'from cache s':>13s} {'new process s':>14s}  notes")
    notes = f"model loaded cold: {loaded}; loaded on the cached pass: {reloaded}"
    print(f"{len(frame):8d} {dim:5d} {cold_s:8.1f} {cached_s:13.2f} {process_s:14.2f}  {notes}")
    slowest = max(cached_s, process_s)
    print(f"targets: cold <= 180 s ({'met' if cold_s <= 180 else 'MISSED'}), "
          f"from cache <= 5 s ({'met' if slowest <= 5 else 'MISSED'})")
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
