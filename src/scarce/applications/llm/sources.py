"""Where a corpus comes from: the file formats evaluation tools write, read into the corpus schema.

:func:`read_conversations` reads one file (or a JailbreakBench directory) in any of

================  ===========================================================================
format            what
================  ===========================================================================
jailbreakbench    a JailbreakBench data directory, or one attack artifact ``.json``
                  (:mod:`scarce.datasets.jailbreakbench`)
harmbench         HarmBench completions with classifier labels, ``{behavior_id: [...]}`` ``.json``
                  (:mod:`scarce.datasets.harmbench`)
garak             a garak ``report.jsonl`` (:mod:`scarce.datasets.garak`)
jsonl, csv        plain ``prompt``, ``response``, ``label`` records (:mod:`scarce.datasets.labelled`)
corpus            this library's own table, ``.parquet`` or ``.jsonl`` (:func:`.corpus.read_corpus`)
================  ===========================================================================

and infers the format from the file when it is unambiguous: the suffix, then the first record's
keys (a garak line has ``entry_type``; a corpus record has ``record_id``, ``method``,
``target_model`` and ``jailbroken``; a HarmBench object maps ids to lists of ``test_case``
entries; an artifact has ``jailbreaks``). Anything else, or a file that matches two formats, is
an error that lists the formats.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Union

import pandas as pd

from scarce.datasets._inputs import is_dir
from scarce.errors import ScarceError, unknown_name_error

__all__ = ["FORMATS", "infer_format", "read_conversations"]

PathLike = Union[str, "os.PathLike[str]"]
FORMATS = ("jailbreakbench", "harmbench", "garak", "jsonl", "csv", "corpus")
"""The corpus formats :func:`read_conversations` reads."""
_CORPUS_KEYS = {"record_id", "method", "target_model", "jailbroken"}
_PEEK_BYTES = 1 << 20


def _first_record(path: Path) -> Any:
    """The first JSON value of a JSON Lines file (a bounded read), or None when it is not JSON."""
    with open(path, "rb") as handle:
        for raw in iter(lambda: handle.readline(_PEEK_BYTES), b""):
            if raw.strip():
                try:
                    return json.loads(raw)
                except (ValueError, RecursionError):
                    return None
    return None


def _json_kinds(path: Path) -> list[str]:
    from scarce.datasets.harmbench import MAX_HARMBENCH_BYTES
    from scarce.datasets.jailbreakbench import read_json_file

    data = read_json_file(path, "corpus file", MAX_HARMBENCH_BYTES)
    kinds = []
    if isinstance(data, dict) and isinstance(data.get("jailbreaks"), list):
        kinds.append("jailbreakbench")
    if isinstance(data, dict) and data and all(isinstance(v, list) and all(isinstance(e, dict) and "test_case" in e
                                                                          for e in v) for v in data.values()):
        kinds.append("harmbench")
    return kinds


def _jsonl_kinds(path: Path) -> list[str]:
    record = _first_record(path)
    if not isinstance(record, dict):
        return []
    kinds = []
    if "entry_type" in record:
        kinds.append("garak")
    if _CORPUS_KEYS <= set(record):
        kinds.append("corpus")
    elif {"prompt", "response"} <= set(record):
        kinds.append("jsonl")
    return kinds


def infer_format(path: PathLike) -> str:
    """The one format ``path`` can be read as, or a :class:`ScarceError` (unknown or ambiguous)."""
    file = Path(path)
    if file.is_dir():
        return "jailbreakbench"
    if not file.is_file():
        raise ScarceError(f"corpus input {str(file)!r} is not a file or directory")
    suffix = file.suffix.lower()
    kinds = {".csv": ["csv"], ".parquet": ["corpus"]}.get(suffix)
    if kinds is None:
        kinds = _json_kinds(file) if suffix == ".json" else _jsonl_kinds(file) if suffix == ".jsonl" else []
    if len(kinds) == 1:
        return kinds[0]
    what = "matches several formats (" + ", ".join(kinds) + ")" if kinds else "is of no format this library reads"
    raise ScarceError(f"corpus input {str(file)!r} {what}; name its format: one of {', '.join(FORMATS)}")


def read_conversations(path: PathLike, format: str | None = None, **options: Any) -> pd.DataFrame:
    """Read ``path`` in ``format`` (inferred when None) as a corpus table, checked.

    ``options`` go to the reader, and are exactly its keyword arguments: ``include_benign`` (a
    JailbreakBench directory), ``method`` and ``attack_type`` (a JailbreakBench artifact file),
    ``method``, ``target_model`` and ``unlabelled`` (HarmBench), ``target_model`` (garak),
    ``unlabelled`` (jsonl, csv), none (corpus). Any other option is refused by name before the
    file is read, rather than reaching the reader as a ``TypeError``.
    """
    chosen = infer_format(path) if format is None else format
    if chosen not in FORMATS:
        raise unknown_name_error("format", chosen, FORMATS)
    reader, what = _reader(chosen, Path(path))
    takes = _keyword_options(reader)
    wrong = sorted(set(options) - set(takes))
    if wrong:
        raise ScarceError(f"option(s) {', '.join(wrong)} do not apply to {what} {str(path)!r} "
                          f"(it takes: {', '.join(takes) or 'none'})")
    frame = reader(Path(path), **options)
    from scarce.applications.llm.corpus import check_corpus

    return check_corpus(frame, source=f"{chosen} file {str(path)!r}")


def _reader(chosen: str, path: Path) -> tuple[Callable[..., pd.DataFrame], str]:
    """The function that reads ``path`` in format ``chosen``, and how to name what it reads.

    A JailbreakBench directory and a JailbreakBench artifact file have different readers, with
    different options.
    """
    from scarce.applications.llm.corpus import read_corpus
    from scarce.datasets.garak import read_garak
    from scarce.datasets.harmbench import read_harmbench
    from scarce.datasets.jailbreakbench import load_jailbreakbench_corpus, read_attack_artifact
    from scarce.datasets.labelled import read_labelled

    if chosen == "jailbreakbench":
        if is_dir(path):
            return load_jailbreakbench_corpus, "the jailbreakbench format's data directory"
        return read_attack_artifact, "the jailbreakbench format's artifact file"
    readers = {"harmbench": read_harmbench, "garak": read_garak, "jsonl": read_labelled, "csv": read_labelled,
               "corpus": read_corpus}
    return readers[chosen], f"the {chosen} format of"


def _keyword_options(reader: Callable[..., Any]) -> tuple[str, ...]:
    """The options ``reader`` takes: its keyword-only parameters (so this list cannot drift from it)."""
    return tuple(name for name, parameter in inspect.signature(reader).parameters.items()
                 if parameter.kind is inspect.Parameter.KEYWORD_ONLY)
