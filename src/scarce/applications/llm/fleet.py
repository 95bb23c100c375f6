"""The fleet threat model (paper section 6) as a rare-event problem with an exact answer.

A *fleet* is the population of conversations a deployed model serves: a fraction ``1 - eta`` of
benign users and a fraction ``eta`` of adversarial ones, whose conversations are those of one
attack group (an attack turn, or an (attack method, target model) pair). Here the fleet is the
finite weighted set of scored records:

    benign record i       weight (1 - eta) / n_benign
    adversarial record j  weight eta / n_adversarial

The surrogate event is ``A_tau = {G(embedding) >= tau}`` for a ruler ``G``; since the fleet is
finite its probability is a weighted count, :meth:`Fleet.surrogate_probability`, which the tests
hold the cascade to.

**Sampler.** Subset Simulation needs the fleet as a map from a standard-normal latent variable.
The records are sorted by decreasing score, and a one-dimensional ``u ~ N(0, 1)`` picks the
record whose cumulative weight (counted from the top score down) first reaches the upper tail
mass ``Phi(-u)``. Each record is thus drawn with exactly its weight, ``u -> score`` is
non-decreasing, and every level ``{score >= gamma}`` is a half-line ``{u >= u_gamma}``. The
engine's MCMC move (adaptive conditional sampling, ``u' = rho u + sqrt(1 - rho^2) z``, accepted
when the proposed record stays in the level) leaves ``N(0, 1)`` restricted to the level
invariant, hence the fleet restricted to the level too. Working with the tail mass ``Phi(-u)``
keeps full relative precision down to tail masses of ``1e-300``.

**Ties.** Records occupy intervals of ``u``, so record scores have plateaus: a level cannot
fall inside a record, and a record of large weight straddling the ``p0`` quantile makes that
level's fraction far from ``p0``. The engine's tie-aware levels keep the estimator unbiased there,
but at a larger CoV than a continuous score's for the same queries (docs/benchmarks/llm.md). The
finite corpus causes these plateaus; a real fleet's conversations seldom share a score. So by default (``tie_break=True``) the level
score also carries the latent's place inside its record: record ``i`` at fraction
``f in [0, 1)`` of its interval (counted upward in ``u``) scores ``s_i + f (s_{i-1} - s_i)``,
between its own score and the next higher record's. This score is non-decreasing in ``u``, so
the levels are still nested half-lines. The failure flag is still the record's own
``s_i >= tau``, so the target ``P(A_tau)``, a sum of whole records, is unchanged; only the
intermediate levels are finer.

**Reference.** The paper's finite-sample target is ``p_ref = eta * pi`` with ``pi`` the group's
empirical jailbreak rate; :func:`reference_probability` adds a percentile-bootstrap interval
(records resampled) and its relative half-width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scarce.checks import check_labels, check_scores
from scarce.checks import check_positive_int
from scarce.errors import ScarceError
from scarce.problem import RareEventProblem
from scarce.seeding import SeedLike, as_generator

__all__ = ["Fleet", "Reference", "check_eta", "reference_probability"]


def check_eta(eta: Any) -> float:
    """``eta`` as a float in (0, 1], or a :class:`ScarceError` naming it.

    A real number only: ``True`` would read as 1.0 and ``"0.5"`` as 0.5, meanings nobody wrote.
    """
    if isinstance(eta, (bool, np.bool_, str, bytes)):
        raise ScarceError(f"eta must be a number in (0, 1] (the adversarial fraction of the fleet); "
                          f"got {eta!r} ({type(eta).__name__})")
    try:
        value = float(eta)
    except (TypeError, ValueError):
        raise ScarceError(f"eta must be a number in (0, 1] (the adversarial fraction of the fleet); "
                          f"got {eta!r}") from None
    if not 0.0 < value <= 1.0:
        raise ScarceError(f"eta must lie in (0, 1] (the adversarial fraction of the fleet); got {eta!r}")
    return value


@dataclass(frozen=True)
class Fleet:
    """A finite fleet: scored benign and adversarial records and the adversarial fraction ``eta``.

    Build it with :meth:`from_scores`. Attributes are the records sorted by decreasing score and
    their cumulative weight from the top.

    Examples
    --------
    >>> fleet = Fleet.from_scores(benign=[0.0, 1.0], adversarial=[2.0, 3.0], eta=0.1)
    >>> round(fleet.surrogate_probability(1.5), 12), round(fleet.surrogate_probability(0.5), 12)
    (0.1, 0.55)
    """

    scores: NDArray[np.float64]
    weights: NDArray[np.float64]
    cumulative: NDArray[np.float64]
    adversarial: NDArray[np.bool_]
    eta: float

    @classmethod
    def from_scores(cls, benign: ArrayLike, adversarial: ArrayLike, eta: float) -> Fleet:
        """The fleet of benign and adversarial records with ruler scores ``benign``, ``adversarial``.

        Parameters
        ----------
        benign : array_like of shape (n_benign,)
            Scores of the benign records (finite); may be empty only when ``eta == 1``.
        adversarial : array_like of shape (n_adversarial,)
            Scores of the adversarial group's records (finite, at least one).
        eta : float
            Adversarial fraction, in (0, 1].
        """
        eta = check_eta(eta)
        b = np.asarray(benign, dtype=float).ravel()
        a = np.asarray(adversarial, dtype=float).ravel()
        if a.size == 0:
            raise ScarceError("adversarial must hold at least one record score: a fleet needs "
                              "adversarial records of the group")
        if b.size == 0 and eta < 1.0:
            raise ScarceError(f"benign is empty but eta={eta!r} < 1 gives benign users weight "
                              f"{1 - eta!r}; pass benign records or eta=1")
        a = check_scores(a, name="adversarial")
        b = check_scores(b, name="benign") if b.size else b
        scores = np.concatenate([b, a])
        weights = np.concatenate([np.full(b.size, (1.0 - eta) / max(b.size, 1)),
                                  np.full(a.size, eta / a.size)])
        is_adv = np.concatenate([np.zeros(b.size, bool), np.ones(a.size, bool)])
        order = np.argsort(-scores, kind="stable")
        scores, weights, is_adv = scores[order], weights[order], is_adv[order]
        cumulative = np.cumsum(weights)
        cumulative /= cumulative[-1]  # exactly 1 at the bottom, whatever the rounding
        return cls(scores=scores, weights=weights, cumulative=cumulative, adversarial=is_adv, eta=eta)

    @property
    def n_records(self) -> int:
        """Number of records (benign and adversarial)."""
        return int(self.scores.size)

    def surrogate_probability(self, threshold: float) -> float:
        """The exact ``P(A_tau) = P(score >= threshold)`` under the fleet weights."""
        tau = float(threshold)
        if math.isnan(tau):
            raise ScarceError("threshold must be a number, not NaN")
        return float(self.weights[self.scores >= tau].sum())

    def leakage(self, threshold: float) -> tuple[float, float]:
        """``(P_b(tau), P_h(tau))``: the benign and adversarial masses above ``threshold``."""
        above = self.scores >= float(threshold)
        n_adv = int(self.adversarial.sum())
        n_ben = self.n_records - n_adv
        benign = float((above & ~self.adversarial).sum() / n_ben) if n_ben else 0.0
        return benign, float((above & self.adversarial).sum() / n_adv)

    def records(self, u: NDArray[np.float64]) -> NDArray[np.intp]:
        """The sampler: positions (in score order) of the records that latent points pick.

        ``u`` has shape (n, 1) or (n,); the record of ``u`` is the first (highest-scoring) one
        whose cumulative weight reaches ``Phi(-u)``.
        """
        return self._locate(u)[1]

    def places(self, u: NDArray[np.float64]) -> NDArray[np.float64]:
        """The sampler with each point's place inside its record: rows ``(position, f)``.

        ``position`` is :meth:`records`' record (as a float) and ``f`` in ``[0, 1)`` how far up
        the record's interval of ``u`` the point lies (0 at its lower edge).
        """
        tail, index = self._locate(u)
        share = self.weights[index] / self.weights.sum()
        with np.errstate(divide="ignore", invalid="ignore"):  # a record of weight 0 (eta = 1): its lower edge
            inside = np.where(share > 0, (self.cumulative[index] - tail) / share, 0.0)
        inside = np.clip(inside, 0.0, np.nextafter(1.0, 0.0))
        return np.column_stack([index.astype(float), inside])

    def _locate(self, u: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
        """The upper tail mass ``Phi(-u)`` of each point and the position of the record it picks."""
        from scipy.special import ndtr

        tail = ndtr(-np.asarray(u, dtype=float).reshape(-1))
        return tail, np.minimum(np.searchsorted(self.cumulative, tail, side="left"), self.n_records - 1)

    def evaluate_records(self, index: NDArray[np.intp], threshold: float
                         ) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
        score = self.scores[index]
        return score, score >= threshold

    def evaluate_places(self, places: NDArray[np.float64], threshold: float
                        ) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
        """Level scores broken by the place inside each record (module docstring, Ties); the
        failure flag is the record's own score against ``threshold``."""
        index = places[:, 0].astype(np.intp)
        score = self.scores[index]
        above = np.where(index > 0, self.scores[np.maximum(index - 1, 0)], score + 1.0)
        return score + places[:, 1] * (above - score), score >= threshold

    def problem(self, threshold: float, *, name: str = "fleet", tie_break: bool = True) -> RareEventProblem:
        """The rare-event problem ``P(score >= threshold)`` over this fleet (a 1-d latent space).

        One query is one record drawn and scored. ``exact_probability`` is set from
        :meth:`surrogate_probability`. ``tie_break`` (default) sets the levels on the record
        score broken by the latent's place inside the record (module docstring, Ties); False
        sets them on the record score alone, with its plateaus.
        """
        tau = float(threshold)
        if math.isnan(tau):
            raise ScarceError("threshold must be a number, not NaN")
        if not isinstance(tie_break, (bool, np.bool_)):
            raise ScarceError(f"tie_break must be True or False, got {tie_break!r}")
        transform = self.places if tie_break else self.records
        return RareEventProblem(1, _FleetScore(self, tau, bool(tie_break)), transform, name=name,
                                exact_probability=self.surrogate_probability(tau))


