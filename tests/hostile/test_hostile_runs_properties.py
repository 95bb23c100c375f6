"""Hostile-input properties: the top-level CLI, the vision settings, the MNIST readers, the store.

Property of every test: the input is accepted, or refused with a clean error (a ScarceError, or
exit code 2 and a one-line ``error:`` / usage message); never a traceback or a foreign
exception. The heavy work behind a valid command (an estimate, a vision run) is replaced by a
marker exception, so only the validation of the configuration runs.

Examples per test: ``SCARCE_HYPOTHESIS_EXAMPLES`` (default 40); seeded (``derandomize``).
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import warnings

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from scarce.cli import app  # noqa: E402
from scarce.datasets.mnist import read_idx  # noqa: E402
from scarce.errors import ScarceError  # noqa: E402
from scarce.experiments.store import ResultStore  # noqa: E402

EXAMPLES = int(os.environ.get("SCARCE_HYPOTHESIS_EXAMPLES", "40"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
runner = CliRunner()
_COUNTER = itertools.count()


class _Ran(Exception):
    """Raised in place of the heavy work: the configuration passed validation."""


def _clean_exit(result) -> bool:  # type: ignore[no-untyped-def]
    """Exit 0, or exit 2 with a message and no traceback, or the marker of a valid configuration."""
    event("accepted" if isinstance(result.exception, _Ran) else f"exit {result.exit_code}")
    if isinstance(result.exception, _Ran):
        return True
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return False
    return result.exit_code == 0 or (result.exit_code == 2 and "Traceback" not in result.output
                                     and ("error:" in result.output or "Error" in result.output))


_NUMBERS = st.sampled_from(["0", "-1", "1", "2", "0.5", "1e-300", "1e300", "nan", "inf", "-inf", "1e18",
                            "1e9", "0x10", "", " ", "abc", "1_000", "9" * 30, "-0", "1e-3", "0.999999"])
_TEXT = st.one_of(_NUMBERS, st.text(max_size=12), st.integers(-10**20, 10**20).map(str),
                  st.floats(allow_nan=True, allow_infinity=True).map(repr))


# -- scarce estimate -------------------------------------------------------------------------------
_ESTIMATE_OPTIONS = ["--problem", "--dim", "--pf", "--k", "--method", "--n-samples", "--level-probability",
                     "--kernel", "--max-queries", "--stop-factor", "--count-seeds", "--seed", "--confidence",
                     "--delta"]


_ESTIMATE_VALID = {
    "--problem": st.sampled_from(["linear", "four_branch", "chi_square", "two_regions"]),
    "--dim": st.integers(1, 50).map(str), "--pf": st.floats(1e-8, 0.4).map(repr),
    "--k": st.floats(1, 10).map(repr), "--method": st.sampled_from(["ss", "mc"]),
    "--n-samples": st.integers(10, 5000).map(str), "--level-probability": st.floats(0.05, 0.5).map(repr),
    "--kernel": st.sampled_from(["acs", "mma"]), "--max-queries": st.integers(100, 10**6).map(str),
    "--stop-factor": st.floats(0.1, 1).map(repr), "--count-seeds": st.sampled_from(["independent", "always", "never"]),
    "--seed": st.integers(0, 100).map(str), "--confidence": st.floats(0.5, 0.999).map(repr),
    "--delta": st.floats(0.01, 0.5).map(repr),
}


@st.composite
def _estimate_option(draw):  # type: ignore[no-untyped-def]
    """An option with a valid value most of the time, a hostile one otherwise."""
    option = draw(st.sampled_from(_ESTIMATE_OPTIONS))
    hostile = draw(st.integers(0, 3)) == 0
    return option, draw(_TEXT if hostile else _ESTIMATE_VALID[option])


@SETTINGS
@given(st.lists(_estimate_option(), max_size=5), st.booleans())
def test_estimate_cli_exits_cleanly_on_any_options(options, as_json):
    from scarce.estimators import MonteCarlo, SubsetSimulation

    def stop(self, problem, seed=None, callback=None):  # validation only, then the marker
        if hasattr(self, "_validate"):
            self._validate()
        raise _Ran

    args = ["estimate", *[part for pair in options for part in pair]] + (["--json"] if as_json else [])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SubsetSimulation, "estimate", stop)
        patch.setattr(MonteCarlo, "estimate", stop)
        result = runner.invoke(app, args)
    assert _clean_exit(result), (args, result.output, repr(result.exception))


# -- scarce vision --set ---------------------------------------------------------------------------
def _vision_keys() -> list[str]:
    from dataclasses import fields

    from scarce.applications.vision.classifier import ClassifierConfig
    from scarce.applications.vision.methods import MethodSettings
    from scarce.applications.vision.protocol import VisionPreset

    top = [f.name for f in fields(VisionPreset) if f.name not in ("name", "methods", "classifier")]
    return top + [f"methods.{f.name}" for f in fields(MethodSettings)] + \
        [f"classifier.{f.name}" for f in fields(ClassifierConfig)] + ["nope", "methods.nope", ""]


def _valid_vision_value(key: str):  # type: ignore[no-untyped-def]
    """Values of the kind the tiny preset holds for ``key`` (within small, valid-looking ranges)."""
    from dataclasses import fields

    from scarce.applications.vision.classifier import ClassifierConfig
    from scarce.applications.vision.protocol import PRESETS

    tiny = PRESETS["tiny"]
    group, _, name = key.rpartition(".")
    if group == "methods":
        current = getattr(tiny.methods, name, None)
    elif group == "classifier":
        current = {f.name: f.default for f in fields(ClassifierConfig)} | dict(tiny.classifier)
        current = current.get(name)
    else:
        current = getattr(tiny, name, None)
    if isinstance(current, bool):
        return st.sampled_from(["true", "false"])
    if isinstance(current, int):
        return st.integers(max(0, current // 4), max(1, current * 2)).map(str)
    if isinstance(current, float):
        return st.floats(current / 4, current * 1.5).map(repr)
    if isinstance(current, tuple):
        return st.lists(st.sampled_from([str(v) for v in current]), min_size=1, max_size=3, unique=True).map(",".join)
    return st.just(str(current))


@st.composite
def _vision_item(draw):  # type: ignore[no-untyped-def]
    key = draw(st.sampled_from(_vision_keys()))
    hostile = draw(st.integers(0, 3)) == 0
    return key, draw(_VISION_VALUES if hostile else _valid_vision_value(key))


_VISION_VALUES = st.one_of(_TEXT, st.sampled_from(["true", "false", "centroid,mah_bad", "centroid", "gaussian",
                                                   "uniform", "float32", "mc", "lhs", "never", "embedded"]))


@SETTINGS
@given(st.lists(_vision_item(), max_size=4), st.sampled_from(["tiny", "tiny", "quick", "paper", "nope"]),
       st.sampled_from(["cpu", "cpu", "auto", "cuda:x", "gpu", ""]))
def test_vision_set_parsing_exits_cleanly(tmp_path, items, preset, device):
    import scarce.applications.vision.pipeline as pipeline

    def stop(*args, **kwargs):
        raise _Ran

    run_dir = tmp_path / f"run{next(_COUNTER)}"
    args = ["vision", "--preset", preset, "--executor", "serial", "--run-dir", str(run_dir), "--device", device]
    for key, value in items:
        args += ["--set", f"{key}={value}"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline, "build_context", stop)
        patch.setenv("SCARCE_DATA_DIR", str(tmp_path))
        result = runner.invoke(app, args)
    assert _clean_exit(result), (args, result.output, repr(result.exception))
    if isinstance(result.exception, _Ran):  # accepted: the stored configuration is plain JSON
        json.loads((run_dir / "config.json").read_text())


# -- the MNIST readers -----------------------------------------------------------------------------
_CODES = st.sampled_from([0x08, 0x09, 0x0B, 0x0C, 0x0D, 0x0E, 0x00, 0x0A, 0xFF])


@st.composite
def _idx_bytes(draw):  # type: ignore[no-untyped-def]
    """IDX-like bytes: a header of any code and shape, a payload of the right or a wrong length."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=64))
    ndim = draw(st.integers(0, 4))
    dims = draw(st.lists(st.one_of(st.integers(0, 6), st.integers(0, 2**32 - 1)), min_size=ndim, max_size=ndim))
    head = bytes([0, 0, draw(_CODES), ndim]) + b"".join(d.to_bytes(4, "big") for d in dims)
    itemsize = {0x08: 1, 0x09: 1, 0x0B: 2, 0x0C: 4, 0x0D: 4, 0x0E: 8}.get(head[2], 1)
    size = int(np.prod(dims, dtype=object)) * itemsize if dims else 0
    length = min(size, 512) + draw(st.integers(-3, 3))
    body = draw(st.binary(min_size=max(0, length), max_size=max(0, length)))
    data = head + body
    cut = draw(st.one_of(st.none(), st.integers(0, len(data))))
    return data if cut is None else data[:cut]


