"""Data sets: MNIST (IDX files or the embedded 5k default).

Importing this package imports only numpy; torch is never needed to read data.

>>> from scarce.datasets import load_mnist
>>> splits = load_mnist(data_dir=None)            # doctest: +SKIP
>>> splits.train_images.shape                     # doctest: +SKIP
(3500, 28, 28)
"""

from __future__ import annotations

from scarce.datasets import mnist as _mnist
from scarce.datasets.mnist import *  # noqa: F403 - the public names of the MNIST module

__all__ = list(_mnist.__all__)
