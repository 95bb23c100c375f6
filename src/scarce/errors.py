"""Exceptions, warnings and the small validators shared by every module.

Every error names the parameter, the value it got and what is allowed, so a
user can fix the call without reading the source.
"""

from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Iterable

import numpy as np


class ScarceError(ValueError):
    """Invalid input to a scarce function (a ``ValueError``)."""


class EvaluationError(RuntimeError):
    """The user's model or performance function raised, or returned bad output.

    The message says at which level and MCMC step it happened; the original
    exception is chained as ``__cause__``.
    """


class ScarceWarning(UserWarning):
    """Statistical trouble that does not stop a run; also flagged on the result."""


class StalledLevelWarning(ScarceWarning):
    """A level threshold could not rise above the previous one (ties)."""


class BudgetExhaustedWarning(ScarceWarning):
    """``max_queries`` or ``max_levels`` stopped a run before the failure event."""


class LowAcceptanceWarning(ScarceWarning):
    """MCMC acceptance so low that the chains barely move."""


class ThinEvidenceWarning(ScarceWarning):
    """A run's failures descend from too few chains of the first level that held a failure
    (:attr:`scarce.results.EstimateResult.thin_evidence`): its error cannot be measured from the run."""


def show(value: object, limit: int = 80) -> str:
    """``repr(value)`` shortened to about ``limit`` characters, for error messages."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a hostile __repr__ must not replace the real error
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else f"{text[:limit - 20]}...{text[-15:]} ({len(text)} characters)"


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
    try:
        number = float(value)
    except (OverflowError, TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise ScarceError(f"{name} must be a finite number in {allowed}, got {show(value)}")
    below = number <= low if low_open else number < low
    above = number >= high if high_open else number > high
    if below or above:
        raise ScarceError(f"{name} must be in {allowed}, got {show(value)}")
    return number


def check_finite_float(name: str, value: object) -> float:
    """Return ``value`` as a finite plain Python ``float``, or raise naming ``name``."""
    return check_in_interval(name, value, -math.inf, math.inf, low_open=True, high_open=True)


def unknown_name_error(kind: str, name: str, choices: Iterable[str]) -> ScarceError:
    """An error for an unknown registry key, with a "did you mean" and the list of choices."""
    options = sorted(choices)
    close = difflib.get_close_matches(name, options, n=3, cutoff=0.5) if isinstance(name, str) else []
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return ScarceError(f"unknown {kind} {show(name)}.{hint} Available: {', '.join(options)}")


def check_flag(name: str, value: object) -> bool:
    """``value`` as a Python bool if it is a Python or NumPy bool, else a :class:`ScarceError` naming ``name``."""
    if not isinstance(value, (bool, np.bool_)):
        raise ScarceError(f"{name} must be True or False, got {show(value)} ({type(value).__name__})")
    return bool(value)


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
