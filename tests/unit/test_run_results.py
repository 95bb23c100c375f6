"""Run directories after a kill: temporary files of killed writes, damaged task files, provenance."""

from __future__ import annotations

import os
import re
import time

import pytest

from conftest import dead_pid as _dead_pid
from scarce._atomic import FOREIGN_TEMPORARY_AGE, _host, atomic_write_text
from scarce.experiments.store import CorruptResultWarning, ResultStore, StaleResultWarning, estimate_methods
from scarce.results import estimator_revision



def test_temporary_files_of_killed_writes_are_removed_when_the_run_resumes(tmp_path):
    store = ResultStore(tmp_path / "run", {"name": "x"})
    store.save("a", {"value": 1})
    tasks = tmp_path / "run" / "tasks"
    dead = tasks / f".b.json.w-{_host()}-{_dead_pid()}.x1.tmp"
    live = tasks / f".c.json.w-{_host()}-{os.getpid()}.x2.tmp"
    foreign_new = tasks / ".d.json.w-otherhost-12.x3.tmp"
    foreign_old = tasks / ".e.json.w-otherhost-13.x4.tmp"
    unrelated = tasks / ".notes.tmp"
    for path in (dead, live, foreign_new, foreign_old, unrelated):
        path.write_text("partial")
    old = time.time() - FOREIGN_TEMPORARY_AGE - 60
    os.utime(foreign_old, (old, old))
    with pytest.warns(CorruptResultWarning, match="removed 2 temporary file"):
        reopened = ResultStore.open(tmp_path / "run")
    assert reopened.removed_temporaries == 2
    assert not dead.exists() and not foreign_old.exists()
    assert live.exists() and foreign_new.exists() and unrelated.exists()  # a live writer's, or not ours
    assert reopened.load("a") == {"value": 1}


def test_an_atomic_write_names_its_writer_and_leaves_no_temporary_file(tmp_path):
    atomic_write_text(tmp_path / "f.json", "{}")
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_chunked_monte_carlo_counts_the_model_calls_of_its_checkpoint_probe(tmp_path):
    import numpy as np

    from scarce import RareEventProblem
    from scarce.experiments.montecarlo import PROBE_POINTS, ChunkedMonteCarlo

    rows = []

    def evaluate(x):  # type: ignore[no-untyped-def]
        rows.append(x.shape[0])
        return x[:, 0], x[:, 0] >= 2.0

    problem = RareEventProblem(2, evaluate, name="counted")
    result = ChunkedMonteCarlo(n_samples=20_000, chunk_size=10_000).estimate(problem, seed=0,
                                                                          checkpoint_dir=tmp_path / "mc")
    assert result.n_samples == 20_000 and result.n_queries == sum(rows) == 20_000 + 2 * PROBE_POINTS
    assert result.info["probe_queries"] == 2 * PROBE_POINTS
    rows.clear()  # without checkpoints there is no probe
    assert ChunkedMonteCarlo(n_samples=20_000, chunk_size=10_000).estimate(problem, seed=0).n_queries == sum(rows)
    assert np.isclose(result.probability, result.n_failed / 20_000)


def _task(task):  # type: ignore[no-untyped-def]
    if task == "bad":
        raise ValueError("a task that breaks")
    if task == "settings":
        from scarce.errors import ScarceError

        raise ScarceError("bad settings")
    return {"value": task}


def test_a_run_stage_stores_resumes_labels_progress_and_records_errors(tmp_path):
    from scarce.errors import ScarceError
    from scarce.experiments.run import Run

    seen = []
    run = Run(ResultStore(tmp_path / "run", {"name": "x"}), progress=lambda *a: seen.append(a))
    tasks = {"t1": 1, "t2": "bad", "t3": 3}
    out = run.stage("first", _task, tasks, labels={"t1": "task one"}, seeds={"t1": [0, 1]})
    assert out == {"t1": {"value": 1}, "t3": {"value": 3}}
    assert ("first", 1, 3, "task one") in seen and seen[-1] == ("first", 3, 3, "done")
    assert set(run.errors(tasks)) == {"t2"} and run.errors({"t1": 0}) == {}
    seen.clear()
    assert run.stage("first", _task, {"t1": 1, "t3": 3}) == out  # resumed: nothing recomputed
    assert seen == [("first", 2, 2, "done")]  # everything was stored: one report, no call
    with pytest.raises(ScarceError, match="bad settings"):
        run.stage("second", _task, {"s": "settings", "t4": 4})
    assert "s" in run.errors()


