"""Encoders: maps from model inputs or features to the embeddings that rulers score.

``supcon``: projection heads trained with the supervised contrastive loss (torch, imported on
first use, so ``import scarce.encoders`` stays light).
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "HeadConfig": "scarce.encoders.supcon",
    "ProjectionHead": "scarce.encoders.supcon",
    "supcon_loss": "scarce.encoders.supcon",
    "train_projection_head": "scarce.encoders.supcon",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'scarce.encoders' has no attribute {name!r}")
