"""JSON Lines read with bounds: each line at most a given size, each a JSON object, errors naming the line.

The JSON parsing rules shared by every reader live here too: an object that names a key twice is
refused (Python's parser would keep the last value silently, dropping data), and so is text that
is not valid Unicode (a lone surrogate escape such as ``\\ud800``, which would fail later, far from
the file, when the text is hashed, embedded or written).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scarce.errors import ScarceError

__all__ = ["DuplicateKeyError", "json_objects", "unicode_problem", "unique_keys"]


class DuplicateKeyError(ValueError):
    """A JSON object names the same key twice."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``'s ``object_pairs_hook``: the object as a dict, refusing a key named twice."""
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
        raise DuplicateKeyError(f"key {twice!r} appears twice in one object, so which value is meant is unclear")
    return data


def unicode_problem(raw: bytes | str, value: Any) -> str | None:
    """What is wrong with the text of ``value`` parsed from ``raw`` (None: all valid Unicode).

    A surrogate can only come from a ``\\u`` escape or from the UTF-8-like bytes ``ED A0..BF``
    (which ``json.loads`` lets through), so the check runs only when ``raw`` holds one of those.
    """
    marks = (b"\\u", b"\xed") if isinstance(raw, bytes) else ("\\u",)
    if not any(mark in raw for mark in marks):  # type: ignore[operator]
        return None
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        return (f"holds text that is not valid Unicode ({exc.reason}: a lone surrogate such as \\ud800); "
                "allowed: text UTF-8 can encode")
    return None


def json_objects(path: Path, what: str, max_line_bytes: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, object)`` for every non-empty line of ``path``; ``where`` names the file and line.

    A line longer than ``max_line_bytes``, one that is not JSON (or nested too deeply to parse,
    or naming a key twice, or holding text that is not valid Unicode) and one that is not a JSON
    object are each a :class:`ScarceError` naming ``what`` and the line; so is a file that cannot
    be read.
    """
    try:
        with open(path, "rb") as handle:
            for number, raw in enumerate(iter(lambda: handle.readline(max_line_bytes + 1), b""), start=1):
                where = f"{what} {str(path)!r}, line {number}"
                if len(raw) > max_line_bytes:
                    raise ScarceError(f"{where}: longer than {max_line_bytes:,} bytes")
                if raw.strip():
                    yield where, _object(raw, where)
    except OSError as exc:
        raise ScarceError(f"{what} {str(path)!r} cannot be read: {exc.strerror or exc}") from None


def _object(raw: bytes, where: str) -> dict[str, Any]:
    """One line parsed as a JSON object, or a :class:`ScarceError` naming ``where``."""
    try:
        record = json.loads(raw, object_pairs_hook=unique_keys)
    except DuplicateKeyError as exc:
        raise ScarceError(f"{where}: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise ScarceError(f"{where}: not a JSON object ({exc})") from None
    if not isinstance(record, dict):
        raise ScarceError(f"{where}: each line must be a JSON object, got {type(record).__name__}")
    problem = unicode_problem(raw, record)
    if problem is not None:
        raise ScarceError(f"{where}: {problem}")
    return record
