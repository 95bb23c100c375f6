"""An on-disk cache of text embeddings, keyed by (model identity, text), shared by the encoders.

Layout: ``<cache_dir>/<model key>/`` where the model key is a sha256 prefix of the encoder's
identity string (model name or weight fingerprint, tokenizer, dtype, every setting that changes
the output). That directory holds ``identity.json`` (the identity in clear) and one
``shard-*.npz`` per finished batch: an uncompressed NumPy archive with

* ``keys``: (n,) ``S64``, the sha256 hex digest of each text (UTF-8),
* one array per cached field, first axis n (e.g. ``embedding`` (n, d) float32,
  ``p_unsafe`` (n,) float64).

Shards are written to a temporary file and renamed (``os.replace``), so a shard is either
complete or absent: an interrupted run loses at most the batch in flight, and the next run
recomputes only the texts with no shard. The index (digest -> shard, row) is rebuilt from the
shards' ``keys`` arrays when the cache is opened; the other arrays are read only when a text is
looked up. Nothing is pickled (``allow_pickle=False`` on read).

>>> import numpy as np, tempfile
>>> cache = EmbeddingCache(tempfile.mkdtemp(), "demo-model")
>>> _ = cache.store(["a", "b"], {"embedding": np.eye(2, dtype=np.float32)})
>>> found, values = cache.lookup(["b", "c"])
>>> found.tolist(), values["embedding"][0].tolist()
([True, False], [0.0, 1.0])
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Union

import numpy as np

from scarce._atomic import atomic_write_bytes
from scarce.errors import ScarceError, check_positive_int

__all__ = ["EmbeddingCache", "ProgressCallback", "cached_encode", "text_digest"]

PathLike = Union[str, "os.PathLike[str]"]
#: ``progress(done, total)``: texts finished (cached ones included) out of the texts requested.
ProgressCallback = Callable[[int, int], None]
BatchEncoder = Callable[[list[str]], Mapping[str, np.ndarray]]

_SHARD_GLOB = "shard-*.npz"


def text_digest(text: str) -> str:
    """The sha256 hex digest of ``text`` encoded as UTF-8 (the cache key of a text)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    """Cached per-text arrays of one encoder, stored under ``directory``.

    Parameters
    ----------
    directory : str or path-like
        Root of the cache; created if missing. Several encoders can share it: each identity gets
        its own subdirectory.
    identity : str
        Everything that determines the encoder's output for a given text (model, tokenizer,
        dtype, settings). Two encoders with the same identity must give the same arrays.
    """

    def __init__(self, directory: PathLike, identity: str):
        if not isinstance(identity, str) or not identity:
            raise ScarceError(f"identity must be a non-empty string, got {identity!r}")
        try:
            root = Path(os.fspath(directory))
        except TypeError:
            raise ScarceError(f"cache_dir must be a path or None, got {type(directory).__name__}") from None
        self.identity = identity
        self.directory = root / hashlib.sha256(identity.encode("utf-8")).hexdigest()[:24]
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ScarceError(f"cache_dir {str(root)!r} cannot be created or written: {exc}") from None
        self._write_identity()
        self._index: dict[str, tuple[Path, int]] = {}
        for shard in sorted(self.directory.glob(_SHARD_GLOB)):
            self._add_to_index(shard)

    def _write_identity(self) -> None:
        path = self.directory / "identity.json"
        if not path.exists():
            atomic_write_bytes(path, json.dumps({"identity": self.identity}, indent=1).encode())

    def _add_to_index(self, shard: Path) -> None:
        try:
            with np.load(shard, allow_pickle=False) as archive:
                keys = archive["keys"]
        except (OSError, ValueError, KeyError):
            return  # an unreadable shard (e.g. foreign file) is ignored and its texts recomputed
        for row, key in enumerate(keys):
            self._index[key.decode("ascii")] = (shard, row)

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, text: object) -> bool:
        return isinstance(text, str) and text_digest(text) in self._index

    def lookup(self, texts: Sequence[str]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Return ``(found, values)`` for ``texts``.

        ``found`` is a boolean mask; ``values`` maps each cached field to an array whose first axis
        runs over ``texts`` (rows of texts not found are zero). Empty when nothing is found.
        """
        where: dict[Path, list[tuple[int, int]]] = {}
        found = np.zeros(len(texts), dtype=bool)
        for i, text in enumerate(texts):
            hit = self._index.get(text_digest(text))
            if hit is not None:
                found[i] = True
                where.setdefault(hit[0], []).append((i, hit[1]))
        values: dict[str, np.ndarray] = {}
        for shard, pairs in where.items():
            targets = np.array([p[0] for p in pairs])
            rows = np.array([p[1] for p in pairs])
            with np.load(shard, allow_pickle=False) as archive:
                for name in archive.files:
                    if name == "keys":
                        continue
                    column = archive[name]
                    if name not in values:
                        values[name] = np.zeros((len(texts),) + column.shape[1:], dtype=column.dtype)
                    values[name][targets] = column[rows]
        return found, values

    def store(self, texts: Sequence[str], arrays: Mapping[str, np.ndarray]) -> Path:
        """Write one shard holding ``arrays`` (first axis = ``texts``) and index it; returns its path."""
        if "keys" in arrays:
            raise ScarceError("arrays must not contain a field named 'keys' (reserved for the text digests)")
        columns = {name: np.ascontiguousarray(value) for name, value in arrays.items()}
        for name, value in columns.items():
            if value.dtype == object or value.shape[:1] != (len(texts),):
                raise ScarceError(f"cached field {name!r} must be a numeric array with {len(texts)} rows "
                                  f"(one per text); got dtype {value.dtype} and shape {value.shape}")
        keys = np.array([text_digest(t) for t in texts], dtype="S64")
        buffer = io.BytesIO()
        np.savez(buffer, keys=keys, **columns)
        path = self.directory / f"shard-{uuid.uuid4().hex}.npz"
        atomic_write_bytes(path, buffer.getvalue())
        for row, key in enumerate(keys):
            self._index[key.decode("ascii")] = (path, row)
        return path


def _unique(texts: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(texts))


def cached_encode(
    texts: Sequence[str],
    encode_batch: BatchEncoder,
    *,
    cache: EmbeddingCache | None,
    batch_size: int,
    progress: ProgressCallback | None = None,
    order: Callable[[str], float] | None = None,
) -> dict[str, np.ndarray]:
    """Encode ``texts`` batch by batch, reusing and filling ``cache``.

    Parameters
    ----------
    texts : sequence of str
        Texts to encode; duplicates are encoded once.
    encode_batch : callable
        ``encode_batch(list_of_texts) -> {field: array}``, each array with one row per text.
        Every field must be finite; a batch with NaN or inf raises before it is cached.
    cache : EmbeddingCache or None
        Where finished batches are written (one shard per batch) and looked up; None = no cache.
    batch_size : int
        Texts per call of ``encode_batch`` (and per shard).
    progress : callable, optional
        ``progress(done, total)`` once after the cache lookup and after every batch.
    order : callable, optional
        Sort key for the texts still to encode (e.g. their length, so batches need little padding).

    Returns
    -------
    dict of str to ndarray
        Each field with one row per entry of ``texts`` (in order).
    """
    check_positive_int("batch_size", batch_size)
    unique = _unique(texts)
    if cache is not None:
        found, values = cache.lookup(unique)
    else:
        found, values = np.zeros(len(unique), dtype=bool), {}
    todo = [i for i in range(len(unique)) if not found[i]]
    if order is not None:
        todo.sort(key=lambda i: order(unique[i]))
    done = len(unique) - len(todo)
    if progress is not None:
        progress(done, len(unique))
    for start in range(0, len(todo), batch_size):
        rows = todo[start:start + batch_size]
        batch = [unique[i] for i in rows]
        arrays = _checked_batch(encode_batch(batch), len(batch))
        if cache is not None:
            cache.store(batch, arrays)
        for name, value in arrays.items():
            if name not in values:
                values[name] = np.zeros((len(unique),) + value.shape[1:], dtype=value.dtype)
            values[name][rows] = value
        done += len(rows)
        if progress is not None:
            progress(done, len(unique))
    position = {text: i for i, text in enumerate(unique)}
    take = np.array([position[t] for t in texts], dtype=np.int64)
    return {name: value[take] for name, value in values.items()}


def _checked_batch(arrays: Mapping[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
    checked = {}
    for name, value in arrays.items():
        a = np.asarray(value)
        if a.shape[:1] != (n,):
            raise ScarceError(f"the encoder returned {name!r} of shape {a.shape} for a batch of {n} texts")
        if np.issubdtype(a.dtype, np.floating) and not np.isfinite(a).all():
            bad = np.flatnonzero(~np.isfinite(a.reshape(n, -1)).all(axis=1))
            raise ScarceError(f"the encoder produced non-finite values (NaN or inf) in {name!r} for "
                              f"{bad.size} of {n} texts (first at batch row {int(bad[0])}); "
                              "embeddings must be finite - check the model weights and dtype")
        checked[name] = a
    return checked