@SETTINGS
@given(_idx_bytes(), st.sampled_from(["raw", "gzip", "gzip-cut", "gzip-flip"]))
def test_idx_reader_returns_the_declared_array_or_a_clean_error(tmp_path, data, form):
    if form != "raw":
        data = gzip.compress(data, mtime=0)
        if form == "gzip-cut":
            data = data[: len(data) // 2]
        elif form == "gzip-flip":
            data = data[:12] + bytes([data[12] ^ 0xFF]) + data[13:] if len(data) > 13 else data
    path = tmp_path / f"idx{next(_COUNTER)}"
    path.write_bytes(data)
    try:
        array = read_idx(path)
    except ScarceError as error:
        assert str(path) in str(error)
        return
    dims = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(data[3])) if form == "raw" \
        else array.shape
    assert array.shape == dims


# -- the result store ------------------------------------------------------------------------------
_JSONISH = st.one_of(st.binary(max_size=80).map(lambda b: b.decode("latin-1")),
                     st.recursive(st.none() | st.booleans() | st.floats() | st.text(max_size=5),
                                  lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                                      st.sampled_from(["payload", "checksum", "fingerprint", "config", "x"]),
                                      inner, max_size=3), max_leaves=8).map(json.dumps),
                     st.integers(1, 5000).map(lambda n: "[" * n + "]" * n))


@SETTINGS
@given(_JSONISH, _JSONISH)
def test_store_reads_damaged_files_as_missing_or_refuses_them_cleanly(tmp_path, task_text, config_text):
    root = tmp_path / f"run{next(_COUNTER)}"
    store = ResultStore(root, {"a": 1})
    (root / "tasks").mkdir()
    (root / "tasks" / "t.json").write_text(task_text, encoding="latin-1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert store.load("t") is None
    (root / "config.json").write_text(config_text, encoding="latin-1")
    try:
        ResultStore(root, {"a": 1})
    except ScarceError:
        pass
