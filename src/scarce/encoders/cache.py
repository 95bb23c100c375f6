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
recomputes only the texts with no shard. Opening the cache reads only each shard's ``keys`` and
checksum (after the size bounds) to rebuild the index (digest -> shard, row); a shard's other
arrays are read, and its checksum and rows verified, the first time one of its texts is looked
up. The verified state is remembered with the file's identity (inode, size, modification time),
so a shard is hashed once per cache object unless the file changes on disk.

A shard without a checksum member was written before shards carried one: if it passes the
structural checks (hex keys, one row per key in every numeric field, the size bounds) it is kept
and rewritten atomically with its checksum, and one warning per cache directory says how many
were upgraded. A shard that fails a check, or whose checksum is present and wrong, is renamed
``*.rejected`` (one :class:`~scarce.errors.ScarceWarning` per opening or lookup) and its texts
are recomputed, so a damaged or edited shard never supplies numbers. Nothing is pickled
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
import zipfile
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Union

import numpy as np

from scarce._atomic import atomic_write_bytes, remove_stale_temporaries
from scarce.checks import check_path, check_positive_int, warn_user
from scarce.datasets._inputs import open_regular
from scarce.errors import ScarceError, ScarceWarning, show

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
#: Member names a field cannot take: the text digests and the checksum.
_RESERVED = ("keys", CHECKSUM)
_HEX = re.compile(rb"[0-9a-f]{64}")
#: How many set-aside shards a warning names before it says "and N more".
_NAMED = 3

#: A file's identity on disk: (device, inode, size, modification time in ns).
Signature = tuple[int, int, int, int]


def text_digest(text: str, name: str = "text") -> str:
    """The sha256 hex digest of ``text`` encoded as UTF-8 (the cache key of a text).

    A value that is not a ``str``, or a string that UTF-8 cannot encode (a lone surrogate such as
    ``"\\ud800"``, which no real text holds), is a :class:`ScarceError` naming ``name``.
    """
    if not isinstance(text, str):
        raise ScarceError(f"{name} must be a str, got {show(text)} ({type(text).__name__})")
    try:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()
    except UnicodeEncodeError as exc:
        raise ScarceError(f"{name} is not valid Unicode text: {exc.reason} at position {exc.start} "
                          f"({show(text)}); allowed: strings UTF-8 can encode") from None


def _check_texts(texts: object, name: str = "texts") -> list[str]:
    """``texts`` as a list, each checked as :func:`text_digest` does; one bare string is refused
    (its characters would be taken as the texts)."""
    if isinstance(texts, (str, bytes, Mapping)) or not isinstance(texts, Iterable):
        raise ScarceError(f"{name} must be a sequence of strings (a list, say), got {show(texts)} "
                          f"({type(texts).__name__})")
    items = list(texts)
    for i, text in enumerate(items):
        text_digest(text, f"{name}[{i}]")
    return items


@dataclass
class _ShardState:
    """What the cache knows of one indexed shard: the checksum its arrays must have and, once they
    were hashed and found to match, the signature of the file that was verified (a file replaced
    or rewritten since, with a new inode, size or modification time, is verified again)."""

    checksum: str
    verified: Signature | None = None


