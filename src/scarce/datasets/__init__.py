"""Data sets: MNIST (IDX files or the embedded 5k default) and JailbreakBench (LLM corpus).

Importing this package imports only numpy; torch is never needed to read data. The JailbreakBench
readers need pandas and are imported on first use (``scarce.datasets.load_jailbreakbench_corpus``).

>>> from scarce.datasets import load_mnist
>>> splits = load_mnist(data_dir=None)            # doctest: +SKIP
>>> splits.train_images.shape                     # doctest: +SKIP
(3500, 28, 28)
"""

from __future__ import annotations

from scarce._lazy import lazy_getattr
from scarce.datasets import mnist as _mnist
from scarce.datasets.mnist import *  # noqa: F403 - the public names of the MNIST module

_LAZY = {
    name: "scarce.datasets.jailbreakbench"
    for name in (
        "CORPUS_COLUMNS",
        "benign_records",
        "find_artifact_files",
        "load_jailbreakbench_corpus",
        "read_attack_artifact",
        "read_attack_artifacts",
        "read_behaviors",
        "resolve_jailbreakbench_dir",
        "summarize_counts",
    )
}

__all__ = sorted([*_mnist.__all__, *_LAZY])


__getattr__ = lazy_getattr(__name__, _LAZY)
