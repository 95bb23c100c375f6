"""The LLM corpus table on disk, its checks, and its attack groups.

The table format is the corpus schema of :mod:`scarce.datasets.jailbreakbench` (one row per
conversation: ``record_id``, ``behavior_id``, ``harmful``, ``method``, ``target_model``,
``turn``, ``prompt``, ``response``, ``judge_score``, ``jailbroken``, and after embedding the
``embedding`` vector). It is stored as Parquet (:func:`write_corpus`, atomic) and read from
Parquet or JSON Lines (:func:`read_corpus`; one JSON object per line with the same keys,
``embedding`` a list of numbers). Only ``record_id``, ``method``, ``target_model``,
``jailbroken`` and, for the estimators, ``embedding`` are required; missing optional columns are
filled (``harmful`` from ``method != "none"``, ``turn`` with ``<NA>``, texts with ``""``).

Records with ``method == "none"`` are the *benign* users of the fleet. The other records are
adversarial and fall into *groups*: the attack turn (``"turn=3"``) when the corpus has turns,
otherwise the (attack method, target model) pair (``"PAIR/vicuna-13b-v1.5"``). A whole method
can also be used as one pooled group, named by the method alone (``"GCG"``).
"""

from __future__ import annotations

import io
import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Union

import numpy as np
import pandas as pd

from scarce._atomic import atomic_write_bytes
from scarce.checks import check_path
from scarce.datasets.jailbreakbench import CORPUS_COLUMNS, NO_VALUE
from scarce.datasets.jsonlines import DuplicateKeyError, unicode_problem, unique_keys
from scarce.errors import ScarceError, unknown_name_error

__all__ = [
    "BENIGN",
    "MAX_CORPUS_BYTES",
    "benign_mask",
    "check_corpus",
    "check_corpus_output",
    "group_mask",
    "group_names",
    "read_corpus",
    "record_groups",
    "value_problem",
    "write_corpus",
]

PathLike = Union[str, "os.PathLike[str]"]
BENIGN = NO_VALUE
_REQUIRED = ("record_id", "method", "target_model", "jailbroken")
_FILL: dict[str, Any] = {"behavior_id": "", "prompt": "", "response": "", "attack_type": "",
                         "category": "", "judge_score": np.nan}


#: A corpus file larger than this is refused before it is read (the paper's corpus with 4096-d
#: judge embeddings is about 40 MB as Parquet and 150 MB as JSON Lines); Parquet is also refused
#: when its row groups declare more than this once decoded.
MAX_CORPUS_BYTES = 4 << 30
#: The longest JSON Lines record read (one conversation with its embedding).
MAX_LINE_BYTES = 64 << 20
#: Parquet schema-metadata key under which a corpus file records what made its embeddings.
EMBEDDING_METADATA = b"scarce.embedding"
#: Bound on that metadata (a JSON object of a few hundred bytes in practice).
MAX_EMBEDDING_METADATA_BYTES = 1 << 16


def read_corpus(path: PathLike) -> pd.DataFrame:
    """A corpus table from a ``.parquet`` file or a JSON Lines file (``.jsonl`` / ``.json``).

    The file's size (and for Parquet the decoded size its metadata declares) is checked against
    :data:`MAX_CORPUS_BYTES` before it is read; Parquet pages that carry a CRC (every file
    :func:`write_corpus` writes) are verified; every value is checked against its column's type.

    Raises
    ------
    ScarceError
        A missing or oversized file, an unknown suffix, a file that is not Parquet or not JSON
        Lines (naming the line), a value of the wrong type (naming the row or line), or a table
        that fails :func:`check_corpus`.
    """
    path = check_path("corpus path", path)
    try:
        regular = path.is_file()
    except OSError as exc:  # a name longer than the file system allows
        raise ScarceError(f"corpus file {str(path)!r} cannot be read: {exc.strerror or exc}") from None
    if not regular:
        raise ScarceError(f"corpus file {str(path)!r} does not exist (or is not a regular file)")
    suffix = path.suffix.lower()
    if suffix not in (".parquet", ".jsonl", ".json"):
        raise ScarceError(f"corpus file {str(path)!r}: unknown suffix {suffix!r}; use .parquet, "
                          ".jsonl or .json (JSON Lines)")
    size = path.stat().st_size
    if size > MAX_CORPUS_BYTES:
        raise ScarceError(f"corpus file {str(path)!r} is {size:,} bytes, more than the {MAX_CORPUS_BYTES:,} "
                          "bytes a corpus table may have; it is not read")
    frame = _read_parquet(path) if suffix == ".parquet" else _read_jsonl(path)
    return check_corpus(frame, source=f"corpus file {str(path)!r}")