@dataclass
class _Opened:
    """What opening a cache directory found: shards set aside, and legacy shards kept."""

    rejected: list[tuple[Path, str]]
    upgraded: int = 0
    not_rewritten: int = 0
    rewrite_error: str = ""


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

    Warns
    -----
    ScarceWarning
        Once per opening when shards were set aside, and once when shards written without a
        checksum (by an older version) were kept and upgraded.
    """

    def __init__(self, directory: PathLike, identity: str):
        if not isinstance(identity, str) or not identity:
            raise ScarceError(f"identity must be a non-empty string, got {identity!r}")
        root = check_path("cache_dir", directory)
        self.identity = identity
        self.directory = root / text_digest(identity, "identity")[:24]
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ScarceError(f"cache_dir {str(root)!r} cannot be created or written: {exc}") from None
        self._write_identity()
        remove_stale_temporaries(self.directory)  # shards whose write an earlier run was killed in
        self._index: dict[str, tuple[Path, int]] = {}
        self._shards: dict[Path, _ShardState] = {}
        opened = _Opened(rejected=[])
        for shard in sorted(self.directory.glob(_SHARD_GLOB)):
            self._add_to_index(shard, opened)
        if opened.rejected:
            warn_user(_rejected_message(self.directory, opened.rejected), ScarceWarning)
        if opened.upgraded:
            warn_user(_upgraded_message(self.directory, opened), ScarceWarning)

    def _write_identity(self) -> None:
        """Write ``identity.json`` (the identity in clear, for a person looking at the cache) once."""
        path = self.directory / "identity.json"
        if not path.exists():
            try:
                atomic_write_bytes(path, json.dumps({"identity": self.identity}, indent=1).encode())
            except OSError as exc:
                raise ScarceError(f"cache_dir {str(self.directory)!r} cannot be written: "
                                  f"{exc.strerror or exc}") from None

    def _add_to_index(self, shard: Path, opened: _Opened) -> None:
        """Index ``shard`` from its keys and checksum alone; upgrade it if it has no checksum."""
        head = _read_members(shard, ("keys", CHECKSUM))
        if isinstance(head, str):
            opened.rejected.append((shard, _set_aside(shard, head)))
            return
        keys = head[0].get("keys")
        problem = _keys_problem(keys) or _checksum_problem(head[0].get(CHECKSUM))
        if problem is not None:
            opened.rejected.append((shard, _set_aside(shard, problem)))
            return
        if CHECKSUM in head[0]:
            state = _ShardState(head[0][CHECKSUM].item().decode("ascii"))
        else:
            state = _upgrade(shard, opened)
            if state is None:
                return
        self._shards[shard] = state
        for row, key in enumerate(keys.tolist()):
            self._index[key.decode("ascii")] = (shard, row)

    def _verified_arrays(self, shard: Path) -> dict[str, np.ndarray] | str:
        """``shard``'s arrays, checked against its checksum unless this very file was verified."""
        state = self._shards[shard]
        read = _read_members(shard)
        if isinstance(read, str):
            return read
        arrays, signature = read
        stated = arrays.pop(CHECKSUM, None)
        problem = _checksum_problem(stated) or _structure_problem(arrays)
        if problem is not None:
            return problem
        expected = state.checksum if stated is None else stated.item().decode("ascii")
        if signature != state.verified:
            if shard_checksum(arrays) != expected:
                return "its checksum does not match its contents (the file was changed or damaged)"
            state.checksum, state.verified = expected, signature
        return arrays

    def _drop(self, shard: Path, reason: str) -> tuple[Path, str]:
        self._index = {k: v for k, v in self._index.items() if v[0] != shard}
        self._shards.pop(shard, None)
        return shard, _set_aside(shard, reason)

    def __len__(self) -> int:
        """The number of texts indexed (a shard's rows are verified when first looked up)."""
        return len(self._index)

    def __contains__(self, text: object) -> bool:
        return isinstance(text, str) and text_digest(text) in self._index

    def lookup(self, texts: Sequence[str]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Return ``(found, values)`` for ``texts``.

        ``found`` is a boolean mask; ``values`` maps each cached field to an array whose first axis
        runs over ``texts`` (rows of texts not found are zero). Empty when nothing is found. A
        shard is verified (checksum, rows) when first read, and again only if its file changed;
        one that fails is set aside (one warning per lookup) and its texts count as not found,
        so they are recomputed.

        Raises
        ------
        ScarceError
            Two verified shards of this encoder hold different fields, shapes or dtypes.
        """
        where: dict[Path, list[tuple[int, int]]] = {}
        texts = _check_texts(texts)
        found = np.zeros(len(texts), dtype=bool)
        digests = [text_digest(text) for text in texts]
        for i, digest in enumerate(digests):
            hit = self._index.get(digest)
            if hit is not None:
                where.setdefault(hit[0], []).append((i, hit[1]))
        values: dict[str, np.ndarray] = {}
        layout: tuple[Path, dict[str, tuple[str, tuple[int, ...]]]] | None = None
        rejected = []
        for shard, pairs in where.items():
            targets = np.array([p[0] for p in pairs])
            rows = np.array([p[1] for p in pairs])
            arrays = self._verified_arrays(shard)
            if not isinstance(arrays, str) and not _rows_match(arrays["keys"], pairs, digests):
                arrays = "its rows changed since the cache was opened"
            if isinstance(arrays, str):
                rejected.append(self._drop(shard, arrays))
                continue
            fields = {n: (a.dtype.str, a.shape[1:]) for n, a in arrays.items() if n != "keys"}
            if layout is None:
                layout = (shard, fields)
            elif fields != layout[1]:
                raise ScarceError(f"embedding cache shards {str(layout[0])!r} and {str(shard)!r} hold "
                                  f"different fields for one encoder ({layout[1]} and {fields}); delete "
                                  f"{str(self.directory)!r} to recompute its embeddings")
            _scatter(values, arrays, targets, rows, len(texts))
            found[targets] = True
        if rejected:
            warn_user(_rejected_message(self.directory, rejected), ScarceWarning)
        return found, values

    def store(self, texts: Sequence[str], arrays: Mapping[str, np.ndarray]) -> Path:
        """Write one shard holding ``arrays`` (first axis = ``texts``) and its checksum, index it;
        returns its path."""
        texts = _check_texts(texts)
        columns = {name: np.ascontiguousarray(value) for name, value in
                   _checked_fields(arrays, len(texts), "arrays", "cached field").items()}
        keys = np.array([text_digest(t) for t in texts], dtype="S64")
        path = self.directory / f"shard-{uuid.uuid4().hex}.npz"
        try:
            checksum = _write_shard(path, {"keys": keys, **columns})
            self._shards[path] = _ShardState(checksum, _signature(os.stat(path)))
        except OSError as exc:
            raise ScarceError(f"embedding cache shard {str(path)!r} cannot be written: "
                              f"{exc.strerror or exc}") from None
        for row, key in enumerate(keys.tolist()):
            self._index[key.decode("ascii")] = (path, row)
        return path


def _checked_fields(arrays: object, n: int, source: str, what: str) -> dict[str, np.ndarray]:
    """The fields of ``arrays`` (``source``) as arrays: a mapping with at least one field, each named by a
    string other than :data:`_RESERVED` and holding a numeric array of ``n`` rows (one per text)."""
    if not isinstance(arrays, Mapping) or not arrays:
        raise ScarceError(f"{source} must map at least one field name to an array (a shard with none would mark "
                          f"its texts found without values), got {show(arrays)} ({type(arrays).__name__})")
    checked = {}
    for name, value in arrays.items():
        if not isinstance(name, str) or name in _RESERVED:
            raise ScarceError(f"{source}: a field name must be a string other than 'keys' and "
                              f"{CHECKSUM!r} (reserved for the text digests and the shard checksum), got {show(name)}")
        try:
            array = np.asarray(value)
        except (TypeError, ValueError, RuntimeError) as exc:  # ragged lists, tensors numpy cannot read
            raise ScarceError(f"{what} {name!r} is not an array ({type(exc).__name__}: {exc})") from None
        if array.dtype.kind not in _NUMERIC or array.shape[:1] != (n,):
            raise ScarceError(f"{what} {name!r} must be a numeric array with {n} rows (one per text); got dtype "
                              f"{array.dtype} and shape {array.shape}")
        checked[name] = array
    return checked


def _rows_match(keys: np.ndarray, pairs: Sequence[tuple[int, int]], digests: Sequence[str]) -> bool:
    """Whether row ``r`` of ``keys`` still holds the digest of text ``t`` for every ``(t, r)``."""
    return all(r < keys.size and keys[r].decode("ascii") == digests[t] for t, r in pairs)


def _scatter(values: dict[str, np.ndarray], arrays: Mapping[str, np.ndarray], targets: np.ndarray,
             rows: np.ndarray, n: int) -> None:
    """Copy rows ``rows`` of every field of ``arrays`` into rows ``targets`` of ``values``."""
    for name, column in arrays.items():
        if name == "keys":
            continue
        if name not in values:
            values[name] = np.zeros((n,) + column.shape[1:], dtype=column.dtype)
        values[name][targets] = column[rows]


def shard_checksum(arrays: Mapping[str, np.ndarray]) -> str:
    """sha256 over every array of a shard (name, dtype, shape and bytes, in name order)."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        value = np.ascontiguousarray(arrays[name])
        digest.update(json.dumps([name, value.dtype.str, list(value.shape)]).encode())
        digest.update(value.tobytes())
    return digest.hexdigest()


def _write_shard(path: Path, arrays: Mapping[str, np.ndarray]) -> str:
    """Write ``arrays`` and their checksum to ``path`` atomically; returns the checksum."""
    checksum = shard_checksum(arrays)
    buffer = io.BytesIO()
    members = {**arrays, CHECKSUM: np.array(checksum, dtype="S64")}
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, value in members.items():  # as np.savez writes, for any field name ("file" too)
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)
    atomic_write_bytes(path, buffer.getvalue())
    return checksum


