"""Geometric rulers: scores of embeddings by proximity to failure (larger = closer to failure).

Build by the paper's names and fit on labelled embeddings (``y = 1`` failure, ``0`` normal):

    from scarce.rulers import make_ruler
    ruler = make_ruler("pc1_p75").fit(Z, y)
    scores = ruler.score_samples(Z_new)     # shape (n,), float64
    tau = ruler.threshold()                 # p75 of the fitted bad-score distribution

    # one ruler per group (here the seed's true class), each scoring its own group's inputs
    per_class = make_ruler("fisher", by="class").fit(Z, y, groups=classes)
    scores = per_class.for_group(seed_class).score_samples(Z_new)

The registry is importable without scikit-learn; the ruler classes (which import it) load on
first use.
"""

from __future__ import annotations

from scarce._lazy import lazy_getattr
from scarce.rulers import registry as _registry
from scarce.rulers.registry import (
    LLM_FAMILIES,
    THRESHOLD_PERCENTILES,
    VISION_RULERS,
    RulerSpec,
    available_rulers,
    make_ruler,
    register_ruler,
    ruler_spec,
)

_LAZY = {
    "BaseRuler": "scarce.rulers.base",
    "LinearRuler": "scarce.rulers.base",
    "RulerFitWarning": "scarce.rulers.base",
    "percentile_threshold": "scarce.rulers.base",
    "AnchoredRuler": "scarce.rulers.anchored",
    "ConditionedRuler": "scarce.rulers.conditioned",
    "BoundaryRuler": "scarce.rulers.boundary",
    "CentroidRuler": "scarce.rulers.linear",
    "CentroidRotationRuler": "scarce.rulers.linear",
    "PC1Ruler": "scarce.rulers.linear",
    "FisherRuler": "scarce.rulers.linear",
    "LogisticRuler": "scarce.rulers.linear",
    "GaussianAnchor": "scarce.rulers.mahalanobis",
    "MahalanobisRuler": "scarce.rulers.mahalanobis",
    "OneClassSVMRuler": "scarce.rulers.ocsvm",
}

__all__ = [*_registry.__all__, *_LAZY]


__getattr__ = lazy_getattr(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted(__all__)
