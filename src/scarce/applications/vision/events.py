r"""Failure events of a classifier, each with the logit margin that leads Subset Simulation to it.

An event says which decisions are failures and, from the logits, a performance function that is
positive exactly on the failure set (up to ties of the top logits), so classic Subset Simulation
can climb to it. With a ruler as the score instead, only the event's flag is used, as the exact
terminal event (documentation, Concepts: "The exact terminal event").

* :class:`Misclassification` (the default): ``argmax_j l_j(x) != y``, with margin
  :math:`\max_{j \ne y} l_j - l_y`.
* :class:`Targeted`: the decision is a given class ``t``, with margin :math:`l_t - \max_{j \ne t} l_j`.
* :class:`LogitsEvent`: any failure flag computed from the logits, with an optional margin of
  the user's (without one, the levels need a ruler).

>>> import numpy as np
>>> logits = np.array([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0]])
>>> Misclassification().failed(logits, label=0).tolist(), Misclassification().margin(logits, 0).tolist()
([False, True], [-1.0, 3.0])
>>> Targeted(2).failed(logits, label=0).tolist(), Targeted(2).margin(logits, 0).tolist()
([False, False], [-2.0, -2.0])
>>> LogitsEvent(lambda l: l[:, 1] > 2.5).failed(logits, label=0).tolist()
[False, True]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from scarce.applications.vision.problem import margin
from scarce.errors import ScarceError, show

__all__ = ["FailureEvent", "LogitsEvent", "Misclassification", "Targeted", "make_event"]


class FailureEvent:
    """What fails, from a batch of logits (n, n_classes) and the seed's label."""

    name = "event"
    #: whether the flag can be read from a label-only classifier's decisions alone
    needs_logits = False
    #: whether :meth:`margin` is defined (a user event without a score has none: its levels need a ruler)
    has_margin = True
    #: whether :meth:`failed` reads only ``predicted`` when it is given (never the logits): then Monte
    #: Carlo through a label-only model asks the target's labels alone, without the surrogate's pass.
    #: A subclass that overrides :meth:`failed` without setting it again gets False.
    reads_decisions_only = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "failed" in cls.__dict__ and "reads_decisions_only" not in cls.__dict__:
            cls.reads_decisions_only = False  # a new flag may read the logits: not inherited

    def failed(self, logits: np.ndarray, label: int, predicted: np.ndarray | None = None) -> np.ndarray:
        raise NotImplementedError

    def margin(self, logits: np.ndarray, label: int) -> np.ndarray:
        raise NotImplementedError

    def check(self, n_classes: int, label: int) -> None:
        """Refuse an event that cannot be asked of a classifier with ``n_classes`` classes."""


@dataclass(frozen=True)
class Misclassification(FailureEvent):
    """The classifier's decision differs from the seed's label."""

    name = "misclassification"
    reads_decisions_only = True

    def failed(self, logits: np.ndarray, label: int, predicted: np.ndarray | None = None) -> np.ndarray:
        decided = logits.argmax(axis=1) if predicted is None else predicted
        return decided != label

    def margin(self, logits: np.ndarray, label: int) -> np.ndarray:
        return margin(logits, label)


@dataclass(frozen=True)
class Targeted(FailureEvent):
    """The classifier decides for class ``target`` (a targeted misclassification)."""

    target: int
    reads_decisions_only = True

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"targeted({self.target})"

    def failed(self, logits: np.ndarray, label: int, predicted: np.ndarray | None = None) -> np.ndarray:
        decided = logits.argmax(axis=1) if predicted is None else predicted
        return decided == self.target

    def margin(self, logits: np.ndarray, label: int) -> np.ndarray:
        return -margin(logits, self.target)  # l_t - max_{j != t} l_j

    def check(self, n_classes: int, label: int) -> None:
        if isinstance(self.target, bool) or not isinstance(self.target, (int, np.integer)) \
                or not 0 <= self.target < n_classes:
            raise ScarceError(f"target must be a class index in 0..{n_classes - 1} of this {n_classes}-class "
                              f"model, got {self.target!r}")
        if self.target == label:
            raise ScarceError(f"target={self.target} is the seed's own label: a targeted failure is a decision "
                              f"for another class (pass another target, or label= when {self.target} is not the seed's correct class)")


@dataclass(frozen=True)
class LogitsEvent(FailureEvent):
    """Failure flagged by ``fn(logits) -> bool (n,)``; ``score(logits) -> float (n,)`` leads to it.

    ``score`` must be larger closer to failure; without it the levels need a ruler
    (``score=ruler``), since no margin is known for an arbitrary event. Each function is handed a
    copy of the logits: one that edits them in place cannot change what the other, or the
    margin, reads after it.
    """

    fn: Callable[[np.ndarray], Any]
    score: Callable[[np.ndarray], Any] | None = None
    name: str = "logits_event"
    needs_logits = True

    @property
    def has_margin(self) -> bool:  # type: ignore[override]
        return self.score is not None

    def failed(self, logits: np.ndarray, label: int, predicted: np.ndarray | None = None) -> np.ndarray:
        flags = np.asarray(self.fn(np.array(logits)))
        if flags.shape != (logits.shape[0],) or not (flags.dtype == bool or np.isin(flags, (0, 1)).all()):
            raise ScarceError(f"the failure function must return one bool per input, shape ({logits.shape[0]},); "
                              f"it returned dtype {flags.dtype}, shape {flags.shape}")
        return flags.astype(bool)

    def margin(self, logits: np.ndarray, label: int) -> np.ndarray:
        if self.score is None:
            raise ScarceError("score='margin' is undefined for a user failure function: give the event a score "
                              "(LogitsEvent(fn, score=...)) or pass score=<fitted ruler>")
        values = np.asarray(self.score(np.array(logits)), dtype=np.float64)
        if values.shape != (logits.shape[0],):
            raise ScarceError(f"the event's score must return one number per input, shape ({logits.shape[0]},); "
                              f"it returned shape {values.shape}")
        return values


def make_event(failure: Any = "misclassification", target: int | None = None) -> FailureEvent:
    """The event named by ``failure``: ``"misclassification"``, a :class:`FailureEvent`, or a
    callable on the logits; ``target`` makes it a targeted misclassification.

    ``failure`` is compared by identity and type before equality: an array (whose ``==`` is
    elementwise) is refused with the others, not asked for its truth value.
    """
    default = failure is None or (isinstance(failure, str) and failure == "misclassification")
    if target is not None:
        if not default:
            raise ScarceError(f"target={target!r} names a targeted misclassification; it cannot be combined "
                              f"with failure={failure!r}")
        return Targeted(target)
    if default:
        return Misclassification()
    if isinstance(failure, FailureEvent):
        return failure
    if callable(failure):
        return LogitsEvent(failure)
    raise ScarceError(f"failure must be 'misclassification', a FailureEvent (Targeted, LogitsEvent) or a callable "
                      f"on the logits returning one bool per input, got {show(failure)} ({type(failure).__name__})")