def _signature(stat: os.stat_result) -> Signature:
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


def _zip_problem(handle: BinaryIO, size: int) -> str | None:
    """Refuse a shard whose size or declared member sizes exceed the bound, or that is compressed."""
    if size > MAX_SHARD_BYTES:
        return f"it is {size:,} bytes, more than the {MAX_SHARD_BYTES:,} a shard may have"
    with zipfile.ZipFile(handle) as archive:
        members = archive.infolist()
    if len(members) > _MAX_MEMBERS:
        return f"it holds {len(members)} arrays"
    declared = sum(m.file_size for m in members)
    if declared > MAX_SHARD_BYTES:
        return f"its arrays declare {declared:,} bytes, more than the {MAX_SHARD_BYTES:,} a shard may have"
    if any(m.compress_type != zipfile.ZIP_STORED for m in members):
        return "it is compressed (shards are written uncompressed)"
    return None


def _read_members(path: Path, names: Collection[str] | None = None
                  ) -> tuple[dict[str, np.ndarray], Signature] | str:
    """The arrays ``names`` of a shard (all when None; absent ones are left out) and the signature
    of the file they were read from, after the size bounds; a reason string if it cannot be read.

    Only a regular file is read (:func:`scarce.datasets._inputs.open_regular`): a named pipe would
    wait forever for a writer and a device such as ``/dev/zero`` would be read until memory runs out.
    """
    try:
        handle = open_regular(path, "the shard")
    except ScarceError as exc:  # gone, unreadable, or a directory, pipe or device
        return str(exc)
    try:
        with handle:
            status = os.fstat(handle.fileno())
            problem = _zip_problem(handle, status.st_size)
            if problem is not None:
                return problem
            handle.seek(0)
            with np.load(handle, allow_pickle=False) as archive:
                wanted = archive.files if names is None else [n for n in archive.files if n in names]
                return {name: archive[name] for name in wanted}, _signature(status)
    except Exception as exc:  # noqa: BLE001 - any failure to parse an untrusted file: unreadable
        return f"it is not a readable NumPy archive ({type(exc).__name__}: {exc})"


