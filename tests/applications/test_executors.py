"""Executors (serial, process pool, a real Dask LocalCluster), the durable grid loop and chunked MC.

Every parallel result is compared with the serial one bit for bit: per-task seeds come from the
task, never from the order tasks run in.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("distributed")

from scarce.errors import ScarceError  # noqa: E402
from scarce.estimators import SubsetSimulation  # noqa: E402
from scarce.experiments import executors as executors_module  # noqa: E402
from scarce.experiments.executors import (  # noqa: E402
    DaskExecutor,
    ProcessExecutor,
    SerialExecutor,
    make_executor,
    run_grid,
)
from scarce.experiments.montecarlo import ChunkedMonteCarlo  # noqa: E402
from scarce.experiments.store import ResultStore  # noqa: E402
from scarce.problems import linear  # noqa: E402


_THREADS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
_THREADS_AT_IMPORT = {k: os.environ.get(k) for k in _THREADS}


# -- task functions (module level: workers import them) ---------------------------------------
def subset_task(task):
    """Subset Simulation on a linear problem, seeded by the task alone."""
    index, probability = task
    result = SubsetSimulation(n_samples=300).estimate(linear(dim=10, probability=probability),
                                                      seed=np.random.SeedSequence([7, index]))
    record = result.to_dict()
    record.pop("wall_time")
    # a BLAS reduction: OpenBLAS sums a long dot product per thread, so its last bits depend on
    # the thread count unless the executors pin it (as they do, one thread per task)
    v = np.random.default_rng(np.random.SeedSequence([8, index])).standard_normal(50_000)
    record["dot"] = float(v @ v)
    return record


class Served:
    """A stand-in for a model: counts the tasks its copy has served."""

    def __init__(self):
        self.count = 0


def count_shipments(task, shared):
    """How many tasks this worker's copy of ``shared`` has served (1, 2, ... if shipped once)."""
    shared.count += 1
    return os.getpid(), shared.count


def breaks_on_two(task, shared):
    if task == 2:
        raise RuntimeError("task 2 breaks")
    return {"value": task * shared}


def counted(task, shared):
    """Leaves a file per call in ``shared`` (a folder), so calls can be counted across processes."""
    Path(shared, f"{task}-{uuid.uuid4().hex}").touch()
    time.sleep(0.05)
    return {"task": task}


def dies_once(task, shared):
    """Kills its worker process the first time task 3 runs."""
    marker = Path(shared, "died")
    if task == 3 and not marker.exists():
        marker.touch()
        os._exit(1)
    return {"task": task}


def _canonical(records):
    return json.dumps(records, sort_keys=True, allow_nan=True)


@pytest.fixture(scope="module")
def dask_executor():
    with DaskExecutor(n_workers=2, threads_per_worker=1) as executor:  # LocalCluster, processes
        yield executor


# -- same numbers everywhere ---------------------------------------------------------------
def test_serial_process_and_dask_give_identical_results(dask_executor):
    from threadpoolctl import threadpool_limits

    tasks = [(i, 1e-4) for i in range(8)]
    # the parent computes with several BLAS threads whatever the environment says (make test sets
    # OMP_NUM_THREADS=1), so the numbers must not depend on the thread count to agree
    with threadpool_limits(limits=2):
        serial = SerialExecutor().map(subset_task, tasks)
    with ProcessExecutor(2) as pool:
        process = pool.map(subset_task, tasks)
    dask = dask_executor.map(subset_task, tasks)
    assert len({r["probability"] for r in serial}) > 1  # the tasks do differ
    assert _canonical(process) == _canonical(serial)
    assert _canonical(dask) == _canonical(serial)
    # submit_all hands back every task once, in whatever order they finish
    unordered = dict(dask_executor.submit_all(subset_task, tasks))
    assert _canonical([unordered[t] for t in tasks]) == _canonical(serial)


@pytest.mark.parametrize("kind", ["process", "dask"])
def test_the_shared_object_ships_to_each_worker_once(kind, dask_executor):
    executor = dask_executor if kind == "dask" else ProcessExecutor(2)
    with executor if kind == "process" else _nullcontext():
        outcomes = executor.map(count_shipments, range(12), shared=Served())
    per_worker: dict[int, list[int]] = {}
    for pid, served in outcomes:
        per_worker.setdefault(pid, []).append(served)
    assert os.getpid() not in per_worker
    # one copy per worker, reused: its counter runs 1, 2, ..., not 1 for every task
    assert sorted(n for counts in per_worker.values() for n in counts) != [1] * 12
    for counts in per_worker.values():
        assert sorted(counts) == list(range(1, len(counts) + 1))


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


# -- failures --------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["serial", "dask"])
def test_a_task_that_raises_is_recorded_and_the_grid_finishes(kind, tmp_path, dask_executor):
    executor = dask_executor if kind == "dask" else SerialExecutor()
    store = ResultStore(tmp_path, {"grid": "breaks"})
    tasks = {f"t{i}": i for i in range(5)}
    payloads = run_grid(store, executor, breaks_on_two, tasks, shared=10)
    assert list(payloads) == ["t0", "t1", "t3", "t4"]
    assert payloads["t4"] == {"value": 40}
    errors = store.errors()
    assert list(errors) == ["t2"] and errors["t2"]["type"] == "RuntimeError"
    assert "task 2 breaks" in errors["t2"]["message"]
    assert "breaks_on_two" in errors["t2"]["traceback"]  # the worker's traceback, not only ours
    assert store.keys() == ["t0", "t1", "t3", "t4"]


