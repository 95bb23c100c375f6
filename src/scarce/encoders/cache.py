"""An on-disk cache of text embeddings, keyed by (model identity, text), shared by the encoders.

Layout: ``<cache_dir>/<model key>/`` where the model key is a sha256 prefix of the encoder's
identity string (model name or weight fingerprint, tokenizer, dtype, every setting that changes
the output). That directory holds ``identity.json`` (the identity in clear) and one
``shard-*.npz`` per finished batch: an uncompressed NumPy archive with

* ``keys``: (n,) ``S64``, the sha256 hex digest of each text (UTF-8),
* one array per cached field, first axis n (e.g. ``embedding`` (n, d) float32,
  ``p_unsafe`` (n,) float64),
* ``sha256``: () ``S64``, the checksum of all the other arrays (:func:`shard_checksum`).

Shards are written to a temporary file and renamed (``os.replace``), so a shard is either
complete or absent: an interrupted run loses at most the batch in flight, and the next run
recomputes only the texts with no shard. The index (digest -> shard, row) is rebuilt from the
shards when the cache is opened, and every shard is verified (:func:`read_shard`: size bounds,
checksum, one row per key) when it is indexed and again when it is read. A shard that fails is
renamed ``*.rejected`` with a :class:`~scarce.errors.ScarceWarning` and its texts are
recomputed, so a damaged or edited shard never supplies numbers. Nothing is pickled
(``allow_pickle=False`` on read).

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
import re
import uuid
import warnings
import zipfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Union

import numpy as np

from scarce._atomic import atomic_write_bytes
from scarce.errors import ScarceError, ScarceWarning, check_positive_int

__all__ = ["CHECKSUM", "EmbeddingCache", "ProgressCallback", "cached_encode", "read_shard", "shard_checksum",
           "text_digest"]

PathLike = Union[str, "os.PathLike[str]"]
#: ``progress(done, total)``: texts finished (cached ones included) out of the texts requested.
ProgressCallback = Callable[[int, int], None]
BatchEncoder = Callable[[list[str]], Mapping[str, np.ndarray]]

_SHARD_GLOB = "shard-*.npz"
#: The member of a shard holding the sha256 of its arrays (:func:`shard_checksum`).
CHECKSUM = "sha256"
#: A shard (one batch of texts) larger than this, on disk or as its arrays declare, is not read.
MAX_SHARD_BYTES = 1 << 30
_MAX_MEMBERS = 64
_NUMERIC = "fiub"
_HEX = re.compile(rb"[0-9a-f]{64}")


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
            try:
                atomic_write_bytes(path, json.dumps({"identity": self.identity}, indent=1).encode())
            except OSError as exc:
                raise ScarceError(f"cache_dir {str(self.directory)!r} cannot be written: "
                                  f"{exc.strerror or exc}") from None

    def _add_to_index(self, shard: Path) -> None:
        arrays = read_shard(shard)
        if isinstance(arrays, str):
            _reject(shard, arrays)
            return
        for row, key in enumerate(arrays["keys"]):
            self._index[key.decode("ascii")] = (shard, row)

    def _drop(self, shard: Path, reason: str) -> None:
        _reject(shard, reason)
        self._index = {k: v for k, v in self._index.items() if v[0] != shard}

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, text: object) -> bool:
        return isinstance(text, str) and text_digest(text) in self._index

    def lookup(self, texts: Sequence[str]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Return ``(found, values)`` for ``texts``.

        ``found`` is a boolean mask; ``values`` maps each cached field to an array whose first axis
        runs over ``texts`` (rows of texts not found are zero). Empty when nothing is found. Each
        shard read is verified again (checksum, rows); one that fails is set aside with a warning
        and its texts count as not found, so they are recomputed.

        Raises
        ------
        ScarceError
            Two verified shards of this encoder hold different fields, shapes or dtypes.
        """
        where: dict[Path, list[tuple[int, int]]] = {}
        found = np.zeros(len(texts), dtype=bool)
        digests = [text_digest(text) for text in texts]
        for i, digest in enumerate(digests):
            hit = self._index.get(digest)
            if hit is not None:
                where.setdefault(hit[0], []).append((i, hit[1]))
        values: dict[str, np.ndarray] = {}
        layout: tuple[Path, dict[str, tuple[str, tuple[int, ...]]]] | None = None
        for shard, pairs in where.items():
            targets = np.array([p[0] for p in pairs])
            rows = np.array([p[1] for p in pairs])
            arrays = read_shard(shard)
            if not isinstance(arrays, str) and not all(
                    arrays["keys"][r].decode("ascii") == digests[t] for t, r in pairs):
                arrays = "its rows changed since the cache was opened"
            if isinstance(arrays, str):
                self._drop(shard, arrays)
                continue
            fields = {n: (a.dtype.str, a.shape[1:]) for n, a in arrays.items() if n != "keys"}
            if layout is None:
                layout = (shard, fields)
            elif fields != layout[1]:
                raise ScarceError(f"embedding cache shards {str(layout[0])!r} and {str(shard)!r} hold "
                                  f"different fields for one encoder ({layout[1]} and {fields}); delete "
                                  f"{str(self.directory)!r} to recompute its embeddings")
            for name, column in arrays.items():
                if name == "keys":
                    continue
                if name not in values:
                    values[name] = np.zeros((len(texts),) + column.shape[1:], dtype=column.dtype)
                values[name][targets] = column[rows]
            found[targets] = True
        return found, values

    def store(self, texts: Sequence[str], arrays: Mapping[str, np.ndarray]) -> Path:
        """Write one shard holding ``arrays`` (first axis = ``texts``) and its checksum, index it;
        returns its path."""
        reserved = sorted(set(arrays) & {"keys", CHECKSUM})
        if reserved:
            raise ScarceError(f"arrays must not contain a field named {reserved[0]!r} (reserved for the "
                              "text digests and the shard checksum)")
        columns = {name: np.ascontiguousarray(value) for name, value in arrays.items()}
        for name, value in columns.items():
            if value.dtype.kind not in _NUMERIC or value.shape[:1] != (len(texts),):
                raise ScarceError(f"cached field {name!r} must be a numeric array with {len(texts)} rows "
                                  f"(one per text); got dtype {value.dtype} and shape {value.shape}")
        keys = np.array([text_digest(t) for t in texts], dtype="S64")
        checksum = np.array(shard_checksum({"keys": keys, **columns}), dtype="S64")
        buffer = io.BytesIO()
        np.savez(buffer, keys=keys, **{CHECKSUM: checksum}, **columns)
        path = self.directory / f"shard-{uuid.uuid4().hex}.npz"
        try:
            atomic_write_bytes(path, buffer.getvalue())
        except OSError as exc:
            raise ScarceError(f"embedding cache shard {str(path)!r} cannot be written: "
                              f"{exc.strerror or exc}") from None
        for row, key in enumerate(keys):
            self._index[key.decode("ascii")] = (path, row)
        return path