def _keys_problem(keys: object) -> str | None:
    if not isinstance(keys, np.ndarray) or keys.dtype != np.dtype("S64") or keys.ndim != 1 or \
            not all(_HEX.fullmatch(k) for k in keys.tolist()):
        return "its 'keys' are not 64-digit hex text digests"
    return None


def _checksum_problem(stated: np.ndarray | None) -> str | None:
    """A checksum member that is present but is not one 64-digit hex digest; None if absent or sound."""
    if stated is None:
        return None
    if stated.shape != () or stated.dtype != np.dtype("S64") or not _HEX.fullmatch(stated.item()):
        return "its checksum member is not a 64-digit hex digest (the file was changed or damaged)"
    return None


def _structure_problem(arrays: Mapping[str, np.ndarray]) -> str | None:
    """What is wrong with a shard's arrays (checksum member removed), or None: hex ``keys``, at least
    one field, and every field numeric with one row per key."""
    keys = arrays.get("keys")
    problem = _keys_problem(keys)
    if problem is not None:
        return problem
    if len(arrays) == 1:
        return "it holds no field besides 'keys'"
    for name, value in arrays.items():
        if name != "keys" and (value.dtype.kind not in _NUMERIC or value.shape[:1] != keys.shape):
            return f"field {name!r} has dtype {value.dtype} and shape {value.shape} for {keys.size} keys"
    return None


