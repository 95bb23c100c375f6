"""Anchored rulers: a model of one labelled population, read as closeness to it.

An anchored family fits a model to an *anchor* population (``D_bad`` or ``D_good``) and reads
a closeness ``c_A(z)`` from it (larger = more like the anchor). The three anchorings of the paper
(appendix ``app:rulers``, last paragraph) are:

    _bad       G(z) =  c_bad(z)
    _good      G(z) = -c_good(z)                    (good-anchored, sign reversed)
    _contrast  G(z) =  c_bad(z) - c_good(z)         (bad-anchored minus good-anchored)

so every variant is oriented "larger = closer to failure".
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from scarce.errors import ScarceError
from scarce.rulers.base import BaseRuler

__all__ = ["ANCHORINGS", "AnchoredRuler"]

#: anchoring -> {anchor population: sign of its closeness in G}
ANCHORINGS: dict[str, dict[str, float]] = {
    "bad": {"bad": 1.0},
    "good": {"good": -1.0},
    "contrast": {"bad": 1.0, "good": -1.0},
}


class AnchoredRuler(BaseRuler):
    """Base of the ``_bad`` / ``_good`` / ``_contrast`` families.

    Subclasses implement ``_fit_anchor(Z_anchor, name) -> model`` and either
    ``_closeness(model, Z) -> ndarray (n,)`` or a faster ``_score`` of their own, and may override
    ``_before_anchors(Z, y)``.

    Attributes
    ----------
    models_ : dict
        Anchor population name (``"bad"``/``"good"``) -> fitted anchor model.
    """

    anchor: str

    def _fit(self, Z: NDArray[np.float64], y: NDArray[np.bool_]) -> None:
        if not isinstance(self.anchor, str) or self.anchor not in ANCHORINGS:
            raise ScarceError(f"anchor must be one of {tuple(ANCHORINGS)}; got {self.anchor!r}")
        rows = {"bad": y, "good": ~y}
        self._before_anchors(Z, y)
        self.models_ = {name: self._fit_anchor(Z[rows[name]], name)
                        for name in ANCHORINGS[self.anchor]}

    def _score(self, Z: NDArray[np.float64]) -> NDArray[np.float64]:
        total = np.zeros(Z.shape[0])
        for name, sign in ANCHORINGS[self.anchor].items():
            total += sign * self._closeness(self.models_[name], Z)
        return total

    def _before_anchors(self, Z: NDArray[np.float64], y: NDArray[np.bool_]) -> None:
        """Hook run once before the anchors are fitted (e.g. to choose a solver)."""

    def _fit_anchor(self, Z_anchor: NDArray[np.float64], name: str) -> Any:  # pragma: no cover
        raise NotImplementedError

    def _closeness(self, model: Any, Z: NDArray[np.float64]) -> NDArray[np.float64]:
        raise NotImplementedError  # pragma: no cover
