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
import os
from pathlib import Path
from typing import Any, Union

import numpy as np
import pandas as pd

from scarce._atomic import atomic_write_bytes
from scarce.datasets.jailbreakbench import CORPUS_COLUMNS, NO_VALUE
from scarce.errors import ScarceError, unknown_name_error

__all__ = [
    "BENIGN",
    "benign_mask",
    "check_corpus",
    "group_mask",
    "group_names",
    "read_corpus",
    "record_groups",
    "write_corpus",
]

PathLike = Union[str, "os.PathLike[str]"]
BENIGN = NO_VALUE
_REQUIRED = ("record_id", "method", "target_model", "jailbroken")
_FILL: dict[str, Any] = {"behavior_id": "", "prompt": "", "response": "", "attack_type": "",
                         "category": "", "judge_score": np.nan}


def read_corpus(path: PathLike) -> pd.DataFrame:
    """A corpus table from a ``.parquet`` file or a JSON Lines file (``.jsonl`` / ``.json``).

    Raises
    ------
    ScarceError
        A missing file, an unknown suffix, an unreadable line, or a table that fails
        :func:`check_corpus`.
    """
    path = Path(path)
    if not path.is_file():
        raise ScarceError(f"corpus file {str(path)!r} does not exist")
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        frame = pd.read_parquet(path)
    elif suffix in (".jsonl", ".json"):
        rows = []
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ScarceError(f"corpus file {str(path)!r}, line {number}: not a JSON object "
                                      f"({exc.msg}); JSON Lines holds one record per line") from None
        frame = pd.DataFrame(rows)
    else:
        raise ScarceError(f"corpus file {str(path)!r}: unknown suffix {suffix!r}; use .parquet, "
                          ".jsonl or .json (JSON Lines)")
    return check_corpus(frame, source=str(path))


def write_corpus(frame: pd.DataFrame, path: PathLike) -> Path:
    """Write a corpus table as Parquet, atomically; returns the path."""
    frame = check_corpus(frame)
    buffer = io.BytesIO()
    out = frame.copy()
    out.attrs = {}  # pandas attrs do not round-trip through pyarrow reliably; keep the table plain
    out.to_parquet(buffer, index=False)
    atomic_write_bytes(path, buffer.getvalue())
    return Path(path)


def check_corpus(frame: Any, *, require_embedding: bool = False, source: str = "corpus") -> pd.DataFrame:
    """Validate a corpus table and fill its optional columns; returns a checked copy.

    Raises
    ------
    ScarceError
        Not a table, missing required columns, no records, duplicated record ids, labels that are
        not booleans, or (``require_embedding``) a missing, ragged or non-finite embedding.
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
    duplicated = out["record_id"].astype(str).duplicated()
    if duplicated.any():
        raise ScarceError(f"{source}: record_id must be unique; {out['record_id'][duplicated].iloc[0]!r} "
                          "repeats")
    labels = out["jailbroken"]
    if labels.isna().any() or not set(pd.unique(labels.astype(object))) <= {True, False, 0, 1}:
        raise ScarceError(f"{source}: jailbroken must be True/False (or 1/0) for every record; got "
                          f"values {sorted(map(repr, pd.unique(labels.astype(object))))[:5]}")
    out["jailbroken"] = labels.astype(bool)
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
