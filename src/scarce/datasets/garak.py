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
``{"text": ...}`` messages; a prompt of several turns is joined with each turn's role. Outputs
that are missing (a failed generation) are dropped and counted in ``attrs["dropped_no_output"]``,
outputs no detector scored in ``attrs["dropped_unscored"]`` (garak's evaluator skips them too);
an evaluated attempt without detector results is refused.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Union

import pandas as pd

from scarce.checks import check_path
from scarce.datasets._inputs import check_name
from scarce.datasets.jailbreakbench import as_corpus, check_file_size
from scarce.datasets.jsonlines import json_objects
from scarce.errors import ScarceError, show

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
        turns = value["turns"]
        if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
            raise ScarceError(f"{where}: a conversation's 'turns' must be a list of objects "
                              f"({{'role': ..., 'content': ...}}), got {show(turns)}")
        texts = [(_role(t.get("role"), where), _text(t.get("content"), where)) for t in turns]
        if len(texts) == 1:
            return texts[0][1]
        return "\n\n".join(f"{role}: {text}" if role else text for role, text in texts if text)
    if isinstance(value, dict) and ("text" in value or not value):
        text = value.get("text")
        if text is None or isinstance(text, str):
            return text
    raise ScarceError(f"{where}: expected text, a message {{'text': ...}} or a conversation {{'turns': [...]}}, got "
                      f"{type(value).__name__} {str(value)[:80]!r}")


def _role(value: Any, where: str) -> str:
    """A turn's role (``"user"``, ``"assistant"``...): a string, or empty when absent."""
    if value is None or isinstance(value, str):
        return value or ""
    raise ScarceError(f"{where}: a turn's 'role' must be a string, got {show(value)} ({type(value).__name__})")


def _list(entry: dict[str, Any], name: str, where: str) -> list[Any]:
    """``entry[name]`` as a list (empty when absent or null); any other value is refused, since
    its items (the characters of a string, the keys of an object) would be taken as outputs."""
    value = entry.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ScarceError(f"{where}: {name!r} must be a list (one item per output), got {show(value)} "
                          f"({type(value).__name__})")
    return value


def _entry_text(entry: dict[str, Any], name: str, where: str, default: str) -> str:
    """``entry[name]`` (the probe's class name, the goal) as text, ``default`` when absent or empty."""
    value = entry.get(name)
    if value is None or value == "":
        return default
    if not isinstance(value, str):
        raise ScarceError(f"{where}: {name!r} must be a string, got {show(value)} ({type(value).__name__})")
    return value


def _lines(path: Path) -> Any:
    """``(where, entry)`` for every non-empty line, each checked to carry an ``entry_type``."""
    check_file_size(path, "garak report", MAX_GARAK_BYTES)
    for where, entry in json_objects(path, "garak report", MAX_LINE_BYTES):
        if "entry_type" not in entry:
            raise ScarceError(f"{where}: every line of a garak report is an object with an 'entry_type'")
        yield where, entry


def _output_rows(entry: dict[str, Any], where: str, target: str) -> tuple[list[dict[str, Any]], int, int]:
    """The attempt's records, the outputs missing (failed generations) and those no detector scored."""
    probe = _entry_text(entry, "probe_classname", where, "unknown").removeprefix("probes.")
    outputs, results = _list(entry, "outputs", where), entry.get("detector_results")
    if not isinstance(results, dict) or not results:
        raise ScarceError(f"{where}: an evaluated attempt (status 2) without detector_results; its outputs have no "
                          f"label, which calibration needs")
    prompt = _text(entry.get("prompt"), where) or ""
    for detector in results:
        _list(results, detector, f"{where}, detector_results")
    rows, missing, unscored = [], 0, 0
    for i, output in enumerate(outputs):
        response = _text(output, f"{where}, output {i}")
        if response is None:  # a failed generation: garak scores it None too
            missing += 1
            continue
        scores = [score for detector, values in results.items()
                  if (score := _score(values, i, detector, where)) is not None]
        if not scores:  # no detector scored it (garak's evaluator skips such outputs too)
            unscored += 1
            continue
        top = max(scores)
        rows.append({"record_id": f"garak/{probe}/{entry.get('uuid', where)}/{i}",
                     "behavior_id": f"{probe}/{entry.get('seq', '')}", "harmful": True, "method": probe,
                     "target_model": target, "turn": pd.NA, "prompt": prompt, "response": response,
                     "judge_score": top, "jailbroken": top >= HIT_THRESHOLD, "attack_type": "",
                     "category": _entry_text(entry, "goal", where, "")})
    return rows, missing, unscored


def _score(values: Any, i: int, detector: str, where: str) -> float | None:
    """Detector ``detector``'s score of output ``i`` in [0, 1], or None where it gave none."""
    if not isinstance(values, list) or i >= len(values) or values[i] is None:
        return None
    value = values[i]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ScarceError(f"{where}: detector {detector!r} scored output {i} {show(value)}, not a number in [0, 1]")
    if not 0 <= value <= 1:  # compared before float(): an integer beyond float range cannot become one
        raise ScarceError(f"{where}: detector {detector!r} scored output {i} {show(value)}, outside [0, 1]")
    return float(value)


def _setup_target(entry: dict[str, Any], where: str) -> str | None:
    """The model under test named by a setup entry (``plugins.target_name``, older garak
    ``plugins.model_name``), or None when it names none."""
    value = entry.get("plugins.target_name") or entry.get("plugins.model_name")
    if value is not None and not isinstance(value, str):
        raise ScarceError(f"{where}: plugins.target_name must be a string (the model's name), got {show(value)} "
                          f"({type(value).__name__})")
    return value or None


def read_garak(path: PathLike, *, target_model: str | None = None) -> pd.DataFrame:
    """Read the evaluated attempts of a garak report as corpus records (one per output).

    ``target_model`` overrides the model named in the report's setup entry.
    """
    file = check_path("path", path)
    attempts: dict[str, tuple[str, dict[str, Any]]] = {}
    target = check_name(target_model, "target_model", optional=True)
    for where, entry in _lines(file):
        kind = entry["entry_type"]
        if kind == "start_run setup" and target is None:
            target = _setup_target(entry, where)
        elif kind == "attempt" and entry.get("status") == _EVALUATED:
            attempts[str(entry.get("uuid", where))] = (where, entry)  # the last evaluation of an attempt
    if not attempts:
        raise ScarceError(f"garak report {str(file)!r} has no evaluated attempt (entry_type 'attempt', status 2); "
                          f"was the scan finished?")
    rows, missing, unscored = [], 0, 0
    for where, entry in attempts.values():
        more, lost, blank = _output_rows(entry, where, str(target or "unknown"))
        rows, missing, unscored = rows + more, missing + lost, unscored + blank
    if not rows:
        raise ScarceError(f"garak report {str(file)!r}: no evaluated output has a detector score")
    frame = as_corpus(rows)
    frame.attrs.update(dropped_no_output=missing, dropped_unscored=unscored)
    return frame

