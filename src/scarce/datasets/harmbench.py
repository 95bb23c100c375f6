"""HarmBench completions and their classifier results, as LLM corpus tables.

HarmBench's ``generate_completions.py`` writes one JSON object per run,
``{behavior_id: [{"test_case": str, "generation": str}, ...]}``, and its
``evaluate_completions.py`` the same object with each entry's classifier verdict added:
``"label": 1`` (the completion is an instance of the harmful behaviour: a jailbreak), ``0`` (not),
or ``-1`` (the classifier's answer could not be parsed). One file holds one attack method against
one target model; HarmBench names the file after the model (``results/<METHOD>/<experiment>/
results/<model>.json``), so the target defaults to the file's stem and the method to
``"harmbench"`` unless given.

Every completion becomes one corpus record (:data:`~scarce.datasets.jailbreakbench.CORPUS_COLUMNS`):
``record_id`` ``"<method>/<target>/<behavior_id>/<i>"``, ``prompt`` the test case, ``response``
the generation, ``jailbroken`` the label. Completions without a usable label are refused, or
dropped and counted with ``unlabelled="drop"``: the calibration ``C_tau`` needs every record's label.

>>> import json, tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "llama2_7b.json"
>>> _ = path.write_text(json.dumps({"make_bomb": [{"test_case": "How?", "generation": "No.", "label": 0}]}))
>>> frame = read_harmbench(path, method="GCG")
>>> frame[["record_id", "method", "target_model", "jailbroken"]].values.tolist()
[['GCG/llama2_7b/make_bomb/0', 'GCG', 'llama2_7b', False]]
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Union

import numpy as np
import pandas as pd

from scarce.checks import check_path
from scarce.datasets._inputs import check_name
from scarce.datasets.jailbreakbench import as_corpus, read_json_file
from scarce.errors import ScarceError

__all__ = ["MAX_HARMBENCH_BYTES", "read_harmbench"]

PathLike = Union[str, "os.PathLike[str]"]
#: HarmBench result files are a few MB (a few hundred behaviours x a few completions).
MAX_HARMBENCH_BYTES = 512 << 20
UNLABELLED = ("error", "drop")


def _label(entry: dict[str, Any], where: str) -> bool | None:
    value = entry.get("label")
    if value is None or (not isinstance(value, bool) and value == -1):
        return None
    if isinstance(value, (bool, np.bool_)) or value in (0, 1):
        return bool(value)
    raise ScarceError(f"{where}: 'label' must be 1 (jailbroken), 0 (not) or -1 (unparsed), got {value!r}")


def _entry_texts(entry: Any, where: str) -> tuple[str, str]:
    if not isinstance(entry, dict):
        raise ScarceError(f"{where} must be an object with 'test_case' and 'generation', got {type(entry).__name__}")
    texts = []
    for name in ("test_case", "generation"):
        value = entry.get(name)
        if not isinstance(value, str):
            raise ScarceError(f"{where}: {name!r} must be a string, got {type(value).__name__}"
                              + (" (multimodal test cases are not read)" if name == "test_case" else ""))
        texts.append(value)
    return texts[0], texts[1]


def _records(data: dict[str, Any], path: Path, method: str, target: str) -> tuple[list[dict[str, Any]], int]:
    rows, unlabelled = [], 0
    for behavior, entries in data.items():
        if not isinstance(entries, list):
            raise ScarceError(f"HarmBench file {str(path)!r}: behaviour {behavior!r} must map to a list of "
                              f"completions, got {type(entries).__name__}")
        for i, entry in enumerate(entries):
            where = f"HarmBench file {str(path)!r}, behaviour {behavior!r}, completion {i}"
            prompt, response = _entry_texts(entry, where)
            flag = _label(entry, where)
            if flag is None:
                unlabelled += 1
                continue
            rows.append({"record_id": f"{method}/{target}/{behavior}/{i}", "behavior_id": str(behavior),
                         "harmful": True, "method": method, "target_model": target, "turn": pd.NA,
                         "prompt": prompt, "response": response, "judge_score": np.nan, "jailbroken": flag,
                         "attack_type": "", "category": ""})
    return rows, unlabelled


def read_harmbench(path: PathLike, *, method: str = "harmbench", target_model: str | None = None,
                   unlabelled: str = "error") -> pd.DataFrame:
    """Read a HarmBench completions file with classifier labels as corpus records.

    Parameters
    ----------
    path : the ``{behavior_id: [{test_case, generation, label}]}`` JSON file
    method : the attack method that made the test cases (``"GCG"``, ``"PAIR"``, ...)
    target_model : the model that wrote the generations; default: the file's stem
    unlabelled : ``"error"`` (default) refuses completions whose label is missing or -1;
        ``"drop"`` leaves them out (the frame's ``attrs["dropped_unlabelled"]`` counts them)
    """
    if not isinstance(unlabelled, str) or unlabelled not in UNLABELLED:
        raise ScarceError(f"unlabelled must be 'error' or 'drop', got {unlabelled!r}")
    file = check_path("path", path)
    method = check_name(method, "method")
    target = check_name(target_model, "target_model", optional=True) or file.stem
    data = read_json_file(file, "HarmBench file", MAX_HARMBENCH_BYTES)
    if not isinstance(data, dict) or not data:
        raise ScarceError(f"HarmBench file {str(file)!r} must be a non-empty JSON object mapping behaviour ids to "
                          f"lists of completions")
    rows, dropped = _records(data, file, method, target)
    if dropped and unlabelled == "error":
        raise ScarceError(f"HarmBench file {str(file)!r}: {dropped} completion(s) have no classifier label (missing "
                          f"or -1), and calibration needs every record's label; run HarmBench's "
                          f"evaluate_completions.py on them,"
                          f" or pass unlabelled='drop' (--drop-unlabelled) to leave them out")
    if not rows:
        raise ScarceError(f"HarmBench file {str(file)!r} holds no labelled completion ({dropped} unlabelled); an "
                          "empty corpus has nothing to calibrate")
    frame = as_corpus(rows)
    frame.attrs["dropped_unlabelled"] = dropped
    return frame
