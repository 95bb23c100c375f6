"""The LLM application (paper section 6): fleet-level jailbreak probability from embeddings of
JailbreakBench conversations.

* ``corpus``: the corpus table on disk (:func:`read_corpus`, :func:`write_corpus`) and its groups;
* ``embedding``: :func:`embed_corpus` adds the sentence-encoder or judge embeddings;
* ``fleet``: the fleet of benign and adversarial records as a rare-event problem with an exact
  answer (:class:`Fleet`), and the reference ``p_ref`` (:func:`reference_probability`);
* ``sweep``: the ruler sweep as a resumable run (:class:`LLMSweep`, presets :func:`get_preset`);
* ``commands``: the ``scarce llm`` command line.

Modules are imported on first use, so importing this package pulls in neither pandas nor torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "Fleet": "scarce.applications.llm.fleet",
    "LLMSweep": "scarce.applications.llm.sweep",
    "SweepConfig": "scarce.applications.llm.sweep",
    "build_setup": "scarce.applications.llm.sweep",
    "get_preset": "scarce.applications.llm.sweep",
    "read_corpus": "scarce.applications.llm.corpus",
    "reference_probability": "scarce.applications.llm.fleet",
    "write_corpus": "scarce.applications.llm.corpus",
    "ENCODERS": "scarce.applications.llm.embedding",
    "embed_corpus": "scarce.applications.llm.embedding",
    "embedding_matrix": "scarce.applications.llm.embedding",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'scarce.applications.llm' has no attribute {name!r}")