def _read_parquet(path: Path) -> pd.DataFrame:
    import pyarrow.parquet as pq

    expected = "a corpus table written by 'scarce llm embed' (Parquet)"
    try:
        with pq.ParquetFile(path) as parquet:
            metadata, names = parquet.metadata, parquet.schema_arrow.names
        declared = sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups))
    except Exception as exc:  # noqa: BLE001 - any failure to parse an untrusted footer means "not Parquet"
        raise ScarceError(f"corpus file {str(path)!r} is not a readable Parquet file "
                          f"({type(exc).__name__}: {exc}); expected {expected}") from None
    if declared > MAX_CORPUS_BYTES:
        raise ScarceError(f"corpus file {str(path)!r} declares {declared:,} bytes of decoded data, more "
                          f"than the {MAX_CORPUS_BYTES:,} bytes a corpus table may have; it is not read")
    try:
        frame = pd.read_parquet(path, page_checksum_verification=True)
    except Exception as exc:  # noqa: BLE001 - pyarrow and pandas raise many types on damaged data
        raise ScarceError(f"corpus file {str(path)!r}: its Parquet data cannot be decoded "
                          f"({type(exc).__name__}: {exc}); expected {expected}") from None
    _check_names(frame, names, path)
    embedding = _embedding_metadata(metadata.metadata or {}, path)
    if embedding is not None:
        frame.attrs["embedding"] = embedding
    return frame


def _check_names(frame: pd.DataFrame, names: list[str], path: Path) -> None:
    """Refuse a file whose pandas metadata names other columns than its schema does.

    pandas takes the columns' names from the metadata it wrote beside the schema; a damaged byte
    there renames a column (``embedding`` read back as ``emn%dding``) without any error.
    """
    index = {name for name in frame.index.names if name is not None}
    schema = {name for name in names if name not in index and not name.startswith("__index_level_")}
    if set(map(str, frame.columns)) != schema:
        raise ScarceError(f"corpus file {str(path)!r}: the column names its pandas metadata gives "
                          f"({sorted(map(str, frame.columns))}) are not its schema's ({sorted(schema)}); the file "
                          "is damaged: write the corpus again with 'scarce llm embed'")


def _embedding_metadata(metadata: dict[bytes, bytes], path: Path) -> dict[str, Any] | None:
    """What made a corpus file's embeddings, from its Parquet metadata (JSON only, never code)."""
    raw = metadata.get(EMBEDDING_METADATA)
    if raw is None:
        return None
    try:
        if len(raw) > MAX_EMBEDDING_METADATA_BYTES:
            raise ValueError(f"{len(raw):,} bytes, more than {MAX_EMBEDDING_METADATA_BYTES:,}")
        value = json.loads(raw.decode("utf-8"))
        if not isinstance(value, dict):
            raise ValueError(f"a JSON {type(value).__name__}, not an object")
    except (ValueError, RecursionError) as exc:
        raise ScarceError(f"corpus file {str(path)!r}: its embedding metadata is damaged ({exc}); "
                          "write the corpus again with 'scarce llm embed'") from None
    return value


