"""Input validation shared by the scoring layer (rulers, selection, calibration).

Array checks for embeddings, scores and labels (the scalar checks live in :mod:`scarce.errors`).
Every check raises :class:`scarce.errors.ScarceError` (a ``ValueError``) with a message that names
the parameter, the value received and what is allowed. Nothing here uses ``assert``.
"""

from __future__ import annotations

import numbers
import os
import sys
import warnings

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scarce.errors import ScarceError, check_in_interval

__all__ = [
    "check_embeddings",
    "check_labels",
    "check_percentile",
    "check_scores",
    "is_real",
    "warn_user",
]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def warn_user(message: str, category: type[Warning]) -> None:
    """Issue a warning attributed to the first caller outside the scarce package."""
    frame, level = sys._getframe(1), 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


def _describe_nonfinite(a: NDArray[np.float64], finite: NDArray[np.bool_]) -> str:
    bad = np.argwhere(~finite)
    first = tuple(int(i) for i in bad[0])
    where = f"row {first[0]}" if len(first) == 1 else f"row {first[0]}, column {first[1]}"
    return f"{len(bad)} non-finite value(s) (NaN or inf), the first {float(a[first])!r} at {where}"


def check_embeddings(
    Z: ArrayLike, *, name: str = "Z", n_features: int | None = None
) -> NDArray[np.float64]:
    """Return ``Z`` as a finite, non-empty float64 array of shape (n_samples, n_features).

    Parameters
    ----------
    Z : array_like of shape (n_samples, n_features)
        Embeddings. Not copied when already a float64 array.
    name : str
        Parameter name used in error messages.
    n_features : int, optional
        Required number of columns (the dimension seen at ``fit``).
    """
    try:
        a = np.asarray(Z, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ScarceError(f"{name} must be a numeric array of shape (n_samples, n_features); "
                          f"got {type(Z).__name__} ({exc})") from None
    if a.ndim != 2:
        raise ScarceError(f"{name} must be a 2-D array of shape (n_samples, n_features); "
                          f"got shape {a.shape}")
    if a.shape[0] == 0 or a.shape[1] == 0:
        raise ScarceError(f"{name} must hold at least one sample and one feature; "
                          f"got shape {a.shape}")
    if n_features is not None and a.shape[1] != n_features:
        raise ScarceError(f"{name} has {a.shape[1]} features but the ruler was fitted with "
                          f"n_features_in_={n_features}; embeddings must have {n_features} columns")
    finite = np.isfinite(a)
    if not finite.all():
        raise ScarceError(f"{name} contains {_describe_nonfinite(a, finite)}; "
                          "embeddings must be finite")
    return a


def check_scores(
    s: ArrayLike, *, name: str = "scores", allow_inf: bool = False, min_size: int = 1
) -> NDArray[np.float64]:
    """Return ``s`` as a 1-D float64 array with no NaN (and no inf unless ``allow_inf``).

    Parameters
    ----------
    s : array_like of shape (n,)
        Ruler scores.
    name : str
        Parameter name used in error messages.
    allow_inf : bool
        Accept ``+inf``/``-inf`` (an exact failure is scored ``+inf`` by the engine).
    min_size : int
        Smallest accepted length.
    """
    a = np.asarray(s, dtype=np.float64)
    if a.ndim != 1:
        raise ScarceError(f"{name} must be a 1-D array of scores; got shape {a.shape}")
    if a.size < min_size:
        raise ScarceError(f"{name} must hold at least {min_size} score(s); got {a.size}")
    finite = ~np.isnan(a) if allow_inf else np.isfinite(a)
    if not finite.all():
        allowed = "no NaN" if allow_inf else "finite values only"
        raise ScarceError(f"{name} contains {_describe_nonfinite(a, finite)}; allowed: {allowed}")
    return a


def check_labels(y: ArrayLike, *, n_samples: int, name: str = "y", require_both: bool = True
                 ) -> NDArray[np.bool_]:
    """Return binary labels (1 = failure/"bad", 0 = normal/"good") as a boolean array.

    Parameters
    ----------
    y : array_like of shape (n_samples,)
        Labels in {0, 1} (booleans accepted).
    n_samples : int
        Required length (rows of the matching embeddings or scores).
    name : str
        Parameter name used in error messages.
    require_both : bool
        Raise unless both classes are present.
    """
    a = np.asarray(y)
    if a.ndim != 1 or a.shape[0] != n_samples:
        raise ScarceError(f"{name} must be a 1-D array of {n_samples} labels (one per sample); "
                          f"got shape {a.shape}")
    if a.dtype != np.bool_:
        if not (np.issubdtype(a.dtype, np.number) and np.isin(a, (0, 1)).all()):
            values = np.unique(a)[:5]
            raise ScarceError(f"{name} must hold labels 1 (failure, 'bad') and 0 (normal, 'good'); "
                              f"got values {values.tolist()}")
        a = a.astype(bool)
    if require_both:
        n_bad = int(a.sum())
        if n_bad == 0 or n_bad == a.size:
            raise ScarceError(f"{name} must contain both classes (1 = failure, 0 = normal); got "
                              f"{n_bad} failure and {a.size - n_bad} normal sample(s)")
    return a


def is_real(value: object) -> bool:
    """True for a real number that is not a bool (NaN included)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_percentile(value: object, name: str = "percentile") -> float:
    """Return a percentile in the open interval (0, 100)."""
    return check_in_interval(name, value, 0.0, 100.0, high_open=True)