def test_an_error_marked_fatal_is_recorded_and_stops_the_grid(tmp_path):
    store = ResultStore(tmp_path, {"grid": "fatal"})
    with pytest.raises(RuntimeError, match="task 2 breaks"):
        run_grid(store, SerialExecutor(), breaks_on_two, {f"t{i}": i for i in range(5)}, shared=1,
                 abort_on=(RuntimeError,))
    assert store.keys() == ["t0", "t1"] and list(store.errors()) == ["t2"]


def test_a_killed_dask_worker_loses_no_finished_result(tmp_path, dask_executor):
    store = ResultStore(tmp_path / "run", {"grid": "killed"})
    tasks = {f"t{i}": i for i in range(8)}
    payloads = run_grid(store, dask_executor, dies_once, tasks, shared=str(tmp_path))
    assert (tmp_path / "died").exists()  # a worker did die mid-grid
    assert list(payloads) == list(tasks) and not store.errors()  # Dask reran its task elsewhere


def test_a_killed_pool_worker_is_recorded_and_a_rerun_completes_the_grid(tmp_path):
    store = ResultStore(tmp_path / "run", {"grid": "killed"})
    tasks = {f"t{i}": i for i in range(8)}
    with ProcessExecutor(2) as pool:
        first = run_grid(store, pool, dies_once, tasks, shared=str(tmp_path))
        assert "t3" not in first and "t3" in store.errors()  # lost tasks are recorded, not hidden
        assert set(store.keys()) == set(first)  # every finished task kept
        second = run_grid(store, pool, dies_once, tasks, shared=str(tmp_path))  # a fresh pool
    assert list(second) == list(tasks) and not store.errors()


# -- resume ----------------------------------------------------------------------------------
class _Interrupted(BaseException):
    pass


def test_an_interrupted_run_resumes_without_recomputing(tmp_path):
    calls = tmp_path / "calls"
    calls.mkdir()
    tasks = {f"t{i}": i for i in range(10)}

    def interrupt_after_four(done, total, key):
        if done == 4:
            raise _Interrupted

    store = ResultStore(tmp_path / "run", {"grid": "resume"})
    with ProcessExecutor(2) as pool:
        with pytest.raises(_Interrupted):
            run_grid(store, pool, counted, tasks, shared=str(calls), progress=interrupt_after_four)
    kept = store.keys()
    assert len(kept) == 4
    stamps = {key: os.stat(tmp_path / "run" / "tasks" / f"{key}.json").st_mtime_ns for key in kept}
    before = {p.name for p in calls.iterdir()}
    with ProcessExecutor(2) as pool:
        payloads = run_grid(store, pool, counted, tasks, shared=str(calls))
    assert list(payloads) == list(tasks)
    recomputed = sorted("t" + name.split("-")[0] for name in {p.name for p in calls.iterdir()} - before)
    assert recomputed == sorted(set(tasks) - set(kept))  # each missing task once, no finished one
    assert {key: os.stat(tmp_path / "run" / "tasks" / f"{key}.json").st_mtime_ns for key in kept} == stamps


# -- bad input -------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_scheduler_is_a_clear_error_within_the_timeout():
    address = f"tcp://127.0.0.1:{_free_port()}"
    start = time.perf_counter()
    with pytest.raises(ScarceError, match="cannot reach a Dask scheduler"):
        DaskExecutor(address, timeout=1).start()
    assert time.perf_counter() - start < 10