def test_timings_are_stored_apart_from_the_results(tmp_path):
    store = ResultStore(tmp_path / "run", {"name": "x"})
    store.save("a", {"value": 1, "timing": {"wall": 0.5}})
    store.save("b", {"value": 1, "timing": {"wall": 0.7}})
    assert store.load("a") == store.load("b") == {"value": 1}  # the results alone: equal across runs
    assert store.timing("a") == {"wall": 0.5} and store.timing("missing") == {}
    assert [t for _, _, t in store.timed_items()] == [{"wall": 0.5}, {"wall": 0.7}]
    record = __import__("json").loads((tmp_path / "run" / "tasks" / "a.json").read_text())
    assert "timing" not in record["payload"] and record["timing"] == {"wall": 0.5}


def test_a_task_file_that_kept_its_timing_inside_still_reads(tmp_path):
    """Run directories written before timings were kept apart resume unchanged."""
    import hashlib
    import json

    from scarce.experiments.store import _canonical

    store = ResultStore(tmp_path / "run", {"name": "x"})
    body = {"value": 1, "timing": {"wall": 0.5}}
    record = {"key": "old", "fingerprint": store.fingerprint, "seed": None, "provenance": {},
              "checksum": hashlib.sha256(_canonical(body).encode()).hexdigest(), "payload": body,
              "revisions": {}}
    (tmp_path / "run" / "tasks").mkdir(exist_ok=True)
    (tmp_path / "run" / "tasks" / "old.json").write_text(json.dumps(record))
    assert store.load("old") == {"value": 1} and store.timing("old") == {"wall": 0.5}


_SS = {"method": "subset_simulation", "probability": 1e-6, "cov": 0.3}


@pytest.mark.parametrize("revision", [None, 1, estimator_revision("subset_simulation") + 1, "2", [2]])
def test_a_task_file_of_another_estimator_revision_is_recomputed_not_mixed_in(tmp_path, revision):
    """A resumed run never mixes results of two revisions of an estimator: a task whose Subset
    Simulation result was stored at another revision (or before revisions were recorded) warns,
    reads as missing, and is computed again."""
    import json

    store = ResultStore(tmp_path / "run", {"name": "x"})
    store.save("a", {"result": _SS, "label": 3})
    path = tmp_path / "run" / "tasks" / "a.json"
    record = json.loads(path.read_text())
    assert record["revisions"] == {"subset_simulation": 2} and store.load("a") == {"result": _SS, "label": 3}
    if revision is None:
        del record["revisions"]
    else:
        record["revisions"] = {"subset_simulation": revision}
    path.write_text(json.dumps(record))
    with pytest.warns(StaleResultWarning, match=re.escape(f"holds results of subset_simulation at revision "
                                                          f"{(revision or 1)!r}, not this scarce's 2; task 'a' will "
                                                          "be recomputed")):
        assert store.load("a") is None
    with pytest.warns(StaleResultWarning):
        assert list(store.items()) == []
    store.save("a", {"result": _SS, "label": 4})  # recomputed: the new record replaces it
    assert store.load("a")["label"] == 4


def test_task_files_without_a_revised_estimator_are_kept_across_revisions(tmp_path):
    """Counts, fitted rulers and Monte Carlo results do not change with Subset Simulation's
    revision: written before revisions were recorded, they still read. An LLM sweep's cascade
    runs of then (run records with levels, no method) are Subset Simulation's, and stale."""
    import json
    import warnings

    store = ResultStore(tmp_path / "run", {"name": "x"})
    payloads = {"counts": {"n": 1000, "failures": 3}, "mc": {"result": {"method": "monte_carlo", "cov": 0.5}},
                "cell": {"kind": "cell", "runs": [{"p": 1e-5, "cov": 0.2, "levels": 5}]}}
    for key, payload in payloads.items():
        store.save(key, payload)
        path = tmp_path / "run" / "tasks" / f"{key}.json"
        record = json.loads(path.read_text())
        del record["revisions"]
        path.write_text(json.dumps(record))
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleResultWarning)
        assert store.load("counts") == payloads["counts"] and store.load("mc") == payloads["mc"]
    with pytest.warns(StaleResultWarning, match="subset_simulation at revision 1"):
        assert store.load("cell") is None
    assert estimate_methods({"runs": [{"method": "subset_simulation", "cov": 0.1}]}) == {"subset_simulation"}


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_writes_respect_the_users_umask(tmp_path, umask, mode):
    import os

    from scarce._atomic import atomic_write_text

    previous = os.umask(umask)
    try:
        atomic_write_text(tmp_path / "config.json", "{}")
    finally:
        os.umask(previous)
    assert (tmp_path / "config.json").stat().st_mode & 0o777 == mode
