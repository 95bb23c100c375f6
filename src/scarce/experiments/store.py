"""A run directory that keeps every finished unit of work, so an interrupted run loses nothing.

Layout::

    <root>/config.json          the run's configuration and its fingerprint (written once)
    <root>/tasks/<key>.json     one file per finished task: rows, provenance and a checksum
    <root>/errors/<key>.json    a task that raised: the error and its traceback

Each task file is written atomically (a temporary file in the same directory, flushed, then
``os.replace``), so a reader sees either the whole file or none. A file that does not parse or
whose checksum does not match (a partial write by another tool, a disk error) is reported and
treated as missing, so the task is recomputed. Opening a run directory made with a different
configuration is refused: results of two configurations never mix.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import subprocess
import time
import traceback
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from scarce._atomic import atomic_write_text
from scarce.errors import ScarceError, ScarceWarning

__all__ = ["CorruptResultWarning", "ResultStore", "config_fingerprint", "provenance"]


class CorruptResultWarning(ScarceWarning):
    """A task file could not be read back; the task will be recomputed."""


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=True, default=str)


def config_fingerprint(config: Mapping[str, Any]) -> str:
    """sha256 of the configuration in canonical JSON (key order does not matter)."""
    return hashlib.sha256(_canonical(dict(config)).encode()).hexdigest()


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


@functools.lru_cache(maxsize=1)
def _git_hash() -> str | None:
    """HEAD of the checkout the package runs from (``+dirty`` with uncommitted changes), or None.

    Read once per process: a run saves thousands of task files and git does not change under it.
    """
    head = _git("rev-parse", "HEAD")
    if not head:
        return None
    status = _git("status", "--porcelain", "--untracked-files=no")
    return f"{head}+dirty" if status else head


def provenance() -> dict[str, Any]:
    """Versions, platform and git hash of the code that produced a result."""
    import numpy

    import scarce

    versions = {"scarce": scarce.__version__, "numpy": numpy.__version__, "python": platform.python_version()}
    for module in ("torch", "sklearn", "scipy"):
        try:
            versions[module] = __import__(module).__version__
        except ImportError:
            pass
    return {"versions": versions, "git": _git_hash(), "host": platform.node(),
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def _check_key(key: str) -> str:
    if not key or any(c in key for c in "/\\\0") or key.startswith("."):
        raise ScarceError(f"task key must be a non-empty file name without '/', got {key!r}")
    return key


class ResultStore:
    """Finished tasks of one run, one JSON file each, keyed by a task name.

    Parameters
    ----------
    root : path
        The run directory (created if needed).
    config : mapping
        The run's configuration (JSON-serialisable). A directory holding a different
        configuration is refused with the keys that differ.
    """

    def __init__(self, root: str | os.PathLike[str], config: Mapping[str, Any]):
        self.root = Path(root)
        self.config = json.loads(_canonical(dict(config)))
        self.fingerprint = config_fingerprint(self.config)
        config_path = self.root / "config.json"
        if config_path.exists():
            stored = json.loads(config_path.read_text(encoding="utf-8"))
            if stored.get("fingerprint") != self.fingerprint:
                old = stored.get("config", {})
                differ = sorted(k for k in set(old) | set(self.config) if old.get(k) != self.config.get(k))
                raise ScarceError(
                    f"run directory {self.root} holds results of a different configuration "
                    f"(keys that differ: {', '.join(differ) or 'none listed'}); use a new directory "
                    f"or the same configuration, results of two configurations are never mixed"
                )
        else:
            atomic_write_text(config_path, json.dumps(
                {"fingerprint": self.fingerprint, "config": self.config, "created": provenance()},
                indent=2, sort_keys=True))

    @classmethod
    def open(cls, root: str | os.PathLike[str]) -> ResultStore:
        """An existing run directory with the configuration it was made with (to report on it)."""
        path = Path(root) / "config.json"
        try:
            config = json.loads(path.read_text(encoding="utf-8"))["config"]
        except FileNotFoundError:
            raise ScarceError(f"{str(root)!r} is not a run directory (no config.json)") from None
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ScarceError(f"{str(path)!r} is unreadable ({error}); the run directory is damaged") from None
        return cls(root, config)

    def _task_path(self, key: str) -> Path:
        return self.root / "tasks" / f"{_check_key(key)}.json"

    def _error_path(self, key: str) -> Path:
        return self.root / "errors" / f"{_check_key(key)}.json"

    def load(self, key: str) -> dict[str, Any] | None:
        """The stored record of ``key``, or None if absent or unreadable (then it is recomputed)."""
        path = self._task_path(key)
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            payload = data["payload"]
            ok = data["checksum"] == hashlib.sha256(_canonical(payload).encode()).hexdigest()
        except (OSError, ValueError, KeyError, TypeError):
            ok = False
        if not ok or data.get("fingerprint") != self.fingerprint:
            warnings.warn(f"result file {path} is corrupted or partial; task {key!r} will be recomputed",
                          CorruptResultWarning, stacklevel=2)
            return None
        return payload

    def has(self, key: str) -> bool:
        return self.load(key) is not None

    def save(self, key: str, payload: Mapping[str, Any], *, seed: Any = None) -> None:
        """Store a finished task atomically (and clear an earlier error record of it)."""
        body = json.loads(_canonical(dict(payload)))
        record = {"key": key, "fingerprint": self.fingerprint, "seed": seed, "provenance": provenance(),
                  "checksum": hashlib.sha256(_canonical(body).encode()).hexdigest(), "payload": body}
        atomic_write_text(self._task_path(key), json.dumps(record, indent=1, allow_nan=True))
        self._error_path(key).unlink(missing_ok=True)

    def save_error(self, key: str, error: BaseException) -> None:
        """Record a task that raised (type, message, traceback); the run goes on."""
        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        atomic_write_text(self._error_path(key), json.dumps(
            {"key": key, "type": type(error).__name__, "message": str(error), "traceback": text,
             "provenance": provenance()}, indent=1))

    def errors(self) -> dict[str, dict[str, Any]]:
        """Recorded task errors by key."""
        folder = self.root / "errors"
        return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))}

    def keys(self) -> list[str]:
        return sorted(p.stem for p in (self.root / "tasks").glob("*.json"))

    def items(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Readable finished tasks, in key order."""
        for key in self.keys():
            payload = self.load(key)
            if payload is not None:
                yield key, payload