@dataclass(frozen=True)
class _FleetScore:
    """``evaluate`` of a fleet problem (a class, not a closure, so that problems pickle)."""

    fleet: Fleet
    threshold: float
    tie_break: bool = False

    def __call__(self, x: NDArray[Any]) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
        if self.tie_break:
            return self.fleet.evaluate_places(x, self.threshold)
        return self.fleet.evaluate_records(x, self.threshold)


@dataclass(frozen=True)
class Reference:
    """The finite-sample reference ``p_ref = eta * pi`` and its bootstrap interval.

    Attributes
    ----------
    probability : float
        ``eta * pi`` with ``pi`` the group's empirical jailbreak rate.
    rate : float
        ``pi``.
    interval : (float, float)
        Percentile-bootstrap interval of ``p_ref`` (records resampled with replacement).
    level : float
    n_records, n_jailbroken : int
    """

    probability: float
    rate: float
    interval: tuple[float, float]
    level: float
    n_records: int
    n_jailbroken: int

    @property
    def relative_half_width(self) -> float:
        """``(hi - lo) / (2 p_ref)``: the paper's "bootstrap relative half-width"."""
        lo, hi = self.interval
        return (hi - lo) / (2.0 * self.probability)


def reference_probability(labels: ArrayLike, eta: float, *, level: float = 0.95,
                          n_resamples: int = 2000, seed: SeedLike = 0) -> Reference:
    """``p_ref = eta * (empirical jailbreak rate)`` of a group, with a bootstrap interval.

    Parameters
    ----------
    labels : array_like of shape (n,)
        The group's jailbreak labels (1 = jailbreak); at least one jailbreak.
    eta : float
        Adversarial fraction, in (0, 1].
    level : float
        Coverage of the interval, in (0, 1).
    n_resamples : int
        Bootstrap resamples (a resample of n records is a binomial count).
    seed : int, SeedSequence or Generator

    Examples
    --------
    >>> ref = reference_probability([1, 0, 0, 1], 1e-3)
    >>> ref.probability
    0.0005
    """
    eta = check_eta(eta)
    y = check_labels(labels, n_samples=np.asarray(labels).size, name="labels", require_both=False)
    if y.size == 0 or not y.any():
        raise ScarceError(f"labels must hold at least one jailbreak (the group has {y.size} "
                          "records and none is jailbroken), else p_ref = 0 and relative errors "
                          "are undefined")
    if not 0.0 < level < 1.0:
        raise ScarceError(f"level must lie in (0, 1); got {level!r}")
    n_resamples = check_positive_int("n_resamples", n_resamples)
    n, k = int(y.size), int(y.sum())
    rate = k / n
    draws = as_generator(seed).binomial(n, rate, size=n_resamples) / n
    tail = 50.0 * (1.0 - level)
    lo, hi = np.percentile(draws, [tail, 100.0 - tail])
    return Reference(probability=eta * rate, rate=rate, interval=(eta * float(lo), eta * float(hi)),
                     level=level, n_records=n, n_jailbroken=k)
