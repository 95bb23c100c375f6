"""Warnings raised inside a run point at the user's line, whichever way the run is driven.

A fixed ``stacklevel`` pointed ``iter_levels``'s warnings one frame past the caller (and the
thin-evidence warning into the package itself); :func:`scarce.errors.user_stack_level` counts the
package's frames instead.
"""

from __future__ import annotations

import inspect
import warnings

import pytest

from scarce import RareEventProblem, SubsetSimulation
from scarce.errors import BudgetExhaustedWarning, FewChainsWarning, ThinEvidenceWarning, user_stack_level
from scarce.problems import linear


def weak_score() -> RareEventProblem:
    return RareEventProblem(2, lambda u: (0.6 * u[:, 0] + 0.8 * u[:, 1], u[:, 0] >= 3.5))


def _drive(engine: SubsetSimulation, problem: RareEventProblem, how: str, seed: int):
    if how == "estimate":
        return engine.estimate(problem, seed=seed)
    for state in engine.iter_levels(problem, seed=seed):
        pass
    return state.result


def _caught(engine, problem, how, category, seed=0):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _drive(engine, problem, how, seed)
    found = [w for w in caught if issubclass(w.category, category)]
    assert found, f"no {category.__name__} raised"
    return found


@pytest.mark.parametrize("how", ["estimate", "iter_levels"])
@pytest.mark.parametrize("engine, problem, category", [
    (SubsetSimulation(n_samples=500, level_probability=0.1), linear(dim=5, probability=1e-3), FewChainsWarning),
    (SubsetSimulation(n_samples=500, max_queries=600), linear(dim=5, probability=1e-6), BudgetExhaustedWarning),
    (SubsetSimulation(n_samples=500), weak_score(), ThinEvidenceWarning),
])
def test_a_run_warning_points_at_the_caller(how, engine, problem, category):
    lines, first = inspect.getsourcelines(_drive)
    drive = range(first, first + len(lines))
    for w in _caught(engine, problem, how, category):
        # the line of _drive that called estimate() or advanced the states, not its caller's
        assert (w.filename, w.lineno in drive) == (__file__, True), (w.filename, w.lineno)


def test_user_stack_level_counts_the_package_frames_only():
    # called from outside the package it is the calling function itself
    assert user_stack_level() == 1
