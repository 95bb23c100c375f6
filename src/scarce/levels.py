r"""Pure level rules of Subset Simulation: where to put the next threshold.

Scores here are *effective* scores: a sample that truly failed has score
``+inf`` (the exact terminal event, DESIGN.md section 2, decision 1), so every
intermediate event contains the failure set and the last level, the threshold
``+inf``, is the failure event itself.

The rule is tie-aware (decision 2).  With ``m = round(p0 * N)`` the candidate
threshold is the ``m``-th largest score; the level probability is the counted
fraction ``#(score >= threshold) / N``, which exceeds ``p0`` when scores tie at
the threshold.  A threshold equal to the smallest score keeps every sample, so
it would pay a whole level of model calls to learn nothing: when the candidate
is the smallest score (a block of ties at the bottom, which includes every
candidate at or below the previous threshold), the next distinct score above it
is used instead.  When there is none, every sample shares one finite score: the
level is a *plateau*, the score can no longer tell samples apart, and the level
has *stalled*.  Its failure fraction is ``0 / N`` (failures would be ``+inf``,
above the plateau), so the next level is the failure event with no failure
counted: the run ends there.  It is never resampled until a failure appears
(that retry is a selection bias) nor jumped to the failure threshold with an
assumed probability.

A plateau that does hold failures is the same rule: the next distinct score above
the tie is ``+inf``, so the failure event becomes the next level and its counted
fraction ``K / N`` is the last factor; the score has stopped helping and the
failure set is reached by plain Monte Carlo inside the plateau.

The last level.  In the classic rule the failure event becomes the next level
once ``m`` samples have failed (the ``m``-th largest score is ``+inf``).  With
``min_failures`` it does so as soon as that many have failed: a population with
a failure fraction just under ``p0`` then ends the run instead of paying a whole
level of model calls to estimate a conditional probability near 1
(:class:`~scarce.estimators.subset.SubsetSimulation` explains the default).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scarce.errors import ScarceError, check_in_interval, check_positive_int


@dataclass(frozen=True)
class ThresholdChoice:
    """The next level of a Subset Simulation run.

    Attributes
    ----------
    threshold : float
        Next threshold ``gamma``; ``+inf`` means the failure event.
    n_above : int
        ``#(score >= threshold)`` in the current population (the seeds).
    probability : float
        The counted level probability ``n_above / N``.
    stalled : bool
        True when the samples that did not fail all share one score (a plateau): the threshold
        cannot rise, so the next level is the failure event, with the failures the population
        holds (``n_above``, possibly 0).
    """

    threshold: float
    n_above: int
    probability: float
    stalled: bool

    @property
    def is_failure_level(self) -> bool:
        """True when the threshold is the failure event (``+inf``)."""
        return math.isinf(self.threshold) and self.threshold > 0


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


def failures_to_stop(n_samples: int, level_probability: float, stop_factor: float) -> int:
    """Failed samples that end a run: ``ceil(stop_factor * m)`` with ``m = round(p0 * N)``, at least 1.

    The product is rounded first, so a factor that is a round fraction of ``m`` is not pushed up
    by floating point (``0.07 * 100`` is ``7.000000000000001``).

    >>> failures_to_stop(2000, 0.1, 0.5), failures_to_stop(1000, 0.1, 0.07), failures_to_stop(10, 0.1, 0.5)
    (100, 7, 1)
    """
    return max(1, math.ceil(round(stop_factor * n_seeds_target(n_samples, level_probability), 9)))


def next_threshold(
    scores: np.ndarray, level_probability: float, min_failures: int | None = None
) -> ThresholdChoice:
    """Choose the next threshold from a population's effective scores.

    Parameters
    ----------
    scores : ndarray, shape (N,)
        Effective scores of the current population (``+inf`` for failures), all at or above
        the threshold of the level the population lives in.
    level_probability : float
        Target conditional probability ``p0`` in (0, 0.5].
    min_failures : int, optional
        Take the failure event as the next level once at least this many scores are
        ``+inf``; ``None`` is the classic rule (``m = round(p0 * N)`` failures).

    Returns
    -------
    ThresholdChoice

    Examples
    --------
    >>> next_threshold(np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]), 0.2)
    ThresholdChoice(threshold=0.9, n_above=2, probability=0.2, stalled=False)

    Ties at the quantile are counted, not assumed away:

    >>> next_threshold(np.array([0.0, 1, 1, 1, 1, 1, 1, 1, 1, 1]), 0.2)
    ThresholdChoice(threshold=1.0, n_above=9, probability=0.9, stalled=False)

    With ``min_failures``, fewer failures than ``m`` already end the run:

    >>> scores = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, np.inf])
    >>> next_threshold(scores, 0.2).threshold, next_threshold(scores, 0.2, min_failures=1).threshold
    (0.9, inf)

    A population tied at one score cannot rise: the next level is the failure event, with the
    failures the population holds (none here):

    >>> next_threshold(np.array([1.0, 1.0, 1.0, 1.0]), 0.5)
    ThresholdChoice(threshold=inf, n_above=0, probability=0.0, stalled=True)

    A tie at the bottom is never a level of its own: the threshold rises past it.

    >>> next_threshold(np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, np.inf]), 0.3)
    ThresholdChoice(threshold=0.5, n_above=2, probability=0.2, stalled=False)
    """
    n = scores.shape[0]
    m = n_seeds_target(n, level_probability)
    if min_failures is not None:
        check_positive_int("min_failures", min_failures)
        n_failed = int(np.count_nonzero(np.isposinf(scores)))
        if n_failed >= min_failures:  # a value above m changes nothing: the classic rule below also stops
            return ThresholdChoice(threshold=math.inf, n_above=n_failed, probability=n_failed / n, stalled=False)
    # m-th largest score, by partition (O(N)) rather than a full sort.
    candidate = float(np.partition(scores, n - m)[n - m])
    stalled = False
    lowest = float(scores.min())
    if np.isposinf(lowest):  # every sample failed: the failure event holds them all
        return ThresholdChoice(threshold=math.inf, n_above=n, probability=1.0, stalled=False)
    if not candidate > lowest:  # a threshold at the smallest score keeps all N samples
        above = scores[scores > lowest]
        if above.size == 0:  # every sample shares one finite score: nothing can rise
            return ThresholdChoice(threshold=math.inf, n_above=0, probability=0.0, stalled=True)
        candidate = float(above.min())
        stalled = math.isinf(candidate)  # only failures lie above the tie: a plateau that holds some
    n_above = int(np.count_nonzero(scores >= candidate))
    return ThresholdChoice(threshold=candidate, n_above=n_above, probability=n_above / n, stalled=stalled)
