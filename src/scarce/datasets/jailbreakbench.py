"""JailbreakBench: the attack artifacts and the JBB-Behaviors CSV files, as LLM corpus tables.

The data directory (``data_dir``, else ``$SCARCE_DATA_DIR/jailbreakbench``) is laid out as in
the JailbreakBench repositories:

    attack-artifacts/<METHOD>/<attack type>/<target model>.json   e.g. PAIR/black_box/vicuna-13b-v1.5.json
    behaviors/harmful-behaviors.csv, behaviors/benign-behaviors.csv

An artifact file holds ``parameters`` (run settings) and ``jailbreaks``: one entry per harmful
behaviour with ``index``, ``goal``, ``prompt``, ``response`` and the ``jailbroken`` flag of the
benchmark's judge. Two traps are handled here:

* entries whose attack failed to produce a prompt (``prompt: null``, PAIR) are dropped and
  counted (``dropped_no_prompt``);
* ``parameters.total_number_of_jailbreaks`` was not updated after re-judging, so jailbreak counts
  are always recomputed from the per-entry ``jailbroken`` flags (the stated total is only reported).

Every reader returns a pandas DataFrame in the *corpus schema* (:data:`CORPUS_COLUMNS`), one row
per conversation:

| column | dtype | meaning |
|---|---|---|
| record_id | str | unique id, ``"<METHOD>/<attack type>/<target>/<index>"`` or ``"benign/<index>"`` |
| behavior_id | str | ``"harmful/<index>"`` or ``"benign/<index>"`` (JBB index) |
| harmful | bool | harmful behaviour (True) or benign (False) |
| method | str | ``PAIR``, ``GCG``, ``JBC``, ``DSN`` (the artifact directory); ``"none"`` for plain behaviour records |
| target_model | str | target model, ``"none"`` where not applicable |
| turn | Int64 | attack turn; ``<NA>`` (the artifacts have no turns) |
| prompt | str | the user prompt (never null) |
| response | str | the target's response (``""`` when none) |
| judge_score | float64 | p_unsafe of a judge; NaN (the artifacts carry labels only) |
| jailbroken | bool | the label: True = jailbreak ("bad") |
| attack_type | str | extra: the artifact subdirectory (``black_box``, ``transfer``, ...) |
| category | str | extra: the JBB behaviour category |

pandas is imported with this module, which :mod:`scarce.datasets` imports only on first use.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Union

import numpy as np
import pandas as pd

from scarce.checks import check_flag, check_path
from scarce.datasets._inputs import check_name, is_dir
from scarce.datasets.jsonlines import DuplicateKeyError, unicode_problem, unique_keys
from scarce.errors import ScarceError

__all__ = [
    "CORPUS_COLUMNS",
    "benign_records",
    "find_artifact_files",
    "load_jailbreakbench_corpus",
    "read_attack_artifact",
    "read_attack_artifacts",
    "read_behaviors",
    "resolve_jailbreakbench_dir",
    "summarize_counts",
]

PathLike = Union[str, "os.PathLike[str]"]
ENV_VAR = "SCARCE_DATA_DIR"
SUBDIR = "jailbreakbench"
ARTIFACTS_DIR = "attack-artifacts"
BEHAVIORS_DIR = "behaviors"
BEHAVIOR_FILES = {True: "harmful-behaviors.csv", False: "benign-behaviors.csv"}
BEHAVIOR_COLUMNS = ("index", "goal", "target", "behavior", "category", "source")
NO_VALUE = "none"
#: Files larger than these are refused before they are read (JailbreakBench's largest artifact is
#: about 2 MB and its behaviour files about 100 kB).
MAX_ARTIFACT_BYTES = 256 << 20
MAX_BEHAVIORS_BYTES = 64 << 20

CORPUS_COLUMNS: dict[str, str] = {
    "record_id": "object",
    "behavior_id": "object",
    "harmful": "bool",
    "method": "object",
    "target_model": "object",
    "turn": "Int64",
    "prompt": "object",
    "response": "object",
    "judge_score": "float64",
    "jailbroken": "bool",
    "attack_type": "object",
    "category": "object",
}
"""The corpus columns, in order, with their pandas dtypes (``embedding`` is added by embedding)."""


# --------------------------------------------------------------------------- locating the data

def resolve_jailbreakbench_dir(data_dir: PathLike | None = None) -> Path:
    """The JailbreakBench directory: the one holding ``attack-artifacts/`` and/or ``behaviors/``.

    Parameters
    ----------
    data_dir : str or path-like, optional
        The JailbreakBench directory itself, or a data directory with a ``jailbreakbench/``
        subdirectory. Default: ``$SCARCE_DATA_DIR/jailbreakbench``.

    Raises
    ------
    ScarceError
        When no directory is given and the variable is unset, or the directory has neither
        ``attack-artifacts/`` nor ``behaviors/``.
    """
    if data_dir is None:
        env = os.environ.get(ENV_VAR, "").strip()
        if not env:
            raise ScarceError(
                "no JailbreakBench data directory: pass data_dir (the directory holding "
                f"'{ARTIFACTS_DIR}/' and '{BEHAVIORS_DIR}/') or set the environment variable "
                f"{ENV_VAR} to a directory with a '{SUBDIR}/' subdirectory")
        base, origin = check_path(f"environment variable {ENV_VAR}", env), f"environment variable {ENV_VAR}={env!r}"
    else:
        base = check_path("data_dir", data_dir)
        origin = f"data_dir={str(base)!r}"
    for candidate in (base, base / SUBDIR):
        if is_dir(candidate / ARTIFACTS_DIR) or is_dir(candidate / BEHAVIORS_DIR):
            return candidate
    raise ScarceError(
        f"{origin}: no JailbreakBench data found; expected '{ARTIFACTS_DIR}/' or '{BEHAVIORS_DIR}/' "
        f"in {str(base)!r} or in {str(base / SUBDIR)!r}")


def find_artifact_files(root: PathLike) -> list[Path]:
    """Artifact files ``<root>/attack-artifacts/<METHOD>/<attack type>/<target>.json``, sorted.

    ``root`` may also be the ``attack-artifacts`` directory itself. Files one level up
    (``attack-info.json``, DSN's ``evaluation.json`` and ``submission.json``, which repeat the
    white-box entries) are not artifacts and are skipped.
    """
    base = check_path("root", root)
    artifacts = base / ARTIFACTS_DIR if is_dir(base / ARTIFACTS_DIR) else base
    if not is_dir(artifacts):
        raise ScarceError(f"root={str(base)!r} is not a directory; expected the JailbreakBench "
                          f"directory holding '{ARTIFACTS_DIR}/'")
    return sorted(p for p in artifacts.glob("*/*/*.json") if p.is_file())


# --------------------------------------------------------------------------- attack artifacts

def _empty_corpus() -> pd.DataFrame:
    return pd.DataFrame({name: pd.Series(dtype=dtype) for name, dtype in CORPUS_COLUMNS.items()})


def as_corpus(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows (dicts with the :data:`CORPUS_COLUMNS` keys) as a corpus table with the schema's dtypes."""
    if not rows:
        return _empty_corpus()
    frame = pd.DataFrame(rows, columns=list(CORPUS_COLUMNS))
    return frame.astype(CORPUS_COLUMNS)


