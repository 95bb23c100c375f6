"""Shared fixtures: a small synthetic LLM corpus with embeddings (no data files, no encoder)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

#: The repository, and the shared data beside it (absent on a clean machine: tests using it skip).
REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"

#: Test folders whose tests take more than a few seconds each (marked ``slow``: ``-m "not slow"``
#: runs the rest in well under a minute).
SLOW_FOLDERS = ("statistical", "applications")


def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    for item in items:
        parts = Path(str(item.fspath)).parts
        if any(folder in parts for folder in SLOW_FOLDERS) or item.fspath.basename.endswith("_properties.py"):
            item.add_marker(pytest.mark.slow)


#: Test folders whose tests run the vision protocol through the CLI, each in a new run directory.
VISION_RUN_FOLDERS = ("applications", "cli")


@pytest.fixture(scope="session")
def _trained_classifiers(tmp_path_factory):
    """One cache of trained classifiers for the whole session (see ``_classifier_trained_once``)."""
    return tmp_path_factory.mktemp("trained-classifiers")


@pytest.fixture(autouse=True)
def _classifier_trained_once(request, monkeypatch):
    """Train each classifier configuration once per session for the tests that run the protocol.

    Every CLI test of the vision protocol starts from an empty run directory and would train the
    same tiny classifier again (seconds each, a good part of the suite's time). Here
    ``train_classifier`` first trains (or loads) the model in a session cache and copies it into
    the run's own cache when that holds no entry of that name, then runs as usual, so the run
    loads it: the code that reads a cached classifier runs in every such test, and training runs
    once per configuration. An entry already in the run's cache (a test that damaged it, say)
    is left alone for the real code to judge.
    """
    if not any(folder in Path(str(request.node.fspath)).parts for folder in VISION_RUN_FOLDERS):
        return
    import shutil

    from scarce.applications.vision import classifier as module

    store = request.getfixturevalue("_trained_classifiers")
    real = module.train_classifier

    def train_once(images, labels, config=module.ClassifierConfig(), *, cache_dir=None, progress=False):
        if cache_dir is not None:
            shared = real(images, labels, config, cache_dir=store, progress=progress)
            target = Path(cache_dir).expanduser()
            if not (target / f"{shared.fingerprint}.safetensors").exists():
                target.mkdir(parents=True, exist_ok=True)
                for suffix in (".safetensors", ".json"):
                    source = store / f"{shared.fingerprint}{suffix}"
                    if source.exists():
                        shutil.copyfile(source, target / source.name)
        return real(images, labels, config, cache_dir=cache_dir, progress=progress)

    monkeypatch.setattr(module, "train_classifier", train_once)


def dead_pid() -> int:
    """The pid of a process that has just ended."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                           text=True, check=True)
    return int(child.stdout)


# -- a small JailbreakBench tree ------------------------------------------------------------------


def clean(call, *args, **kwargs):  # type: ignore[no-untyped-def]
    """Run ``call``: its value, or None for a ScarceError with a message; any other exception fails the test."""
    import warnings

    from scarce.errors import ScarceError, ScarceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScarceWarning)
        try:
            return call(*args, **kwargs)
        except ScarceError as exc:
            assert str(exc) and "Traceback" not in str(exc)
            return None


def synthetic_corpus(seed: int = 0, dim: int = 8):
    """Benign records, two PAIR targets with jailbreaks, one without, and a GCG group.

    Jailbroken records sit along +e_0, benign ones along -e_0, failed attacks in between, so
    linear rulers separate them; a benign record or two overlap the attacks (some leakage).
    """
    import pandas as pd

    rng = np.random.default_rng(seed)
    rows = []

    def add(method, target, n, n_jb, centre_jb, centre_no):
        for i in range(n):
            jb = i < n_jb
            z = rng.normal(size=dim) * 0.6
            z[0] += centre_jb if jb else centre_no
            rows.append({"record_id": f"{method}-{target}-{i}", "behavior_id": f"b{i % 7}",
                         "method": method, "target_model": target, "jailbroken": jb,
                         "prompt": f"p {method} {i}", "response": f"r {i}", "embedding": z.astype(np.float32)})

    add("none", "none", 40, 0, 0.0, -2.0)
    add("PAIR", "model-a", 30, 20, 2.0, 0.0)
    add("PAIR", "model-b", 25, 10, 2.2, 0.2)
    add("PAIR", "model-c", 4, 0, 0.0, 0.0)
    add("GCG", "model-a", 30, 12, 1.6, -0.3)
    return pd.DataFrame(rows)


