"""Exceptions and warnings of scarce, and the "did you mean" error for an unknown name.

The validators that raise them live in :mod:`scarce.checks`.

Every error names the parameter, the value it got and what is allowed, so a
user can fix the call without reading the source.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Iterable


class ScarceError(ValueError):
    """Invalid input to a scarce function (a ``ValueError``)."""


class EvaluationError(RuntimeError):
    """The user's model or performance function raised, or returned bad output; or the
    ``callback`` handed to an estimator raised.

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


class FewChainsWarning(ScarceWarning):
    """Fewer than :data:`scarce.levels.MIN_CHAINS_PER_LEVEL` Markov chains a level (``N p0``): on a
    run several levels deep the reported CoV can fall short of the estimate's spread."""


class FewParticlesWarning(ScarceWarning):
    """Adaptive multilevel splitting with few particles or most of them killed at each iteration:
    a replica's estimate is then skewed and the replicas' interval can cover less than its level."""


class ThinEvidenceWarning(ScarceWarning):
    """A run's failures descend from too few chains of the first level that held a failure
    (:attr:`scarce.results.EstimateResult.thin_evidence`): its error cannot be measured from the run."""


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_stack_level() -> int:
    """The ``stacklevel`` that points a warning at the first caller outside the scarce package.

    A fixed ``stacklevel`` is right for one call path only: the same warning raised inside a
    run reaches the user through :meth:`~scarce.SubsetSimulation.estimate` one frame further
    than through :meth:`~scarce.SubsetSimulation.iter_levels`'s generator. Counting the frames
    that lie in the package (the function that warns, and its callers up to the user's code)
    gives the user's line on every path; pandas does the same (``find_stack_level``). Call it
    in the function that calls :func:`warnings.warn`.
    """
    frame, level = sys._getframe(1), 1  # the function about to warn
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    return level


def show(value: object, limit: int = 80) -> str:
    """``repr(value)`` shortened to about ``limit`` characters, for error messages."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a hostile __repr__ must not replace the real error
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else f"{text[:limit - 20]}...{text[-15:]} ({len(text)} characters)"


def unknown_name_error(kind: str, name: str, choices: Iterable[str]) -> ScarceError:
    """An error for an unknown registry key, with a "did you mean" and the list of choices."""
    options = sorted(choices)
    close = difflib.get_close_matches(name, options, n=3, cutoff=0.5) if isinstance(name, str) else []
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return ScarceError(f"unknown {kind} {show(name)}.{hint} Available: {', '.join(options)}")