def _read_jsonl(path: Path) -> pd.DataFrame:
    """The records of a JSON Lines corpus; an unreadable file is a ScarceError naming it."""
    rows = []
    where = f"corpus file {str(path)!r}"
    try:
        with path.open("rb") as handle:
            for number in range(1, 1 << 62):
                raw = handle.readline(MAX_LINE_BYTES + 1)
                if not raw:
                    break
                if len(raw) > MAX_LINE_BYTES:
                    raise ScarceError(f"{where}, line {number}: longer than {MAX_LINE_BYTES:,} bytes; JSON "
                                      "Lines holds one record (a JSON object) per line")
                record = _json_record(raw, f"{where}, line {number}")
                if record is not None:
                    rows.append(record)
    except OSError as exc:
        raise ScarceError(f"{where} cannot be read: {exc.strerror or exc}") from None
    return pd.DataFrame(rows)


def _json_record(raw: bytes, where: str) -> dict[str, Any] | None:
    """One JSON Lines record checked against the corpus schema; None for a blank line.

    Parsed under the readers' shared rules (:mod:`scarce.datasets.jsonlines`): a key named twice
    in one object and text that is not valid Unicode (a lone surrogate escape) are refused here,
    not kept last-wins or left to fail when the text is embedded or written.
    """
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScarceError(f"{where}: not UTF-8 text (byte {exc.start} of the line); JSON Lines is "
                          "UTF-8") from None
    if not line.strip():
        return None
    try:
        record = json.loads(line, object_pairs_hook=unique_keys)
    except DuplicateKeyError as exc:
        raise ScarceError(f"{where}: {exc}") from None
    except RecursionError:
        raise ScarceError(f"{where}: JSON nested too deeply; expected one flat record per line") from None
    except ValueError as exc:  # JSONDecodeError, or an integer too long to convert
        raise ScarceError(f"{where}: not a JSON object ({getattr(exc, 'msg', exc)}); JSON Lines holds "
                          "one record per line") from None
    if not isinstance(record, dict):
        raise ScarceError(f"{where}: expected a JSON object (one record), got a JSON "
                          f"{type(record).__name__}")
    problem = unicode_problem(raw, record)
    if problem is not None:
        raise ScarceError(f"{where}: {problem}")
    for column, value in record.items():
        problem = value_problem(column, value)
        if problem is None and column == "embedding":
            problem = _vector_problem(value)
        if problem is not None:
            raise ScarceError(f"{where}: {column} {problem}")
    return record


def check_corpus_output(path: Any) -> Path:
    """Check, before any work, that a corpus table can be written to ``path``; returns it.

    Raises
    ------
    ScarceError
        An empty path, a suffix other than ``.parquet``, an existing directory, or a place
        under a file or in a directory that is not writable.
    """
    out = check_path("the corpus output path", path)
    if out.suffix.lower() != ".parquet":
        raise ScarceError(f"corpus output {str(out)!r}: the corpus is written as Parquet, so the name "
                          "must end in .parquet")
    try:
        if out.is_dir():
            raise ScarceError(f"corpus output {str(out)!r} is an existing directory; name a file")
        ancestor = next((parent for parent in out.parents if parent.exists()), None)
    except OSError as exc:  # a name longer than the file system allows
        raise ScarceError(f"corpus output {str(out)!r} cannot be used: {exc.strerror or exc}; allowed: a "
                          "file path whose every name the file system accepts") from None
    if ancestor is not None:
        if not ancestor.is_dir():
            raise ScarceError(f"corpus output {str(out)!r}: {str(ancestor)!r} is not a directory")
        if not os.access(ancestor, os.W_OK | os.X_OK):
            raise ScarceError(f"corpus output {str(out)!r}: directory {str(ancestor)!r} is not writable")
    return out


