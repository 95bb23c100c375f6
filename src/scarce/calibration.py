"""Surrogate-event calibration: from ``P(A_tau)`` to the true failure probability ``P(T)``.

Paper, section "Surrogate Event Design" (eq. ``cal-theory``) and appendix ``app:recall``
(eq. ``prec-recall-def``). The cascade estimates the surrogate ``A_tau = {G(f(x)) >= tau}``;
labelled calibration data from the *target* distribution give:

    precision(tau) = P(T | A_tau) ~ W(bad, score >= tau) / W(score >= tau)
    recall(tau)    = P(A_tau | T) ~ W(bad, score >= tau) / W(bad)
    C_tau          = precision / recall

(``W`` = count, or sum of sample weights), and Bayes' rule gives ``P(T) = P(A_tau) * C_tau``.
On the calibration sample itself ``C_tau = W(bad) / W(score >= tau)``. The identity transfers to
a test population only if precision and recall are the same there; the paper's PAIR -> GCG study
keeps the ruler and ``tau`` but refits ``C_tau`` on the new target
(:meth:`SurrogateCalibration.refit`).

Examples
--------
>>> import numpy as np
>>> scores = np.array([0.1, 0.4, 0.8, 0.9, 0.2, 0.95])
>>> labels = np.array([0, 0, 1, 1, 0, 1])
>>> cal = SurrogateCalibration(threshold=0.5).fit(scores, labels)
>>> cal.precision_, cal.recall_, cal.factor_
(1.0, 1.0, 1.0)
>>> cal.apply(0.4).probability
0.4
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, clone
from sklearn.utils.validation import check_is_fitted

from scarce.checks import as_double, check_labels, check_scores, is_real, warn_user
from scarce.checks import check_in_interval, check_positive_int
from scarce.errors import ScarceError, ScarceWarning
from scarce.seeding import SeedLike, as_generator

__all__ = ["CalibratedEstimate", "CalibrationWarning", "SurrogateCalibration", "precision_recall"]

_GOOD_BELOW, _GOOD_ABOVE, _BAD_BELOW, _BAD_ABOVE = range(4)
#: Most bootstrap resamples of ``C_tau``: four cell totals each, 320 MB at this many.
MAX_RESAMPLES = 10_000_000


class CalibrationWarning(ScarceWarning):
    """Statistical trouble in a calibration (e.g. bootstrap replicates without any failure)."""


def _check_weights(sample_weight: ArrayLike | None, n: int) -> NDArray[np.float64] | None:
    if sample_weight is None:
        return None
    w = check_scores(sample_weight, name="sample_weight")
    if w.size != n or np.any(w < 0) or not w.max(initial=0.0) > 0:
        raise ScarceError(f"sample_weight must hold {n} non-negative finite weights with a "
                          f"positive sum; got shape {w.shape}, min {w.min(initial=0.0):.3g}, "
                          f"sum {w.sum():.3g}")
    # Precision, recall and C_tau are ratios of weight sums: dividing by the largest weight (a
    # power of two, so exactly) leaves them unchanged and keeps weights near the largest double
    # from summing to inf
    return w / 2.0 ** math.floor(math.log2(w.max()))


def precision_recall(scores: ArrayLike, labels: ArrayLike, threshold: float | ArrayLike,
                     sample_weight: ArrayLike | None = None
                     ) -> tuple[NDArray[np.float64], NDArray[np.float64]] | tuple[float, float]:
    """Precision and recall of ``{score >= threshold}`` against the failure labels.

    Parameters
    ----------
    scores : array_like of shape (n,)
        Ruler scores of labelled samples (``+inf``/``-inf`` allowed, NaN not).
    labels : array_like of shape (n,)
        1 failure (``T``), 0 normal.
    threshold : float or array_like of shape (k,)
        One or several levels ``tau`` (vectorised: O((n + k) log n)).
    sample_weight : array_like of shape (n,), optional
        Non-negative weights (e.g. to reweight the calibration set to a target prior).

    Returns
    -------
    precision, recall : float or ndarray of shape (k,)
        ``precision`` is NaN where nothing scores ``>= tau``; ``recall`` is NaN without failures.
    """
    s = check_scores(scores, name="scores", allow_inf=True)
    y = check_labels(labels, n_samples=s.size, name="labels", require_both=False)
    w = _check_weights(sample_weight, s.size)
    t = _check_thresholds(threshold)
    order = np.argsort(s, kind="stable")
    ws = np.ones(s.size) if w is None else w[order]
    # suffix sums: weight of all / of failures among the samples sorted at or after position i
    above_all = np.concatenate([np.cumsum(ws[::-1])[::-1], [0.0]])
    above_bad = np.concatenate([np.cumsum((ws * y[order])[::-1])[::-1], [0.0]])
    idx = np.searchsorted(s[order], t, side="left")
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = above_bad[idx] / above_all[idx]
        recall = above_bad[idx] / above_bad[0]
    if t.ndim == 0:
        return float(precision), float(recall)
    return precision, recall


def _check_thresholds(threshold: object) -> NDArray[np.float64]:
    """One real level ``tau`` or a 1-D array of them (``+-inf`` allowed), as floats; a ScarceError otherwise."""
    if is_real(threshold):
        single = as_double(threshold)  # None: an int beyond the doubles
        t = np.asarray(math.nan if single is None else single)
    else:
        raw = np.asarray(threshold) if isinstance(threshold, (list, tuple, np.ndarray)) else None
        ok = raw is not None and raw.ndim <= 1 and raw.dtype.kind in "iuf"
        t = raw.astype(float) if ok else np.asarray(math.nan)
    if np.isnan(t).any():
        raise ScarceError(f"threshold must be a real number or a 1-D array of them (+-inf allowed, NaN not), "
                          f"got {threshold!r:.200}")
    return t


@dataclass(frozen=True)
class CalibratedEstimate:
    """A calibrated failure probability ``P_hat(T) = P_hat(A_tau) * C_tau``.

    Attributes
    ----------
    probability : float
        Calibrated estimate, capped at 1 (with a :class:`CalibrationWarning`); the intervals are
        capped at 1 too.
    surrogate_probability : float
        The cascade's ``P_hat(A_tau)``.
    factor : float
        ``C_tau``.
    threshold : float
        ``tau``.
    level : float or None
        Confidence level of the intervals.
    interval : (float, float) or None
        The estimate's interval times ``C_tau``: cascade uncertainty only, ``C_tau`` held fixed
        (the convention of the paper's ``tab:gcg-transfer``).
    interval_with_calibration : (float, float) or None
        Also covers the calibration uncertainty: the estimate's ``1 - alpha/2`` interval times the
        ``1 - alpha/2`` bootstrap interval of ``C_tau`` (Bonferroni, so joint coverage is at least
        ``level`` when both parts hold their nominal coverage).
    factor_interval : (float, float) or None
        Bootstrap interval of ``C_tau`` at level ``1 - alpha/2`` used above.
    delta : float or None
        Envelope risk level.
    envelope_lower : float or None
        ``C_tau`` times the estimate's anytime-valid lower bound ``delta * P_hat(A_tau)``: with
        probability ``>= 1 - delta`` it is below the calibrated target ``P(A_tau) C_tau``
        (``C_tau`` fixed, as in the paper's section "Theoretical Guarantees", "Surrogate Event").
    envelope : object or None
        The estimate's whole envelope scaled by ``C_tau`` (``envelope(delta).scaled(C_tau)``),
        when the estimate's envelope offers ``scaled``.
    """

    probability: float
    surrogate_probability: float
    factor: float
    threshold: float
    level: float | None = None
    interval: tuple[float, float] | None = None
    interval_with_calibration: tuple[float, float] | None = None
    factor_interval: tuple[float, float] | None = None
    delta: float | None = None
    envelope_lower: float | None = None
    envelope: Any = None


class SurrogateCalibration(BaseEstimator):
    """Precision, recall and ``C_tau = precision / recall`` of the surrogate ``{score >= tau}``.

    Parameters
    ----------
    threshold : float
        The surrogate level ``tau`` (e.g. ``ruler.threshold(75)``; see :meth:`from_ruler`).
    n_resamples : int
        Bootstrap resamples for :meth:`factor_interval`, at most :data:`MAX_RESAMPLES`.
    random_state : int, numpy Generator, SeedSequence or None
        Seed of the bootstrap. An int (or None-free seed) gives the same interval on every call.

    Attributes
    ----------
    precision_ : float
        ``P(T | A_tau)`` on the calibration data.
    recall_ : float
        ``P(A_tau | T)`` on the calibration data (> 0, else ``fit`` raises).
    factor_ : float
        ``C_tau = precision_ / recall_``.
    n_samples_, n_bad_, n_above_ : int
        Calibration size, failures, samples with ``score >= tau`` (unweighted counts).
    """

    def __init__(self, threshold: float, n_resamples: int = 2000,
                 random_state: SeedLike = None):
        self.threshold = threshold
        self.n_resamples = n_resamples
        self.random_state = random_state

    @classmethod
    def from_ruler(cls, ruler: Any, percentile: float | None = None, **params: Any
                   ) -> SurrogateCalibration:
        """Calibration at ``tau = ruler.threshold(percentile)`` (a fitted ruler's operating point).

        Examples
        --------
        ``SurrogateCalibration.from_ruler(make_ruler("pc1_p75").fit(Z, y))`` uses the ruler's
        p75 of its bad-score distribution.
        """
        return cls(threshold=ruler.threshold(percentile), **params)

    def fit(self, scores: ArrayLike, labels: ArrayLike, sample_weight: ArrayLike | None = None
            ) -> SurrogateCalibration:
        """Measure precision and recall of ``{score >= threshold}`` on labelled data.

        Parameters
        ----------
        scores : array_like of shape (n,)
            Ruler scores of labelled samples of the target distribution.
        labels : array_like of shape (n,)
            1 failure (``T``), 0 normal; both classes required.
        sample_weight : array_like of shape (n,), optional
            Non-negative weights.

        Returns
        -------
        self

        Raises
        ------
        ValueError
            If ``recall(threshold) = 0`` (no labelled failure reaches ``tau``; ``C_tau`` undefined).
        """
        tau = as_double(self.threshold)  # None: not a real number, or an int beyond the doubles
        if tau is None or math.isnan(tau):
            raise ScarceError(f"threshold must be a real number (the surrogate level tau; +-inf "
                              f"allowed, NaN not); got {self.threshold!r:.200}")
        check_positive_int("n_resamples", self.n_resamples, maximum=MAX_RESAMPLES)
        s = check_scores(scores, name="scores", allow_inf=True)
        y = check_labels(labels, n_samples=s.size, name="labels")
        w = _check_weights(sample_weight, s.size)
        precision, recall = precision_recall(s, y, tau, w)
        if not recall > 0:
            raise ScarceError(
                f"threshold={tau!r} gives recall 0: no labelled failure scores >= threshold "
                f"(the largest failure score is {float(s[y].max())!r}), so C_tau = precision / "
                "recall is undefined; choose a threshold at or below the failure scores, e.g. "
                "SurrogateCalibration.from_ruler(ruler, percentile=75)")
        above = s >= tau
        self._cells = (2 * y + above).astype(np.int8)
        self._weights = w
        self.precision_ = float(precision)
        self.recall_ = float(recall)
        self.factor_ = float(precision / recall)
        self.n_samples_ = int(s.size)
        self.n_bad_ = int(y.sum())
        self.n_above_ = int(above.sum())
        return self

    def refit(self, scores: ArrayLike, labels: ArrayLike, sample_weight: ArrayLike | None = None
              ) -> SurrogateCalibration:
        """A new calibration with the same ``tau`` fitted on data from a new target distribution.

        The paper's attack-style transfer (appendix ``app:gcg-transfer``): the ruler and its
        percentile threshold carry over from PAIR to GCG, ``C_tau`` is refit. ``self`` is left
        unchanged, so inherited and refit calibrations can be compared.
        """
        return clone(self).fit(scores, labels, sample_weight)

    def _bootstrap_factors(self, n_resamples: int, rng: np.random.Generator) -> NDArray[np.float64]:
        """``C_tau`` of bootstrap resamples of the calibration data (rows with replacement)."""
        cells, w, n = self._cells, self._weights, self._cells.size
        if w is None:  # resampling rows = multinomial cell counts
            counts = np.bincount(cells, minlength=4)
            totals = rng.multinomial(n, counts / n, size=n_resamples).astype(float)
        else:
            totals = np.empty((n_resamples, 4))
            step = max(1, 4_000_000 // n)
            for start in range(0, n_resamples, step):
                rows = min(step, n_resamples - start)
                idx = rng.integers(0, n, size=(rows, n))
                flat = (cells[idx] + 4 * np.arange(rows)[:, None]).ravel()
                totals[start:start + rows] = np.bincount(
                    flat, weights=w[idx].ravel(), minlength=4 * rows).reshape(rows, 4)
        bad = totals[:, _BAD_BELOW] + totals[:, _BAD_ABOVE]
        above = totals[:, _GOOD_ABOVE] + totals[:, _BAD_ABOVE]
        with np.errstate(invalid="ignore", divide="ignore"):
            return bad / above

    def factor_interval(self, level: float = 0.95) -> tuple[float, float]:
        """Percentile bootstrap interval of ``C_tau`` (rows resampled with replacement).

        Resamples with no failure are dropped (with a warning); a resample with nothing above
        ``tau`` has ``C_tau = inf``. The bounds are order statistics (no interpolation), so the
        interval errs on the wide side.

        Parameters
        ----------
        level : float
            Coverage in (0, 1).

        Returns
        -------
        (float, float)
        """
        check_is_fitted(self)
        level = check_in_interval("level", level, 0.0, 1.0, high_open=True)
        rng = as_generator(self.random_state, name="random_state")
        n_resamples = check_positive_int("n_resamples", self.n_resamples, maximum=MAX_RESAMPLES)
        factors = self._bootstrap_factors(n_resamples, rng)
        keep = ~np.isnan(factors)
        if not keep.all():
            warn_user(f"{(~keep).sum()} of {factors.size} bootstrap resamples had no failure and "
                      "were dropped; the calibration set has too few failures for a reliable "
                      "interval", CalibrationWarning)
        factors = factors[keep]
        if factors.size == 0:
            raise ScarceError(f"factor_interval: none of the {keep.size} bootstrap resamples held a failure, so "
                              f"C_tau has no interval; use more resamples (n_resamples={self.n_resamples}) or a "
                              f"calibration set with more failures (it has {self.n_bad_})")
        tail = 50.0 * (1.0 - level)
        lo = np.percentile(factors, tail, method="lower")
        hi = np.percentile(factors, 100.0 - tail, method="higher")
        return (float(lo), float(hi))

    def apply(self, estimate: Any, *, level: float = 0.95, delta: float | None = None
              ) -> CalibratedEstimate:
        """Calibrate a surrogate estimate: ``P_hat(T) = P_hat(A_tau) * C_tau``.

        Parameters
        ----------
        estimate : float or estimate object
            ``P_hat(A_tau)`` in [0, 1], or an object with ``probability`` (float) and optionally
            ``ci(level) -> (lo, hi)`` and ``envelope(delta)`` (returning an object with ``lower``),
            such as the engine's ``EstimateResult``.
        level : float
            Confidence level of the intervals, in (0, 1).
        delta : float, optional
            Envelope risk level in (0, 1); requires ``estimate.envelope``.

        Returns
        -------
        CalibratedEstimate
        """
        check_is_fitted(self)
        level = check_in_interval("level", level, 0.0, 1.0, high_open=True)
        c = self.factor_
        obj = None if is_real(estimate) else estimate
        value = estimate if obj is None else getattr(estimate, "probability", None)
        if obj is not None and not hasattr(estimate, "probability"):
            raise ScarceError("estimate must be a probability (float) or an object with a "
                              f"'probability' attribute (e.g. EstimateResult); got "
                              f"{type(estimate).__name__}")
        p = check_in_interval("estimate probability", value, 0.0, 1.0, low_open=False)
        fields: dict[str, Any] = {}
        if obj is not None and hasattr(obj, "ci"):
            lo, hi = obj.ci(level)
            half = 1.0 - (1.0 - level) / 2.0
            b_lo, b_hi = obj.ci(half)
            f_lo, f_hi = self.factor_interval(half)
            fields.update(level=level, interval=(min(lo * c, 1.0), min(hi * c, 1.0)),
                          interval_with_calibration=(min(b_lo * f_lo, 1.0), min(b_hi * f_hi, 1.0)),
                          factor_interval=(f_lo, f_hi))
        if delta is not None:
            delta = check_in_interval("delta", delta, 0.0, 1.0, high_open=True)
            if obj is None or not hasattr(obj, "envelope"):
                raise ScarceError("delta: an envelope needs an estimate object with an "
                                  "envelope(delta) method (e.g. EstimateResult); got a float")
            envelope = obj.envelope(delta)
            fields.update(delta=delta, envelope_lower=min(float(envelope.lower) * c, 1.0),
                          envelope=envelope.scaled(c) if hasattr(envelope, "scaled") else None)
        if p * c > 1.0:
            warn_user(f"the calibrated probability P_hat(A_tau) * C_tau = {p:.6g} * {c:.6g} = {p * c:.6g} "
                      "exceeds 1 and is capped at 1: the surrogate event is rarer than the failures it "
                      "stands for (precision far above recall), so tau sits too high for this estimate",
                      CalibrationWarning)
        return CalibratedEstimate(probability=min(p * c, 1.0), surrogate_probability=p, factor=c,
                                  threshold=float(self.threshold), **fields)
