"""Atomic file writes: a reader sees the whole new file or the old one, never a part.

The data go to a temporary file in the target's directory (same file system), are flushed and
fsynced, and the file is renamed over the target with ``os.replace``. On any error the temporary
file is removed and the target is untouched. Every durable artefact of scarce (result-store
tasks, embedding-cache shards, cached classifiers, written IDX files) is written this way.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["atomic_write_bytes", "atomic_write_text"]


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (parent directories are created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # the temporary name is unique (concurrent writers never collide) and stays short: a target
    # name near the 255-byte limit must not make its temporary name too long
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:64]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))
