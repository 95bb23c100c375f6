"""Input validation, in one place: scalar parameters, settings, and arrays (embeddings, scores, labels).
Every check raises :class:`scarce.errors.ScarceError` (a ``ValueError``) with a message that names
the parameter, the value received and what is allowed. Nothing here uses ``assert``.
"""

from __future__ import annotations

import math
import numbers
import os
import warnings
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scarce.errors import ScarceError, show, unknown_name_error, user_stack_level

__all__ = [
    "check_embeddings",
    "check_labels",
    "check_percentile",
    "check_scores",
    "as_real_array",
    "is_real",
    "power_of_two_scale",
    "tensor_to_numpy",
    "warn_user",
]


def warn_user(message: str | Warning, category: type[Warning]) -> None:
    """Issue a warning attributed to the first caller outside the scarce package.

    The stack level is counted (:func:`scarce.errors.user_stack_level`), not fixed, so the
    warning names the user's line whichever public function led to it. ``message`` may be a
    warning instance that carries fields beside its text (its own class is then the category).
    """
    warnings.warn(message, category, stacklevel=user_stack_level())


def _describe_nonfinite(a: NDArray[np.float64], finite: NDArray[np.bool_]) -> str:
    bad = np.argwhere(~finite)
    first = tuple(int(i) for i in bad[0])
    where = f"row {first[0]}" if len(first) == 1 else f"row {first[0]}, column {first[1]}"
    return f"{len(bad)} non-finite value(s) (NaN or inf), the first {float(a[first])!r} at {where}"


#: Torch floating dtypes numpy can hold; the others (bfloat16, float8) are widened to float32.
_NUMPY_TORCH_FLOATS = ("torch.float16", "torch.float32", "torch.float64")


def tensor_to_numpy(value: object) -> object:
    """A torch-like tensor (anything with ``detach``) as numpy, detached and on the CPU.

    Floating dtypes numpy cannot represent (bfloat16, the float8 types) are widened to float32
    first; other values are returned unchanged. Errors of the conversion propagate.
    """
    if not hasattr(value, "detach"):
        return value
    value = value.detach().cpu()
    if (hasattr(value, "is_floating_point") and value.is_floating_point()
            and str(value.dtype) not in _NUMPY_TORCH_FLOATS):
        value = value.float()
    return value.numpy()


def as_real_array(value: ArrayLike, name: str, expected: str) -> NDArray[np.float64]:
    """``value`` as a float64 array, or a :class:`ScarceError` for anything not real numbers.

    Strings, complex numbers, objects (Python ints beyond int64, ``None``) and ragged nested
    lists are refused rather than converted: numpy would parse strings and silently drop
    imaginary parts. Torch tensors of dtypes numpy cannot hold (bfloat16) are widened first.
    """
    try:
        raw = np.asarray(tensor_to_numpy(value))
    except Exception as exc:  # noqa: BLE001 - ragged lists, odd objects: all the caller's input
        raise ScarceError(f"{name} must be {expected}; got a {type(value).__name__} numpy cannot "
                          f"read as one ({type(exc).__name__}: {exc})") from None
    if raw.dtype.kind == "O" and all(isinstance(v, (numbers.Real, np.number)) and not isinstance(v, bool)
                                     for v in raw.ravel().tolist()):
        try:
            raw = raw.astype(np.float64)
        except OverflowError:  # a Python int beyond float64: as non-finite as inf
            raw = np.array([float(v) if abs(v) <= 1e308 else float("inf") if v > 0 else -float("inf")
                            for v in raw.ravel().tolist()]).reshape(raw.shape)
    if raw.dtype.kind not in "biuf":
        raise ScarceError(f"{name} must be {expected} of real numbers; got dtype {raw.dtype} "
                          f"(shape {raw.shape})")
    with np.errstate(over="ignore"):
        return raw.astype(np.float64, copy=False)


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
    a = as_real_array(Z, name, "a numeric array of shape (n_samples, n_features)")
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
    a = as_real_array(s, name, "a 1-D array of scores")
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
    try:
        a = np.asarray(y)
    except Exception as exc:  # noqa: BLE001 - ragged lists and odd objects
        raise ScarceError(f"{name} must be a 1-D array of {n_samples} labels 0/1; got a "
                          f"{type(y).__name__} numpy cannot read ({type(exc).__name__})") from None
    if a.ndim != 1 or a.shape[0] != n_samples:
        raise ScarceError(f"{name} must be a 1-D array of {n_samples} labels (one per sample); "
                          f"got shape {a.shape}")
    if a.dtype != np.bool_:
        if not (a.dtype.kind in "iuf" and np.isin(a, (0, 1)).all()):
            raise ScarceError(f"{name} must hold labels 1 (failure, 'bad') and 0 (normal, 'good'); "
                              f"got values {_first_values(a)} (dtype {a.dtype})")
        a = a.astype(bool)
    if require_both:
        n_bad = int(a.sum())
        if n_bad == 0 or n_bad == a.size:
            raise ScarceError(f"{name} must contain both classes (1 = failure, 0 = normal); got "
                              f"{n_bad} failure and {a.size - n_bad} normal sample(s)")
    return a


