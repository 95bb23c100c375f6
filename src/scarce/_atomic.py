"""Atomic file writes: a reader sees the whole new file or the old one, never a part.

The data go to a temporary file in the target's directory (same file system), are flushed and
fsynced, and the file is renamed over the target with ``os.replace``. On any error the temporary
file is removed and the target is untouched. Every durable artefact of scarce (result-store
tasks, embedding-cache shards, cached classifiers, written IDX files) is written this way.
"""

from __future__ import annotations

import os
import re
import socket
import tempfile
import time
from pathlib import Path

__all__ = ["atomic_write_bytes", "atomic_write_text", "new_file_mode", "remove_stale_temporaries"]

#: A temporary file of another host (a shared file system) is stale only when this old (seconds).
FOREIGN_TEMPORARY_AGE = 24 * 3600
_TEMPORARY = re.compile(r"^\..*\.w-(?P<host>[A-Za-z0-9_]{1,32})-(?P<pid>\d+)\.[^.]+\.tmp$")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname())[:32] or "host"


def _writer_tag() -> str:
    """``w-<host>-<pid>``: which process writes a temporary file, so a resume can tell a dead writer's."""
    return f"w-{_host()}-{os.getpid()}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # a process of another user holds the pid (or the pid is not one of ours)
    return True


def remove_stale_temporaries(directory: str | os.PathLike[str]) -> int:
    """Remove the temporary files that killed writes left in ``directory``; returns how many.

    A write killed between creating its temporary file and renaming it leaves a hidden
    ``.<name>.w-<host>-<pid>.<random>.tmp``.  Such a file is stale when its writer, on this host,
    is no longer running; a temporary file of another host (a shared file system) only when it
    is older than :data:`FOREIGN_TEMPORARY_AGE`.  A live writer's file is never touched, so two
    runs sharing a directory do not remove each other's writes in flight.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return 0
    host, removed, now = _host(), 0, time.time()
    for path in directory.iterdir():
        match = _TEMPORARY.match(path.name)
        if match is None or not path.is_file():
            continue
        if match["host"] == host:
            stale = not _alive(int(match["pid"]))
        else:
            stale = now - path.stat().st_mtime > FOREIGN_TEMPORARY_AGE
        if stale:
            try:
                path.unlink()
                removed += 1
            except FileNotFoundError:
                pass
    return removed


def _umask() -> int:
    """The process's umask, read without changing it where the system says it (Linux), else set and restored."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def new_file_mode() -> int:
    """The permissions a new file gets from the user's umask (``0o666 & ~umask``); mkstemp's 0600
    would ignore it."""
    return 0o666 & ~_umask()


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (parent directories are created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # the temporary name is unique (concurrent writers never collide) and stays short: a target
    # name near the 255-byte limit must not make its temporary name too long
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:64]}.{_writer_tag()}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), new_file_mode())
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
