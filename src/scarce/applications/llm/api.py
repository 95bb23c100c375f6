r"""Your own corpus, one call: the fleet's jailbreak probability with its interval and calibration interval.

:func:`fleet_probability` runs SCARCE's surrogate cascade (paper section 6) on an embedded
corpus: a ruler ``G`` fitted on the attack group's and the benign records' embeddings, the
surrogate event ``A_tau = {G >= tau}`` at the ruler's ``percentile`` threshold, Subset Simulation
of ``P(A_tau)`` over the fleet (benign users with weight ``1 - eta``, the attack group with
weight ``eta``; :class:`~scarce.applications.llm.fleet.Fleet`), and the calibration

.. math:: \hat P(\text{jailbreak}) = \hat P(A_\tau)\, C_\tau, \qquad C_\tau = \text{precision}(\tau) / \text{recall}(\tau)

fitted on the group's labelled records (:class:`~scarce.calibration.SurrogateCalibration`). The
result holds the cascade's interval (``C_tau`` fixed), the interval that also carries the
calibration's bootstrap uncertainty, and the paper's finite-sample reference
``p_ref = eta * (jailbreak rate of the group)`` with its bootstrap interval.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from scarce.applications.llm.corpus import benign_mask, check_corpus, group_mask, read_corpus
from scarce.applications.llm.fleet import Fleet, Reference, check_eta, reference_probability
from scarce.errors import ScarceError, ScarceWarning
from scarce.results import EstimateResult
from scarce.seeding import SeedLike

__all__ = ["FleetEstimate", "fleet_probability"]


@dataclass(frozen=True)
class FleetEstimate:
    """A calibrated fleet jailbreak probability: the estimate, its intervals and what it rests on."""

    probability: float
    interval: tuple[float, float]
    interval_with_calibration: tuple[float, float]
    factor: float
    factor_interval: tuple[float, float]
    threshold: float
    surrogate: EstimateResult
    reference: Reference
    group: str
    ruler: str
    eta: float
    n_records: int

    def __str__(self) -> str:
        lo, hi = self.interval
        clo, chi = self.interval_with_calibration
        ref_lo, ref_hi = self.reference.interval
        return (f"P(jailbreak | fleet, eta={self.eta:g}, group {self.group}) = {self.probability:.4g}\n"
                f"  95% interval [{lo:.3g}, {hi:.3g}] (C_tau fixed); with calibration [{clo:.3g}, {chi:.3g}]\n"
                f"  C_tau = {self.factor:.3g} [{self.factor_interval[0]:.3g}, {self.factor_interval[1]:.3g}] at "
                f"tau = {self.threshold:.4g} ({self.ruler}); P(A_tau) = {self.surrogate.probability:.4g}, "
                f"{self.surrogate.n_queries:,} queries\n"
                f"  reference eta * rate = {self.reference.probability:.4g} [{ref_lo:.3g}, {ref_hi:.3g}] from "
                f"{self.n_records} records")


def _corpus(corpus: Any) -> Any:
    frame = read_corpus(corpus) if not hasattr(corpus, "columns") else corpus
    return check_corpus(frame, require_embedding=True)


def _group(frame: Any, group: str | None) -> np.ndarray:
    """The attack group's rows: a named group or method, or every adversarial record."""
    if group is None:
        return ~benign_mask(frame)
    mask = group_mask(frame, group)
    if not mask.any():
        raise ScarceError(f"group {group!r} has no record in the corpus")
    return mask


def _ruler(ruler: Any, Z: np.ndarray, labels: np.ndarray, seed: SeedLike) -> tuple[Any, str]:
    if not isinstance(ruler, str):
        if not hasattr(ruler, "score_samples") or not hasattr(ruler, "threshold"):
            raise ScarceError(f"ruler must be a registry name or a fitted ruler, got {type(ruler).__name__}")
        return ruler, getattr(ruler, "name", type(ruler).__name__)
    from scarce.rulers import make_ruler

    params = {"random_state": seed} if "random_state" in make_ruler(ruler).get_params() else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScarceWarning)
        return make_ruler(ruler, **params).fit(Z, labels.astype(np.int64)), ruler


def fleet_probability(corpus: Any, eta: float, *, ruler: Any = "centroid", percentile: float = 75,
                      group: str | None = None, n_samples: int = 2000, level: float = 0.95,
                      seed: SeedLike = 0) -> FleetEstimate:
    """The probability that a conversation of the fleet is a jailbreak, by SCARCE's cascade.

    Parameters
    ----------
    corpus : DataFrame or path
        An embedded corpus (``scarce llm embed`` or :func:`~.embedding.embed_corpus`): benign
        records (``method == "none"``) and labelled adversarial ones.
    eta : float in (0, 1]
        The adversarial fraction of the fleet.
    ruler : str or fitted ruler
        A registry name, fitted here on the group's and the benign records, or a ruler fitted
        on the corpus's embeddings.
    percentile : float
        The ruler's threshold ``tau`` as a percentile of its failure scores (75: ``p75``).
    group : str, optional
        The attack group (``"PAIR/vicuna-13b-v1.5"``, ``"turn=3"``, or a method ``"GCG"``);
        default: every adversarial record.
    n_samples, level, seed : Subset Simulation's samples per level; the intervals' level; the seed.
    """
    eta = check_eta(eta)
    frame = _corpus(corpus)
    from scarce.applications.llm.embedding import embedding_matrix

    Z, labels = embedding_matrix(frame), frame["jailbroken"].to_numpy(bool)
    adversarial, benign = _group(frame, group), benign_mask(frame)
    if not labels[adversarial].any():
        raise ScarceError(f"group {group or 'of all adversarial records'!r} has no jailbreak, so C_tau is undefined")
    if eta < 1.0 and not benign.any():
        raise ScarceError("the corpus has no benign records (method 'none'), so a fleet with eta < 1 has no benign "
                          "users; add benign records or pass eta=1")
    fitted, name = _ruler(ruler, Z[adversarial | benign], labels[adversarial | benign], seed)
    scores = fitted.score_samples(Z)
    tau = float(fitted.threshold(percentile))
    return _cascade(scores, labels, adversarial, benign, tau, eta, n_samples, level, seed,
                    group=group or "all adversarial", ruler=f"{name}_p{percentile:g}")


def _cascade(scores: np.ndarray, labels: np.ndarray, adversarial: np.ndarray, benign: np.ndarray, tau: float,
             eta: float, n_samples: int, level: float, seed: SeedLike, *, group: str, ruler: str) -> FleetEstimate:
    from scarce.calibration import SurrogateCalibration
    from scarce.estimators import SubsetSimulation

    calibration = SurrogateCalibration(threshold=tau, random_state=0).fit(scores[adversarial],
                                                                           labels[adversarial].astype(int))
    fleet = Fleet.from_scores(scores[benign], scores[adversarial], eta)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScarceWarning)
        surrogate = SubsetSimulation(n_samples=n_samples, max_levels=60).estimate(fleet.problem(tau), seed=seed)
        calibrated = calibration.apply(surrogate, level=level)
    return FleetEstimate(calibrated.probability, calibrated.interval, calibrated.interval_with_calibration,
                         calibrated.factor, calibrated.factor_interval, tau, surrogate,
                         reference_probability(labels[adversarial], eta, level=level), group, ruler, eta,
                         int(adversarial.sum() + benign.sum()))