def check_file_size(path: Path, what: str, limit: int) -> None:
    """Refuse a file larger than ``limit`` bytes before reading it."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise ScarceError(f"{what} {str(path)!r} does not exist") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the name
        raise ScarceError(f"{what} {str(path)!r} cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    if not path.is_file():
        raise ScarceError(f"{what} {str(path)!r} is not a regular file")
    if size > limit:
        raise ScarceError(f"{what} {str(path)!r} is {size:,} bytes, more than the {limit:,} bytes such a "
                          "file may have; it is not read")


def read_json_file(path: Path, what: str, limit: int) -> Any:
    """A JSON file read whole after its size is checked against ``limit``; every failure a
    :class:`ScarceError` naming ``what`` and the file (missing, too large, too deep, not JSON, an
    object naming a key twice, text that is not valid Unicode)."""
    check_file_size(path, what, limit)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        data = json.loads(text, object_pairs_hook=unique_keys)
    except FileNotFoundError:  # removed between the size check and the open
        raise ScarceError(f"{what} {str(path)!r} does not exist") from None
    except RecursionError:
        raise ScarceError(f"{what} {str(path)!r} is nested too deeply to be read") from None
    except DuplicateKeyError as exc:
        raise ScarceError(f"{what} {str(path)!r}: {exc}") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # ValueError: JSONDecodeError, huge ints
        raise ScarceError(f"{what} {str(path)!r} is not readable JSON: {exc}") from None
    problem = unicode_problem(text, data)
    if problem is not None:
        raise ScarceError(f"{what} {str(path)!r} {problem}")
    return data


def _load_json(path: Path) -> dict[str, Any]:
    data = read_json_file(path, "artifact file", MAX_ARTIFACT_BYTES)
    if not isinstance(data, dict) or not isinstance(data.get("jailbreaks"), list):
        raise ScarceError(f"artifact file {str(path)!r} must be a JSON object with a 'jailbreaks' list "
                          "(a JailbreakBench attack artifact)")
    return data


def _flag(value: object, path: Path, position: int) -> bool:
    if isinstance(value, (bool, np.bool_)) or value in (0, 1):
        return bool(value)
    raise ScarceError(f"artifact file {str(path)!r}, entry {position}: 'jailbroken' must be true or "
                      f"false, got {value!r}")


def _entry_index(entry: dict[str, Any], path: Path, position: int) -> int:
    index = entry.get("index", position)
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise ScarceError(f"artifact file {str(path)!r}, entry {position}: 'index' must be a "
                          f"non-negative integer, got {index!r}")
    return index


def _check_texts(entry: dict[str, Any], path: Path, position: int) -> None:
    for name in ("prompt", "response", "category"):
        value = entry.get(name)
        if value is not None and not isinstance(value, str):
            raise ScarceError(f"artifact file {str(path)!r}, entry {position}: {name!r} must be a string "
                              f"or null, got {type(value).__name__}")


def _attack_record(entry: dict[str, Any], index: int, flag: bool, method: str, attack_type: str,
                   target: str) -> dict[str, Any]:
    return {
        "record_id": f"{method}/{attack_type}/{target}/{index}", "behavior_id": f"harmful/{index}",
        "harmful": True, "method": method, "target_model": target, "turn": pd.NA,
        "prompt": entry["prompt"], "response": entry.get("response") or "", "judge_score": np.nan,
        "jailbroken": flag, "attack_type": attack_type, "category": entry.get("category") or "",
    }


def read_attack_artifact(path: PathLike, *, method: str | None = None,
                         attack_type: str | None = None) -> pd.DataFrame:
    """Read one attack artifact file as corpus records.

    Parameters
    ----------
    path : str or path-like
        ``.../<METHOD>/<attack type>/<target>.json``.
    method, attack_type : str, optional
        Override the names taken from the two parent directories.

    Returns
    -------
    pandas.DataFrame
        One row per entry with a prompt, in the corpus schema. ``frame.attrs["summary"]`` holds
        the file's counts: ``entries``, ``records``, ``dropped_no_prompt``, ``jailbreaks``
        (recounted from the records), ``stated_jailbreaks`` (``parameters.total_number_of_jailbreaks``,
        None if absent) and ``stale_total`` (the stated total differs from the recount over all
        entries).
    """
    path = check_path("path", path)
    method = check_name(method, "method", optional=True) or path.parent.parent.name
    attack_type = check_name(attack_type, "attack_type", optional=True) or path.parent.name
    data = _load_json(path)
    parameters = data.get("parameters") if isinstance(data.get("parameters"), dict) else {}
    model = parameters.get("model")
    if model is not None and not isinstance(model, str):
        raise ScarceError(f"artifact file {str(path)!r}: parameters.model must be a string (the target "
                          f"model's name), got {type(model).__name__}")
    target = model or path.stem
    rows, dropped, seen = [], 0, set()
    jailbroken_all = 0
    for position, entry in enumerate(data["jailbreaks"]):
        if not isinstance(entry, dict):
            raise ScarceError(f"artifact file {str(path)!r}, entry {position}: expected an object, "
                              f"got {type(entry).__name__}")
        index = _entry_index(entry, path, position)
        if index in seen:
            raise ScarceError(f"artifact file {str(path)!r}: behaviour index {index} appears twice")
        seen.add(index)
        if "jailbroken" not in entry:
            raise ScarceError(f"artifact file {str(path)!r}, entry {position}: no 'jailbroken' flag")
        flag = _flag(entry["jailbroken"], path, position)
        jailbroken_all += flag
        prompt = entry.get("prompt")
        if prompt is None:
            dropped += 1
            continue
        _check_texts(entry, path, position)
        rows.append(_attack_record(entry, index, flag, method, attack_type, target))
    frame = as_corpus(rows)
    stated = parameters.get("total_number_of_jailbreaks")
    frame.attrs["summary"] = {
        "file": str(path), "method": method, "attack_type": attack_type, "target_model": target,
        "entries": len(data["jailbreaks"]), "records": len(rows), "dropped_no_prompt": dropped,
        "jailbreaks": int(frame["jailbroken"].sum()), "jailbreaks_all_entries": jailbroken_all,
        "stated_jailbreaks": stated,
        "stale_total": stated is not None and stated != jailbroken_all,
    }
    return frame


def read_attack_artifacts(root: PathLike | None = None) -> pd.DataFrame:
    """Read every artifact file (every method and target model) as one corpus table.

    Parameters
    ----------
    root : str or path-like, optional
        The JailbreakBench directory (or its ``attack-artifacts`` subdirectory, or a data
        directory with ``jailbreakbench/``). Default: ``$SCARCE_DATA_DIR/jailbreakbench``.

    Returns
    -------
    pandas.DataFrame
        The records of all files, in file order. ``frame.attrs["files"]`` lists the per-file
        summaries of :func:`read_attack_artifact` and ``frame.attrs["dropped_no_prompt"]`` their total.
    """
    base = _artifact_root(root)
    files = find_artifact_files(base)
    if not files:
        raise ScarceError(f"no artifact files under {str(base)!r}; expected "
                          f"'{ARTIFACTS_DIR}/<METHOD>/<attack type>/<target>.json'")
    frames = [read_attack_artifact(path) for path in files]
    summaries = [f.attrs["summary"] for f in frames]
    frame = pd.concat(frames, ignore_index=True).astype(CORPUS_COLUMNS)
    _check_unique(frame["record_id"], "record_id")
    frame.attrs = {"files": summaries,
                   "dropped_no_prompt": sum(s["dropped_no_prompt"] for s in summaries)}
    return frame


def _artifact_root(root: PathLike | None) -> Path:
    if root is not None:
        base = check_path("root", root)
        if base.name == ARTIFACTS_DIR and is_dir(base):
            return base
    return resolve_jailbreakbench_dir(root)


def _check_unique(values: pd.Series, name: str) -> None:
    duplicated = values[values.duplicated()]
    if len(duplicated):
        raise ScarceError(f"{name} must be unique; {len(duplicated)} duplicate(s), e.g. "
                          f"{duplicated.iloc[0]!r}")


# --------------------------------------------------------------------------- behaviours

def read_behaviors(path: PathLike, *, harmful: bool) -> pd.DataFrame:
    """Read a JBB-Behaviors CSV (``index,goal,target,behavior,category,source``).

    Parameters
    ----------
    path : str or path-like
        ``harmful-behaviors.csv`` or ``benign-behaviors.csv``.
    harmful : bool
        Which of the two files it is (sets ``behavior_id`` = ``"harmful/<index>"`` or
        ``"benign/<index>"`` and the ``harmful`` column).

    Returns
    -------
    pandas.DataFrame
        Columns ``behavior_id``, ``harmful`` and the CSV columns (``index`` as int).
    """
    path = check_path("path", path)
    harmful = check_flag("harmful", harmful)
    check_file_size(path, "behaviours file", MAX_BEHAVIORS_BYTES)
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            reader = csv.DictReader(handle)
            header = reader.fieldnames or []
            rows = list(reader)
    except FileNotFoundError:  # removed between the size check and the open
        raise ScarceError(f"behaviours file {str(path)!r} does not exist") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ScarceError(f"behaviours file {str(path)!r} is not a readable CSV: {exc}") from None
    missing = [c for c in ("index", "goal") if c not in header]
    if missing:
        raise ScarceError(f"behaviours file {str(path)!r} lacks column(s) {missing}; expected the "
                          f"JBB-Behaviors header {','.join(BEHAVIOR_COLUMNS)}")
    kind = "harmful" if harmful else "benign"
    records = []
    for line, row in enumerate(rows, start=2):
        try:
            index = int(row["index"])
        except (TypeError, ValueError):
            raise ScarceError(f"behaviours file {str(path)!r}, line {line}: 'index' must be an "
                              f"integer, got {row['index']!r}") from None
        if not row.get("goal"):
            raise ScarceError(f"behaviours file {str(path)!r}, line {line}: empty 'goal'")
        records.append({"behavior_id": f"{kind}/{index}", "harmful": bool(harmful), "index": index,
                        **{c: row.get(c) or "" for c in BEHAVIOR_COLUMNS if c != "index"}})
    frame = pd.DataFrame(records, columns=["behavior_id", "harmful", *BEHAVIOR_COLUMNS])
    _check_unique(frame["behavior_id"], "behavior_id")
    return frame


def benign_records(behaviors: pd.DataFrame) -> pd.DataFrame:
    """Corpus records of plain behaviours: prompt = goal, response = ``""``, not jailbroken.

    Parameters
    ----------
    behaviors : pandas.DataFrame
        A table from :func:`read_behaviors` (benign or harmful).

    Returns
    -------
    pandas.DataFrame
        One record per behaviour with ``record_id`` = ``behavior_id``, ``method`` and
        ``target_model`` ``"none"``.
    """
    rows = [{
        "record_id": row.behavior_id, "behavior_id": row.behavior_id, "harmful": bool(row.harmful),
        "method": NO_VALUE, "target_model": NO_VALUE, "turn": pd.NA, "prompt": str(row.goal),
        "response": "", "judge_score": np.nan, "jailbroken": False, "attack_type": NO_VALUE,
        "category": str(row.category),
    } for row in behaviors.itertuples(index=False)]
    return as_corpus(rows)


def load_jailbreakbench_corpus(root: PathLike | None = None, *, include_benign: bool = True
                               ) -> pd.DataFrame:
    """The LLM corpus: every harmful attack conversation plus the benign behaviours.

    Parameters
    ----------
    root : str or path-like, optional
        The JailbreakBench directory, or a data directory with ``jailbreakbench/``. Default:
        ``$SCARCE_DATA_DIR/jailbreakbench``.
    include_benign : bool
        Append the benign JBB behaviours (``behaviors/benign-behaviors.csv``) as records.

    Returns
    -------
    pandas.DataFrame
        Attack records (all methods and targets, failed entries dropped) then benign records, in
        the corpus schema. ``frame.attrs["counts"]`` holds ``attack_records``,
        ``dropped_no_prompt``, ``jailbreaks``, ``benign_records`` and ``records``;
        ``frame.attrs["files"]`` the per-file summaries.
    """
    include_benign = check_flag("include_benign", include_benign)
    base = resolve_jailbreakbench_dir(root)
    attacks = read_attack_artifacts(base)
    files, dropped = attacks.attrs["files"], attacks.attrs["dropped_no_prompt"]
    parts = [attacks]
    if include_benign:
        path = base / BEHAVIORS_DIR / BEHAVIOR_FILES[False]
        parts.append(benign_records(read_behaviors(path, harmful=False)))
    frame = pd.concat(parts, ignore_index=True).astype(CORPUS_COLUMNS)
    _check_unique(frame["record_id"], "record_id")
    frame.attrs = {
        "files": files,
        "counts": {
            "attack_records": len(attacks), "dropped_no_prompt": dropped,
            "jailbreaks": int(attacks["jailbroken"].sum()),
            "benign_records": len(frame) - len(attacks), "records": len(frame),
        },
    }
    return frame


def summarize_counts(frame: pd.DataFrame, by: Iterable[str] = ("method", "target_model")) -> pd.DataFrame:
    """Records and jailbreaks per group of a corpus table (a small reporting helper)."""
    keys = list(by)
    grouped = frame.groupby(keys, sort=True)["jailbroken"]
    return pd.DataFrame({"records": grouped.size(), "jailbreaks": grouped.sum().astype(int)}).reset_index()