def write_corpus(frame: pd.DataFrame, path: PathLike) -> Path:
    """Write a corpus table as Parquet, atomically; returns the path.

    ``frame.attrs["embedding"]`` (what :func:`~scarce.applications.llm.embedding.embed_corpus`
    records: the encoder, its identity with the rendering of the conversation, the dimension) is
    kept in the file's metadata as JSON, and :func:`read_corpus` gives it back in ``attrs``.

    Raises
    ------
    ScarceError
        A table that fails :func:`check_corpus`, or a path :func:`check_corpus_output` refuses.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = check_corpus_output(path)
    frame = check_corpus(frame)
    buffer = io.BytesIO()
    out = frame.copy()
    out.attrs = {}  # pandas attrs do not round-trip through pyarrow reliably; keep the table plain
    table = pa.Table.from_pandas(out, preserve_index=False)
    embedding = frame.attrs.get("embedding")
    if embedding:  # what made the embeddings (encoder, identity with its rendering, dimension)
        table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                               EMBEDDING_METADATA: json.dumps(embedding, sort_keys=True).encode()})
    pq.write_table(table, buffer, write_page_checksum=True)  # verified by read_corpus
    try:
        atomic_write_bytes(path, buffer.getvalue())
    except OSError as exc:
        raise ScarceError(f"corpus output {str(path)!r} cannot be written: {exc.strerror or exc}") from None
    return path


def check_corpus(frame: Any, *, require_embedding: bool = False, source: str = "corpus") -> pd.DataFrame:
    """Validate a corpus table and fill its optional columns; returns a checked copy.

    Raises
    ------
    ScarceError
        Not a table, missing required columns, no records, duplicated record ids, a value of the
        wrong type (labels that are not booleans, texts that are not strings, ...; the message
        names the row, the record id and the column), or (``require_embedding``) a missing,
        ragged or non-finite embedding.
    """
    if not isinstance(frame, pd.DataFrame):
        raise ScarceError(f"{source} must be a pandas DataFrame in the corpus schema, got "
                          f"{type(frame).__name__}")
    missing = [c for c in _REQUIRED if c not in frame.columns]
    if missing:
        raise ScarceError(f"{source} lacks column(s) {missing}; a corpus table needs "
                          f"{list(_REQUIRED)} (see scarce.applications.llm.corpus)")
    if len(frame) == 0:
        raise ScarceError(f"{source} has no records")
    out = frame.copy()
    out.attrs = dict(frame.attrs)
    _check_values(out, source)
    duplicated = out["record_id"].astype(str).duplicated()
    if duplicated.any():
        raise ScarceError(f"{source}: record_id must be unique; {out['record_id'][duplicated].iloc[0]!r} "
                          "repeats")
    out["jailbroken"] = out["jailbroken"].astype(bool)
    if "harmful" in out.columns:
        out["harmful"] = out["harmful"].astype(bool)
    for column in ("method", "target_model"):
        out[column] = out[column].fillna(NO_VALUE).astype(str)
    if "harmful" not in out.columns:
        out["harmful"] = out["method"] != BENIGN
    if "turn" not in out.columns:
        out["turn"] = pd.array([pd.NA] * len(out), dtype="Int64")
    out["turn"] = out["turn"].astype("Int64")
    for column, value in _FILL.items():
        if column not in out.columns:
            out[column] = value
    order = [c for c in CORPUS_COLUMNS if c in out.columns]
    out = out[order + [c for c in out.columns if c not in order]]
    if require_embedding:
        from scarce.applications.llm.embedding import embedding_matrix

        embedding_matrix(out)  # raises on a missing, ragged or non-finite embedding
    return out


def _is_null(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, (float, np.floating)) and math.isnan(value))


def _is_flag(value: Any) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return True
    return isinstance(value, (int, float, np.integer, np.floating)) and value in (0, 1)


#: What each column's values must be (``value_problem``); other columns are not checked.
_KINDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "record_id": ("a string or an integer", lambda v: isinstance(v, str) or (
        isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)))),
    "jailbroken": ("True/False (or 1/0)", _is_flag),
    "harmful": ("True/False (or 1/0)", _is_flag),
    "turn": ("an integer or null", lambda v: _is_null(v) or (
        isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
        and math.isfinite(v) and float(v).is_integer() and abs(v) < 2 ** 53)),
    "judge_score": ("a number or null", lambda v: _is_null(v) or (
        isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)))),
    **{c: ("a string or null", lambda v: _is_null(v) or isinstance(v, str))
       for c in ("method", "target_model", "behavior_id", "prompt", "response", "attack_type", "category")},
}


def value_problem(column: str, value: Any) -> str | None:
    """What is wrong with ``value`` in ``column`` of a corpus record (None: nothing)."""
    kind = _KINDS.get(column)
    if kind is None or kind[1](value):
        return None
    return f"must be {kind[0]}, got {_shown(value)}"


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{text[:60]}... ({type(value).__name__})" if len(text) > 60 else f"{text} ({type(value).__name__})"


def _vector_problem(value: Any) -> str | None:
    """What is wrong with an embedding (None: a non-empty list of numbers)."""
    try:
        array = np.asarray(value)
    except (ValueError, TypeError):
        return "must be a list of numbers (one vector), got a ragged or nested value"
    if array.ndim != 1 or array.size == 0 or array.dtype.kind not in "fiu":
        return f"must be a non-empty list of numbers, got {_shown(value)}"
    return None


def _check_values(frame: pd.DataFrame, source: str) -> None:
    """Every checked column's values have their type; the error names the row and record id."""
    for column in _KINDS:
        if column not in frame.columns:
            continue
        required = column in ("record_id", "jailbroken", "harmful")
        for row, value in enumerate(frame[column].tolist()):
            problem = value_problem(column, value)
            if problem is None and required and _is_null(value):
                problem = "must not be null"
            if problem is not None:
                record = frame["record_id"].iloc[row] if column != "record_id" else None
                where = f"row {row}" + ("" if record is None else f" (record_id {record!r})")
                raise ScarceError(f"{source}, {where}: {column} {problem}")