def test_the_cli_writes_nothing_when_the_scheduler_is_unreachable(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from typer.testing import CliRunner

    from scarce.cli import app

    monkeypatch.setattr(executors_module, "DEFAULT_CONNECT_TIMEOUT", 1.0)
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(app, ["vision", "--preset", "tiny", "--run-dir", str(run_dir),
                                      "--scheduler", f"tcp://127.0.0.1:{_free_port()}"])
    assert result.exit_code == 2 and "cannot reach a Dask scheduler" in result.output
    assert not run_dir.exists()
    result = CliRunner().invoke(app, ["vision", "--preset", "tiny", "--run-dir", str(run_dir), "--executor", "dusk"])
    assert result.exit_code == 2 and "Did you mean 'dask'" in result.output and not run_dir.exists()


def test_make_executor_names_and_arguments():
    with pytest.raises(ScarceError, match="Did you mean 'process'"):
        make_executor("proccess")
    with pytest.raises(ScarceError, match="n_workers"):
        make_executor("process", n_workers=0)
    with pytest.raises(ScarceError, match="needs executor 'dask'"):
        make_executor("process", address="tcp://127.0.0.1:8786")
    assert isinstance(make_executor("dask", address="local", n_workers=1), DaskExecutor)
    assert make_executor("serial").map(abs, [-2, 3]) == [2, 3]


# -- chunked Monte Carlo ---------------------------------------------------------------------
def test_chunked_monte_carlo_is_the_same_on_dask_and_resumes(tmp_path, dask_executor):
    problem = linear(dim=5, probability=1e-2)
    mc = ChunkedMonteCarlo(n_samples=250_000, chunk_size=50_000, batch_size=25_000)
    reference = mc.estimate(problem, seed=11)
    assert reference.n_samples == 250_000 and reference.info["chunks"] == 5
    lo, hi = reference.ci(0.999)
    assert lo < 1e-2 < hi
    on_dask = mc.estimate(problem, seed=11, executor=dask_executor)
    assert (on_dask.n_failed, on_dask.probability) == (reference.n_failed, reference.probability)

    def interrupt_after_two(done, total, key):
        if done == 2:
            raise _Interrupted

    folder = tmp_path / "mc"
    with pytest.raises(_Interrupted):
        mc.estimate(problem, seed=11, checkpoint_dir=folder, progress=interrupt_after_two)
    done_first = sorted(p.name for p in (folder / "tasks").glob("*.json"))
    assert len(done_first) == 2
    stamps = {name: os.stat(folder / "tasks" / name).st_mtime_ns for name in done_first}
    computed = []
    resumed = mc.estimate(problem, seed=11, checkpoint_dir=folder,
                          progress=lambda done, total, key: computed.append(key))
    assert resumed.n_failed == reference.n_failed
    assert len([k for k in computed if k.startswith("chunk-")]) == 3  # only the missing chunks
    assert {name: os.stat(folder / "tasks" / name).st_mtime_ns for name in done_first} == stamps
    # a larger budget reuses the five chunks; another seed is refused
    more = ChunkedMonteCarlo(n_samples=300_000, chunk_size=50_000, batch_size=25_000)
    computed.clear()
    more.estimate(problem, seed=11, checkpoint_dir=folder, progress=lambda d, t, key: computed.append(key))
    assert [k for k in computed if k.startswith("chunk-")] == ["chunk-000000005"]
    with pytest.raises(ScarceError, match="different configuration"):
        mc.estimate(problem, seed=12, checkpoint_dir=folder)
    # a factory (built once per worker) gets a name that is the same in every run, so it resumes
    factory_dir = tmp_path / "factory"
    first = mc.estimate(functools.partial(linear, dim=5, probability=1e-2), seed=11, checkpoint_dir=factory_dir)
    again = mc.estimate(functools.partial(linear, dim=5, probability=1e-2), seed=11, checkpoint_dir=factory_dir)
    assert first.n_failed == again.n_failed == reference.n_failed
    assert "scarce.problems.linear(dim=5, probability=0.01)" in (factory_dir / "config.json").read_text()
    with pytest.raises(ScarceError, match="reproducible"):
        mc.estimate(problem, seed=None, checkpoint_dir=folder)


# -- the vision protocol through an executor -------------------------------------------------
def test_vision_stage_is_identical_in_serial_process_and_dask(tmp_path, dask_executor):
    torch = pytest.importorskip("torch")
    from scarce.applications.vision.classifier import SmallCNN
    from scarce.applications.vision.noise import GaussianNoise
    from scarce.applications.vision.pipeline import VisionContext
    from scarce.applications.vision.problem import VisionModel
    from scarce.applications.vision.protocol import VisionRun, get_preset

    torch.manual_seed(0)
    images = np.random.default_rng(0).random((3, 28, 28))
    context = VisionContext(VisionModel(SmallCNN(4, 8, 16)), GaussianNoise(0.3), {}, images, np.array([1, 2, 3]))
    preset = get_preset("tiny", methods={"smc_samples": 2000, "smc_batch": 1000, "ss_samples": 200,
                                         "max_levels": 3})
    jobs = [(i, m) for i in range(3) for m in ("smc", "ss_margin")]
    rows = {}
    for kind in ("serial", "process", "dask"):
        executor = dask_executor if kind == "dask" else make_executor(kind, n_workers=2)
        with executor if kind != "dask" else _nullcontext():
            run = VisionRun(preset, tmp_path / kind, context, executor=executor)
            rows[kind] = [{**row, "result": {**row["result"], "wall_time": None}, "timing": None}
                          for row in run._run_stage("eval", jobs)]
    assert len(rows["serial"]) == len(jobs)
    assert _canonical(rows["process"]) == _canonical(rows["serial"])
    assert _canonical(rows["dask"]) == _canonical(rows["serial"])
    # the local cluster's thread limits stay in its workers (torch here would train otherwise)
    assert {k: os.environ.get(k) for k in _THREADS} == _THREADS_AT_IMPORT


def test_allocator_tuning_is_applied_once_and_harmless():
    import sys

    from scarce._allocator import keep_large_blocks

    applied = keep_large_blocks()
    assert applied is keep_large_blocks()  # cached: once per process
    if sys.platform.startswith("linux"):
        assert applied is True
    assert np.ones((3000, 784)).sum() == 3000 * 784  # large blocks still allocate and free
