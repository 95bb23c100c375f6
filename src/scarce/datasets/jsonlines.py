"""JSON Lines read with bounds: each line at most a given size, each a JSON object, errors naming the line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scarce.errors import ScarceError

__all__ = ["json_objects"]


def json_objects(path: Path, what: str, max_line_bytes: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, object)`` for every non-empty line of ``path``; ``where`` names the file and line.

    A line longer than ``max_line_bytes``, one that is not JSON (or nested too deeply to parse)
    and one that is not a JSON object are each a :class:`ScarceError` naming ``what`` and the line.
    """
    with open(path, "rb") as handle:
        for number, raw in enumerate(iter(lambda: handle.readline(max_line_bytes + 1), b""), start=1):
            where = f"{what} {str(path)!r}, line {number}"
            if len(raw) > max_line_bytes:
                raise ScarceError(f"{where}: longer than {max_line_bytes:,} bytes")
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except (ValueError, RecursionError) as exc:
                raise ScarceError(f"{where}: not a JSON object ({exc})") from None
            if not isinstance(record, dict):
                raise ScarceError(f"{where}: each line must be a JSON object, got {type(record).__name__}")
            yield where, record
