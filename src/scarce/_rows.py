"""Finding copies of points: each row of an array as one exact, sortable value.

Markov chains copy states (a rejected move repeats its state; a seed is copied into its
chain), and two parts of the engine need to know which stored rows a given row is a copy of:
Subset Simulation looks up the model's own score of a failed state among the failed points it
evaluated, and response-surface sampling leaves every copy of a chain's seed out of the surface
that moves the chain. Both compare rows by their bytes, so a copy always matches and a different
point never does, whatever the floating-point values; sorting and binary search keep it free
of Python loops.
"""

from __future__ import annotations

import numpy as np

__all__ = ["member", "row_keys"]


def row_keys(rows: np.ndarray) -> np.ndarray:
    """Each row of a 2-D array as one opaque bytes value (NumPy's void type), comparable and sortable."""
    rows = np.ascontiguousarray(rows)
    return rows.view(np.dtype((np.void, rows.shape[1] * rows.itemsize))).ravel()


def member(values: np.ndarray, of: np.ndarray) -> np.ndarray:
    """Whether each of ``values`` equals one of ``of``: ``np.isin`` by a binary search of ``of`` sorted.

    ``np.isin`` sorts both arrays together; here only ``of`` (typically the few: seeds) is sorted.
    Works for numbers and for :func:`row_keys`.
    """
    if of.size == 0:
        return np.zeros(values.shape, dtype=bool)
    table = np.sort(of)
    found = table[np.minimum(np.searchsorted(table, values), table.size - 1)]
    return found == values
