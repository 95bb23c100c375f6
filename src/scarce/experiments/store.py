"""A run directory that keeps every finished unit of work, so an interrupted run loses nothing.

Layout:

    <root>/config.json          the run's configuration and its fingerprint (written once)
    <root>/tasks/<key>.json     one file per finished task: rows, provenance and a checksum
    <root>/errors/<key>.json    a task that raised: the error and its traceback

Each task file is written atomically (a temporary file in the same directory, flushed, then
``os.replace``), so a reader sees either the whole file or none. A file that does not parse or
whose checksum does not match (a partial write by another tool, a disk error) is reported and
treated as missing, so the task is recomputed; so is one written by estimators of another
revision (:data:`scarce.results.ESTIMATOR_REVISIONS`: a change to what one returns for a seed),
so a resumed run never mixes two; task files without estimates (Monte Carlo checkpoints of
counts, fitted rulers) are not touched by it. Opening a run directory made with a different
configuration is refused: results of two configurations never mix, and a ``config.json`` whose
stored fingerprint is not the sha256 of the configuration it holds is refused as damaged.

Every file-system failure (a run directory that is a file, a name too long, a read-only
directory, a full disk) and every unreadable configuration (not JSON, nested too deep) is a
:class:`~scarce.errors.ScarceError` that names the path and the reason; a failed write leaves
the previous file intact (see :mod:`scarce._atomic`).
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
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from scarce._atomic import atomic_write_text, remove_stale_temporaries
from scarce.checks import warn_user
from scarce.errors import ScarceError, ScarceWarning
from scarce.results import estimator_revision

__all__ = ["CorruptResultWarning", "ResultStore", "RunDirectoryError", "StaleResultWarning", "check_run_dir", "estimate_methods",
           "config_fingerprint", "provenance"]


class CorruptResultWarning(ScarceWarning):
    """A task file could not be read back; the task will be recomputed.

    ``path`` names the task file (None for a warning about the run directory as a whole), so a
    caller that gathers these warnings learns which files were left out without reading the text.
    """

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:  # keep the path across processes (pickle)
        return type(self), (str(self), self.path)


class StaleResultWarning(CorruptResultWarning):
    """A task file holds results of an estimator at another revision
    (:data:`scarce.results.ESTIMATOR_REVISIONS`); the task will be recomputed."""


def estimate_methods(payload: Any) -> set[str]:
    """The estimators whose results a task's payload holds: every mapping with a ``cov`` at its top
    level, one level down or in a list one level down, by its ``method`` (an
    :class:`~scarce.results.EstimateResult`'s dict), or ``"subset_simulation"`` for a run record
    with ``levels`` and no method (an LLM sweep's cascade runs before they named it)."""
    found: set[str] = set()
    values = [payload]
    if isinstance(payload, Mapping):
        for value in payload.values():
            values.extend(value if isinstance(value, list) else [value])
    for value in values:
        if isinstance(value, Mapping) and "cov" in value:
            method = value.get("method", "subset_simulation" if "levels" in value else None)
            if isinstance(method, str):
                found.add(method)
    return found


def _stale_methods(record: dict[str, Any]) -> list[str]:
    """``"METHOD at revision R, not C"`` for each estimator whose results ``record`` holds at a
    revision other than the current one (a record without revisions: revision 1)."""
    recorded = record.get("revisions")
    recorded = recorded if isinstance(recorded, dict) else {}
    out = []
    for method in sorted(estimate_methods(record["payload"])):
        revision, current = recorded.get(method, 1), estimator_revision(method)
        if revision != current:
            out.append(f"{method} at revision {revision!r}, not this scarce's {current}")
    return out


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


#: Distributions whose versions a result records (read from their metadata, never imported).
PROVENANCE_PACKAGES = ("scarce", "numpy", "scipy", "scikit-learn", "torch", "transformers", "pandas")


@functools.lru_cache(maxsize=1)
def _versions() -> tuple[tuple[str, str], ...]:
    """Python's and :data:`PROVENANCE_PACKAGES`' versions, read once per process (each lookup scans
    the installed distributions' metadata, and a run saves a task file per finished unit)."""
    from importlib import metadata

    versions = [("python", platform.python_version())]
    for name in PROVENANCE_PACKAGES:
        try:
            versions.append((name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            pass
    return tuple(versions)


def provenance() -> dict[str, Any]:
    """Versions, platform and git hash of the code that produced a result.

    Versions come from the installed distributions' metadata (:mod:`importlib.metadata`), so
    recording them imports nothing: an LLM sweep does not load torch to say which one is there.
    A package that is not installed is left out.
    """
    return {"versions": dict(_versions()), "git": _git_hash(), "host": platform.node(),
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


#: The payload entry a task's timings travel in; stored apart from its results.
TIMING = "timing"

#: What reading a JSON file can raise on damaged content (RecursionError: nested too deep).
_UNREADABLE = (OSError, ValueError, KeyError, TypeError, RecursionError)


class RunDirectoryError(ScarceError, OSError):
    """A file of a run directory could not be read or written (full disk, permissions, a bad name).

    Both a :class:`~scarce.errors.ScarceError` (the clear message the command line prints) and an
    ``OSError`` (with the original ``errno`` and ``filename``), so code that handles file-system
    errors keeps working.
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def _os_error(action: str, path: Path, error: OSError) -> RunDirectoryError:
    """A clear error for a file-system failure: what was attempted, on which path, and why."""
    reason = error.strerror or str(error) or type(error).__name__
    clear = RunDirectoryError(f"cannot {action} {str(path)!r}: {reason} ({type(error).__name__}); check that "
                              f"the run directory is a writable directory with free space and a valid name")
    clear.errno, clear.strerror, clear.filename = error.errno, error.strerror, str(path)
    return clear


def _read_json(path: Path) -> Any:
    """A JSON file's content; a ScarceError naming the file when it is unreadable or damaged."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise
    except OSError as error:
        raise _os_error("read", path, error) from None
    except RecursionError:
        raise ScarceError(f"{str(path)!r} is nested too deeply to be a scarce file; the run directory "
                          "is damaged or not a scarce run directory") from None
    except ValueError as error:
        raise ScarceError(f"{str(path)!r} is not valid JSON ({error}); the run directory is damaged") from None


def check_run_dir(root: Any) -> Path:
    """``root`` as a run-directory path (:func:`scarce.checks.check_path`: an empty name would
    write into the current directory), in UTF-8."""
    from scarce.checks import check_path

    path = check_path("run directory", root)
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:  # bytes the file system's encoding could not decode, kept as surrogates
        raise ScarceError(f"run directory must be a name in UTF-8, got {str(path)!r}: the report's tables are written "
                          "by a library (pyarrow) that takes UTF-8 paths only, so the run would end in an error after "
                          "all its work") from None
    return path


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
        self.root = check_run_dir(root)
        self.config = json.loads(_canonical(dict(config)))
        self.fingerprint = config_fingerprint(self.config)
        config_path = self.root / "config.json"
        try:
            if self.root.exists() and not self.root.is_dir():
                raise ScarceError(f"run directory {str(self.root)!r} exists and is not a directory; pass "
                                  "a new or existing directory")
            for sub in ("tasks", "errors", "cache"):  # found now, not when the first task is saved
                if (self.root / sub).exists() and not (self.root / sub).is_dir():
                    raise ScarceError(f"run directory {str(self.root)!r} holds {sub!r}, which is not a directory; "
                                      f"a run keeps its {sub} there: move it away or pass another run directory")
            stored = _read_json(config_path)
        except FileNotFoundError:
            stored = None
        except OSError as error:
            raise _os_error("open", self.root, error) from None
        if stored is None:
            self._write(config_path, json.dumps(
                {"fingerprint": self.fingerprint, "config": self.config, "created": provenance()},
                indent=2, sort_keys=True))
        else:
            self._check_stored(stored, config_path)
        #: temporary files of writes killed in an earlier run, removed on opening (see ``_atomic``)
        self.removed_temporaries = sum(remove_stale_temporaries(self.root / sub) for sub in ("", "tasks", "errors", "cache"))
        if self.removed_temporaries:
            warn_user(f"run directory {str(self.root)!r}: removed {self.removed_temporaries} temporary file(s) "
                      "left by writes an earlier run was killed in; their tasks are recomputed",
                      CorruptResultWarning)

    def _check_stored(self, stored: Any, config_path: Path) -> None:
        """Refuse a damaged config.json, or one of another configuration (naming the keys)."""
        old = stored.get("config") if isinstance(stored, dict) else None
        if not isinstance(old, dict) or stored.get("fingerprint") != config_fingerprint(old):
            raise ScarceError(f"{str(config_path)!r} is damaged: its fingerprint does not match the "
                              "configuration it holds; use a new run directory")
        if stored["fingerprint"] != self.fingerprint:
            differ = sorted(k for k in set(old) | set(self.config) if old.get(k) != self.config.get(k))
            raise ScarceError(
                f"run directory {self.root} holds results of a different configuration "
                f"(keys that differ: {', '.join(differ) or 'none listed'}); use a new directory "
                f"or the same configuration, results of two configurations are never mixed"
            )

    @staticmethod
    def _write(path: Path, text: str) -> None:
        """Write a file atomically; a file-system failure is a ScarceError naming the path."""
        try:
            atomic_write_text(path, text)
        except OSError as error:
            raise _os_error("write", path, error) from None

    @classmethod
    def open(cls, root: str | os.PathLike[str]) -> ResultStore:
        """An existing run directory with the configuration it was made with (to report on it)."""
        path = check_run_dir(root) / "config.json"
        try:
            config = _read_json(path)["config"]
        except FileNotFoundError:
            raise ScarceError(f"{str(root)!r} is not a run directory (no config.json)") from None
        except (KeyError, TypeError) as error:
            raise ScarceError(f"{str(path)!r} is unreadable ({error!r}); the run directory is damaged") from None
        if not isinstance(config, dict):
            raise ScarceError(f"{str(path)!r} holds no configuration mapping; the run directory is damaged")
        return cls(root, config)

    def _task_path(self, key: str) -> Path:
        return self.root / "tasks" / f"{_check_key(key)}.json"

    def _error_path(self, key: str) -> Path:
        return self.root / "errors" / f"{_check_key(key)}.json"

    def _record(self, key: str) -> dict[str, Any] | None:
        """A task file's verified record, or None if absent or unreadable (then it is recomputed)."""
        path = self._task_path(key)
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            payload = data["payload"]
            ok = isinstance(payload, dict) and \
                data["checksum"] == hashlib.sha256(_canonical(payload).encode()).hexdigest() and \
                data.get("fingerprint") == self.fingerprint
        except _UNREADABLE:
            ok = False
        if not ok:
            warn_user(CorruptResultWarning(f"result file {path} is corrupted or partial; task {key!r} will be "
                                           "recomputed", path=str(path)), CorruptResultWarning)
            return None
        stale = _stale_methods(data)
        if stale:
            warn_user(StaleResultWarning(f"result file {path} holds results of {', '.join(stale)}; task {key!r} will "
                                         "be recomputed so that results of two revisions never mix", path=str(path)),
                      StaleResultWarning)
            return None
        return data

    def load(self, key: str) -> dict[str, Any] | None:
        """The stored results of ``key`` (timings apart, see :meth:`timing`), or None if absent or
        unreadable (then it is recomputed)."""
        record = self._record(key)
        if record is None:
            return None
        return {k: v for k, v in record["payload"].items() if k != TIMING}  # older files kept it inside

    def timing(self, key: str) -> dict[str, Any]:
        """The timings stored with ``key``'s results ({} when none or when the file is unreadable)."""
        record = self._record(key)
        if record is None:
            return {}
        timing = record.get(TIMING, record["payload"].get(TIMING))
        return timing if isinstance(timing, dict) else {}

    def has(self, key: str) -> bool:
        return self.load(key) is not None

    def save(self, key: str, payload: Mapping[str, Any], *, seed: Any = None) -> None:
        """Store a finished task atomically (and clear an earlier error record of it).

        A ``"timing"`` entry of ``payload`` (seconds, which differ from run to run) is stored beside
        the results, outside their checksum: :meth:`load` gives the results alone, which a seed
        fixes for a given model (a model trained on another processor can have other weights:
        ``training_info["weights_sha256"]`` tells), and :meth:`timing` the timings.
        """
        body = json.loads(_canonical(dict(payload)))
        timing = body.pop(TIMING, None)
        revisions = {method: estimator_revision(method) for method in sorted(estimate_methods(body))}
        record = {"key": key, "fingerprint": self.fingerprint, "revisions": revisions, "seed": seed,
                  "provenance": provenance(),
                  "checksum": hashlib.sha256(_canonical(body).encode()).hexdigest(), "payload": body}
        if timing is not None:
            record[TIMING] = timing
        self._write(self._task_path(key), json.dumps(record, indent=1, allow_nan=True))
        try:
            self._error_path(key).unlink(missing_ok=True)
        except OSError as error:
            raise _os_error("remove", self._error_path(key), error) from None

    def save_error(self, key: str, error: BaseException) -> None:
        """Record a task that raised (type, message, traceback); the run goes on."""
        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        self._write(self._error_path(key), json.dumps(
            {"key": key, "type": type(error).__name__, "message": str(error), "traceback": text,
             "provenance": provenance()}, indent=1))

    def errors(self) -> dict[str, dict[str, Any]]:
        """Recorded task errors by key."""
        records = {}
        for path in sorted((self.root / "errors").glob("*.json")):
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
            except _UNREADABLE as error:
                record = {"key": path.stem, "type": "unreadable", "message": f"{path} is damaged ({error!r})"}
            records[path.stem] = record if isinstance(record, dict) else \
                {"key": path.stem, "type": "unreadable", "message": f"{path} holds no error record"}
        return records

    def unreadable(self, key: str, why: str) -> None:
        """Say that task ``key``'s file, verified, ``why`` cannot be used (a :class:`CorruptResultWarning`
        with its path): an application reading its payload found what no task writes there."""
        path = self._task_path(key)
        warn_user(CorruptResultWarning(f"result file {path} is corrupted: it {why}; delete it and rerun to "
                                       "recompute the task", path=str(path)), CorruptResultWarning)

    def keys(self) -> list[str]:
        """Keys of the task files present (readable or not)."""
        return sorted(p.stem for p in (self.root / "tasks").glob("*.json"))

    def items(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Readable finished tasks' results (timings apart), in key order."""
        for key, payload, _ in self.timed_items():
            yield key, payload

    def timed_items(self) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
        """Readable finished tasks as ``(key, results, timings)``, in key order (each file read once)."""
        for key in self.keys():
            record = self._record(key)
            if record is not None:
                payload = {k: v for k, v in record["payload"].items() if k != TIMING}
                timing = record.get(TIMING, record["payload"].get(TIMING))
                yield key, payload, timing if isinstance(timing, dict) else {}
