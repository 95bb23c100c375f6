"""Linear rulers: centroid direction and its rotations, PC1, Fisher LDA, logistic regression.

Each is ``G(z) = w . z + b`` (paper, appendix ``app:rulers``, "Mathematical mechanisms"); scoring
costs one matrix-vector product. Notation: ``mu_b``, ``mu_g`` are the bad and good centroids,
``Z`` is (n_samples, n_features), ``y = 1`` marks failures.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray
from scipy import linalg
from sklearn.decomposition import PCA
from sklearn.linear_model import LogisticRegression

from scarce.checks import warn_user
from scarce.checks import check_in_interval, check_positive_int
from scarce.errors import ScarceError
from scarce.rulers.base import LinearRuler, RulerFitWarning, check_random_state_param

__all__ = ["CentroidRotationRuler", "CentroidRuler", "FisherRuler", "LogisticRuler", "PC1Ruler"]


def _centroid_axis(Z: NDArray[np.float64], y: NDArray[np.bool_]):
    """Return ``(mu_b, mu_g, d_c)`` with ``d_c = (mu_b - mu_g) / ||mu_b - mu_g||``."""
    mu_b, mu_g = Z[y].mean(axis=0), Z[~y].mean(axis=0)
    diff = mu_b - mu_g
    norm = float(np.linalg.norm(diff))
    scale = float(np.abs(Z).max())
    if not norm > 1e-12 * scale:  # relative to the embeddings' magnitude (rounding noise of the means)
        raise ScarceError("y: the bad and good centroids coincide (||mu_b - mu_g|| = "
                          f"{norm:.3g}), so the centroid direction is undefined; the labelled "
                          "embeddings must separate in their means")
    return mu_b, mu_g, diff / norm


class CentroidRuler(LinearRuler):
    """Signed progress along the normal-to-failure centroid axis.

    ``d_c = (mu_b - mu_g) / ||mu_b - mu_g||`` and ``G(z) = (z - o) . d_c`` with the offset ``o``
    the midpoint ``(mu_b + mu_g) / 2``, so ``G = 0`` halfway between the centroids,
    ``G(mu_b) = ||mu_b - mu_g|| / 2`` and ``G(mu_g) = -||mu_b - mu_g|| / 2``.
    Paper: appendix ``app:rulers``, "Centroid direction" (``centroid``, ``centroid_p75``...).

    Parameters
    ----------
    percentile : float, optional
        Default operating percentile of :meth:`threshold`, in (0, 100).

    Attributes
    ----------
    direction_ : ndarray of shape (n_features,)
        Unit direction ``d_c``.
    offset_ : ndarray of shape (n_features,)
        ``o``, the midpoint of the centroids.
    coef_, intercept_ : ndarray of shape (n_features,), float
        ``G(z) = coef_ . z + intercept_``.
    """

    def __init__(self, percentile: float | None = None):
        self.percentile = percentile

    def _fit(self, Z, y):
        mu_b, mu_g, d_c = _centroid_axis(Z, y)
        self.direction_ = d_c
        self.offset_ = 0.5 * (mu_b + mu_g)
        self.coef_ = d_c
        self.intercept_ = -float(self.offset_ @ d_c)


class CentroidRotationRuler(LinearRuler):
    """The centroid direction rotated by ``angle`` degrees inside the top-two PCA plane.

    Let ``a``, ``b`` be the first two principal directions of the pooled embeddings (good and
    bad together) and decompose ``d_c = alpha a + beta b + d_perp``. Then (paper, appendix
    ``app:rulers``, "Centroid rotations"):

        d_theta = (alpha cos t - beta sin t) a + (alpha sin t + beta cos t) b + d_perp
        G(z)    = (z - o) . d_theta,   o = (mu_b + mu_g) / 2.

    **Sign convention.** PCA directions have arbitrary signs; here ``a`` and ``b`` are flipped so
    that ``alpha >= 0`` and ``beta >= 0``. A positive angle therefore turns the in-plane part of
    ``d_c`` from ``a`` toward ``b`` (and beyond). ``||d_theta|| = 1`` and
    ``d_theta . d_c = cos(t) (alpha^2 + beta^2) + ||d_perp||^2``, so moving from ``mu_g`` to
    ``mu_b`` raises the score for ``|angle| < 90``; at 90 degrees the rise is only
    ``||mu_b - mu_g|| ||d_perp||^2`` (zero when ``d_c`` lies in the PCA plane): the rotated ruler
    then probes a failure-*adjacent* axis, not the centroid axis.

    Parameters
    ----------
    angle : float
        Rotation in degrees, in [-360, 360] (the paper uses 0, 15, 30, 45, 60, 90).
    percentile : float, optional
        Default operating percentile of :meth:`threshold`.
    random_state : int, RandomState or None
        Passed to :class:`sklearn.decomposition.PCA` (matters for its randomised solver).

    Attributes
    ----------
    centroid_direction_ : ndarray of shape (n_features,)
        ``d_c``.
    plane_ : ndarray of shape (2, n_features)
        The oriented PCA directions ``a`` (row 0) and ``b`` (row 1).
    plane_coordinates_ : ndarray of shape (2,)
        ``(alpha, beta)``, both non-negative.
    direction_ : ndarray of shape (n_features,)
        ``d_theta``.
    offset_, coef_, intercept_
        As in :class:`CentroidRuler`.
    """

    def __init__(self, angle: float = 0.0, percentile: float | None = None,
                 random_state: int | None = None):
        self.angle = angle
        self.percentile = percentile
        self.random_state = random_state

    def _fit(self, Z, y):
        check_in_interval("angle", self.angle, -360.0, 360.0, low_open=False)
        check_random_state_param(self.random_state)
        if Z.shape[1] < 2:
            raise ScarceError(f"Z: a rotation needs at least 2 features to span a PCA plane; "
                              f"got n_features={Z.shape[1]}")
        mu_b, mu_g, d_c = _centroid_axis(Z, y)
        plane = PCA(n_components=2, random_state=self.random_state).fit(Z).components_.copy()
        coords = plane @ d_c
        signs = np.where(coords < 0, -1.0, 1.0)
        plane *= signs[:, None]
        alpha, beta = coords * signs
        d_perp = d_c - alpha * plane[0] - beta * plane[1]
        t = math.radians(float(self.angle))
        d_theta = ((alpha * math.cos(t) - beta * math.sin(t)) * plane[0]
                   + (alpha * math.sin(t) + beta * math.cos(t)) * plane[1] + d_perp)
        self.centroid_direction_ = d_c
        self.plane_ = plane
        self.plane_coordinates_ = np.array([alpha, beta])
        self.direction_ = d_theta
        self.offset_ = 0.5 * (mu_b + mu_g)
        self.coef_ = d_theta
        self.intercept_ = -float(self.offset_ @ d_theta)


class PC1Ruler(LinearRuler):
    """Position along the first principal component, oriented toward failure.

    ``G(z) = (z - zbar) . v1`` with ``v1`` the largest-variance direction of the chosen
    population and ``zbar`` its mean; the sign of ``v1`` is chosen so that the bad centroid
    projects higher than the good one (paper, appendix ``app:rulers``, "PC1 projection"; the
    winning LLM family, ``pc1_p75``). Labels are used only for this sign when
    ``population="pooled"``.

    Parameters
    ----------
    population : {"pooled", "bad", "good"}
        Embeddings on which the PCA is fitted.
    percentile : float, optional
        Default operating percentile of :meth:`threshold`.
    random_state : int, RandomState or None
        Passed to :class:`sklearn.decomposition.PCA`.

    Attributes
    ----------
    component_ : ndarray of shape (n_features,)
        Oriented unit direction ``v1``.
    mean_ : ndarray of shape (n_features,)
        ``zbar``.
    explained_variance_ratio_ : float
        Share of the population's variance along ``v1``.
    coef_, intercept_
        ``G(z) = coef_ . z + intercept_``.

    Warns
    -----
    RulerFitWarning
        When ``v1`` is orthogonal to ``mu_b - mu_g`` (orientation undefined).
    """

    _populations = ("pooled", "bad", "good")

    def __init__(self, population: str = "pooled", percentile: float | None = None,
                 random_state: int | None = None):
        self.population = population
        self.percentile = percentile
        self.random_state = random_state

    def _fit(self, Z, y):
        if not isinstance(self.population, str) or self.population not in self._populations:
            raise ScarceError(f"population must be one of {self._populations}; "
                              f"got {self.population!r}")
        check_random_state_param(self.random_state)
        rows = {"pooled": slice(None), "bad": y, "good": ~y}[self.population]
        population = Z[rows]
        where = f"y: pc1 with population={self.population!r} needs at least 2"
        if population.shape[0] < 2:
            raise ScarceError(f"{where} embeddings in that population to find a principal "
                              f"direction; got {population.shape[0]}")
        if not np.ptp(population, axis=0).any():
            raise ScarceError(f"{where} distinct embeddings in that population to find a principal "
                              f"direction; its {population.shape[0]} embeddings are identical")
        pca = PCA(n_components=1, random_state=self.random_state).fit(population)
        v1 = pca.components_[0].copy()
        gap = float((Z[y].mean(axis=0) - Z[~y].mean(axis=0)) @ v1)
        if abs(gap) <= 1e-12 * float(np.abs(Z).max()):
            warn_user("pc1: the first principal component is orthogonal to the centroid "
                      "difference, so its orientation toward failure is undefined; scores may "
                      "not increase toward the bad set", RulerFitWarning)
        if gap < 0:
            v1 = -v1
        self.component_ = v1
        self.mean_ = pca.mean_
        self.explained_variance_ratio_ = float(pca.explained_variance_ratio_[0])
        self.coef_ = v1
        self.intercept_ = -float(pca.mean_ @ v1)


class FisherRuler(LinearRuler):
    """Fisher linear discriminant with a ridge.

    ``w = (S_w + lambda I)^{-1} (mu_b - mu_g)`` and ``G(z) = (z - zbar) . w`` (paper, appendix
    ``app:rulers``, "Fisher LDA"), where ``S_w`` is the pooled within-class covariance
    ``(sum_bad (z - mu_b)(z - mu_b)^T + sum_good (z - mu_g)(z - mu_g)^T) / (n - 2)`` and ``zbar``
    the pooled mean. The ridge is scale-free: ``lambda = ridge * trace(S_w) / n_features``
    (``lambda = ridge`` if ``S_w = 0``). ``w`` is not normalised, as in the paper.

    Parameters
    ----------
    ridge : float
        Relative ridge, > 0.
    percentile : float, optional
        Default operating percentile of :meth:`threshold`.

    Attributes
    ----------
    ridge_ : float
        The absolute ``lambda`` used.
    mean_ : ndarray of shape (n_features,)
        ``zbar``.
    coef_, intercept_
        ``G(z) = coef_ . z + intercept_`` with ``coef_ = w``.
    """

    def __init__(self, ridge: float = 1e-3, percentile: float | None = None):
        self.ridge = ridge
        self.percentile = percentile

    def _fit(self, Z, y):
        check_in_interval("ridge", self.ridge, 0.0, math.inf)
        n, d = Z.shape
        scatter = np.zeros((d, d))
        for rows in (y, ~y):
            centred = Z[rows] - Z[rows].mean(axis=0)
            scatter += centred.T @ centred
        s_w = scatter / max(n - 2, 1)
        mean_var = float(np.trace(s_w)) / d
        lam = float(self.ridge) * (mean_var if mean_var > 0 else 1.0)
        diff = Z[y].mean(axis=0) - Z[~y].mean(axis=0)
        w = linalg.solve(s_w + lam * np.eye(d), diff, assume_a="pos")
        self.ridge_ = lam
        self.mean_ = Z.mean(axis=0)
        self.coef_ = w
        self.intercept_ = -float(self.mean_ @ w)


class LogisticRuler(LinearRuler):
    """Decision function of an L2-regularised logistic regression on the failure label.

    ``G(z) = w . z + b`` with ``(w, b)`` from :class:`sklearn.linear_model.LogisticRegression`
    (default L2 penalty, inverse strength ``C``); ``G`` is the log-odds of failure (paper,
    appendix ``app:rulers``, "Logistic regression").

    Parameters
    ----------
    C : float
        Inverse regularisation strength, > 0.
    max_iter : int
        Solver iterations.
    percentile : float, optional
        Default operating percentile of :meth:`threshold`.
    random_state : int, RandomState or None
        Passed to the classifier.

    Attributes
    ----------
    classifier_ : LogisticRegression
        The fitted classifier.
    coef_, intercept_
        ``G(z) = coef_ . z + intercept_``.
    """

    def __init__(self, C: float = 1.0, max_iter: int = 1000, percentile: float | None = None,
                 random_state: int | None = None):
        self.C = C
        self.max_iter = max_iter
        self.percentile = percentile
        self.random_state = random_state

    def _fit(self, Z, y):
        check_random_state_param(self.random_state)
        C = check_in_interval("C", self.C, 0.0, math.inf, high_open=True)
        max_iter = check_positive_int("max_iter", self.max_iter, maximum=10**7)
        clf = LogisticRegression(C=C, max_iter=max_iter, random_state=self.random_state)
        clf.fit(Z, y.astype(np.int8))
        self.classifier_ = clf
        self.coef_ = clf.coef_[0].astype(np.float64)
        self.intercept_ = float(clf.intercept_[0])
