"""Unit tests of the pure level rule (exact values)."""

import math

import numpy as np
import pytest

from scarce.levels import failures_to_stop, n_seeds_target, next_threshold


def test_continuous_scores_keep_exactly_p0_n():
    scores = np.arange(100, dtype=float)
    choice = next_threshold(scores, 0.1)
    assert choice.threshold == 90.0
    assert choice.n_above == 10
    assert choice.probability == 0.1
    assert not choice.stalled


def test_ties_at_the_quantile_are_counted():
    scores = np.array([0.0] * 50 + [1.0] * 45 + [2.0] * 5)
    choice = next_threshold(scores, 0.1)
    # 10th largest is a tied 1.0: all 50 samples >= 1.0 are counted, not an assumed 10
    assert choice.threshold == 1.0
    assert choice.n_above == 50
    assert choice.probability == 0.5


def test_tie_block_at_previous_threshold_moves_to_next_distinct_value():
    scores = np.array([1.0] * 95 + [3.0] * 3 + [4.0] * 2)
    choice = next_threshold(scores, 0.1)
    assert choice.threshold == 3.0
    assert choice.n_above == 5
    assert not choice.stalled


def test_plateau_without_failures_ends_in_the_failure_event_with_none_counted():
    # every sample shares one score: the level cannot rise and is never retried until a failure
    # shows up; its failure fraction, 0 / N, is the last factor
    scores = np.full(20, 2.5)
    choice = next_threshold(scores, 0.1)
    assert choice.stalled and choice.is_failure_level
    assert choice.n_above == 0 and choice.probability == 0.0


def test_tie_at_the_bottom_is_never_a_level_of_its_own():
    # the 10th largest is the smallest score: a level there would keep all 100 samples
    scores = np.array([0.0] * 95 + [0.5] * 4 + [np.inf])
    choice = next_threshold(scores, 0.1)
    assert choice.threshold == 0.5 and choice.n_above == 5 and not choice.stalled


def test_failures_make_the_failure_level():
    scores = np.array([0.0] * 85 + [np.inf] * 15)
    choice = next_threshold(scores, 0.1)
    assert choice.is_failure_level
    assert choice.n_above == 15 and choice.probability == 0.15


def test_few_failures_below_target_give_a_finite_threshold():
    scores = np.array(list(np.linspace(0, 1, 95)) + [np.inf] * 5)
    choice = next_threshold(scores, 0.1)
    assert math.isfinite(choice.threshold)
    assert choice.n_above == 10


def test_only_failures_above_a_stuck_level_jump_to_the_failure_event_by_count():
    # every non-failed sample sits at the previous threshold: the next level is the failure set
    scores = np.array([1.0] * 97 + [np.inf] * 3)
    choice = next_threshold(scores, 0.1)
    assert choice.is_failure_level and choice.n_above == 3 and choice.probability == 0.03


def test_min_failures_ends_the_run_with_fewer_failures_than_the_target():
    scores = np.array(list(np.linspace(0, 1, 95)) + [np.inf] * 5)
    assert math.isfinite(next_threshold(scores, 0.1, min_failures=6).threshold)
    choice = next_threshold(scores, 0.1, min_failures=5)
    assert choice.is_failure_level and choice.n_above == 5 and choice.probability == 0.05


def test_min_failures_above_the_target_is_the_classic_rule():
    scores = np.array(list(np.linspace(0, 1, 85)) + [np.inf] * 15)
    assert next_threshold(scores, 0.1, min_failures=50) == next_threshold(scores, 0.1)
    few = np.array(list(np.linspace(0, 1, 95)) + [np.inf] * 5)
    assert next_threshold(few, 0.1, min_failures=10) == next_threshold(few, 0.1)


@pytest.mark.parametrize("n, p0, factor, k", [(2000, 0.1, 0.5, 100), (2000, 0.1, 1.0, 200), (1000, 0.1, 0.07, 7),
                                             (2000, 0.1, 0.14, 28), (100, 0.1, 0.31, 4), (10, 0.1, 0.5, 1)])
def test_failures_to_stop_rounds_the_product_before_the_ceiling(n, p0, factor, k):
    assert failures_to_stop(n, p0, factor) == k


@pytest.mark.parametrize("bad", [0, -1, 2.5])
def test_min_failures_must_be_a_positive_int(bad):
    with pytest.raises(ValueError, match="min_failures"):
        next_threshold(np.arange(10.0), 0.1, min_failures=bad)


@pytest.mark.parametrize("n, p0, m", [(2000, 0.1, 200), (10, 0.5, 5), (7, 0.2, 1), (3, 0.1, 1)])
def test_seed_target(n, p0, m):
    assert n_seeds_target(n, p0) == m
