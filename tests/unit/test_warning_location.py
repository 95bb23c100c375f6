"""Warnings raised inside a run point at the user's line, whichever way the run is driven.

A fixed ``stacklevel`` pointed ``iter_levels``'s warnings one frame past the caller (and the
thin-evidence warning into the package itself); :func:`scarce.errors.user_stack_level` counts the
package's frames instead.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

from conftest import dead_pid
from scarce import AdaptiveMultilevelSplitting, RareEventProblem, SubsetSimulation
from scarce._atomic import _host
from scarce.errors import (
    BudgetExhaustedWarning,
    FewChainsWarning,
    StalledLevelWarning,
    ThinEvidenceWarning,
    user_stack_level,
)
from scarce.estimators.amls import AMLS
from scarce.experiments.store import CorruptResultWarning, ResultStore
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


def _splitting_over_budget():
    engine = AdaptiveMultilevelSplitting(n_samples=100, n_killed=50, n_steps=1, n_replicas=2, max_queries=400)
    return engine.estimate(linear(dim=5, probability=1e-6), seed=0)


def _splitting_on_a_plateau():
    plateau = RareEventProblem(2, lambda u: (np.zeros(len(u)), u[:, 0] >= 3.5))
    return AdaptiveMultilevelSplitting(n_samples=100, n_killed=50, n_steps=1, n_replicas=2).estimate(plateau, seed=0)


def _amls_over_budget():
    return AMLS(n_samples=100, n_steps=5, max_queries=700).estimate(linear(dim=5, probability=1e-6), seed=0)


def _store_with_a_corrupt_task(tmp_path):
    store = ResultStore(tmp_path / "run", {"name": "x"})
    store.save("a", {"value": 1})
    (tmp_path / "run" / "tasks" / "a.json").write_text("{not json")
    return store.load("a")


def _store_reopened_after_a_killed_write(tmp_path):
    ResultStore(tmp_path / "run", {"name": "x"}).save("a", {"value": 1})
    (tmp_path / "run" / "tasks" / f".b.json.w-{_host()}-{dead_pid()}.x1.tmp").write_text("partial")  # a dead writer's
    return ResultStore.open(tmp_path / "run")


@pytest.mark.parametrize("run, category", [
    (_splitting_over_budget, BudgetExhaustedWarning),
    (_splitting_on_a_plateau, StalledLevelWarning),
    (_amls_over_budget, BudgetExhaustedWarning),
    (_store_with_a_corrupt_task, CorruptResultWarning),
    (_store_reopened_after_a_killed_write, CorruptResultWarning),  # through open(): pointed into the store
])
def test_the_other_engines_and_the_store_warn_at_the_callers_line(run, category, tmp_path):
    # each helper above calls the package once; the warning must name that call's line in this file
    lines, first = inspect.getsourcelines(run)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(tmp_path) if "tmp_path" in inspect.signature(run).parameters else run()
    found = [w for w in caught if issubclass(w.category, category)]
    assert found, f"no {category.__name__} raised"
    for w in found:
        assert (w.filename, first <= w.lineno < first + len(lines)) == (__file__, True), (w.filename, w.lineno)