def _first_values(a: np.ndarray, limit: int = 5) -> str:
    """A few distinct values of ``a`` for an error message (works for mixed object arrays)."""
    try:
        return str(np.unique(a)[:limit].tolist())
    except TypeError:  # objects that do not compare (None next to str)
        pass
    seen: list[str] = []
    for v in a.ravel()[:1000].tolist():
        text = repr(v)[:40]
        if text not in seen:
            seen.append(text)
        if len(seen) == limit:
            break
    return "[" + ", ".join(seen) + "]"


#: Arrays whose largest magnitude lies in [2**-SAFE_EXPONENT, 2**SAFE_EXPONENT] are used as
#: given; their fourth powers (LedoitWolf's shrinkage) stay in float64's normal range.
SAFE_EXPONENT = 64


def power_of_two_scale(*arrays: NDArray[np.float64]) -> float:
    """1.0, or a power of two that brings the largest ``|value|`` of ``arrays`` into ``[1, 2)``.

    Used by computations that square or sum their inputs (covariances, kernels, variances) so
    that finite inputs near float64's limits neither overflow nor underflow: dividing by a power
    of two is exact, and every quantity that is scale-invariant keeps its value. ``1.0`` when the
    largest ``|value|`` is zero or inside ``[2**-SAFE_EXPONENT, 2**SAFE_EXPONENT]``, so ordinary
    inputs are untouched.
    """
    top = max((float(np.abs(a).max()) for a in arrays if a.size), default=0.0)
    if top == 0.0 or 2.0**-SAFE_EXPONENT <= top <= 2.0**SAFE_EXPONENT:
        return 1.0
    return math.ldexp(1.0, math.frexp(top)[1] - 1)  # top = m 2**e, m in [0.5, 1); 2**1024 overflows


