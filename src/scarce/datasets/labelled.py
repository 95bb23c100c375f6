"""Plain labelled conversations, JSON Lines or CSV, as LLM corpus tables.

The simplest corpus a user has: one conversation per line (JSONL) or row (CSV) with

| column | required | meaning |
|---|---|---|
| prompt | yes | the user's text |
| response | yes | the model's answer |
| label | yes | jailbroken / unsafe: ``true``/``false``, ``1``/``0``, ``yes``/``no`` (or named ``jailbroken``) |
| method | no | the attack style; ``"none"`` marks benign users (default ``"custom"``) |
| target_model | no | the model that answered (default ``"unknown"``) |
| record_id | no | unique id (default ``"<file stem>/<line>"``) |
| behavior_id | no | the behaviour or goal the conversation is about |
| judge_score | no | a judge's probability of unsafe, in [0, 1] |

Records without a label are refused, or dropped and counted (``unlabelled="drop"``,
``attrs["dropped_unlabelled"]``): the calibration ``C_tau`` needs every record's label.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "chats.csv"
>>> _ = path.write_text("prompt,response,label\\nhi,hello,no\\nhow to x?,here is how,yes\\n")
>>> read_labelled(path)[["record_id", "method", "jailbroken"]].values.tolist()
[['chats/1', 'custom', False], ['chats/2', 'custom', True]]
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Union

import pandas as pd

from scarce.checks import check_path
from scarce.datasets.jailbreakbench import NO_VALUE, as_corpus, check_file_size
from scarce.datasets.jsonlines import json_objects
from scarce.errors import ScarceError, show

__all__ = ["read_labelled"]

PathLike = Union[str, "os.PathLike[str]"]
MAX_TABLE_BYTES = 4 << 30
MAX_LINE_BYTES = 64 << 20
_TRUE, _FALSE = {"1", "true", "yes", "unsafe", "jailbroken"}, {"0", "false", "no", "safe"}


def _flag(value: Any, where: str) -> bool | None:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value == "":
        return None
    if isinstance(value, bool) or (isinstance(value, (int, float)) and value in (0, 1)):
        return bool(value)
    text = str(value).strip().lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise ScarceError(f"{where}: label must be true/false, 1/0 or yes/no, got {value!r}")


def _judge_score(value: Any, where: str) -> float:
    """An optional judge probability in [0, 1] (NaN when absent)."""
    if value is None or value == "":
        return math.nan
    problem = f"{where}: judge_score must be a probability in [0, 1], got {value!r}"
    if isinstance(value, bool):
        raise ScarceError(problem)
    try:
        score = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer beyond float range
        raise ScarceError(problem) from None
    if not math.isnan(score) and not 0.0 <= score <= 1.0:
        raise ScarceError(problem)
    return score


def _rows_jsonl(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    return json_objects(path, "corpus file", MAX_LINE_BYTES)


def _rows_csv(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:  # -sig: the byte-order mark spreadsheets write
            for number, record in enumerate(csv.DictReader(handle), start=1):
                yield f"corpus file {str(path)!r}, row {number}", record
    except UnicodeDecodeError as exc:
        raise ScarceError(f"{str(path)!r} is not UTF-8 text: {exc}") from None
    except csv.Error as exc:
        raise ScarceError(f"{str(path)!r} is not a readable CSV file: {exc}") from None
    except OSError as exc:
        raise ScarceError(f"corpus file {str(path)!r} cannot be read: {exc.strerror or exc}") from None


def _optional_text(record: dict[str, Any], name: str, where: str, default: str, *, integer: bool = False) -> str:
    """Column ``name`` of ``record`` as text (``default`` when absent, null or empty).

    A string is taken as it is, an integer too where ``integer`` (a numeric record id); any other
    value (a list, an object, a number) is refused: written with ``str`` it would become a
    name no one gave, such as ``"{'a': 1}"``.
    """
    value = record.get(name)
    if value is None or (isinstance(value, str) and not value):
        return default
    if isinstance(value, str) or (integer and isinstance(value, int) and not isinstance(value, bool)):
        return str(value)
    allowed = "a string, an integer or null" if integer else "a string or null"
    raise ScarceError(f"{where}: {name!r} must be {allowed}, got {show(value)} ({type(value).__name__})")


def _record(record: dict[str, Any], where: str, number: int, stem: str) -> dict[str, Any] | None:
    texts = {}
    for name in ("prompt", "response"):
        value = record.get(name)
        if not isinstance(value, str):
            raise ScarceError(f"{where}: {name!r} must be a string, got {type(value).__name__}; the columns are "
                              f"prompt, response and label (see scarce.datasets.labelled)")
        texts[name] = value
    label = record.get("label")
    flag = _flag(record.get("jailbroken") if label is None or label == "" else label, where)
    if flag is None:
        return None
    method = _optional_text(record, "method", where, "custom")
    return {"record_id": _optional_text(record, "record_id", where, f"{stem}/{number}", integer=True),
            "behavior_id": _optional_text(record, "behavior_id", where, "", integer=True), "harmful": method != NO_VALUE,
            "method": method, "target_model": _optional_text(record, "target_model", where, "unknown"), "turn": pd.NA,
            **texts, "judge_score": _judge_score(record.get("judge_score"), where), "jailbroken": flag,
            "attack_type": "", "category": _optional_text(record, "category", where, "")}


def read_labelled(path: PathLike, *, unlabelled: str = "error") -> pd.DataFrame:
    """Read a ``.jsonl`` or ``.csv`` file of labelled conversations as corpus records."""
    if not isinstance(unlabelled, str) or unlabelled not in ("error", "drop"):
        raise ScarceError(f"unlabelled must be 'error' or 'drop', got {unlabelled!r}")
    file = check_path("path", path)
    check_file_size(file, "corpus file", MAX_TABLE_BYTES)
    suffix = file.suffix.lower()
    if suffix not in (".jsonl", ".csv"):
        raise ScarceError(f"corpus file {str(file)!r}: plain labelled records are read from .jsonl or .csv, not "
                          f"{suffix or '(no suffix)'}")
    rows, dropped = [], 0
    for number, (where, record) in enumerate((_rows_jsonl if suffix == ".jsonl" else _rows_csv)(file), start=1):
        row = _record(record, where, number, file.stem)
        if row is None:
            dropped += 1
        else:
            rows.append(row)
    if dropped and unlabelled == "error":
        raise ScarceError(f"corpus file {str(file)!r}: {dropped} record(s) have no label, and calibration needs "
                          f"every record's label; label them,"
                          f" or pass unlabelled='drop' (--drop-unlabelled) to leave them out")
    if not rows:
        raise ScarceError(f"corpus file {str(file)!r} holds no labelled record")
    frame = as_corpus(rows)
    frame.attrs["dropped_unlabelled"] = dropped
    return frame
