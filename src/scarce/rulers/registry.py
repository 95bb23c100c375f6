"""Registry of rulers under the paper's names (appendix ``app:rulers``, ``tab:ruler-catalogue``).

The registry maps a name to a class (given lazily as ``"module:Class"``, so listing names imports
nothing heavy) and default parameters:

* vision catalogue (13): ``centroid``, ``centroid_rot_{000,015,030,045,060,090}deg``,
  ``mah_{bad,good,contrast}``, ``ocsvm_{bad,good,contrast}``;
* LLM families (6): ``pc1``, ``centroid``, ``fisher``, ``logreg``, ``mah_bad``,
  ``centroid_rot90``, each also as ``<family>_p{50,75,90,95}``: the same score function with a
  default operating percentile (``ruler.percentile``) used by ``threshold()``.

Examples
--------
>>> "centroid_rot_090deg" in available_rulers("vision")
True
>>> len(available_rulers("vision")), len(available_rulers("llm"))
(13, 30)
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from scarce.errors import ScarceError, unknown_name_error

if TYPE_CHECKING:  # pragma: no cover
    from scarce.rulers.base import BaseRuler

__all__ = [
    "LLM_FAMILIES",
    "THRESHOLD_PERCENTILES",
    "VISION_RULERS",
    "RulerSpec",
    "available_rulers",
    "make_ruler",
    "register_ruler",
    "ruler_spec",
]

ROTATION_ANGLES = (0, 15, 30, 45, 60, 90)
THRESHOLD_PERCENTILES = (50, 75, 90, 95)
"""The percentiles of the failure scores that the catalogue's thresholded variants use (``pc1_p75``, ...)."""
VISION_RULERS = (
    "centroid",
    *(f"centroid_rot_{a:03d}deg" for a in ROTATION_ANGLES),
    "mah_bad", "mah_good", "mah_contrast",
    "ocsvm_bad", "ocsvm_good", "ocsvm_contrast",
)
"""The 13 rulers of the paper's vision study: the centroid and its rotations, Mahalanobis and one-class SVM anchorings."""
LLM_FAMILIES = ("pc1", "centroid", "fisher", "logreg", "mah_bad", "centroid_rot90")
"""The ruler families of the paper's LLM sweep."""


@dataclass(frozen=True)
class RulerSpec:
    """One registry entry.

    Attributes
    ----------
    name : str
        Registry key.
    target : str or type
        The ruler class, or ``"module:Class"`` imported on first use.
    params : Mapping
        Default constructor parameters (overridden by ``make_ruler(**params)``).
    family : str
        Family name (``"centroid"``, ``"mahalanobis"``, ...).
    catalogues : tuple of str
        Where the paper uses it: ``"vision"`` and/or ``"llm"``.
    """

    name: str
    target: str | type
    params: Mapping[str, Any] = field(default_factory=dict)
    family: str = ""
    catalogues: tuple[str, ...] = ()

    def resolve(self) -> type:
        """Return the ruler class (importing its module if needed)."""
        if isinstance(self.target, str):
            module, _, attr = self.target.partition(":")
            return getattr(importlib.import_module(module), attr)
        return self.target


_REGISTRY: dict[str, RulerSpec] = {}
_CONDITIONED = "scarce.rulers.conditioned:ConditionedRuler"


def register_ruler(name: str, target: str | type, *, family: str = "",
                   catalogues: tuple[str, ...] = (), overwrite: bool = False,
                   **params: Any) -> RulerSpec:
    """Add a ruler to the registry.

    Parameters
    ----------
    name : str
        New registry key.
    target : str or type
        A :class:`~scarce.rulers.base.BaseRuler` subclass or ``"module:Class"``.
    family : str
        Family label (free text).
    catalogues : tuple of str
        Catalogues it belongs to (``"vision"``, ``"llm"``, or your own).
    overwrite : bool
        Replace an existing entry instead of raising.
    **params
        Default constructor parameters.

    Returns
    -------
    RulerSpec
    """
    if not isinstance(name, str) or not name:
        raise ScarceError(f"name must be a non-empty string; got {name!r}")
    if name in _REGISTRY and not overwrite:
        raise ScarceError(f"name {name!r} is already registered (pass overwrite=True to replace)")
    spec = RulerSpec(name, target, MappingProxyType(dict(params)), family, tuple(catalogues))
    _REGISTRY[name] = spec
    return spec


def ruler_spec(name: str) -> RulerSpec:
    """Registry entry for ``name``; an unknown name raises with "did you mean" and the catalogue."""
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise unknown_name_error("ruler", name, _REGISTRY) from None


