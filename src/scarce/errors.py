"""Exceptions, warnings and the small validators shared by every module.

Every error names the parameter, the value it got and what is allowed, so a
user can fix the call without reading the source.
"""

from __future__ import annotations

import difflib
import math
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
    """A run's failures descend from one or two first-level samples: its error cannot be measured."""


def check_positive_int(name: str, value: object, minimum: int = 1) -> int:
    """Return ``value`` as an int, or raise naming ``name`` if it is not an int >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ScarceError(f"{name} must be an integer >= {minimum}, got {value!r} ({type(value).__name__})")
    if value < minimum:
        raise ScarceError(f"{name} must be an integer >= {minimum}, got {value}")
    return int(value)


def check_in_interval(
    name: str,
    value: object,
    low: float,
    high: float,
    *,
    low_open: bool = True,
    high_open: bool = False,
) -> float:
    """Return ``value`` as a float inside the interval, or raise naming ``name``.

    The interval is written in the message with brackets showing which ends are open.
    """
    left, right = ("(" if low_open else "["), (")" if high_open else "]")
    allowed = f"{left}{low:g}, {high:g}{right}"
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ScarceError(f"{name} must be a number in {allowed}, got {value!r} ({type(value).__name__})")
    number = float(value)
    if not math.isfinite(number):
        raise ScarceError(f"{name} must be a finite number in {allowed}, got {value!r}")
    below = number <= low if low_open else number < low
    above = number >= high if high_open else number > high
    if below or above:
        raise ScarceError(f"{name} must be in {allowed}, got {value!r}")
    return number


def unknown_name_error(kind: str, name: str, choices: Iterable[str]) -> ScarceError:
    """An error for an unknown registry key, with a "did you mean" and the list of choices."""
    options = sorted(choices)
    close = difflib.get_close_matches(name, options, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return ScarceError(f"unknown {kind} {name!r}.{hint} Available: {', '.join(options)}")


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
