r"""Reliability benchmark problems with exact answers, in standard-normal space.

Each builder returns a :class:`~scarce.problem.RareEventProblem` whose
``exact_probability`` is known in closed form (or by one-dimensional
quadrature).  Scores follow the library convention: larger is closer to
failure, ``failed = score >= 0``, i.e. ``score = -g`` for a limit state ``g <= 0``.

| name | d | failure event |
|---|---|---|
| ``linear`` | any | ``sum(u) / sqrt(d) >= beta``, ``beta = -Phi^{-1}(P)`` |
| ``four_branch`` | 2 | Au-Beck series system with four branches, ``k = 7`` |
| ``chi_square`` | any | ``sum(u^2) >= c``, ``c`` the chi-square(d) quantile |
| ``two_regions`` | any | ``abs(u_1) >= beta``, ``P = 2 Phi(-beta)`` (two disjoint regions) |
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable

import numpy as np

from scarce.checks import check_in_interval, check_positive_int
from scarce.errors import ScarceError, unknown_name_error
from scarce.problem import MAX_DIM, RareEventProblem


#: Smallest exact probability a benchmark problem takes: five decades above the smallest level a
#: run may reach (:data:`scarce.levels.MIN_PROBABILITY`), so a run's noisy levels stay above it.
MIN_PROBLEM_PROBABILITY = 1e-300


def _checked_threshold(threshold: float, probability: float, what: str) -> float:
    """``threshold`` if finite and ``probability`` at least :data:`MIN_PROBLEM_PROBABILITY`; else a
    :class:`ScarceError`: ``probability`` is beyond what an estimate represents."""
    if not math.isfinite(threshold) or probability < MIN_PROBLEM_PROBABILITY:
        raise ScarceError(f"probability={probability!r} is too small for float64: {what} would be "
                          f"{threshold}; use a probability of at least 1e-300")
    return threshold


def linear(dim: int = 100, probability: float = 1e-6) -> RareEventProblem:
    """Linear limit state ``g = beta - sum(u) / sqrt(d)``; exact ``P_f = Phi(-beta)``."""
    from scipy.stats import norm

    dim = check_positive_int("dim", dim, maximum=MAX_DIM)
    probability = check_in_interval("probability", probability, 0.0, 1.0, high_open=True)
    beta = _checked_threshold(float(-norm.ppf(probability)), probability, "beta = -Phi^{-1}(P)")
    root = math.sqrt(dim)

    def score(u: np.ndarray) -> np.ndarray:
        return u.sum(axis=1) / root - beta

    return RareEventProblem.from_score(score, dim, 0.0, name=f"linear(d={dim}, P={probability:.0e})", exact_probability=probability)


def four_branch(k: float = 7.0) -> RareEventProblem:
    r"""Four-branch series system (Au and Beck 2001 style), ``d = 2``.

    ``g = min(3 + (u1 - u2)^2 / 10 - (u1 + u2) / sqrt 2, 3 + (u1 - u2)^2 / 10 + (u1 + u2) / sqrt 2,
    (u1 - u2) + k / sqrt 2, (u2 - u1) + k / sqrt 2)``.

    In rotated coordinates ``a = (u1 + u2) / sqrt 2``, ``b = (u1 - u2) / sqrt 2`` (independent
    standard normals) failure is ``|b| >= k / 2`` or ``|a| >= 3 + b^2 / 5``, so
    ``P_f = 2 Phi(-k/2) + int_{|b| < k/2} phi(b) 2 Phi(-(3 + b^2/5)) db`` (quadrature);
    ``k = 7`` gives about 2.22e-3. ``k`` must be positive (the branch offset ``k / 2`` is a
    distance) and at most 70: there the straight branches add ``2 Phi(-35)``, about 1e-268,
    so a larger ``k`` describes the same problem while its quadrature range grows without bound.
    """
    from scipy.integrate import quad
    from scipy.stats import norm

    k = check_in_interval("k", k, 0.0, 70.0)
    half = k / 2.0
    inner, _ = quad(lambda b: norm.pdf(b) * 2.0 * norm.sf(3.0 + b * b / 5.0), -half, half, epsabs=1e-14, epsrel=1e-12)
    exact = 2.0 * norm.sf(half) + inner
    r2 = math.sqrt(2.0)

    def score(u: np.ndarray) -> np.ndarray:
        u1, u2 = u[:, 0], u[:, 1]
        quad_term = 3.0 + (u1 - u2) ** 2 / 10.0
        g = np.minimum.reduce(
            [quad_term - (u1 + u2) / r2, quad_term + (u1 + u2) / r2, (u1 - u2) + k / r2, (u2 - u1) + k / r2]
        )
        return -g

    return RareEventProblem.from_score(score, 2, 0.0, name=f"four_branch(k={k:g})", exact_probability=exact)


def chi_square(dim: int = 50, probability: float = 1e-6) -> RareEventProblem:
    """Failure ``sum(u^2) >= c`` with ``c = chi2(d).isf(P)``; exact ``P_f = P``."""
    from scipy.stats import chi2

    dim = check_positive_int("dim", dim, maximum=MAX_DIM)
    probability = check_in_interval("probability", probability, 0.0, 1.0, high_open=True)
    c = _checked_threshold(float(chi2(dim).isf(probability)), probability, "the quantile c")

    def score(u: np.ndarray) -> np.ndarray:
        return np.einsum("ij,ij->i", u, u) - c

    return RareEventProblem.from_score(score, dim, 0.0, name=f"chi_square(d={dim}, P={probability:.0e})", exact_probability=probability)


def two_regions(dim: int = 10, probability: float = 1e-5) -> RareEventProblem:
    """Two disjoint failure regions ``|u_1| >= beta``, ``beta = -Phi^{-1}(P / 2)``; exact ``P_f = P``."""
    from scipy.stats import norm

    dim = check_positive_int("dim", dim, maximum=MAX_DIM)
    probability = check_in_interval("probability", probability, 0.0, 1.0, high_open=True)
    beta = _checked_threshold(float(-norm.ppf(probability / 2.0)), probability, "beta = -Phi^{-1}(P / 2)")

    def score(u: np.ndarray) -> np.ndarray:
        return np.abs(u[:, 0]) - beta

    return RareEventProblem.from_score(score, dim, 0.0, name=f"two_regions(d={dim}, P={probability:.0e})", exact_probability=probability)


PROBLEMS: dict[str, Callable[..., RareEventProblem]] = {
    "linear": linear,
    "four_branch": four_branch,
    "chi_square": chi_square,
    "two_regions": two_regions,
}


def make_problem(name: str, **params: object) -> RareEventProblem:
    """A benchmark problem by name (see the module table)."""
    if not isinstance(name, str) or name not in PROBLEMS:
        raise unknown_name_error("problem", str(name), PROBLEMS)
    builder = PROBLEMS[name]
    allowed = list(inspect.signature(builder).parameters)
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ScarceError(f"problem {name!r} takes no parameter(s) {unknown}; allowed: {', '.join(allowed)}")
    return builder(**params)


#: The problems of the reliability benchmark (``benchmarks/reliability.py``), as (name, parameters).
BENCHMARK_SUITE: tuple[tuple[str, dict], ...] = (
    ("linear", {"dim": 100, "probability": 1e-3}),
    ("linear", {"dim": 100, "probability": 1e-6}),
    ("linear", {"dim": 100, "probability": 1e-9}),
    ("four_branch", {"k": 7.0}),
    ("chi_square", {"dim": 50, "probability": 1e-6}),
    ("two_regions", {"dim": 10, "probability": 1e-5}),
)
