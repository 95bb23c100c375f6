"""Data sets: MNIST (IDX files or the embedded 5k default).

Importing this package imports only numpy; torch is never needed to read data.

>>> from scarce.datasets import load_mnist
>>> splits = load_mnist(data_dir=None)            # doctest: +SKIP
>>> splits.train_images.shape                     # doctest: +SKIP
(3500, 28, 28)
"""

from __future__ import annotations

from scarce.datasets.mnist import (
    EMBEDDED_SOURCE,
    MNIST_FILES,
    MNIST_MIRRORS,
    MnistSplits,
    download_mnist,
    load_mnist,
    read_idx,
    write_idx,
)

__all__ = [
    "EMBEDDED_SOURCE",
    "MNIST_FILES",
    "MNIST_MIRRORS",
    "MnistSplits",
    "download_mnist",
    "load_mnist",
    "read_idx",
    "write_idx",
]
