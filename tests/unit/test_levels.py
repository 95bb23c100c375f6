"""Unit tests of the pure level rule (exact values)."""

import math

import numpy as np
import pytest

from scarce.levels import early_stop_allowed, failures_to_stop, in_level, n_seeds_target, next_threshold


def test_continuous_scores_keep_exactly_p0_n_above_the_next_score_down():
    # the boundary is the (m + 1)-th largest score, 89; the level is {score > 89}
    scores, keys = np.arange(100, dtype=float), np.random.default_rng(0).random(100)
    choice = next_threshold(scores, 0.1, keys=keys)
    assert choice.threshold == 89.0
    assert choice.n_above == 10 and np.count_nonzero(choice.contains(scores, keys)) == 10
    assert choice.probability == 0.1
    assert not choice.stalled


def test_ties_at_the_boundary_are_split_by_the_keys():
    # the 11th largest is a tied 1.0: five of the 45 tied samples survive, those with the top keys
    scores = np.array([0.0] * 50 + [1.0] * 45 + [2.0] * 5)
    keys = np.random.default_rng(1).permutation(100) / 100
    choice = next_threshold(scores, 0.1, keys=keys)
    assert choice.threshold == 1.0 and choice.n_above == 10 and choice.probability == 0.1
    inside = choice.contains(scores, keys)
    assert inside[95:].all() and not inside[:50].any()
    tied = keys[50:95]
    assert set(tied[inside[50:95]]) == set(np.sort(tied)[-5:])


def test_without_keys_ties_at_the_boundary_are_killed_with_it():
    scores = np.array([0.0] * 50 + [1.0] * 45 + [2.0] * 5)
    choice = next_threshold(scores, 0.1)
    assert choice.threshold == 1.0 and choice.key == np.inf
    assert choice.n_above == 5 and choice.probability == 0.05
    assert np.count_nonzero(choice.contains(scores)) == 5


def test_copies_of_the_boundary_state_die_with_it():
    # a rejected move repeats a state and its key: the copies tie in (score, key) and are killed
    scores = np.array([0.0] * 85 + [1.0] * 10 + [2.0] * 5)
    keys = np.concatenate([np.linspace(0, 0.5, 85), np.full(10, 0.7), np.linspace(0.1, 0.2, 5)])
    choice = next_threshold(scores, 0.1, keys=keys)
    assert choice.n_above == 5 and choice.threshold == 1.0 and choice.key == 0.7


def test_a_tie_block_at_the_bottom_is_split_not_kept_whole():
    scores = np.array([1.0] * 95 + [3.0] * 3 + [4.0] * 2)
    choice = next_threshold(scores, 0.1, keys=np.random.default_rng(2).random(100))
    assert choice.threshold == 1.0 and choice.n_above == 10
    assert not choice.stalled


def test_plateau_without_failures_ends_in_the_failure_event_with_none_counted():
    # every sample shares one score: the level cannot rise and is never retried until a failure
    # shows up; its failure fraction, 0 / N, is the last factor
    scores = np.full(20, 2.5)
    choice = next_threshold(scores, 0.1)
    assert choice.stalled and choice.is_failure_level
    assert choice.n_above == 0 and choice.probability == 0.0


def test_top_copies_of_one_state_without_failures_leave_nothing_above():
    scores = np.array([0.0] * 80 + [0.5] * 20)
    keys = np.concatenate([np.random.default_rng(3).random(80), np.full(20, 0.3)])
    choice = next_threshold(scores, 0.1, keys=keys)
    assert choice.stalled and choice.is_failure_level and choice.n_above == 0


def test_level_membership_is_lexicographic():
    scores, keys = np.array([1.0, 2.0, 2.0, 3.0, np.inf]), np.array([0.9, 0.2, 0.7, 0.1, 0.0])
    assert in_level(scores, keys, 2.0, 0.5).tolist() == [False, False, True, True, True]
    assert in_level(scores, keys, 2.0, -np.inf).tolist() == [False, True, True, True, True]
    assert in_level(scores, None, 2.0, np.inf).tolist() == [False, False, False, True, True]
    assert in_level(scores, keys, np.inf, -np.inf).tolist() == [False, False, False, False, True]


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


def test_m_failures_are_not_yet_the_failure_level_but_m_plus_one_are():
    # the boundary is the (m + 1)-th largest: with m failures it is the largest finite score
    m_failed = np.array(list(np.linspace(0, 1, 90)) + [np.inf] * 10)
    assert math.isfinite(next_threshold(m_failed, 0.1).threshold)
    assert next_threshold(m_failed, 0.1).n_above == 10
    assert next_threshold(np.array(list(np.linspace(0, 1, 89)) + [np.inf] * 11), 0.1).is_failure_level