def available_rulers(catalogue: str | None = None) -> tuple[str, ...]:
    """Registered ruler names, sorted.

    Parameters
    ----------
    catalogue : {"vision", "llm"} or None
        Only the names used in that part of the paper (``None``: all).
    """
    if catalogue is None:
        return tuple(sorted(_REGISTRY))
    known = {c for spec in _REGISTRY.values() for c in spec.catalogues}
    if catalogue not in known:
        raise unknown_name_error("catalogue", catalogue, known)
    return tuple(sorted(n for n, s in _REGISTRY.items() if catalogue in s.catalogues))


def make_ruler(name: str, **params: Any) -> BaseRuler:
    """Build an unfitted ruler by registry name.

    Parameters
    ----------
    name : str
        A name from :func:`available_rulers` (e.g. ``"mah_bad"``, ``"pc1_p75"``).
    **params
        Constructor parameters overriding the registered defaults (e.g. ``random_state=0``).

    Returns
    -------
    BaseRuler
        Unfitted; call ``fit(Z, y)``.

    Raises
    ------
    ScarceError
        (a ``ValueError``) for an unknown name, with the closest names and the catalogue, or
        for a parameter the ruler does not take.

    Conditioned variants take ``by`` (and optionally ``fallback``, ``min_failures``,
    ``min_normals``) and return a :class:`~scarce.rulers.conditioned.ConditionedRuler` that
    fits this ruler once per group: ``make_ruler("fisher", by="class").fit(Z, y, groups=c)``.

    Examples
    --------
    >>> make_ruler("pc1_p75").percentile
    75
    >>> make_ruler("fisher", by="class", fallback="refuse")
    ConditionedRuler(by='class', fallback='refuse', ruler=FisherRuler())
    """
    if "by" in params:
        if getattr(ruler_spec(name).resolve(), "takes_groups", False):
            raise ScarceError(f"ruler {name!r} is fitted with the groups itself (one model over all of them); "
                              f"drop by={params['by']!r} and pass groups= to fit")
        # resolved by name like every ruler class: the registry imports no ruler module itself
        # (the conditioned wrapper resolves its own ruler names through this registry)
        wrapper = RulerSpec("conditioned", _CONDITIONED).resolve()
        conditioning = {k: params.pop(k) for k in ("by", "fallback", "min_failures", "min_normals") if k in params}
        return wrapper(make_ruler(name, **params), **conditioning)
    spec = ruler_spec(name)
    cls = spec.resolve()
    allowed = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ScarceError(f"ruler {name!r} ({cls.__name__}) takes no parameter(s) {unknown}; "
                          f"allowed parameters: {', '.join(allowed)}")
    return cls(**{**spec.params, **params})


def _register_catalogue() -> None:
    linear = "scarce.rulers.linear"
    families = {  # name -> (target, family, params)
        "centroid": (f"{linear}:CentroidRuler", "centroid", {}),
        "centroid_rot90": (f"{linear}:CentroidRotationRuler", "centroid_rotation", {"angle": 90.0}),
        "pc1": (f"{linear}:PC1Ruler", "pc1", {}),
        "fisher": (f"{linear}:FisherRuler", "fisher", {}),
        "logreg": (f"{linear}:LogisticRuler", "logreg", {}),
    }
    for angle in ROTATION_ANGLES:
        families[f"centroid_rot_{angle:03d}deg"] = (
            f"{linear}:CentroidRotationRuler", "centroid_rotation", {"angle": float(angle)})
    for anchor in ("bad", "good", "contrast"):
        families[f"mah_{anchor}"] = ("scarce.rulers.mahalanobis:MahalanobisRuler", "mahalanobis",
                                     {"anchor": anchor})
        families[f"ocsvm_{anchor}"] = ("scarce.rulers.ocsvm:OneClassSVMRuler", "ocsvm",
                                       {"anchor": anchor})
    # beyond the paper: a ruler of the decision boundary, fitted with the group (class) of each embedding
    families["boundary"] = ("scarce.rulers.boundary:BoundaryRuler", "boundary", {})
    for name, (target, family, params) in families.items():
        catalogues = tuple(c for c, names in (("vision", VISION_RULERS), ("llm", LLM_FAMILIES))
                           if name in names)
        register_ruler(name, target, family=family, catalogues=catalogues, **params)
    for name in LLM_FAMILIES:
        target, family, params = families[name]
        for p in THRESHOLD_PERCENTILES:
            register_ruler(f"{name}_p{p}", target, family=family, catalogues=("llm",),
                           **params, percentile=p)


_register_catalogue()
