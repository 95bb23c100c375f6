"""Lazy package exports: names resolved from their modules on first access (PEP 562).

``import scarce`` and its subpackages stay light (numpy only); torch, pandas, scikit-learn and
transformers load when a name that needs them is first used.

>>> __getattr__ = lazy_getattr("scarce.encoders", {"JudgeEncoder": "scarce.encoders.judge"})  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_getattr", "lazy_module"]


def lazy_getattr(package: str, table: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``table[name]`` and returns its attribute ``name``."""

    def __getattr__(name: str) -> Any:
        if name in table:
            return getattr(importlib.import_module(table[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


def lazy_module(package: str, table: Mapping[str, str]) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``(__all__, __getattr__, __dir__)`` of a module that only re-exports ``table`` lazily."""
    names = sorted(table)
    return names, lazy_getattr(package, table), lambda: list(names)
