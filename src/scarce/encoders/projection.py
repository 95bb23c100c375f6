"""The optional projection stage of the LLM application: a contrastive head on judge embeddings.

The paper compresses the 4,096-d Llama-Guard hidden states with an MLP ``4096 -> 256 -> 64``
with L2-normalised output, trained with the supervised contrastive loss on the jailbreak labels.
That head is :class:`scarce.encoders.supcon.ProjectionHead`; this module only fixes its LLM
settings (any input dimension is accepted, e.g. 384 for the sentence encoder).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from scarce.encoders.supcon import HeadConfig, ProjectionHead, train_projection_head
from scarce.seeding import SeedLike

__all__ = ["LLM_HEAD", "fit_llm_head"]

#: The paper's LLM head: hidden 256, output 64 (other settings as :class:`HeadConfig`).
LLM_HEAD = HeadConfig(hidden=256, out_dim=64)


def fit_llm_head(embeddings: np.ndarray, labels: np.ndarray, *, seed: SeedLike = 0,
                 **settings: Any) -> ProjectionHead:
    """Train the LLM projection head ``in_dim -> 256 -> 64`` on jailbreak labels.

    Parameters
    ----------
    embeddings : array of shape (n, in_dim)
        Judge (or sentence-encoder) embeddings, finite.
    labels : array of shape (n,)
        1 / True = jailbreak ("bad"), 0 / False = not; at least two of each.
    seed : int, SeedSequence or Generator
        Seeds the initialisation and the batch draws.
    **settings
        Overrides of :data:`LLM_HEAD` (``hidden``, ``out_dim``, ``temperature``, ``steps``,
        ``batch_size``, ``learning_rate``, ``weight_decay``).

    Returns
    -------
    ProjectionHead
        ``head.transform(embeddings)`` gives L2-normalised (n, 64) float64 embeddings.
    """
    config = replace(LLM_HEAD, **settings) if settings else LLM_HEAD
    return train_projection_head(embeddings, labels, config, seed=seed)