def with_bad_embedding(corpus, row: int, column: int, value: float):
    """A copy of ``corpus`` whose embedding of ``row`` holds ``value`` at ``column`` (NaN or inf checks)."""
    bad = corpus.copy()
    vector = bad.embedding.iloc[row].copy()
    vector[column] = value
    bad.at[row, "embedding"] = vector
    return bad


@pytest.fixture
def llm_corpus():
    return synthetic_corpus()


def entry(index, prompt, jailbroken, response="ok"):
    return {"index": index, "goal": f"goal {index}", "behavior": "b", "category": "Privacy",
            "prompt": prompt, "response": response, "jailbroken": jailbroken,
            "jailbroken_llama_guard1": False}


def write_artifact(root, method, attack_type, model, entries, stated):
    path = root / "attack-artifacts" / method / attack_type / f"{model}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    parameters = {"method": method, "model": model, "attack_type": attack_type,
                  "total_number_of_jailbreaks": stated}
    path.write_text(json.dumps({"parameters": parameters, "jailbreaks": entries}))
    return path


def write_behaviors(root, kind, goals):
    path = root / "behaviors" / f"{kind}-behaviors.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["index,goal,target,behavior,category,source"]
    lines += [f'{i},"{g}","Sure, {g}",B,Cat,Original' for i, g in enumerate(goals)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def jbb(tmp_path):
    """A small JailbreakBench tree: PAIR (one failed entry, a stale stated total), GCG, behaviours."""
    root = tmp_path / "jailbreakbench"
    # PAIR: entry 1 failed (no prompt, response null); the stated total (3) is stale: the flags say 1.
    write_artifact(root, "PAIR", "black_box", "vicuna-13b-v1.5",
                   [entry(0, "p0", True), entry(1, None, False, response=None), entry(2, "p2", False)],
                   stated=3)
    write_artifact(root, "GCG", "transfer", "gpt-4", [entry(0, "g0", False), entry(1, "g1", True)], stated=2)
    (root / "attack-artifacts" / "PAIR" / "attack-info.json").write_text("{}")  # not an artifact
    write_behaviors(root, "benign", ["Write a poem", "Bake, then eat"])
    write_behaviors(root, "harmful", ["goal 0", "goal 1", "goal 2"])
    return root


# -- one tiny vision run shared by the tests that read or resume it ------------------------------


@pytest.fixture(scope="session")
def tiny_vision_run(tmp_path_factory):
    """``scarce vision --preset tiny`` run once: ``(run directory, the command's output)``.

    Tests that change the run work on a copy (``shutil.copytree``, which keeps the files' times).
    The pytest-xdist workers share one run (:func:`made_once`).
    """
    pytest.importorskip("torch")
    pytest.importorskip("mlxtend")
    return made_once(tmp_path_factory, "tiny-vision", _tiny_vision_run)


def made_once(tmp_path_factory, name, make):  # type: ignore[no-untyped-def]
    """``make(folder)`` for one folder per test session, shared by the pytest-xdist workers.

    The first worker to ask makes it in the session's common temporary folder, under a file
    lock, and the others wait and read it (pytest-xdist's documented recipe; its ``loadgroup``
    mode does not group tests under pytest 9). ``make`` must find a folder it finished and
    return its result without redoing the work. Without xdist, a folder of this session.
    """
    from filelock import FileLock

    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return make(tmp_path_factory.mktemp(name))
    shared = tmp_path_factory.getbasetemp().parent  # this session's folder, above every worker's own
    with FileLock(str(shared / f"{name}.lock")):
        return make(shared / name)


def _tiny_vision_run(folder: Path) -> tuple[Path, str]:
    """The tiny run in ``folder`` (made there unless a finished one and its output are there)."""
    from typer.testing import CliRunner

    from scarce.cli import app

    run_dir, output = folder / "run", folder / "output.txt"
    if not output.exists():
        result = CliRunner().invoke(app, ["vision", "--preset", "tiny", "--run-dir", str(run_dir)])
        assert result.exit_code == 0, result.output
        output.write_text(result.output)
    return run_dir, output.read_text()