def read_shard(path: Path) -> dict[str, np.ndarray] | str:
    """A shard's arrays (``keys`` and the fields) after verifying it; a reason string if it fails.

    Verified: the size bounds, the checksum over every array, ``keys`` (64 hex digits each) and
    one row per key in every numeric field. A shard without a checksum fails here;
    :class:`EmbeddingCache` upgrades such legacy shards when it opens their directory.
    """
    read = _read_members(Path(path))
    if isinstance(read, str):
        return read
    arrays = read[0]
    stated = arrays.pop(CHECKSUM, None)
    if stated is None:
        return "it carries no checksum (written by an older version, or not a shard)"
    if _checksum_problem(stated) is not None or stated.item().decode("ascii") != shard_checksum(arrays):
        return "its checksum does not match its contents (the file was changed or damaged)"
    return _structure_problem(arrays) or arrays


def _upgrade(shard: Path, opened: _Opened) -> _ShardState | None:
    """Keep a shard written without a checksum if its structure is sound, rewriting it with one.

    Returns its state (verified), or None when it was set aside. When it cannot be rewritten
    (a read-only cache), the checksum computed now is kept in memory and checked on lookup.
    """
    read = _read_members(shard)
    if isinstance(read, str):
        opened.rejected.append((shard, _set_aside(shard, read)))
        return None
    arrays, signature = read
    problem = _structure_problem(arrays)
    if problem is not None:
        opened.rejected.append((shard, _set_aside(shard, problem)))
        return None
    opened.upgraded += 1
    try:
        checksum = _write_shard(shard, arrays)
        signature = _signature(os.stat(shard))
    except OSError as exc:
        opened.not_rewritten += 1
        opened.rewrite_error = str(exc.strerror or exc)
        checksum = shard_checksum(arrays)
    return _ShardState(checksum, signature)


def _set_aside(shard: Path, reason: str) -> str:
    """Rename a shard that is not used to ``*.rejected`` (so it is reported once); returns the
    reason with where the shard now is."""
    aside = shard.with_name(shard.name + ".rejected")
    try:
        os.replace(shard, aside)
        return f"{reason}; moved to {aside.name}"
    except OSError:
        return f"{reason}; left in place"


def _rejected_message(directory: Path, rejected: Sequence[tuple[Path, str]]) -> str:
    named = "; ".join(f"{shard.name!r}: {why}" for shard, why in rejected[:_NAMED])
    more = f"; and {len(rejected) - _NAMED} more" if len(rejected) > _NAMED else ""
    return (f"{len(rejected)} embedding cache shard(s) in {str(directory)!r} are not used and their texts "
            f"are recomputed: {named}{more}")


def _upgraded_message(directory: Path, opened: _Opened) -> str:
    message = (f"{opened.upgraded} embedding cache shard(s) in {str(directory)!r} carry no checksum (written "
               "by an older version of scarce); they passed the structural checks and are kept")
    if opened.not_rewritten:
        return (f"{message}, but {opened.not_rewritten} could not be rewritten with a checksum "
                f"({opened.rewrite_error}) and are upgraded again at the next opening")
    return f"{message}, rewritten with a checksum"


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
    texts = _check_texts(texts)
    unique = _unique(texts)
    found, values = cache.lookup(unique) if cache is not None else (np.zeros(len(unique), dtype=bool), {})
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
    """The encoder's output for a batch of ``n`` texts, checked as a shard's fields are, and finite."""
    checked = _checked_fields(arrays, n, "the encoder's output", "the encoder's field")
    for name, a in checked.items():
        if np.issubdtype(a.dtype, np.floating) and not np.isfinite(a).all():
            bad = np.flatnonzero(~np.isfinite(a.reshape(n, -1)).all(axis=1))
            raise ScarceError(f"the encoder produced non-finite values (NaN or inf) in {name!r} for "
                              f"{bad.size} of {n} texts (first at batch row {int(bad[0])}); "
                              "embeddings must be finite - check the model weights and dtype")
    return checked
