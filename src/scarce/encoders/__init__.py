"""Encoders: maps from model inputs or features to the embeddings that rulers score.

``supcon``: projection heads trained with the supervised contrastive loss; ``projection``: the
LLM head settings; ``judge``: Llama-Guard style judge hidden states and p_unsafe (transformers);
``text``: the offline sentence encoder (all-MiniLM-L6-v2); ``cache``: the on-disk embedding cache
they share; ``device``: checking a device name. Each module is imported on first use, so ``import scarce.encoders`` stays light
(no torch, transformers or sentence-transformers).
"""

from __future__ import annotations

from scarce._lazy import lazy_getattr

_LAZY = {
    "HeadConfig": "scarce.encoders.supcon",
    "ProjectionHead": "scarce.encoders.supcon",
    "supcon_loss": "scarce.encoders.supcon",
    "train_projection_head": "scarce.encoders.supcon",
    "LLM_HEAD": "scarce.encoders.projection",
    "fit_llm_head": "scarce.encoders.projection",
    "JudgeEncoder": "scarce.encoders.judge",
    "JudgeOutputs": "scarce.encoders.judge",
    "SentenceEncoder": "scarce.encoders.text",
    "render_conversation": "scarce.encoders.text",
    "EmbeddingCache": "scarce.encoders.cache",
    "cached_encode": "scarce.encoders.cache",
    "available_devices": "scarce.encoders.device",
    "check_device": "scarce.encoders.device",
}

__all__ = sorted(_LAZY)


__getattr__ = lazy_getattr(__name__, _LAZY)
