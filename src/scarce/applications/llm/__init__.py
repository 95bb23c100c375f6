"""The LLM application (paper section 6): fleet-level jailbreak probability from embeddings of
JailbreakBench conversations.

``embedding``: :func:`embed_corpus` adds the sentence-encoder or judge embeddings to a corpus
table. Modules are imported on first use, so importing this package pulls in neither pandas
nor torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "ENCODERS": "scarce.applications.llm.embedding",
    "embed_corpus": "scarce.applications.llm.embedding",
    "embedding_matrix": "scarce.applications.llm.embedding",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'scarce.applications.llm' has no attribute {name!r}")
