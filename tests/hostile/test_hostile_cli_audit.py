"""Hostile command lines (issue 18): options checked before any work, clean errors naming the
option and the value, no silently ignored option, no exit 0 when the run's tasks failed.

Each command's heavy work (reading a corpus, fitting rulers, training a classifier, embedding)
is replaced by a marker exception or never reached: these tests run in seconds, read no data
files and download nothing.
"""

from __future__ import annotations

import itertools
import os
import types

import pytest

hypothesis = pytest.importorskip("hypothesis")
pytest.importorskip("pandas")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from scarce.cli import app  # noqa: E402

runner = CliRunner()
LONG = "x" * 300  # a file name longer than the 255 bytes a file system allows
_COUNTER = itertools.count()


class _Reached(Exception):
    """Raised in place of the work a command does once its options are accepted."""


def _reached(*args, **kwargs):  # type: ignore[no-untyped-def]
    raise _Reached


def _text(result) -> str:  # type: ignore[no-untyped-def]
    return " ".join(result.output.split())


def _refused(result, *messages: str) -> None:  # type: ignore[no-untyped-def]
    """Exit status 2 with each message, and no exception other than the exit."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, result.output
    for message in messages:
        assert message in _text(result), result.output


# -------------------------------------------------------------------------------- scarce vision
@pytest.fixture
def vision_stub(monkeypatch):
    """``scarce vision`` with its offline stage replaced by the marker: only the checks run."""
    import scarce.applications.vision.pipeline as pipeline

    monkeypatch.setattr(pipeline, "build_context", _reached)


def _vision(tmp_path, *args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["vision", "--preset", "tiny", "--executor", "serial", "--device", "cpu",
                               "--run-dir", str(tmp_path / f"run{next(_COUNTER)}"), *args])


@pytest.mark.parametrize("option, setting, key", [("--scale", "scale=0.4", "scale"),
                                                  ("--noise", "noise=gaussian", "noise"),
                                                  ("--seed", "seed=2", "seed")])
def test_vision_option_and_set_of_one_key_that_disagree_are_refused(tmp_path, vision_stub, option, setting, key):
    value = {"--scale": "0.3", "--noise": "uniform", "--seed": "1"}[option]
    _refused(_vision(tmp_path, option, value, "--set", setting), f"--set {key}=", "disagree")
    agreeing = _vision(tmp_path, "--scale", "0.3", "--set", "scale=0.3")
    assert isinstance(agreeing.exception, _Reached), agreeing.output


def test_vision_data_dir_is_refused_for_a_preset_that_reads_no_mnist_files(tmp_path, vision_stub):
    _refused(_vision(tmp_path, "--data-dir", str(tmp_path)), f"--data-dir {str(tmp_path)!r} is read only by",
             "reads data='embedded'")
    _refused(_vision(tmp_path, "--data-dir", ""), "--data-dir must be a non-empty path, got ''")
    mnist = _vision(tmp_path, "--data-dir", str(tmp_path), "--set", "data=mnist")
    assert isinstance(mnist.exception, _Reached), mnist.output


def test_vision_workers_ignored_or_beyond_the_bound_is_refused(tmp_path, vision_stub):
    _refused(_vision(tmp_path, "--workers", "2"), "--workers 2 sizes a process pool", "--executor serial")
    bound = 4 * (os.cpu_count() or 1)
    _refused(_vision(tmp_path, "--executor", "process", "--workers", str(bound + 1)),
             f"--workers {bound + 1} is above the bound of {bound}", "allow_large=true")
    _refused(_vision(tmp_path, "--executor", "process", "--workers", "0"), "--workers must be an integer >= 1, got 0")
    lifted = _vision(tmp_path, "--executor", "process", "--workers", str(bound + 1), "--set", "allow_large=true")
    assert isinstance(lifted.exception, _Reached), lifted.output


def test_vision_run_whose_tasks_failed_exits_nonzero_naming_them(tmp_path, monkeypatch):
    """The report renders what finished, then the command says what failed and exits 1."""
    import scarce.applications.vision.analysis as analysis
    import scarce.applications.vision.pipeline as pipeline
    import scarce.applications.vision.protocol as protocol
    import scarce.cli.vision as cli_vision

    errors = {"screen-00001-scarce:centroid": {"type": "RuntimeError", "message": "task broke"},
              "eval-00002-amls": {"type": "RuntimeError", "message": "task broke"}}

    class FailedRun:
        def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            pass

        def run(self):  # type: ignore[no-untyped-def]
            return {"screen_seeds": [1], "eval_seeds": [2], "top_rulers": [], "errors": errors}

    monkeypatch.setattr(pipeline, "build_context", lambda *a, **k: types.SimpleNamespace(info={}))
    monkeypatch.setattr(protocol, "VisionRun", FailedRun)
    monkeypatch.setattr(analysis, "report_context", lambda *a, **k: {})
    monkeypatch.setattr(cli_vision, "_vision_report", lambda *a, **k: None)
    result = _vision(tmp_path)
    assert result.exit_code == 1, result.output
    assert "error: 2 task(s) of the run failed" in _text(result)
    assert "screen-00001-scarce:centroid: RuntimeError: task broke" in _text(result)


# ---------------------------------------------------------------------------- scarce llm transfer
@pytest.mark.parametrize("args, message", [
    (["--etas", ""], "--etas must list at least one adversarial fraction in (0, 1], each once, got ''"),
    (["--etas", "1e-3,0.001"], "each once, got '1e-3,0.001'"),
    (["--etas", "2"], "--etas takes comma-separated numbers"),
    (["--seed", "-1"], "--seed must be an integer >= 0, got -1"),
    (["--n-samples", "5"], "--n-samples 5 keeps 0.5 seeds per level"),
    (["--n-samples", "2000000"], "--n-samples 2,000,000 is above the bound of 1,000,000"),
    (["--n-runs", "100000"], "--n-runs 100,000 is above the bound of 10,000"),
    (["--n-samples", "1000000", "--n-runs", "100"],
     "samples per level a cell may draw; lower one, or pass --allow-large"),
    (["--corpus", ""], "--corpus must be a non-empty path, got ''"),
])
def test_transfer_options_are_checked_before_the_corpus_is_read(tmp_path, args, message):
    base = ["llm", "transfer", "--corpus", str(tmp_path / "missing.parquet"), "--out", str(tmp_path / "out"),
            "--styles", "PAIR,GCG", "--n-samples", "300", "--n-runs", "2"]
    _refused(runner.invoke(app, base + args), message)
    assert not (tmp_path / "out").exists()


def test_transfer_allow_large_lifts_the_sample_bounds(tmp_path):
    result = runner.invoke(app, ["llm", "transfer", "--corpus", str(tmp_path / "missing.parquet"), "--styles",
                                 "PAIR,GCG", "--out", str(tmp_path / "out"), "--n-samples", "2000000", "--allow-large"])
    _refused(result, "missing.parquet")  # past every option check, to the corpus


# ------------------------------------------------------------------------- scarce llm embed
@pytest.fixture
def embed_stub(tmp_path, monkeypatch):
    """A small input file; every reader and the embedding replaced by the marker."""
    import scarce.applications.llm.corpus as corpus
    import scarce.applications.llm.embedding as embedding
    import scarce.applications.llm.sources as sources
    import scarce.datasets as datasets

    for module, name in ((sources, "read_conversations"), (corpus, "read_corpus"),
                         (datasets, "load_jailbreakbench_corpus"), (embedding, "embed_corpus")):
        monkeypatch.setattr(module, name, _reached)
    path = tmp_path / "records.jsonl"
    path.write_text('{"prompt": "p", "response": "r", "label": 1}\n')
    monkeypatch.chdir(tmp_path)
    return path


@pytest.mark.parametrize("args, message", [
    (["--batch-size", "0"], "--batch-size must be an integer >= 1, got 0"),
    (["--encoder", ""], "unknown encoder ''"),
    (["--encoder", "judge"], "--encoder judge needs --model"),
    (["--model", "some-judge"], "--model 'some-judge' is read only with --encoder judge"),
    (["--cache-dir", ""], "--cache-dir must be a non-empty path, got ''"),
    (["--cache-dir", "records.jsonl"], "--cache-dir 'records.jsonl': 'records.jsonl' exists and is not a directory"),
    (["--input", ""], "--input must be a non-empty path, got ''"),
    (["--data-dir", ""], "--data-dir must be a non-empty path, got ''"),
])
def test_embed_options_are_checked_before_the_input_is_read(tmp_path, embed_stub, args, message):
    base = ["llm", "embed", "--input", str(embed_stub), "--out", str(tmp_path / "out.parquet"), "--device", "cpu",
            "--cache-dir", str(tmp_path / "cache")]
    if "--data-dir" in args:  # the JailbreakBench directory is read only without --input
        base = ["llm", "embed", "--out", str(tmp_path / "out.parquet"), "--device", "cpu"]
    _refused(runner.invoke(app, base + args), message)
    assert sorted(os.listdir(tmp_path)) == ["records.jsonl"]


def test_embed_empty_corpus_is_refused_not_replaced_by_the_jailbreakbench_directory(tmp_path, embed_stub):
    _refused(runner.invoke(app, ["llm", "embed", "--corpus", "", "--out", str(tmp_path / "out.parquet"),
                                 "--device", "cpu"]), "--corpus must be a non-empty path, got ''")


def test_embed_empty_format_is_refused_not_inferred(tmp_path, monkeypatch):
    import scarce.applications.llm.embedding as embedding

    monkeypatch.setattr(embedding, "embed_corpus", _reached)
    records = tmp_path / "records.jsonl"
    records.write_text('{"prompt": "p", "response": "r", "label": 1}\n')
    result = runner.invoke(app, ["llm", "embed", "--input", str(records), "--format", "", "--device", "cpu",
                                 "--out", str(tmp_path / "out.parquet"), "--cache-dir", str(tmp_path / "cache")])
    _refused(result, "unknown format ''")


# ----------------------------------------------------------------- file-system errors, long names
def test_llm_commands_refuse_a_name_too_long_cleanly(tmp_path, llm_corpus):
    from scarce.applications.llm.corpus import write_corpus

    corpus = str(write_corpus(llm_corpus, tmp_path / "corpus.parquet"))
    records = tmp_path / "records.jsonl"
    records.write_text('{"prompt": "p", "response": "r", "label": 1}\n')
    for args in (["llm", "transfer", "--corpus", corpus, "--styles", "PAIR,GCG", "--out", str(tmp_path / LONG)],
                 ["llm", "sweep", "--preset", "tiny", "--executor", "serial", "--corpus", corpus,
                  "--run-dir", str(tmp_path / LONG)],
                 ["llm", "embed", "--input", str(records), "--device", "cpu", "--cache-dir", str(tmp_path / "cache"),
                  "--out", str(tmp_path / f"{LONG}.parquet")]):
        _refused(runner.invoke(app, args), "File name too long")


def test_llm_report_refuses_an_empty_run_dir_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _refused(runner.invoke(app, ["llm", "report", "--run-dir", ""]),
             "--run-dir: run directory must be a non-empty path, got ''")
    assert os.listdir(tmp_path) == []


def test_sweep_and_vision_estimate_name_an_empty_path_as_given(tmp_path):
    _refused(runner.invoke(app, ["llm", "sweep", "--preset", "tiny", "--corpus", "", "--run-dir", str(tmp_path / "r")]),
             "--corpus must be a non-empty path, got ''")
    for option in ("--input", "--weights"):
        args = {"--input": "x.npy", "--weights": "w.safetensors", option: ""}
        result = runner.invoke(app, ["vision", "estimate", "--model", "nowhere.models:build", "--device", "cpu",
                                     *[part for pair in args.items() for part in pair]])
        _refused(result, f"{option} must be a non-empty path, got ''")


# ------------------------------------------------------------------------------ --allow-large
def test_estimate_memory_bound_names_the_allow_large_option_and_it_reaches_the_estimator(monkeypatch):
    from scarce.estimators import SubsetSimulation

    _refused(runner.invoke(app, ["estimate", "--n-samples", "1000000000"]), "above the 8 GiB bound",
             "or pass --allow-large")
    seen = []

    def record(self, problem, seed=None, callback=None):  # type: ignore[no-untyped-def]
        seen.append(self.allow_large)
        raise _Reached

    monkeypatch.setattr(SubsetSimulation, "estimate", record)
    result = runner.invoke(app, ["estimate", "--n-samples", "1000000000", "--allow-large", "--json"])
    assert isinstance(result.exception, _Reached) and seen == [True], result.output


def test_vision_estimate_allow_large_reaches_the_estimator(monkeypatch):
    import numpy as np

    import scarce.cli.vision_estimate as cli_estimate

    seen = []
    monkeypatch.setattr(cli_estimate, "_load", lambda *a: (np.zeros(3), object()))
    monkeypatch.setattr(cli_estimate, "_run", lambda network, x0, quiet, **o: seen.append(o["estimator"]) or _reached())
    result = runner.invoke(app, ["vision", "estimate", "--model", "m:f", "--input", "x.npy", "--allow-large"])
    assert isinstance(result.exception, _Reached) and seen[0].allow_large is True, result.output


# ------------------------------------------------------------------------- hostile properties
EXAMPLES = int(os.environ.get("SCARCE_HYPOTHESIS_EXAMPLES", "40"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))
_VALUES = st.sampled_from(["0", "-1", "2", "nan", "inf", "1e9", "", " ", "é", "9" * 30, "1e-3,1e-3", "abc"])


@st.composite
def _llm_command(draw, root):  # type: ignore[no-untyped-def]
    """An llm command line whose options are valid except one to three hostile ones."""
    paths = {"new": str(root / f"new{next(_COUNTER)}"), "long": str(root / LONG), "empty": "", "blank": "  ",
             "file": str(root / "corpus.parquet"), "underfile": str(root / "corpus.parquet" / "x")}
    path = st.sampled_from(sorted(paths)).map(paths.get)
    corpus = str(root / "corpus.parquet")
    command = draw(st.sampled_from(["transfer", "embed", "sweep"]))
    base, options = {
        "transfer": (["--corpus", corpus, "--styles", "PAIR,GCG", "--n-samples", "300", "--n-runs", "2",
                      "--out", paths["new"]], {"--out": path, "--corpus": path, "--etas": _VALUES, "--seed": _VALUES,
                                               "--n-samples": _VALUES, "--n-runs": _VALUES}),
        "embed": (["--corpus", corpus, "--device", "cpu", "--out", paths["new"] + ".parquet",
                   "--cache-dir", paths["new"]],
                  {"--out": path, "--cache-dir": path, "--corpus": path, "--batch-size": _VALUES,
                   "--encoder": st.sampled_from(["", "judge", "x"]), "--format": st.sampled_from(["", "x", "csv"])}),
        "sweep": (["--corpus", corpus, "--preset", "tiny", "--executor", "serial", "--run-dir", paths["new"]],
                  {"--run-dir": path, "--corpus": path, "--workers": _VALUES,
                   "--set": st.sampled_from(["seed=-1", "etas=", "n_runs=0", "nope=1", "etas=1e-3,0.001"])}),
    }[command]
    extra = []
    for _ in range(draw(st.integers(1, 3))):
        option = draw(st.sampled_from(sorted(options)))
        extra += [option, draw(options[option])]
    return ["llm", command, *base, *extra]


@pytest.fixture(scope="module")
def hostile_root(tmp_path_factory):
    from conftest import synthetic_corpus
    from scarce.applications.llm.corpus import write_corpus

    root = tmp_path_factory.mktemp("hostile-cli")
    write_corpus(synthetic_corpus(), root / "corpus.parquet")
    (root / "cwd").mkdir()
    return root


@SETTINGS
@given(data=st.data())
def test_llm_commands_exit_cleanly_and_write_nothing_in_the_working_directory(hostile_root, data):
    """Any mix of hostile options: accepted (the work is the marker) or exit 2 with an error line,
    never an exception, and nothing written in the working directory."""
    import scarce.applications.llm.embedding as embedding
    import scarce.applications.llm.sweep as sweep
    import scarce.applications.llm.transfer as transfer

    args = data.draw(_llm_command(hostile_root))
    cwd = hostile_root / "cwd"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)
        patch.setattr(transfer, "transfer_matrix", _reached)
        patch.setattr(embedding, "embed_corpus", _reached)
        patch.setattr(sweep.LLMSweep, "run", _reached)
        result = runner.invoke(app, args)
    left = os.listdir(cwd)
    for name in left:
        os.remove(cwd / name) if (cwd / name).is_file() else __import__("shutil").rmtree(cwd / name)
    assert not left, (args, left)
    if not isinstance(result.exception, _Reached):  # an error line, or click's usage error for a bad number
        assert result.exception is None or isinstance(result.exception, SystemExit), (args, repr(result.exception))
        assert result.exit_code == 2 and ("error:" in result.output or "Invalid value" in result.output), \
            (args, result.output)


def test_vision_on_mnist_without_a_data_directory_is_refused_before_the_run_directory_is_made(tmp_path, vision_stub,
                                                                                             monkeypatch):
    """The paper preset's missing --data-dir was found after config.json and cache/ were written.
    (A directory given is the loader's to resolve: it expands ``~`` and reads a ``mnist:`` prefix.)"""
    monkeypatch.delenv("SCARCE_DATA_DIR", raising=False)
    run_dir = tmp_path / "mnist-run"
    result = runner.invoke(app, ["vision", "--preset", "tiny", "--set", "data=mnist", "--executor", "serial",
                                 "--run-dir", str(run_dir)])
    _refused(result, "give --data-dir (or set SCARCE_DATA_DIR)")
    assert not run_dir.exists()


@pytest.mark.parametrize("blocker", ["tasks", "errors", "cache", "finished.json"])
def test_vision_refuses_a_run_directory_whose_own_parts_are_in_the_way_before_any_work(tmp_path, vision_stub,
                                                                                     blocker):
    """``tasks`` as a file failed only when the first task was saved, ``finished.json`` as a
    directory only after the whole run."""
    run_dir = tmp_path / "blocked"
    run_dir.mkdir()
    if blocker == "finished.json":
        (run_dir / blocker).mkdir()
    else:
        (run_dir / blocker).write_text("x")
    result = runner.invoke(app, ["vision", "--preset", "tiny", "--executor", "serial", "--run-dir", str(run_dir)])
    _refused(result, repr(blocker) if blocker != "finished.json" else "a directory named finished.json")


def test_estimate_errors_name_the_option_that_was_given():
    for args, option in ((["--n-samples", "-5"], "--n-samples: n_samples"),
                         (["--stop-factor", "0"], "--stop-factor: stop_factor"),
                         (["--pf", "0"], "--pf: probability"),
                         (["--dim", "0"], "--dim: dim")):
        result = runner.invoke(app, ["estimate", *args])
        assert result.exit_code == 2 and f"error: {option}" in result.output, (args, result.output)


def test_vision_setting_errors_name_the_set_item_given(tmp_path, vision_stub):
    _refused(_vision(tmp_path, "--set", "n_eval=0"), "error: --set n_eval: n_eval must be an integer >= 1, got 0")
