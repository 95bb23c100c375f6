"""Embedding an LLM corpus table: the sentence encoder or the judge's hidden states.

:func:`embed_corpus` adds the ``embedding`` column (one float32 vector per record, the same
length for the whole corpus) to a corpus table (see :mod:`scarce.datasets.jailbreakbench` for the
columns), and for the judge also ``judge_score`` (p_unsafe). Both encoders go through the on-disk
cache of :mod:`scarce.encoders.cache`, so a second call with the same ``cache_dir`` does no
forward pass.
"""

from __future__ import annotations

import os
from typing import Any, Union

import numpy as np

from scarce.encoders.cache import ProgressCallback
from scarce.encoders.device import check_device
from scarce.checks import check_positive_int
from scarce.errors import ScarceError, unknown_name_error

__all__ = ["ENCODERS", "embed_corpus", "embedding_matrix"]

PathLike = Union[str, "os.PathLike[str]"]
ENCODERS = {"minilm": 32, "judge": 8}
"""Encoder names accepted by :func:`embed_corpus`, with their default batch sizes."""
_REQUIRED = ("prompt", "response")


def _check_frame(frame: Any) -> None:
    if not hasattr(frame, "columns") or not hasattr(frame, "copy"):
        raise ScarceError(f"frame must be a pandas DataFrame in the corpus schema, "
                          f"got {type(frame).__name__}")
    missing = [c for c in _REQUIRED if c not in frame.columns]
    if missing:
        raise ScarceError(f"frame lacks column(s) {missing}; a corpus table needs 'prompt' and 'response'")
    if len(frame) == 0:
        raise ScarceError("frame has no records to embed")
    if frame["prompt"].isna().any():
        bad = frame.index[frame["prompt"].isna()][0]
        raise ScarceError(f"frame has a null prompt (first at index {bad!r}); prompts must be strings "
                          "(the readers drop failed artifact entries)")
    blank = frame["prompt"].astype(str).str.strip() == ""
    if blank.any():
        rows = list(frame.index[blank][:5])
        raise ScarceError(f"{int(blank.sum())} record(s) have a prompt that is empty or only whitespace (first at "
                          f"index {rows}): rendered, the conversation holds no text of the user to embed; drop "
                          "them or give their prompts")


def _responses(frame: Any) -> list[str]:
    return ["" if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)
            for value in frame["response"].tolist()]


def _make_encoder(encoder: Any, model: Any, tokenizer: Any, device: str | None,
                  options: dict[str, Any]) -> tuple[str, Any]:
    if not isinstance(encoder, str):
        kind = type(encoder).__name__
        if kind == "JudgeEncoder":
            return "judge", encoder
        if kind == "SentenceEncoder":
            return "minilm", encoder
        raise ScarceError(f"encoder must be one of {sorted(ENCODERS)} or a JudgeEncoder/SentenceEncoder, "
                          f"got {kind}")
    if encoder not in ENCODERS:
        raise unknown_name_error("encoder", encoder, ENCODERS)
    if encoder == "judge":
        if model is None:
            raise ScarceError("encoder='judge' needs model (a judge name, directory or loaded causal LM)")
        from scarce.encoders.judge import JudgeEncoder

        return "judge", JudgeEncoder(model, tokenizer, device=device, **options)
    from scarce.encoders.text import SentenceEncoder

    return "minilm", SentenceEncoder("minilm" if model is None else model, device=device, **options)


