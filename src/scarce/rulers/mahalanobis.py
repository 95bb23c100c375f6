"""Mahalanobis rulers with a shrinkage covariance (``mah_bad``, ``mah_good``, ``mah_contrast``).

Paper, appendix ``app:rulers``, "Mahalanobis": ``G(z) = -sqrt((z - mu_b)^T Sigma_b^{-1}
(z - mu_b))`` for ``mah_bad``; appendix ``app:mah-broken`` for the "noise-dimension dominance"
diagnostic reported here as ``n_floor_directions_``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from sklearn.covariance import OAS, LedoitWolf

from scarce.checks import warn_user
from scarce.checks import check_in_interval
from scarce.errors import ScarceError
from scarce.rulers.anchored import ANCHORINGS, AnchoredRuler
from scarce.rulers.base import RulerFitWarning

__all__ = ["GaussianAnchor", "MahalanobisRuler", "whitened_distances"]

_ESTIMATORS = {"ledoit_wolf": LedoitWolf, "oas": OAS}
_CHUNK_ROWS = 1 << 14


@dataclass(frozen=True)
class GaussianAnchor:
    """Location and shrinkage covariance of one anchor population, in eigen form.

    The shrinkage estimators return ``Sigma = (1 - s) S + s mu I`` with ``S`` the sample
    covariance and ``mu = trace(S) / d``, so every eigenvalue of ``Sigma`` is at least the
    *floor* ``s mu``.

    Attributes
    ----------
    location : ndarray of shape (d,)
        Anchor mean.
    eigenvalues : ndarray of shape (d,)
        Eigenvalues of ``Sigma``, ascending.
    whitening : ndarray of shape (d, d)
        ``V diag(eigenvalues)^{-1/2}``, so ``||(z - location) @ whitening||`` is the Mahalanobis
        distance.
    shrinkage : float
        ``s`` chosen by the estimator.
    floor : float
        ``s * trace(S) / d``.
    n_samples : int
        Anchor size.
    """

    location: NDArray[np.float64]
    eigenvalues: NDArray[np.float64]
    whitening: NDArray[np.float64]
    shrinkage: float
    floor: float
    n_samples: int

    def distance(self, Z: NDArray[np.float64]) -> NDArray[np.float64]:
        """Mahalanobis distance of each row of ``Z`` (n, d) to the anchor, shape (n,)."""
        return whitened_distances(Z, [self])[:, 0]

    @property
    def condition_number(self) -> float:
        """Largest over smallest eigenvalue."""
        return float(self.eigenvalues[-1] / self.eigenvalues[0])

    def n_floor_directions(self, floor_factor: float) -> int:
        """Number of eigen-directions with eigenvalue ``<= floor_factor * floor``."""
        if self.floor <= 0:
            return 0
        return int(np.count_nonzero(self.eigenvalues <= floor_factor * self.floor))


def whitened_distances(Z: NDArray[np.float64], anchors: list[GaussianAnchor]
                       ) -> NDArray[np.float64]:
    """Mahalanobis distances of the rows of ``Z`` (n, d) to several anchors, shape (n, k).

    One matrix product ``Z [W_1 ... W_k]`` per row chunk (k anchors share the pass over ``Z``),
    then ``||Z W_a - mu_a W_a||`` per anchor; memory is bounded by the chunk size.
    """
    d = Z.shape[1]
    whitening = np.hstack([a.whitening for a in anchors])
    shift = np.concatenate([a.location @ a.whitening for a in anchors])
    out = np.empty((Z.shape[0], len(anchors)))
    for start in range(0, Z.shape[0], _CHUNK_ROWS):
        block = Z[start:start + _CHUNK_ROWS] @ whitening
        block -= shift
        np.square(block, out=block)
        out[start:start + _CHUNK_ROWS] = block.reshape(-1, len(anchors), d).sum(axis=2)
    return np.sqrt(out, out=out)


class MahalanobisRuler(AnchoredRuler):
    """Covariance-normalised closeness to the bad (and/or good) cluster.

    With ``d_A(z) = sqrt((z - mu_A)^T Sigma_A^{-1} (z - mu_A))`` for anchor ``A``:

        mah_bad       G(z) = -d_bad(z)
        mah_good      G(z) = +d_good(z)
        mah_contrast  G(z) = d_good(z) - d_bad(z)

    ``Sigma_A`` is a shrinkage covariance (:class:`sklearn.covariance.LedoitWolf` or
    :class:`~sklearn.covariance.OAS`), positive definite even with fewer samples than dimensions.

    Parameters
    ----------
    anchor : {"bad", "good", "contrast"}
        Anchoring (see :mod:`scarce.rulers.anchored`).
    covariance : {"ledoit_wolf", "oas"}
        Shrinkage estimator.
    floor_factor : float
        A direction counts as sitting on the regularisation floor when its eigenvalue is at most
        ``floor_factor * floor``; the default 2 means "the shrinkage term supplies at least half
        of the variance in that direction".
    percentile : float, optional
        Default operating percentile of :meth:`threshold`.

    Attributes
    ----------
    models_ : dict of str -> GaussianAnchor
        One per anchor population used.
    n_floor_directions_ : int
        The paper's "noise-dimension dominance" diagnostic (appendix ``app:mah-broken``): the
        number of eigen-directions of the fitted covariance whose eigenvalue is at most
        ``floor_factor`` times the shrinkage floor ``s * trace(S) / d`` (the larger count of the
        two anchors for ``contrast``).
    condition_number_ : float
        Largest over smallest eigenvalue of the fitted covariance (the larger of the two anchors
        for ``contrast``): how much the inverse amplifies floor directions relative to data
        directions.

    Notes
    -----
    Read the two diagnostics together. Many floor directions *and* a large condition number is
    the paper's failure mode: the data span few directions, the others get the floor variance and
    the inverse amplifies them (inverse eigenvalues ~1e5 against ~60 there). Many floor directions
    with a condition number near 1 only mean the estimator shrank the covariance almost to its
    isotropic target (``s`` near 1), and the distance is a scaled Euclidean one, which is harmless.

    Warns
    -----
    RulerFitWarning
        When an anchor has fewer samples than dimensions.
    """

    def __init__(self, anchor: str = "bad", covariance: str = "ledoit_wolf",
                 floor_factor: float = 2.0, percentile: float | None = None):
        self.anchor = anchor
        self.covariance = covariance
        self.floor_factor = floor_factor
        self.percentile = percentile

    def _before_anchors(self, Z, y):
        if not isinstance(self.covariance, str) or self.covariance not in _ESTIMATORS:
            raise ScarceError(f"covariance must be one of {tuple(_ESTIMATORS)}; "
                              f"got {self.covariance!r}")
        check_in_interval("floor_factor", self.floor_factor, 1.0, math.inf, low_open=False)

    def _fit_anchor(self, Z_anchor, name):
        n, d = Z_anchor.shape
        if n < 2:
            raise ScarceError(f"y: the {name} anchor of mah_{self.anchor} needs at least 2 samples "
                              f"to estimate a covariance; got {n}")
        if n <= d:
            warn_user(f"mah_{self.anchor}: the {name} anchor has {n} samples for {d} dimensions "
                      f"(parameter y); the shrinkage covariance is still positive definite, but "
                      "many directions sit on its regularisation floor (see n_floor_directions_)",
                      RulerFitWarning)
        est = _ESTIMATORS[self.covariance](assume_centered=False).fit(Z_anchor)
        eigenvalues, vectors = np.linalg.eigh(est.covariance_)
        if eigenvalues[0] <= 0:
            raise ScarceError(f"y: the {name} anchor of mah_{self.anchor} has a singular "
                              "covariance (all its embeddings are identical); a Mahalanobis "
                              "distance is undefined")
        shrinkage = float(est.shrinkage_)
        # trace(Sigma) = trace(S): the shrinkage target mu I keeps the trace.
        floor = shrinkage * float(np.trace(est.covariance_)) / d
        return GaussianAnchor(location=est.location_, eigenvalues=eigenvalues,
                              whitening=vectors / np.sqrt(eigenvalues), shrinkage=shrinkage,
                              floor=floor, n_samples=n)

    def _score(self, Z):
        # All anchors in one pass over Z: G = sum_a sign_a * (-d_a(z)).
        names, signs = zip(*ANCHORINGS[self.anchor].items(), strict=True)
        dist = whitened_distances(Z, [self.models_[a] for a in names])
        return dist @ -np.asarray(signs)

    def _fit(self, Z, y):
        super()._fit(Z, y)
        self.n_floor_directions_ = max(m.n_floor_directions(self.floor_factor)
                                       for m in self.models_.values())
        self.condition_number_ = max(m.condition_number for m in self.models_.values())

    def _extra_diagnostics(self):
        return {"n_floor_directions": self.n_floor_directions_,
                "condition_number": self.condition_number_}