def test_only_failures_above_a_plateau_make_the_failure_level_by_count():
    # every non-failed sample shares one score: the next level is the failure set
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


@pytest.mark.parametrize("n, p0, factor, k", [(2000, 0.1, 0.5, 100), (2000, 0.1, 1.0, 200), (10000, 0.1, 0.07, 70),
                                             (2000, 0.1, 0.35, 70), (1000, 0.1, 0.57, 57), (10, 0.1, 0.5, 1)])
def test_failures_to_stop_rounds_the_product_before_the_ceiling(n, p0, factor, k):
    assert failures_to_stop(n, p0, factor) == k


@pytest.mark.parametrize("n, p0, factor, k", [(500, 0.1, 0.5, 50), (1000, 0.1, 0.1, 50), (300, 0.1, 0.2, 30)])
def test_an_early_stop_needs_fifty_failures_or_the_classic_count(n, p0, factor, k):
    # a stop at a handful of failures selects the populations whose count came out high
    assert failures_to_stop(n, p0, factor) == k


@pytest.mark.parametrize("n_failed, gamma, n, p0, allowed", [
    (120, 1.0, 2000, 0.1, True),    # 60 effective draws
    (120, 2.0, 2000, 0.1, False),   # 40: clustered along the chains
    (150, 2.0, 2000, 0.1, True),    # exactly 50
    (50, -0.3, 1000, 0.1, True),    # a negative factor (anti-correlated chains) counts as none:
    (40, -0.3, 1000, 0.1, False),   # 40, not 40 / 0.7 = 57 effective draws
    (120, float("nan"), 2000, 0.1, False),  # no measured factor: the classic rule decides
    (10, 0.0, 100, 0.1, True),      # m = 10 is the bar where it is below 50
    (10, 0.5, 100, 0.1, False),
])
def test_an_early_stop_counts_its_failures_in_effective_draws(n_failed, gamma, n, p0, allowed):
    assert early_stop_allowed(n_failed, gamma, n, p0) is allowed


@pytest.mark.parametrize("bad", [0, -1, 2.5])
def test_min_failures_must_be_a_positive_int(bad):
    with pytest.raises(ValueError, match="min_failures"):
        next_threshold(np.arange(10.0), 0.1, min_failures=bad)


@pytest.mark.parametrize("n, p0, m", [(2000, 0.1, 200), (10, 0.5, 5), (7, 0.2, 1), (3, 0.1, 1)])
def test_seed_target(n, p0, m):
    assert n_seeds_target(n, p0) == m


def _ideal_splitting(rng, n, p0, depth):
    """One run with exact resampling: Exp(1) scores, failure ``x >= depth``, P = exp(-depth).

    Above a boundary ``b`` an Exp(1) score is ``b + Exp(1)`` (memoryless), so every level is
    drawn exactly and only the level rule can bias the product of the counted fractions.
    """
    x, estimate = rng.exponential(size=n), 1.0
    while True:
        choice = next_threshold(np.where(x >= depth, np.inf, x), p0, keys=rng.random(n))
        estimate *= choice.probability
        if choice.is_failure_level:
            return estimate
        x = choice.threshold + rng.exponential(size=n)


def test_the_level_rule_is_unbiased_under_exact_resampling_even_with_few_samples():
    # N = 100, p0 = 0.1, four levels: a threshold at the m-th largest sample gives 1.4x here
    rng = np.random.default_rng(20261124)
    depth = math.log(1e4)
    est = np.array([_ideal_splitting(rng, 100, 0.1, depth) for _ in range(4000)])
    se = est.std(ddof=1) / math.sqrt(est.size)
    assert abs(est.mean() - math.exp(-depth)) < 3 * se


def test_membership_at_a_keyed_boundary_needs_the_keys():
    with pytest.raises(ValueError, match="key: the level's boundary key is 0.5"):
        in_level(np.array([1.0, 2.0]), None, 2.0, 0.5)


def test_stop_factor_one_stays_the_classic_rule_at_exactly_p0_n_failures():
    # seed 0 ends with 100 = p0 N failures under chains of gamma 2.6: the classic rule stops there,
    # and the effective-draw check must not add a level (it did: 4,900 queries instead of 3,900)
    import warnings

    from scarce import SubsetSimulation
    from scarce.problems import linear

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = SubsetSimulation(n_samples=1000, stop_factor=1.0).estimate(linear(dim=10, probability=1e-4), seed=0)
    assert result.n_queries == 3900 and result.levels[-1].n_failed == 100
