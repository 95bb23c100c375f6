"""garak scan reports (``garak.<uuid>.report.jsonl``) as LLM corpus tables.

A garak report is JSON Lines; each line has an ``entry_type``. The reader uses two kinds:

* ``"start_run setup"``: the run's settings, where ``plugins.target_name`` (older garak:
  ``plugins.model_name``) names the model under test;
* ``"attempt"`` with ``status == 2`` (sent, answered and evaluated): one prompt, its ``outputs``
  (one per generation) and ``detector_results`` (``{detector: [score per output]}``, scores in
  [0, 1]). Earlier statuses of the same attempt (0: not sent, 1: not evaluated) are skipped.

Each evaluated output becomes one corpus record: ``method`` the probe (``dan.Dan_11_0``),
``prompt`` the text of the prompt's turns, ``response`` the output, ``judge_score`` the largest
detector score and ``jailbroken`` whether it reaches garak's hit threshold (0.5, as garak's
evaluator counts a hit). Both report layouts are read: prompts and outputs as plain strings
(garak before 0.10) or as ``{"turns": [{"role", "content": {"text"}}]}`` conversations and
``{"text": ...}`` messages. Outputs that are missing (a failed generation) are dropped and counted
in ``attrs["dropped_no_output"]``; an evaluated attempt without detector results is refused.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Union

import pandas as pd

from scarce.datasets.jailbreakbench import as_corpus, check_file_size
from scarce.datasets.jsonlines import json_objects
from scarce.errors import ScarceError

__all__ = ["HIT_THRESHOLD", "read_garak"]

PathLike = Union[str, "os.PathLike[str]"]
#: A detector score at or above this is a hit (garak's evaluator threshold).
HIT_THRESHOLD = 0.5
MAX_GARAK_BYTES = 4 << 30
MAX_LINE_BYTES = 64 << 20
_EVALUATED = 2


def _text(value: Any, where: str) -> str | None:
    """A prompt or output as text: a string, a ``{"text"}`` message or a ``{"turns"}`` conversation."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict) and "turns" in value:
        texts = [_text(turn.get("content") if isinstance(turn, dict) else turn, where) for turn in value["turns"]]
        return "\n\n".join(t for t in texts if t)
    if isinstance(value, dict) and ("text" in value or not value):
        text = value.get("text")
        if text is None or isinstance(text, str):
            return text
    raise ScarceError(f"{where}: expected text, a message {{'text': ...}} or a conversation {{'turns': [...]}}, got "
                      f"{type(value).__name__} {str(value)[:80]!r}")


def _lines(path: Path) -> Any:
    """``(where, entry)`` for every non-empty line, each checked to carry an ``entry_type``."""
    check_file_size(path, "garak report", MAX_GARAK_BYTES)
    for where, entry in json_objects(path, "garak report", MAX_LINE_BYTES):
        if "entry_type" not in entry:
            raise ScarceError(f"{where}: every line of a garak report is an object with an 'entry_type'")
        yield where, entry


def _output_rows(entry: dict[str, Any], where: str, target: str) -> tuple[list[dict[str, Any]], int]:
    probe = str(entry.get("probe_classname") or "unknown").removeprefix("probes.")
    outputs, results = entry.get("outputs") or [], entry.get("detector_results")
    if not isinstance(results, dict) or not results:
        raise ScarceError(f"{where}: an evaluated attempt (status 2) without detector_results; its outputs have no "
                          f"label, which calibration needs")
    prompt = _text(entry.get("prompt"), where) or ""
    rows, missing = [], 0
    for i, output in enumerate(outputs):
        response = _text(output, f"{where}, output {i}")
        scores = [_score(values, i, detector, where) for detector, values in results.items()]
        if response is None:
            missing += 1
            continue
        top = max(scores)
        rows.append({"record_id": f"garak/{probe}/{entry.get('uuid', where)}/{i}",
                     "behavior_id": f"{probe}/{entry.get('seq', '')}", "harmful": True, "method": probe,
                     "target_model": target, "turn": pd.NA, "prompt": prompt, "response": response,
                     "judge_score": top, "jailbroken": top >= HIT_THRESHOLD, "attack_type": "",
                     "category": str(entry.get("goal") or "")})
    return rows, missing


def _score(values: Any, i: int, detector: str, where: str) -> float:
    try:
        score = float(values[i])
    except (TypeError, ValueError, IndexError, KeyError):
        raise ScarceError(f"{where}: detector {detector!r} gives no score in [0, 1] for output {i}") from None
    if not 0.0 <= score <= 1.0:
        raise ScarceError(f"{where}: detector {detector!r} scored output {i} {score!r}, outside [0, 1]")
    return score


def read_garak(path: PathLike, *, target_model: str | None = None) -> pd.DataFrame:
    """Read the evaluated attempts of a garak report as corpus records (one per output).

    ``target_model`` overrides the model named in the report's setup entry.
    """
    file = Path(path)
    attempts: dict[str, tuple[str, dict[str, Any]]] = {}
    target = target_model
    for where, entry in _lines(file):
        kind = entry["entry_type"]
        if kind == "start_run setup" and target is None:
            target = entry.get("plugins.target_name") or entry.get("plugins.model_name")
        elif kind == "attempt" and entry.get("status") == _EVALUATED:
            attempts[str(entry.get("uuid", where))] = (where, entry)  # the last evaluation of an attempt
    if not attempts:
        raise ScarceError(f"garak report {str(file)!r} has no evaluated attempt (entry_type 'attempt', status 2); "
                          f"was the scan finished?")
    rows, missing = [], 0
    for where, entry in attempts.values():
        more, lost = _output_rows(entry, where, str(target or "unknown"))
        rows += more
        missing += lost
    frame = as_corpus(rows)
    frame.attrs["dropped_no_output"] = missing
    return frame

