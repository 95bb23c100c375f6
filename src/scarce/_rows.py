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

__all__ = ["copies", "first_order", "member", "row_keys"]

#: :func:`copies` compares pairs of rows directly while they number at most this many per row.
PAIRS_PER_ROW = 4


def row_keys(rows: np.ndarray) -> np.ndarray:
    """Each row of a 2-D array as one opaque bytes value (NumPy's void type), comparable and sortable."""
    rows = np.ascontiguousarray(rows)
    return rows.view(np.dtype((np.void, rows.shape[1] * rows.itemsize))).ravel()


def member(values: np.ndarray, of: np.ndarray, presorted: bool = False) -> np.ndarray:
    """Whether each of ``values`` equals one of ``of``: ``np.isin`` by a binary search of ``of`` sorted.

    ``np.isin`` sorts both arrays together; here only ``of`` (typically the few: seeds) is sorted,
    and not even that when the caller says it is (``presorted``: ascending already).
    Works for numbers and for :func:`row_keys`.
    """
    if of.size == 0:
        return np.zeros(values.shape, dtype=bool)
    table = of if presorted else np.sort(of)
    found = table[np.minimum(np.searchsorted(table, values), table.size - 1)]
    return found == values


def first_order(rows: np.ndarray) -> np.ndarray:
    """The stable argsort of a 2-D array's first column: the order :func:`copies` searches ``rows`` in."""
    return np.argsort(np.ascontiguousarray(rows[:, 0]), kind="stable")


def copies(rows: np.ndarray, *groups: np.ndarray, order: np.ndarray | None = None) -> np.ndarray:
    """Masks ``(len(groups), n)``: whether each row of ``rows`` is a byte-for-byte copy of some row of each group.

    ``rows``' first column is sorted once, and each row of a group finds, by a binary
    search, the rows sharing its first value; only those pairs are compared whole, as unsigned
    words (their bytes). Where the pairs would outnumber ``rows`` and the group several times
    over (a row repeated in the group and among ``rows``, or first values shared by many), the
    rows that share a first value with the group are compared by
    :func:`member` of :func:`row_keys` instead, whose cost does not grow with the pairs. The groups
    are typically the few (seeds) and ``rows`` the many (a level's points); all are 2-D arrays of
    one dtype and width. ``order``, when given, must be ``rows``' first column's stable argsort
    (:func:`first_order`), kept by a caller that asks about the same rows again.
    """
    out = np.zeros((len(groups), rows.shape[0]), dtype=bool)
    if rows.shape[0] == 0:
        return out
    order = first_order(rows) if order is None else order
    column, words = rows[order, 0], np.dtype(f"u{rows.itemsize}")
    for mask, group in zip(out, groups):
        if group.shape[0] == 0:
            continue
        low = np.searchsorted(column, group[:, 0], side="left")
        counts = np.searchsorted(column, group[:, 0], side="right") - low
        total = int(counts.sum())
        if total > PAIRS_PER_ROW * (rows.shape[0] + group.shape[0]):  # rows repeated in the group, or shared firsts
            near = order[member(column, group[:, 0])]  # the rows sharing a first value with some group row
            mask[near] = member(row_keys(rows[near]), row_keys(group))
            continue
        starts = np.cumsum(counts) - counts  # each group row's first pair
        pair = order[np.arange(total) - np.repeat(starts - low, counts)]  # the rows sharing its first value
        same = np.all(rows[pair].view(words) == np.repeat(group, counts, axis=0).view(words), axis=1)
        mask[pair[same]] = True
    return out
