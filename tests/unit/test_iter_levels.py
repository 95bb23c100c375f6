"""``SubsetSimulation.iter_levels``: the engine as an iterator over levels, and ``estimate`` as its end."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.stats import norm

from scarce import RareEventProblem, SubsetSimulation
from scarce.errors import ScarceError
from scarce.results import LevelState

BETA = norm.isf(1e-4)


class _Counted:
    """A linear problem in 4 dimensions that counts the rows it evaluates."""

    def __init__(self) -> None:
        self.rows = 0
        self.problem = RareEventProblem(4, self._evaluate, name="counted")

    def _evaluate(self, x: np.ndarray):  # type: ignore[no-untyped-def]
        self.rows += x.shape[0]
        g = x.sum(axis=1) / 2.0
        return g, g >= BETA


def test_the_states_run_from_level_zero_to_a_last_one_that_holds_the_result():
    counted = _Counted()
    states = list(SubsetSimulation(n_samples=500).iter_levels(counted.problem, seed=3))
    assert all(isinstance(s, LevelState) for s in states)
    assert [s.level for s in states] == list(range(len(states)))
    assert [s.done for s in states] == [False] * (len(states) - 1) + [True]
    assert all(s.result is None for s in states[:-1])
    result = states[-1].result
    assert result.reached_failure and result.n_queries == counted.rows == states[-1].n_queries
    assert states[-1].running_estimate == result.probability
    assert [s.diagnostics for s in states] == list(result.levels)


def test_estimate_is_the_iterator_run_to_its_end():
    via_iterator = list(SubsetSimulation(n_samples=500).iter_levels(_Counted().problem, seed=7))[-1].result
    direct = SubsetSimulation(n_samples=500).estimate(_Counted().problem, seed=7)
    a, b = via_iterator.to_dict(), direct.to_dict()
    a.pop("wall_time"), b.pop("wall_time")
    assert a == b


def test_nothing_runs_between_states_so_a_caller_can_stop_and_pay_only_for_what_it_saw():
    counted = _Counted()
    states = SubsetSimulation(n_samples=500).iter_levels(counted.problem, seed=0)
    assert counted.rows == 0  # the settings are checked, no model call yet
    first = next(states)
    assert first.level == 0 and counted.rows == first.n_queries == 500
    second = next(states)
    assert counted.rows == second.n_queries > 500  # no call made for a level not asked for
    third = next(states)
    assert counted.rows == third.n_queries > second.n_queries  # its calls come when it is asked for
    assert second.running_probability == pytest.approx(0.2)  # level_probability 'auto' at N = 500: 100 chains
    assert second.running_estimate == second.running_probability * second.n_failed / 500


def test_the_running_envelope_is_delta_times_the_level_probability():
    states = list(SubsetSimulation(n_samples=500).iter_levels(_Counted().problem, seed=1))
    for s in states:
        assert s.envelope_lower(0.05) == pytest.approx(0.05 * s.running_probability)
    # the last state's bound is the result's anytime-valid lower bound
    assert states[-1].envelope_lower(0.05) == pytest.approx(states[-1].result.envelope(0.05).lower)
    with pytest.raises(ValueError, match="delta"):
        states[0].envelope_lower(0.0)


def test_a_budget_ends_the_iteration_with_a_flagged_partial_result():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        states = list(SubsetSimulation(n_samples=500, max_queries=1400).iter_levels(_Counted().problem, seed=0))
    last = states[-1]
    assert last.done and last.result.status == "budget" and not last.result.reached_failure
    assert last.n_queries <= 1400 and math.isfinite(last.running_probability)


def test_bad_settings_and_problems_are_refused_before_the_first_state():
    with pytest.raises(ScarceError, match="n_samples"):
        SubsetSimulation(n_samples=-5).iter_levels(_Counted().problem)
    with pytest.raises(ScarceError, match="RareEventProblem"):
        SubsetSimulation().iter_levels(object())  # type: ignore[arg-type]