def benign_mask(frame: pd.DataFrame) -> np.ndarray:
    """Records of benign users (``method == "none"``)."""
    return (frame["method"].astype(str) == BENIGN).to_numpy()


def record_groups(frame: pd.DataFrame) -> pd.Series:
    """The group of every adversarial record (``""`` for benign ones).

    ``"turn=<t>"`` when the record has a turn, else ``"<method>/<target_model>"``.
    """
    turn = frame["turn"].astype("Int64")
    pair = frame["method"].astype(str) + "/" + frame["target_model"].astype(str)
    named = pair.where(turn.isna(), "turn=" + turn.astype(str))
    return named.where(~pd.Series(benign_mask(frame), index=frame.index), "")


def group_names(frame: pd.DataFrame, method: str | None = None) -> list[str]:
    """The groups of a corpus (of one attack method when given), sorted."""
    groups = record_groups(frame)
    keep = ~benign_mask(frame)
    if method is not None:
        keep &= (frame["method"].astype(str) == method).to_numpy()
    return sorted(set(groups[keep]))


def group_mask(frame: pd.DataFrame, group: str) -> np.ndarray:
    """Records of ``group``: a group name from :func:`group_names`, or a method name (pooled).

    Raises
    ------
    ScarceError
        No adversarial record belongs to ``group`` (the message lists the groups there are).
    """
    adversarial = ~benign_mask(frame)
    mask = adversarial & ((record_groups(frame) == group).to_numpy()
                          | (frame["method"].astype(str) == group).to_numpy())
    if not mask.any():
        methods = sorted(set(frame["method"].astype(str)[adversarial]))
        raise unknown_name_error("group", group, group_names(frame) + methods)
    return mask
