"""What every estimator shares: a constructor that only stores, the problem and seed checked
once, model calls counted in one place, and one way to build the result.

An estimator is configured by its constructor (which validates nothing, as in scikit-learn:
``SubsetSimulation(n_samples=-1)`` builds, ``estimate`` refuses it) and run by
``estimate(problem, seed=...)``, which returns an :class:`~scarce.results.EstimateResult`.
:class:`Estimator` gives the parameters back (``get_params``, ``repr``) and prepares a run:
the settings validated into a copy (``_validated``, each estimator's own), the problem checked,
the seed turned into a generator.  :class:`CountedEvaluation` is the only place an estimator's
model calls go through, so ``n_queries`` is every point the model evaluated.
:func:`build_result` adds the fields every result carries (method, problem, the seed's record).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from scarce.errors import EvaluationError, ScarceError
from scarce.problem import MAX_DIM, RareEventProblem
from scarce.results import EstimateResult
from scarce.seeding import SeedLike, as_generator, describe_seed

__all__ = ["CountedEvaluation", "Estimator", "build_result", "check_callback", "check_memory", "check_problem",
           "effective_scores"]


#: Memory the latent states of one level (or one Monte Carlo batch) may take before
#: ``allow_large=True`` is required (8 GiB).
MAX_LEVEL_BYTES = 8 * 2**30
#: Model queries a Monte Carlo run may be asked for before ``allow_large=True`` is required: at a
#: microsecond a query, more than half an hour of a model that costs nothing.
MAX_MONTE_CARLO_QUERIES = 2_000_000_000


def check_problem(problem: object) -> RareEventProblem:
    """``problem`` itself, or a ScarceError naming what it is instead of a RareEventProblem.

    Its ``dim`` is checked again: an attribute set after construction would reach NumPy.
    """
    from scarce.checks import check_positive_int

    if not isinstance(problem, RareEventProblem):
        raise ScarceError(f"problem must be a RareEventProblem, got {type(problem).__name__}")
    problem.dim = check_positive_int("problem.dim", problem.dim, maximum=MAX_DIM)
    return problem


def check_memory(rows: int, dim: int, dtype: str, allow_large: bool, setting: str) -> None:
    """Refuse ``rows`` latent points of width ``dim`` above :data:`MAX_LEVEL_BYTES`, unless ``allow_large``.

    ``setting`` names the settings that set ``rows`` (``"n_samples=..."``), for the message.
    """
    need = rows * dim * np.dtype(dtype).itemsize
    if need > MAX_LEVEL_BYTES and not allow_large:
        raise ScarceError(
            f"{setting} with a latent dimension of {dim} ({dtype}) needs about {need / 2**30:.1f} GiB of latent "
            f"states, above the {MAX_LEVEL_BYTES / 2**30:.0f} GiB bound; lower it, or pass allow_large=True if the "
            "machine has the memory"
        )


def check_callback(callback: object) -> None:
    """Refuse a ``callback`` that is neither None nor callable with one argument, before any model call."""
    if callback is None:
        return
    if not callable(callback):
        raise ScarceError(f"callback must be None or callable (it is called with each level's diagnostics), got "
                          f"{callback!r} ({type(callback).__name__})")
    try:
        signature = inspect.signature(callback, follow_wrapped=False)  # what is called, not what a decorator wraps
    except (TypeError, ValueError):  # a builtin or extension callable without a signature: called as it is
        return
    try:
        signature.bind(None)
    except TypeError:
        raise ScarceError(f"callback must take one argument, each level's diagnostics (a LevelDiagnostics); "
                          f"{getattr(callback, '__qualname__', type(callback).__name__)}{signature} does not") from None


def call_back(callback: Callable[[Any], object] | None, diagnostics: Any) -> None:
    """Hand ``diagnostics`` (a :class:`~scarce.results.LevelDiagnostics`) to the user's ``callback``, if any.

    What the callback raises reaches the caller as an :class:`~scarce.errors.EvaluationError`
    naming the level, with the callback's own exception chained as its cause.
    """
    if callback is None:
        return
    try:
        callback(diagnostics)
    except Exception as exc:  # noqa: BLE001 - the user's code: any exception, reported as the callback's
        raise EvaluationError(f"callback raised {type(exc).__name__} on level {diagnostics.level}: {exc}") from exc


class Estimator:
    """Base of the estimators: stored parameters, and a run's checked settings, problem and generator."""

    method: ClassVar[str] = "estimator"

    def get_params(self) -> dict[str, Any]:
        """The constructor's parameters as stored (scikit-learn's convention)."""
        names = [p for p in inspect.signature(type(self).__init__).parameters if p != "self"]
        return {name: getattr(self, name) for name in names}

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"

    def _validated(self) -> Estimator:
        """A copy holding the validated settings (each estimator checks its own)."""
        return self

    def _prepare(self, problem: object, seed: SeedLike) -> tuple[Any, RareEventProblem, np.random.Generator]:
        """The validated settings, the checked problem and the run's generator, before any model call."""
        return self._validated(), check_problem(problem), as_generator(seed)


class CountedEvaluation:
    """A problem's model calls, counted: ``n_queries`` is every latent point evaluated."""

    def __init__(self, problem: RareEventProblem) -> None:
        self.problem = problem
        self.n_queries = 0

    def __call__(self, u: np.ndarray, where: str = "") -> tuple[np.ndarray, np.ndarray]:
        """``(score, failed)`` of a batch of latent points (one model call)."""
        score, failed = self.problem.evaluate_latent(u, where=where)
        self.n_queries += u.shape[0]
        return score, failed

    def effective(self, u: np.ndarray, where: str = "") -> np.ndarray:
        """Effective scores of a batch (:func:`effective_scores`)."""
        return effective_scores(*self(u, where))


def effective_scores(score: np.ndarray, failed: np.ndarray) -> np.ndarray:
    """``+inf`` where the point truly failed (the exact terminal event), the score elsewhere."""
    return np.where(failed, np.inf, score)


def build_result(estimator: Estimator | type, problem_name: str, seed: SeedLike, outcome: dict[str, Any],
                 info: dict[str, Any], **fields: Any) -> EstimateResult:
    """An :class:`EstimateResult` from a run's ``outcome`` fields, with the method, the problem and
    the seed's record (first in ``info``) that every result carries."""
    return EstimateResult(**outcome, method=estimator.method, problem=problem_name,
                          info={"seed": describe_seed(seed), **info}, **fields)
