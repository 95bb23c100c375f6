r"""Pure level rules of Subset Simulation: where to put the next threshold.

Scores here are *effective* scores: a sample that truly failed has score
``+inf`` (the exact terminal event), so every
intermediate event contains the failure set and the last level, the threshold
``+inf``, is the failure event itself.

The rule is that of generalised adaptive multilevel splitting (Bréhier, Lelièvre
and Rousset 2016).  With ``m = round(p0 * N)``, the boundary ``b`` is the
``(m + 1)``-th largest sample; every sample at or below it is killed, the
survivors seed the next level, and the level probability is their counted
fraction ``#(above b) / N`` (decision 2), exactly ``p0`` when nothing ties.

Why the boundary sits one sample below the seeds.  Putting the threshold *at* the
``m``-th largest score keeps the same ``m`` seeds, but the level then starts at a
seed, one sample too high, and the product of the counted fractions is biased
upward by about ``n_levels (1 - p0) / (N p0)`` (Cérou et al. 2012): 7% for
``N = 500``, ``p0 = 0.1`` and four intermediate levels.  With the boundary at the
``(m + 1)``-th sample the product is unbiased for ideal (independent) resampling
at any ``N`` (Bréhier et al. 2016), and the bias of the Markov chain version
falls with it (:mod:`scarce.estimators.subset`).

Ties.  That property holds for scores that never tie.  Rulers, saturated
classifiers and discrete corpora tie, and a rejected Markov chain move repeats
its state.  Every evaluated point therefore carries a tie-breaking key, an
independent uniform draw, and samples are ordered by ``(score, key)``: the
continuous order of an augmented space in which the failure event (score
``+inf``) is unchanged and the argument applies as it stands.  A tie block
straddling the boundary is split by the keys instead of kept whole (which counts
more than ``p0`` and keeps part of the bias) or killed whole (which
empties the population whenever ``m + 1`` samples share the top score: unbiased,
but often 0).  Copies of one state share their key, so they survive or die
together.

When every sample that did not fail shares one finite score, the level is a
*plateau*: the score can no longer tell samples apart and the level has
*stalled*.  The next level is then the failure event, counted from the plateau's
own samples (``K / N``, possibly ``0 / N``), and a run with no failure there ends
with estimate 0.  It is never resampled until a failure appears (that retry is a
selection bias) nor jumped to the failure threshold with an assumed probability.
The same holds when the ``m + 1`` largest samples are copies of one state that
did not fail: nothing lies above the boundary.

The last level.  Without ``min_failures`` the failure event becomes the next
level once the boundary itself has failed (``m + 1`` failures).  With
``min_failures`` it does so as soon as that many have failed: a population with
a failure fraction just under ``p0`` then ends the run instead of paying a whole
level of model calls to estimate a conditional probability near 1
(:class:`~scarce.estimators.subset.SubsetSimulation` explains the default).

Examples of :func:`next_threshold`
----------------------------------
Ties at the boundary are split by their keys:

>>> scores, keys = np.array([0.0, 1, 1, 1, 1, 2]), np.array([0.5, 0.1, 0.4, 0.3, 0.2, 0.9])
>>> next_threshold(scores, 0.34, keys=keys)
ThresholdChoice(threshold=1.0, n_above=2, probability=0.3333333333333333, stalled=False, key=0.3)

and without keys killed with it, so fewer than ``m`` may survive:

>>> next_threshold(scores, 0.34).n_above
1

With ``min_failures``, fewer failures than ``m`` already end the run:

>>> scores = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, np.inf])
>>> next_threshold(scores, 0.2).probability, next_threshold(scores, 0.2, min_failures=1).threshold
(0.2, inf)

A population tied at one score cannot rise: the next level is the failure event, with the
failures the population holds (none here):

>>> next_threshold(np.array([1.0, 1.0, 1.0, 1.0]), 0.5)
ThresholdChoice(threshold=inf, n_above=0, probability=0.0, stalled=True, key=-inf)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scarce.checks import check_in_interval, check_positive_int
from scarce.errors import ScarceError


@dataclass(frozen=True)
class ThresholdChoice:
    """The next level of a Subset Simulation run.

    The level is the set of samples whose ``(score, key)`` pair lies above ``(threshold, key)``
    in lexicographic order: ``score > threshold``, or ``score == threshold`` with a tie-breaking
    key above ``key``.  ``key = -inf`` makes it ``score >= threshold``; ``key = +inf`` makes it
    ``score > threshold``.

    Attributes
    ----------
    threshold : float
        Boundary score ``gamma``; ``+inf`` means the failure event.
    n_above : int
        Samples of the current population in the level (the seeds).
    probability : float
        The counted level probability ``n_above / N``.
    stalled : bool
        True when the samples that did not fail all share one score (a plateau), or when nothing
        lies above the boundary: the level cannot rise, so the next level is the failure event,
        with the failures the population holds (``n_above``, possibly 0).
    key : float
        Tie-breaking key of the boundary sample.
    """

    threshold: float
    n_above: int
    probability: float
    stalled: bool
    key: float = -math.inf

    @property
    def is_failure_level(self) -> bool:
        """True when the threshold is the failure event (``+inf``)."""
        return math.isinf(self.threshold) and self.threshold > 0

    def contains(self, score: np.ndarray, key: np.ndarray | None = None) -> np.ndarray:
        """Which samples lie in the level (``key`` may be omitted when the boundary key is ``-inf``)."""
        return in_level(score, key, self.threshold, self.key)


def in_level(score: np.ndarray, key: np.ndarray | None, threshold: float, threshold_key: float) -> np.ndarray:
    """``(score, key) > (threshold, threshold_key)`` in lexicographic order, elementwise.

    >>> in_level(np.array([1.0, 2.0, 2.0, 3.0]), np.array([0.9, 0.2, 0.7, 0.1]), 2.0, 0.5)
    array([False, False,  True,  True])
    """
    above = score > threshold
    if threshold_key == -math.inf:
        return above | (score == threshold)
    if threshold_key == math.inf:
        return above
    if key is None:
        raise ScarceError(f"key: the level's boundary key is {threshold_key!r}, so membership of samples "
                          f"at the boundary score {threshold!r} needs their tie-breaking keys")
    return above | ((score == threshold) & (key > threshold_key))


#: Smallest running probability a run's levels may reach. Below about 1e-308 a float64 loses its
#: digits and then rounds to 0, so a level below this bound would turn a run that reaches the
#: failure into an estimate of 0; such a run stops at the level before, flagged ``max_levels``.
#: The last factor (at least one failure in ``N``) then keeps the estimate of a run that reaches the
#: failure a normal float64 up to ``N`` of about 1e3, and nonzero far beyond.
MIN_PROBABILITY = 1e-305
#: Fewest Markov chains a level (``N p0``) at which the reported CoV holds on deep runs
#: (:func:`auto_level_probability`).
MIN_CHAINS_PER_LEVEL = 100
#: The level probability ``"auto"`` gives when ``N`` allows ``MIN_CHAINS_PER_LEVEL`` chains at it.
DEFAULT_LEVEL_PROBABILITY = 0.1


def below_floor_message(what: str) -> str:
    """The warning of a run that stops because ``what`` would fall below :data:`MIN_PROBABILITY`."""
    return (f"{what} would fall below {MIN_PROBABILITY:g}, the smallest probability this engine represents "
            "(float64 rounds smaller estimates to 0): the failure is rarer than that, and the run stops there, "
            "flagged max_levels")


def auto_level_probability(n_samples: int) -> float:
    r"""``p0`` for ``level_probability="auto"``: ``min(0.5, max(0.1, 100 / N))``.

    A level's ``N p0`` seeds start its Markov chains, and the reported CoV estimates each
    level's variance from those chains (grouped by their parents,
    :func:`scarce.envelope.lineage_variance`). With few chains that estimate runs short: the
    cluster sums' own mean is estimated from them, a few parents hold many seeds, and the
    levels' errors carry a correlation the genealogy does not show; so a run several levels
    deep on 50 chains a level covers less than its nominal level. With about 100 chains it
    holds, and Subset Simulation's variance per model call is nearly flat in ``p0`` between 0.1
    and 0.3 (each level costs ``N`` calls and covers ``ln(1/p0)`` of ``ln(1/P)``), so a small
    ``N`` keeps 100 chains by raising ``p0`` instead of thinning them: ``N >= 1000`` keeps the
    classic 0.1, ``N = 500`` takes 0.2, ``N = 200`` takes 0.5, and below that the chains are
    fewer than 100 (:class:`scarce.errors.FewChainsWarning`). The measurements are on the
    documentation's benchmark page "The engine under hostile scores".
    """
    return min(0.5, max(DEFAULT_LEVEL_PROBABILITY, MIN_CHAINS_PER_LEVEL / check_positive_int("n_samples", n_samples)))


def resolve_level_probability(n_samples: object, level_probability: object) -> object:
    """``level_probability`` with ``"auto"`` (any case, surrounding spaces ignored) replaced by
    :func:`auto_level_probability` of ``n_samples``.

    Anything else is returned as given, for :func:`check_level_sizes` to check (so is ``"auto"``
    beside an ``n_samples`` that is not a positive integer, whose error names ``n_samples``).
    """
    if isinstance(level_probability, str):
        if level_probability.strip().lower() != "auto":  # as the CLI takes it
            raise ScarceError(f"level_probability must be a number in (0, 0.5] or 'auto', got {level_probability!r}")
        return auto_level_probability(check_positive_int("n_samples", n_samples, minimum=2))
    return level_probability


def check_level_sizes(n_samples: object, level_probability: object, *, high: float = 0.5,
                      high_open: bool = False) -> tuple[int, float]:
    """Validate ``N`` (>= 2) and ``p0`` (in (0, high]) with ``N * p0 >= 1``; return them."""
    n = check_positive_int("n_samples", n_samples, minimum=2)
    p0 = check_in_interval("level_probability", level_probability, 0.0, high, high_open=high_open)
    if n * p0 < 1:
        raise ScarceError(
            f"n_samples * level_probability must be >= 1 (at least one seed per level), got "
            f"{n} * {p0} = {n * p0:g}"
        )
    return n, p0


def n_seeds_target(n_samples: int, level_probability: float) -> int:
    """Target number of seeds ``m = round(p0 * N)``, at least 1."""
    return max(1, int(round(level_probability * n_samples)))


#: Fewest failures that may end a run before the classic rule does (``m`` where that is smaller),
#: counted as independent draws (:func:`early_stop_allowed`).
EARLY_STOP_MIN_FAILURES = 50


def early_stop_allowed(n_failed: int, correlation_factor: float, n_samples: int, level_probability: float) -> bool:
    """Whether ``n_failed`` failures along chains whose failure indicator has the Au-Beck factor
    ``gamma`` are enough to end a run before the classic rule (``m`` failures, Au and Beck's
    ``N p0``: :func:`failures_to_stop` at ``stop_factor=1``) would.

    Ending a run when its count of failures reaches a bar selects the populations whose count
    came out high, and the bar keeps that selection small only if the count varies as a count
    of independent draws would. Along Markov chains it varies ``1 + gamma`` times as much
    (Au and Beck's factor): a chain that steps into the failure set tends to stay there, and a
    score that orders the failures only partly leaves them in the few chains that stumbled into
    them. A level whose conditional failure probability is well under ``p0`` can then hold
    ``stop_factor m`` failures by chance, and a run that stops there returns an estimate several
    times the truth with an interval that does not reach it. So the count an early stop needs is
    in effective draws, Kish's ``n_failed / (1 + gamma)``: at least
    :data:`EARLY_STOP_MIN_FAILURES` (or ``m`` where that is smaller). The engine asks it below ``m``
    failures only: at ``m`` or more the run stops as under the classic rule. A negative factor
    (chains that alternate) counts as 0, and one that is not a number (a level too short to
    measure it) refuses the stop: the classic rule needs no factor.

    >>> early_stop_allowed(120, 1.0, 2000, 0.1), early_stop_allowed(120, 2.0, 2000, 0.1)
    (True, False)
    """
    if math.isnan(correlation_factor):
        return False
    bar = min(n_seeds_target(n_samples, level_probability), EARLY_STOP_MIN_FAILURES)
    return n_failed / (1.0 + max(correlation_factor, 0.0)) >= bar


def failures_to_stop(n_samples: int, level_probability: float, stop_factor: float) -> int:
    """Failed samples that end a run: ``ceil(stop_factor * m)`` with ``m = round(p0 * N)``.

    Stopping as soon as ``K`` failures reach a count selects the populations whose count came
    out high, and ``K / N`` is then biased upward; the bias fades quickly as the count grows.
    So an early stop needs at least :data:`EARLY_STOP_MIN_FAILURES` failures (or ``m``, the
    classic rule, when that is smaller), and that many in effective draws where the failures
    lie along Markov chains (:func:`early_stop_allowed`, which the engine applies).  The product is rounded first, so a factor that is a
    round fraction of ``m`` is not pushed up by floating point (``0.07 * 1000`` is
    ``70.00000000000001``).

    >>> failures_to_stop(2000, 0.1, 0.5), failures_to_stop(1000, 0.1, 0.07), failures_to_stop(500, 0.1, 0.5)
    (100, 50, 50)
    """
    m = n_seeds_target(n_samples, level_probability)
    wanted = max(1, math.ceil(round(stop_factor * m, 9)))
    return min(m, max(wanted, EARLY_STOP_MIN_FAILURES))


def stop_before_level(next_level: int, max_levels: int, n_queries: int, cost: int,
                      max_queries: int | None) -> str | None:
    """Why level ``next_level`` must not start, or None: the run's two budget rules.

    ``"max_levels"`` when ``next_level`` would reach ``max_levels`` (levels are numbered from 0,
    the independent draws); ``"budget"`` when its ``cost`` model calls would take the
    ``n_queries`` already made past ``max_queries``.  A run stopped by either is a partial,
    flagged result; the failure level itself is never refused (it costs no call).

    >>> stop_before_level(3, 50, 5000, 1800, None), stop_before_level(50, 50, 0, 1, None)
    (None, 'max_levels')
    >>> stop_before_level(3, 50, 5000, 1800, 6000)
    'budget'
    """
    if next_level >= max_levels:
        return "max_levels"
    if exceeds_budget(n_queries, cost, max_queries):
        return "budget"
    return None


def exceeds_budget(n_queries: int, cost: int, max_queries: int | None) -> bool:
    """Whether ``cost`` more model calls would take the ``n_queries`` made past ``max_queries``.

    >>> exceeds_budget(5000, 1800, 6000), exceeds_budget(5000, 1000, 6000), exceeds_budget(5000, 1, None)
    (True, False, False)
    """
    return max_queries is not None and n_queries + cost > max_queries


def next_threshold(scores: np.ndarray, level_probability: float, min_failures: int | None = None,
                   keys: np.ndarray | None = None) -> ThresholdChoice:
    """Choose the next level from a population's effective scores and tie-breaking keys.

    The boundary is the ``(m + 1)``-th largest ``(score, key)`` pair (``m = round(p0 * N)``);
    every sample at or below it is killed and the samples above it seed the next level.  With
    distinct pairs exactly ``m`` survive; copies of one state (a rejected Markov chain move
    repeats its state and key) tie and are killed together.

    Parameters
    ----------
    scores : ndarray, shape (N,)
        Effective scores of the current population (``+inf`` for failures), all in the level
        the population lives in.
    level_probability : float
        Target conditional probability ``p0`` in (0, 0.5].
    min_failures : int, optional
        Take the failure event as the next level once at least this many scores are
        ``+inf``; ``None`` is the classic rule (``m + 1`` failures: the boundary has failed).
    keys : ndarray, shape (N,), optional
        Each sample's tie-breaking key (uniform on [0, 1), drawn independently for every
        evaluated point).  Without keys every tie at the boundary is killed.

    Returns
    -------
    ThresholdChoice

    Examples
    --------
    The boundary is the third largest score, 0.8 (ties, ``min_failures``, plateaus: module examples):

    >>> next_threshold(np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]), 0.2)
    ThresholdChoice(threshold=0.8, n_above=2, probability=0.2, stalled=False, key=inf)
    """
    n = scores.shape[0]
    m = n_seeds_target(n, level_probability)
    n_failed = int(np.count_nonzero(np.isposinf(scores)))
    if min_failures is not None:
        check_positive_int("min_failures", min_failures)
        if n_failed >= min_failures:  # a value above m changes nothing: the classic rule below also stops
            return _failure_level(n_failed, n)
    if n_failed == n:  # every sample failed: the failure event holds them all
        return _failure_level(n, n)
    # (m + 1)-th largest score, by partition (O(N)) rather than a full sort.
    boundary = float(np.partition(scores, n - m - 1)[n - m - 1])
    finite = scores[~np.isposinf(scores)]
    if boundary == math.inf or finite.min() == finite.max():
        # m + 1 failures, or a plateau: every sample that did not fail shares one score
        return _failure_level(n_failed, n, stalled=boundary != math.inf)
    n_above = int(np.count_nonzero(scores > boundary))
    key = math.inf
    if keys is not None:  # the boundary's rank inside its tie block, from the top
        tied = keys[scores == boundary]
        rank = tied.size - (m + 1 - n_above)
        key = float(np.partition(tied, rank)[rank])
        n_above += int(np.count_nonzero(tied > key))
    if n_above == 0:  # the m + 1 largest pairs are copies of one state, and it did not fail
        return ThresholdChoice(threshold=math.inf, n_above=0, probability=0.0, stalled=True)
    return ThresholdChoice(threshold=boundary, n_above=n_above, probability=n_above / n, stalled=False, key=key)


def _failure_level(n_failed: int, n: int, stalled: bool = False) -> ThresholdChoice:
    """The failure event as the next level, holding the ``n_failed`` failures of ``n`` samples."""
    return ThresholdChoice(threshold=math.inf, n_above=n_failed, probability=n_failed / n, stalled=stalled)
