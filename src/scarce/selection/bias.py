"""Benign-leakage bias of the calibrated estimator (why the selector is directional).

Paper, appendix ``app:llm-ranking``, eq. ``selector-bias-decomp``: with a fleet in which a
fraction ``eta`` is adversarial, benign mass above the surrogate threshold ``P_b(tau)`` and
harmful mass above it ``P_h(tau)``, the calibrated estimate has relative bias:

    (p_hat_cor - eta pi) / (eta pi) = (1 - eta) / eta * P_b(tau) / P_h(tau).

At ``eta = 1e-3`` the prefactor is ~1000: a leakage ratio of 1e-3 already gives 100 % error.
"""

from __future__ import annotations

import numbers

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scarce.checks import as_real_array, check_scores
from scarce.errors import ScarceError, show

__all__ = ["leakage_masses", "leakage_relative_bias"]


def leakage_relative_bias(eta: ArrayLike, benign_mass: ArrayLike, harmful_mass: ArrayLike
                          ) -> NDArray[np.float64] | float:
    """Relative bias ``(1 - eta) / eta * P_b(tau) / P_h(tau)`` (broadcasts over arrays).

    Parameters
    ----------
    eta : float or array_like
        Adversarial fraction of the fleet, in (0, 1].
    benign_mass : float or array_like
        ``P_b(tau)``: probability that a benign input scores ``>= tau``, in [0, 1].
    harmful_mass : float or array_like
        ``P_h(tau)``: probability that a harmful input scores ``>= tau``, in (0, 1].

    Returns
    -------
    float or ndarray

    Examples
    --------
    >>> round(leakage_relative_bias(1e-3, 1e-3, 1.0), 3)
    0.999
    """
    e, pb, ph = (as_real_array(v, name, "a number or an array of numbers") for v, name in
                 ((eta, "eta"), (benign_mass, "benign_mass"), (harmful_mass, "harmful_mass")))
    if not np.all((e > 0) & (e <= 1)):
        raise ScarceError(f"eta must lie in (0, 1]; got {show(eta)}")
    if not np.all((pb >= 0) & (pb <= 1)):
        raise ScarceError(f"benign_mass must lie in [0, 1]; got {show(benign_mass)}")
    if not np.all((ph > 0) & (ph <= 1)):
        raise ScarceError(f"harmful_mass must lie in (0, 1] (no harmful mass above the threshold "
                          f"makes the calibration undefined); got {show(harmful_mass)}")
    try:
        e, pb, ph = np.broadcast_arrays(e, pb, ph)
    except ValueError:
        raise ScarceError(f"eta, benign_mass and harmful_mass must broadcast to one shape; got "
                          f"shapes {e.shape}, {pb.shape}, {ph.shape}") from None
    with np.errstate(over="ignore", invalid="ignore"):  # no benign mass: no leakage, however small eta
        out = np.where(pb > 0, (1.0 - e) / e * pb / ph, 0.0)
    if not np.all(np.isfinite(out)):
        raise ScarceError(f"eta: the relative bias (1 - eta) / eta * P_b / P_h exceeds float64's "
                          f"range for eta={show(eta)}, harmful_mass={show(harmful_mass)}")
    return float(out) if out.ndim == 0 else out


def leakage_masses(good: ArrayLike, bad: ArrayLike, threshold: float) -> tuple[float, float]:
    """Empirical ``(P_b(tau), P_h(tau))``: fractions of good and bad scores ``>= threshold``."""
    g = check_scores(good, name="good", allow_inf=True)
    b = check_scores(bad, name="bad", allow_inf=True)
    if isinstance(threshold, (bool, np.bool_)) or not isinstance(threshold, (numbers.Real, np.number)):
        raise ScarceError(f"threshold must be a number, got {show(threshold)} ({type(threshold).__name__})")
    tau = float(threshold)
    if np.isnan(tau):
        raise ScarceError("threshold must be a number, not NaN")
    return float(np.mean(g >= tau)), float(np.mean(b >= tau))
