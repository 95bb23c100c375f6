"""Run configurations: presets as data files, one ``--set key=value`` parser, one task-seed rule.

Both applications describe a run by a frozen dataclass (``VisionPreset``, ``SweepConfig``) whose
named presets live in a TOML file shipped with the package.  This module reads those files, reads
command-line overrides with one set of typing rules, and derives every task's seed the same way:

* a value is read as the type of the setting's current value: ``true``/``false``; an integer
  (``12``, ``1e4`` or ``2000.0``, never ``0.5``); a finite number; text; or a comma-separated
  list of one of these;
* an unknown key gets the closest names ("did you mean") and the allowed ones; a key given twice
  is refused;
* ``task_seed(base, *parts)`` is ``SeedSequence([base, *parts])`` with text parts replaced by
  their CRC-32: a function of what the task is, never of when or where it runs, so a run gives
  the same numbers on one worker or many and resumes bit for bit.
"""

from __future__ import annotations

import math
import tomllib
import zlib
from collections.abc import Callable, Iterable, Mapping
from importlib import resources
from typing import Any, TypeVar

import numpy as np

from scarce.checks import split_setting
from scarce.errors import ScarceError, unknown_name_error

__all__ = ["check_table", "coerce_setting", "load_presets", "nest", "parse_settings", "task_seed"]

T = TypeVar("T")


def _integer(text: str) -> int:
    """An integer written as ``12``, ``1e4`` or ``2000.0``; ``ValueError`` for anything else."""
    number = float(text)
    if not number.is_integer():
        raise ValueError(text)
    return int(text) if text.lstrip("+-").isdigit() else int(number)


def _number(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(text)
    return number


def _kind(current: Any) -> str:
    if isinstance(current, bool):
        return "true or false"
    if isinstance(current, int):
        return "an integer"
    if isinstance(current, float):
        return "a finite number"
    if isinstance(current, tuple):
        kinds = {type(v) for v in current}
        return "a comma-separated list of " + ("integers" if kinds == {int} else "numbers" if kinds == {float}
                                               else "names")
    return "a text"


def _example(current: Any) -> str:
    if isinstance(current, tuple):
        return ",".join(map(str, current)) or "a,b"
    return str(current).lower() if isinstance(current, bool) else str(current)


def _read(text: str, current: Any) -> Any:
    if isinstance(current, bool):
        if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise ValueError(text)
        return text.lower() in ("true", "1", "yes")
    if isinstance(current, int):
        return _integer(text)
    if isinstance(current, float):
        return _number(text)
    if isinstance(current, tuple):
        items = [t.strip() for t in text.split(",") if t.strip()]
        kinds = {type(v) for v in current}
        if kinds == {int}:
            return tuple(_integer(t) for t in items)
        if kinds == {float}:
            return tuple(_number(t) for t in items)
        return tuple(items)
    return text


def coerce_setting(key: str, text: str, current: Any) -> Any:
    """``text`` read as the type of ``current`` (module rules); a ScarceError naming key and type.

    >>> coerce_setting("n_runs", "1e3", 20), coerce_setting("etas", "1e-3, 1e-2", (1e-4,))
    (1000, (0.001, 0.01))
    """
    try:
        return _read(text, current)
    except (ValueError, OverflowError):
        raise ScarceError(f"--set {key}={text!r}: {key} takes a value like {_example(current)} "
                          f"({_kind(current)})") from None


def parse_settings(items: Iterable[str], current: Mapping[str, Any], kind: str = "setting") -> dict[str, Any]:
    """``["n_runs=5", "methods.ss_samples=500"]`` read against the current values of the allowed keys.

    ``current`` maps every key a user may set (nested ones as ``group.name``) to its value now;
    the result maps the keys given to their typed values (see :func:`nest`).
    """
    out: dict[str, Any] = {}
    given: dict[str, str] = {}
    for item in items:
        key, text = split_setting(item, sorted(current), kind)
        if key in given:
            raise ScarceError(f"--set {key} is given twice ({given[key]!r} and {item!r}); give it once")
        given[key] = item
        out[key] = coerce_setting(key, text, current[key])
    return out


def nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    """``{"a": 1, "g.x": 2}`` as ``{"a": 1, "g": {"x": 2}}``."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        group, _, name = key.rpartition(".")
        if group:
            out.setdefault(group, {})[name] = value
        else:
            out[name] = value
    return out


def task_seed(base: int, *parts: int | str) -> np.random.SeedSequence:
    """The seed of one task: ``SeedSequence([base, *parts])``, a text part as its CRC-32.

    >>> task_seed(0, 2, 17, "ss_margin").entropy
    [0, 2, 17, 1522962409]
    """
    return np.random.SeedSequence([int(base), *(zlib.crc32(p.encode()) if isinstance(p, str) else int(p)
                                                for p in parts)])


def _type_ok(value: Any, default: Any) -> bool:
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, tuple):
        return isinstance(value, list)
    if isinstance(default, dict):
        return isinstance(value, dict)
    return isinstance(value, type(default))


def check_table(table: Mapping[str, Any], defaults: Mapping[str, Any], where: str,
                required: Iterable[str] = ()) -> dict[str, Any]:
    """A preset table checked against the settings' defaults: names, types and required keys.

    Arrays become tuples and integers given for numbers become floats; a wrong key gets "did you
    mean", a wrong type names the key, the value and the type its default has.
    """
    missing = [k for k in required if k not in table]
    if missing:
        raise ScarceError(f"{where} lacks the required setting(s) {missing}")
    out = {}
    for key, value in table.items():
        if key not in defaults:
            raise unknown_name_error(f"setting of {where}", key, sorted(defaults))
        default = defaults[key]
        if not _type_ok(value, default):
            raise ScarceError(f"{where}: {key} = {value!r} ({type(value).__name__}); {key} takes "
                              f"{_kind(default) if not isinstance(default, dict) else 'a table'}, like {default!r}")
        out[key] = tuple(value) if isinstance(value, list) else float(value) if isinstance(default, float) else value
    return out


def load_presets(package: str, filename: str, build: Callable[[str, dict[str, Any]], T]) -> dict[str, T]:
    """Every preset of a TOML file shipped in ``package``: ``build(name, table)`` per top-level table."""
    try:
        text = resources.files(package).joinpath(filename).read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ScarceError(f"the preset file {package}/{filename} cannot be read ({exc})") from None
    presets = {}
    for name, table in data.items():
        if not isinstance(table, dict):
            raise ScarceError(f"{package}/{filename}: {name} = {table!r} is not a preset table ([{name}])")
        presets[name] = build(name, table)
    return presets