def shard_checksum(arrays: Mapping[str, np.ndarray]) -> str:
    """sha256 over every array of a shard (name, dtype, shape and bytes, in name order)."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        value = np.ascontiguousarray(arrays[name])
        digest.update(json.dumps([name, value.dtype.str, list(value.shape)]).encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def _zip_problem(path: Path) -> str | None:
    """Refuse a shard whose size or declared member sizes exceed the bound, or that is compressed."""
    size = path.stat().st_size
    if size > MAX_SHARD_BYTES:
        return f"it is {size:,} bytes, more than the {MAX_SHARD_BYTES:,} a shard may have"
    with zipfile.ZipFile(path) as archive:
        members = archive.infolist()
    if len(members) > _MAX_MEMBERS:
        return f"it holds {len(members)} arrays"
    declared = sum(m.file_size for m in members)
    if declared > MAX_SHARD_BYTES:
        return f"its arrays declare {declared:,} bytes, more than the {MAX_SHARD_BYTES:,} a shard may have"
    if any(m.compress_type != zipfile.ZIP_STORED for m in members):
        return "it is compressed (shards are written uncompressed)"
    return None


def read_shard(path: Path) -> dict[str, np.ndarray] | str:
    """A shard's arrays (``keys`` and the fields) after verifying it; a reason string if it fails.

    Verified: the size bounds, the checksum over every array, ``keys`` (64 hex digits each) and
    one row per key in every numeric field.
    """
    try:
        problem = _zip_problem(path)
        if problem is not None:
            return problem
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except Exception as exc:  # noqa: BLE001 - any failure to parse an untrusted file: unreadable
        return f"it is not a readable NumPy archive ({type(exc).__name__}: {exc})"
    stated = arrays.pop(CHECKSUM, None)
    if stated is None:
        return "it carries no checksum (written by an older version, or not a shard)"
    if stated.shape != () or stated.dtype != np.dtype("S64") or \
            stated.item().decode("ascii", "replace") != shard_checksum(arrays):
        return "its checksum does not match its contents (the file was changed or damaged)"
    keys = arrays.get("keys")
    if keys is None or keys.dtype != np.dtype("S64") or keys.ndim != 1 or \
            not all(_HEX.fullmatch(k) for k in keys.tolist()):
        return "its 'keys' are not 64-digit hex text digests"
    for name, value in arrays.items():
        if name != "keys" and (value.dtype.kind not in _NUMERIC or value.shape[:1] != keys.shape):
            return f"field {name!r} has dtype {value.dtype} and shape {value.shape} for {keys.size} keys"
    return arrays


def _reject(shard: Path, reason: str) -> None:
    """Warn about a shard that is not used and set it aside (``.rejected``) so it warns once."""
    aside = shard.with_name(shard.name + ".rejected")
    try:
        os.replace(shard, aside)
        where = f"moved to {aside.name}"
    except OSError:
        where = "left in place"
    warnings.warn(f"embedding cache shard {str(shard)!r} is not used: {reason}; it is {where} and its "
                  "texts are recomputed", ScarceWarning, stacklevel=3)


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
