"""The vision benchmark's option checks, which stop a command before any model or Monte Carlo work."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "vision.py"


@pytest.fixture(scope="module")
def vision():
    spec = importlib.util.spec_from_file_location("benchmark_vision", _PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["benchmark_vision"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("benchmark_vision", None)


def _check(vision, argv: list[str]):
    parser = vision._parser()
    args = parser.parse_args(argv)
    args.explicit = vision._given_options(argv)
    vision._check_args(parser, args)
    return args


def test_truths_refuse_a_seed_choosing_option_even_at_its_default(vision, capsys):
    # --seeds 6 is the default value: given beside --truths it would still be silently unused
    for extra in (["--seeds", "6"], ["--seeds=6"], ["--max-p", "1e-3"], ["--smc-samples", "100000"]):
        with pytest.raises(SystemExit):
            _check(vision, ["--truths", "3=0.01", *extra])
        assert "--truths hands in the seeds" in capsys.readouterr().err
    args = _check(vision, ["--truths", "3=0.01,5=2e-3", "--reps", "4", "--first-rep", "300"])
    assert args.given == {3: 0.01, 5: 2e-3}
    assert "seeds" not in args.explicit and {"truths", "reps", "first_rep"} <= args.explicit


def test_bad_option_values_are_refused(vision, capsys):
    for argv, message in ((["--reps", "1"], "--reps must be at least 2"),
                          (["--first-rep", "-1"], "--first-rep must be 0 or more"),
                          (["--truths", "3=1.5"], "strictly between 0 and 1"),
                          (["--truths", "3=0.1,3=0.2"], "a new seed index"),
                          (["--truth-classifier", "61dec1b3c188"], "without --truths"),
                          (["--truths", "3=0.1", "--truth-classifier", "61dec1b3"], "12 or more hex digits"),
                          (["--truths", "3=0.1", "--truth-classifier", "61dec1b3c18z"], "12 or more hex digits")):
        with pytest.raises(SystemExit):
            _check(vision, argv)
        assert message in capsys.readouterr().err


def test_seed_indices_that_would_share_run_seeds_are_refused(vision):
    vision._refuse_shared_run_seeds([0, 17, 999])
    with pytest.raises(SystemExit, match=r"seed indices \[1000, 1203\] are 1000 or more.*seed index 0"):
        vision._refuse_shared_run_seeds([5, 1203, 1000])


def _pool():
    sys.path.insert(0, str(_PATH.parent))
    spec = importlib.util.spec_from_file_location("benchmark_vision_pool", _PATH.parent / "vision_pool.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _dump(path, classifier=None, truth=2e-4, run_seed=1):
    record = {"method": "Margin SS", "seed": 7, "run_seed": run_seed, "truth": truth, "estimate": 1.9e-4, "cov": 0.2,
              "lo": 1.5e-4, "hi": 2.1e-4, "flags": [], "n_queries": 7800}
    if classifier:
        record["classifier"] = classifier
    path.write_text(__import__("json").dumps(record) + "\n")
    return str(path)


def test_pooling_rescored_truths_and_refusing_two_classifiers(vision, tmp_path):
    pool = _pool()
    a = _dump(tmp_path / "a.jsonl", "61dec1b3c18873dc", run_seed=1)
    b = _dump(tmp_path / "b.jsonl", "0badc0ffee000000", run_seed=2)
    with pytest.raises(SystemExit, match="ran on 2 classifiers"):
        pool.read_runs([f"x={a},{b}"])
    old = _dump(tmp_path / "old.jsonl", run_seed=3)  # a dump from before the digest was recorded
    runs = pool.read_runs([f"x={a},{old}"], truths={7: 2.5e-4})
    assert [r["truth"] for r in runs[("x", "Margin SS")]] == [2.5e-4, 2.5e-4]  # scored against the recount
    assert [r["truth"] for r in pool.read_runs([f"x={a}"])[("x", "Margin SS")]] == [2e-4]