def is_real(value: object) -> bool:
    """True for a real number that is not a bool (NaN included)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def as_double(value: object) -> float | None:
    """``value`` as a Python float when it is a real number (not a bool) within the doubles; None otherwise.

    NaN and the infinities are doubles and come back as they are; a Python int beyond the largest
    double (``10**400``) has no float and gives None, as a string or a complex number does.
    """
    if not is_real(value):
        return None
    try:
        return float(value)  # type: ignore[arg-type]
    except (OverflowError, TypeError, ValueError):
        return None


def check_percentile(value: object, name: str = "percentile") -> float:
    """Return a percentile in the open interval (0, 100)."""
    return check_in_interval(name, value, 0.0, 100.0, high_open=True)


# -- scalar parameters and settings ---------------------------------------------------------------
#: Largest integer a count parameter may take: it must fit a signed 64-bit integer.
MAX_INT = 2**63 - 1




def check_positive_int(name: str, value: object, minimum: int = 1, maximum: int | None = None) -> int:
    """Return ``value`` as a plain Python ``int``, or raise naming ``name``.

    Accepts Python and NumPy integers (never ``bool``, and never floats, even integral ones
    such as ``500.0``: a count given as a float is usually a mistake worth reporting). The
    value must lie in ``[minimum, maximum]``; ``maximum`` defaults to :data:`MAX_INT` so the
    result always fits NumPy's int64. Callers must keep the returned ``int``: a NumPy scalar
    kept instead overflows in small dtypes (``int16``) and is not JSON-serialisable.
    """
    top = MAX_INT if maximum is None else min(int(maximum), MAX_INT)
    allowed = f"an integer in [{minimum}, {top}]" if maximum is not None else f"an integer >= {minimum}"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        integral = isinstance(value, (float, np.floating)) and float(value).is_integer()
        hint = "; write it as an int" if integral else ""
        raise ScarceError(f"{name} must be {allowed}, got {show(value)} ({type(value).__name__}){hint}")
    number = int(value)
    if number < minimum or number > top:
        limit = "" if maximum is not None or number <= top else f" (at most {top}, the int64 limit)"
        raise ScarceError(f"{name} must be {allowed}{limit}, got {show(number)}")
    return number


def check_shape(name: str, value: object, allowed: str, *, one_int: bool = False) -> tuple[int, ...]:
    """``value`` as a non-empty tuple of positive Python ints (an array's shape), or raise naming ``name``.

    Accepts a tuple, list or range, or a one-dimensional NumPy array, of integers (Python's,
    NumPy's or any ``numbers.Integral``), never ``bool``; with ``one_int``, a single integer is a
    shape of one axis. Strings and byte buffers are refused, though they are sequences. ``allowed``
    says in the message what is accepted.
    """
    if one_int and isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, (bool, np.bool_)):
        sizes: tuple[object, ...] | None = (value,)
    elif isinstance(value, np.ndarray):
        sizes = tuple(value) if value.ndim == 1 else None
    elif isinstance(value, (tuple, list, range)):
        sizes = tuple(value)
    else:
        sizes = None
    if not sizes or not all(isinstance(n, (numbers.Integral, np.integer)) and not isinstance(n, (bool, np.bool_))
                            and n >= 1 for n in sizes):
        raise ScarceError(f"{name} must be {allowed}, got {show(value)} ({type(value).__name__})")
    return tuple(int(n) for n in sizes)  # type: ignore[call-overload]


def check_in_interval(
    name: str,
    value: object,
    low: float,
    high: float,
    *,
    low_open: bool = True,
    high_open: bool = False,
) -> float:
    """Return ``value`` as a plain Python ``float`` inside the interval, or raise naming ``name``.

    Accepts Python and NumPy reals of any precision (``float16`` included: it is converted
    to a Python float before any arithmetic, so it cannot overflow later), never ``bool``,
    strings or NaN/inf. The interval is written in the message with brackets showing which
    ends are open. Callers must keep the returned ``float``, not the value they passed.
    """
    left, right = ("(" if low_open else "["), (")" if high_open else "]")
    allowed = f"{left}{low:g}, {high:g}{right}"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.integer, np.floating)):
        raise ScarceError(f"{name} must be a number in {allowed}, got {show(value)} ({type(value).__name__})")
    number = as_double(value)
    if number is None or not math.isfinite(number):
        raise ScarceError(f"{name} must be a finite number in {allowed}, got {show(value)}")
    below = number <= low if low_open else number < low
    above = number >= high if high_open else number > high
    if below or above:
        raise ScarceError(f"{name} must be in {allowed}, got {show(value)}")
    return number


def check_finite_float(name: str, value: object) -> float:
    """Return ``value`` as a finite plain Python ``float``, or raise naming ``name``."""
    return check_in_interval(name, value, -math.inf, math.inf, low_open=True, high_open=True)


def check_flag(name: str, value: object) -> bool:
    """``value`` as a Python bool if it is a Python or NumPy bool, else a :class:`ScarceError` naming ``name``."""
    if not isinstance(value, (bool, np.bool_)):
        raise ScarceError(f"{name} must be True or False, got {show(value)} ({type(value).__name__})")
    return bool(value)


def check_path(name: str, value: object) -> Path:
    """``value`` as a :class:`~pathlib.Path`, or a :class:`ScarceError` naming ``name``.

    A path is a ``str`` or path-like (``bytes`` are decoded), not blank (the empty path would
    silently mean the current directory: a typo or an unset shell variable would read or write
    there) and without a NUL byte (which no file system accepts).
    """
    try:
        text = os.fspath(value)  # type: ignore[call-overload]
    except TypeError:
        raise ScarceError(f"{name} must be a path (a str or os.PathLike), got {show(value)} "
                          f"({type(value).__name__})") from None
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if not text.strip():
        raise ScarceError(f"{name} must be a non-empty path, got {text!r} (an empty path would mean the current "
                          "directory)")
    if "\0" in text:
        raise ScarceError(f"{name} must not contain a NUL byte, got {show(text)}")
    return Path(text)


def check_choice(name: str, value: object, choices: Iterable[str]) -> str:
    """``value`` if it is one of the strings ``choices``, else :func:`unknown_name_error` for ``name``."""
    choices = tuple(choices)
    if not isinstance(value, str) or value not in choices:
        raise unknown_name_error(name, show(value) if not isinstance(value, str) else value, choices)
    return value


def describe_bad_positions(mask: np.ndarray, limit: int = 5) -> str:
    """Describe where ``mask`` is true: a count and the first few indices."""
    where = np.flatnonzero(mask)
    shown = ", ".join(str(i) for i in where[:limit])
    more = f", ... ({where.size - limit} more)" if where.size > limit else ""
    return f"{where.size} point(s), at index {shown}{more}"


def split_setting(item: str, allowed: Iterable[str], kind: str = "setting") -> tuple[str, str]:
    """``"key=value"`` (a ``--set`` override) as ``(key, value text)``; the key must be allowed.

    Raises
    ------
    ScarceError
        No ``=`` or an empty key; an unknown key (with "did you mean" and the allowed keys).
    """
    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ScarceError(f"--set takes key=value, got {item!r}")
    allowed = list(allowed)
    if key not in allowed:
        raise unknown_name_error(kind, key, allowed)
    return key, text.strip()
