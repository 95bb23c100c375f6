"""Least squares from normal equations, with a singular design refused rather than solved.

Two fits in the engine accumulate ``X^T X`` and ``X^T y`` instead of keeping the design ``X``:
response-surface sampling (:mod:`scarce.kernels.response_surface`), whose equations are updated by
adding and removing rows, and the linear fit of a Latin-hypercube level's indicator
(:func:`scarce.envelope.latin_hypercube_variance`), whose design has ``N`` rows of ``d + 1``
columns. Both need the coefficients only where the design determines them.
"""

from __future__ import annotations

import numpy as np

__all__ = ["MIN_PIVOT_RATIO", "solve_normal_equations"]

#: Smallest ratio of the equilibrated normal equations' Cholesky pivots: below it the design is singular.
MIN_PIVOT_RATIO = 1e-6


def solve_normal_equations(gram: np.ndarray, moment: np.ndarray) -> np.ndarray | None:
    """Least-squares coefficients from ``X^T X`` and ``X^T y`` (None: singular).

    The equations are equilibrated (unit diagonal), so the Cholesky factor's diagonal measures the
    design rather than the columns' units; a ratio of its extremes below ``MIN_PIVOT_RATIO`` (a
    condition number above about 1e12) counts as singular.
    """
    from scipy.linalg import lapack

    diagonal = gram.diagonal()
    if not (diagonal > 0.0).all():  # also False for NaN
        return None
    with np.errstate(all="ignore"):
        scale = 1.0 / np.sqrt(diagonal)
        unit = gram * scale[:, None]
        unit *= scale
        rhs = moment * scale
        if not (np.isfinite(unit).all() and np.isfinite(rhs).all()):
            return None
        factor, coef, info = lapack.dposv(unit, rhs, lower=1, overwrite_a=1, overwrite_b=1)
        pivots = np.abs(factor.diagonal())
        if info != 0 or not pivots.min() >= MIN_PIVOT_RATIO * pivots.max():
            return None
        coef *= scale
    return coef if np.isfinite(coef).all() else None