def embed_corpus(frame: Any, encoder: Any = "minilm", *, model: Any = None, tokenizer: Any = None,
                 cache_dir: PathLike | None = None, batch_size: int | None = None, device: str | None = None,
                 progress: ProgressCallback | None = None, **options: Any) -> Any:
    """Embed every record of a corpus table.

    Parameters
    ----------
    frame : pandas.DataFrame
        A corpus table (at least ``prompt`` and ``response``; null responses count as ``""``).
    encoder : {"minilm", "judge"} or an encoder instance
        ``"minilm"``: :class:`scarce.encoders.text.SentenceEncoder` (prompt and response, 384-d each; CPU-friendly);
        ``"judge"``: :class:`scarce.encoders.judge.JudgeEncoder` (hidden states and p_unsafe).
        A built ``SentenceEncoder`` or ``JudgeEncoder`` is used as is (then ``model``,
        ``tokenizer``, ``device`` and ``options`` are ignored).
    model, tokenizer : optional
        For ``"judge"`` (required): a model name, directory or loaded causal LM, and its tokenizer
        (:class:`~scarce.encoders.judge.JudgeEncoder`). For ``"minilm"``: None (the bundled model)
        or a loaded SentenceTransformer (then pass ``model_id``).
    cache_dir, batch_size, device, progress : optional
        On-disk embedding cache (None: none); records per forward pass (32 minilm, 8 judge);
        where the model runs (default: a GPU when present); ``progress(done, total)`` over texts.
    **options
        Further keyword arguments of the encoder's constructor (e.g. ``chat_template``,
        ``safe_token``, ``threshold``, ``model_id``, ``max_seq_length``).

    Returns
    -------
    pandas.DataFrame
        A copy of ``frame`` with ``embedding`` (per record a float32 vector) and, for the judge,
        ``judge_score`` (p_unsafe, float64); for the sentence encoder, ``windows`` (how many
        windows of word pieces each conversation was embedded over: more than one where it is
        longer than the model reads at once). Other columns, the ``jailbroken`` label included,
        are unchanged; ``attrs["embedding"]`` records the encoder identity and dimension, and
        ``windowed_records``, the records embedded over more than one window.

    Raises
    ------
    ScarceError
        An unknown encoder, a frame without prompts, a device this machine lacks, or non-finite
        (NaN/inf) embeddings.
    """
    _check_frame(frame)
    if isinstance(encoder, str):
        device = check_device(device)
    kind, built = _make_encoder(encoder, model, tokenizer, device, options)
    size = ENCODERS[kind] if batch_size is None else check_positive_int("batch_size", batch_size)
    prompts = [str(p) for p in frame["prompt"].tolist()]
    responses = _responses(frame)
    out = frame.copy()
    if kind == "judge":
        result = built.encode(prompts, responses, batch_size=size, cache_dir=cache_dir, progress=progress)
        embeddings = result.embeddings
        out["judge_score"] = result.p_unsafe.astype(np.float64)
    else:
        embeddings = built.encode(prompts, responses, batch_size=size, cache_dir=cache_dir, progress=progress)
        out["windows"] = built.last_windows
    return _with_embeddings(out, embeddings, kind, built.identity, frame.attrs)


def _with_embeddings(out: Any, embeddings: np.ndarray, kind: str, identity: str, attrs: dict) -> Any:
    """``out`` with the (checked, float32) embeddings and ``attrs["embedding"]``: what made them."""
    _check_finite(embeddings)
    out["embedding"] = list(np.asarray(embeddings, dtype=np.float32))
    info = {"encoder": kind, "identity": identity, "dimension": int(embeddings.shape[1])}
    if "windows" in out:
        info["windowed_records"] = int((out["windows"] > 1).sum())
    out.attrs = {**attrs, "embedding": info}
    return out


def _check_finite(embeddings: np.ndarray) -> None:
    finite = np.isfinite(embeddings).all(axis=1)
    if not finite.all():
        bad = np.flatnonzero(~finite)
        raise ScarceError(f"the embeddings of {bad.size} record(s) contain NaN or inf (first at row "
                          f"{int(bad[0])}); embeddings must be finite")


def _vector(value: Any, row: int, frame: Any) -> np.ndarray:
    """One record's embedding as a float64 vector; a clear error naming the row otherwise."""
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        array = None
    if array is None or array.ndim != 1 or array.dtype.kind not in "fiu":
        record = frame["record_id"].iloc[row] if "record_id" in frame.columns else row
        shown = repr(value)
        shown = shown[:60] + "..." if len(shown) > 60 else shown
        raise ScarceError(f"the embedding of row {row} (record_id {record!r}) must be a list of numbers "
                          f"(one vector), got {shown} ({type(value).__name__})")
    return array.astype(np.float64)


def embedding_matrix(frame: Any, column: str = "embedding") -> np.ndarray:
    """The ``embedding`` column of a corpus table as an (n, d) float64 array.

    Raises
    ------
    ScarceError
        The column is missing, the vectors differ in length, or a value is NaN/inf.
    """
    if not hasattr(frame, "columns") or column not in frame.columns:
        raise ScarceError(f"frame has no {column!r} column; embed the corpus first (embed_corpus)")
    vectors = [_vector(value, row, frame) for row, value in enumerate(frame[column].tolist())]
    lengths = sorted({v.size for v in vectors})
    if not vectors or len(lengths) != 1 or lengths[0] == 0:
        raise ScarceError(f"{column!r} must hold vectors of one non-zero length per corpus; "
                          f"got lengths {lengths[:5]}")
    matrix = np.stack(vectors)
    _check_finite(matrix)
    return matrix
