"""Executors: one ``map``-like interface over a serial loop, a local process pool and Dask.

An experiment is a grid of independent tasks. An executor runs ``fn`` on each task and hands
back ``(task, outcome)`` pairs *as they finish*, so the caller can write each result to a
:class:`~scarce.experiments.store.ResultStore` at once and an interruption loses only the tasks
still running:

    with make_executor("dask", n_workers=2) as executor:
        for task, outcome in executor.submit_all(fn, tasks, shared=context):
            ...  # outcome is fn's return value, or the exception the task raised

Large read-only objects a task needs (a classifier, fitted rulers) go in ``shared``: they are
shipped to every worker **once** (a process pool passes them to its worker initializer, Dask
broadcasts them with ``client.scatter``) and ``fn`` is called as ``fn(task, shared)``; without
``shared`` it is called as ``fn(task)``. Results never depend on the executor or on the order
tasks finish in, provided each task draws its randomness from its own seed (a per-task
``SeedSequence``), never from a generator shared between tasks.

:func:`run_grid` is the durable loop on top: it skips tasks already in a store, saves each
result as it arrives and records a task that raised while the others go on.

| kind | executor |
|---|---|
| ``serial`` | :class:`SerialExecutor`: a plain loop in this process (debugging, tests) |
| ``process`` | :class:`ProcessExecutor`: ``concurrent.futures`` pool of spawned processes |
| ``dask`` | :class:`DaskExecutor`: a Dask ``distributed`` cluster (a scheduler's address, or a ``LocalCluster``) |

Dask is an optional dependency (``pip install 'scarce[scale]'``), imported only when a
:class:`DaskExecutor` connects.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import sys
import traceback
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from scarce._allocator import keep_large_blocks
from scarce.checks import check_positive_int
from scarce.errors import ScarceError, unknown_name_error

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "EXECUTORS",
    "DaskExecutor",
    "Executor",
    "ProcessExecutor",
    "RemoteTraceback",
    "SerialExecutor",
    "blas_threads",
    "executor_from_options",
    "make_executor",
    "run_grid",
]

#: Seconds a :class:`DaskExecutor` waits for a scheduler before giving up.
DEFAULT_CONNECT_TIMEOUT = 10.0


class _Nothing:
    """The "no shared object" marker; unpickles as the same object in every process."""

    def __repr__(self) -> str:
        return "<no shared object>"

    def __reduce__(self) -> str:
        return "NOTHING"


NOTHING: Any = _Nothing()


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker, chained as its ``__cause__``.

    An exception sent back from another process loses its traceback; the worker formats it and
    it is attached here, so ``traceback.format_exception`` (and
    :meth:`ResultStore.save_error`) still show where the task failed.
    """

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f'\n"""\n{self.text}"""'


class _Failure:
    """What a worker returns for a task that raised: the exception and its formatted traceback."""

    __slots__ = ("error", "text")

    def __init__(self, error: BaseException, text: str):
        self.error, self.text = error, text

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Failure, (self.error, self.text))


def _portable(error: BaseException) -> BaseException:
    """``error`` if it survives a pickle round trip, else a RuntimeError with its message."""
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:
        return RuntimeError(f"{type(error).__name__}: {error}")


def blas_threads(threads: int | None) -> Any:
    """A context limiting the BLAS libraries to ``threads`` threads (no-op for None).

    OpenBLAS sums a long dot product in per-thread blocks, so ``g @ g`` differs in its last bits
    between 1 and 2 threads; a fixed count per task keeps results independent of the machine.
    """
    if threads is None:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a dependency of scikit-learn
        return contextlib.nullcontext()
    return threadpool_limits(limits=threads, user_api="blas")


def _limit_torch(threads: int | None) -> None:
    """In a worker: torch's intra-op threads to the worker's share of the cores."""
    torch = sys.modules.get("torch")
    if threads is not None and torch is not None and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def _call(fn: Callable[..., Any], task: Any, shared: Any, threads: int | None = None) -> Any:
    """Run one task in a worker; an exception comes back as a :class:`_Failure`, not raised."""
    try:
        keep_large_blocks()  # once per process: no page-fault churn on the per-step arrays
        _limit_torch(threads)
        with blas_threads(threads):
            return fn(task) if shared is NOTHING else fn(task, shared)
    except Exception as error:
        text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        return _Failure(_portable(error), text)


def _unwrap(value: Any) -> Any:
    if isinstance(value, _Failure):
        error = value.error
        if error.__cause__ is None:
            error.__cause__ = RemoteTraceback(value.text)
        return error
    return value


class Executor:
    """The interface every executor implements (an abstract base; use :func:`make_executor`).

    Executors are context managers: workers start on entry (or on first use) and stop on exit,
    cancelling the tasks not yet finished. By default every executor runs a task with one BLAS
    thread (``threads_per_task=1``), so the same task gives the same bits on each.
    """

    kind = "abstract"

    def submit_all(self, fn: Callable[..., Any], tasks: Iterable[Any], *,
                   shared: Any = NOTHING) -> Iterator[tuple[Any, Any]]:
        """Run ``fn`` on every task; yield ``(task, outcome)`` as tasks finish (any order).

        Parameters
        ----------
        fn : callable
            ``fn(task)``, or ``fn(task, shared)`` when ``shared`` is given. For a process pool
            or Dask it must be picklable (a module-level function; Dask and, where installed,
            cloudpickle also take closures).
        tasks : iterable
            The tasks' arguments (small, picklable).
        shared : object, optional
            A large read-only object every task needs, shipped to each worker once.

        Yields
        ------
        (task, outcome)
            ``outcome`` is ``fn``'s return value, or the exception it raised (with the
            worker's traceback chained as a :class:`RemoteTraceback`). A worker that died
            yields its tasks with the executor's error (``BrokenProcessPool``,
            ``KilledWorker``).
        """
        tasks = list(tasks)
        outcomes = self._run(fn, tasks, shared)
        try:
            for index, outcome in outcomes:
                yield tasks[index], outcome
        finally:
            outcomes.close()

    def map(self, fn: Callable[..., Any], tasks: Iterable[Any], *, shared: Any = NOTHING) -> list[Any]:
        """``[fn(t) for t in tasks]`` in task order (emcee's ``pool.map``); re-raises the first error."""
        tasks = list(tasks)
        results: list[Any] = [None] * len(tasks)
        outcomes = self._run(fn, tasks, shared)
        try:
            for index, outcome in outcomes:
                if isinstance(outcome, BaseException):
                    raise outcome
                results[index] = outcome
        finally:
            outcomes.close()
        return results

    def _run(self, fn: Callable[..., Any], tasks: list[Any], shared: Any) -> Iterator[tuple[int, Any]]:
        """What a subclass implements: a generator of ``(index into tasks, outcome)`` as tasks
        finish; closing it cancels the tasks not started."""
        raise NotImplementedError

    def start(self) -> Executor:
        """Start the workers now (otherwise on first use); returns self."""
        return self

    def close(self) -> None:
        """Stop the workers; tasks not finished are cancelled."""

    def __enter__(self) -> Executor:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class SerialExecutor(Executor):
    """Every task in turn, in this process (no pickling; the reference for the others).

    Parameters
    ----------
    threads_per_task : int or None
        BLAS threads inside a task (default 1, as in the parallel executors, so the numbers are
        the same bit for bit; see :func:`blas_threads`). None leaves BLAS as it is. torch keeps
        its threads here.
    """

    kind = "serial"

    def __init__(self, *, threads_per_task: int | None = 1):
        self.threads_per_task = _check_threads(threads_per_task)

    def _run(self, fn: Callable[..., Any], tasks: list[Any], shared: Any) -> Iterator[tuple[int, Any]]:
        for index, task in enumerate(tasks):
            try:
                with blas_threads(self.threads_per_task):
                    outcome = fn(task) if shared is NOTHING else fn(task, shared)
            except Exception as error:  # a failing task is handed back; the grid goes on
                outcome = error
            yield index, outcome


# -- process pool --------------------------------------------------------------------------
_WORKER: dict[str, Any] = {}


def _dumps(obj: Any) -> bytes:
    """Pickle with cloudpickle when it is installed (closures, lambdas), else plain pickle."""
    try:
        import cloudpickle
    except ImportError:
        return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def _check_threads(threads: int | None) -> int | None:
    return None if threads is None else check_positive_int("threads_per_task", threads)


#: Seconds between two checks of a worker with no parent sentinel that its parent is alive.
PARENT_POLL_SECONDS = 0.5


def _wait_parent_sentinel(sentinel: Any) -> None:
    """Block until the parent process's sentinel is ready (the parent ended), then exit."""
    from multiprocessing.connection import wait

    wait([sentinel])
    os._exit(1)


def _watch_parent(parent: int, interval: float) -> None:
    """Exit this process as soon as its parent is gone (it was reparented)."""
    import time

    while os.getppid() == parent:
        time.sleep(interval)
    os._exit(1)


def _die_with_parent(interval: float = PARENT_POLL_SECONDS) -> None:
    """In a pool worker: a daemon thread that ends the worker when the parent process dies.

    ``concurrent.futures`` workers block on their task queue and outlive a parent killed with
    SIGKILL (which runs no clean-up), and they keep multiprocessing's resource tracker alive
    with them. The thread waits on ``multiprocessing.parent_process().sentinel``, a handle the
    parent created before starting the worker and that becomes ready when the parent ends, so
    it neither polls nor misses a parent that died before this initializer ran (reading the
    parent's id here would then read init's). ``PR_SET_PDEATHSIG`` is not used: it fires when
    the *thread* that spawned the worker ends. Only in a process that multiprocessing did not
    start (no sentinel) does it fall back to polling ``os.getppid()`` on POSIX.
    """
    import multiprocessing
    import threading

    parent = multiprocessing.parent_process()
    if parent is not None and parent.sentinel is not None:
        target, args = _wait_parent_sentinel, (parent.sentinel,)
    elif os.name == "posix":
        target, args = _watch_parent, (os.getppid(), interval)
    else:
        return
    threading.Thread(target=target, args=args, name="scarce-parent-watchdog", daemon=True).start()


def _process_init(payload: bytes, threads: int | None) -> None:
    """Worker initializer: end with the parent; receive ``(fn, shared)`` once for every task."""
    _die_with_parent()
    _WORKER["fn"], _WORKER["shared"] = pickle.loads(payload)
    _WORKER["threads"] = threads


def _process_task(task: Any) -> Any:
    return _call(_WORKER["fn"], task, _WORKER["shared"], _WORKER["threads"])


class ProcessExecutor(Executor):
    """A local pool of ``n_workers`` spawned processes (``concurrent.futures``).

    Parameters
    ----------
    n_workers : int, optional
        Worker processes (default: the number of CPU cores).
    threads_per_task : int or None
        Threads torch and BLAS may use in each worker (default 1, so ``n_workers`` workers use
        ``n_workers`` cores and the numbers match the other executors); None leaves the
        libraries' defaults.

    Notes
    -----
    Workers are started with the ``spawn`` method (safe with torch and threads; a script that
    uses a pool needs the ``if __name__ == "__main__":`` guard). ``fn`` and ``shared`` are sent to
    each worker once through the pool's initializer; a call of :meth:`submit_all` with another
    ``fn`` or ``shared`` object starts a fresh pool.
    """

    kind = "process"

    def __init__(self, n_workers: int | None = None, *, threads_per_task: int | None = 1):
        self.n_workers = check_positive_int("n_workers", n_workers if n_workers is not None else os.cpu_count() or 1)
        self.threads_per_task = _check_threads(threads_per_task)
        self._pool: Any = None
        self._installed: tuple[Any, Any] | None = None

    def _pool_for(self, fn: Callable[..., Any], shared: Any) -> Any:
        if self._pool is not None and self._installed is not None and \
                self._installed[0] is fn and self._installed[1] is shared:
            return self._pool
        self.close()
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self._pool = ProcessPoolExecutor(
            max_workers=self.n_workers, mp_context=multiprocessing.get_context("spawn"),
            initializer=_process_init, initargs=(_dumps((fn, shared)), self.threads_per_task))
        self._installed = (fn, shared)
        return self._pool

    def _run(self, fn: Callable[..., Any], tasks: list[Any], shared: Any) -> Iterator[tuple[int, Any]]:
        from concurrent.futures import FIRST_COMPLETED, wait
        from concurrent.futures.process import BrokenProcessPool

        if not tasks:
            return
        pool = self._pool_for(fn, shared)
        pending = {pool.submit(_process_task, task): index for index, task in enumerate(tasks)}
        broken = False
        try:
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    index = pending.pop(future)
                    try:
                        outcome = _unwrap(future.result())
                    except BrokenProcessPool as error:  # a worker died: its tasks are lost, not its peers' results
                        broken = True
                        outcome = error
                    except Exception as error:  # the task's arguments or result did not pickle
                        outcome = error
                    yield index, outcome
        finally:
            for future in pending:
                future.cancel()
            if broken:
                self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        self._pool, self._installed = None, None

    def __repr__(self) -> str:
        return f"ProcessExecutor(n_workers={self.n_workers}, threads_per_task={self.threads_per_task})"


# -- Dask ----------------------------------------------------------------------------------
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


class DaskExecutor(Executor):
    """Tasks on a Dask ``distributed`` cluster.

    Parameters
    ----------
    address : str or None
        A running scheduler (``"tcp://host:8786"``), or None / ``"local"`` to start a
        ``LocalCluster`` of ``n_workers`` worker processes here (closed with the executor).
    n_workers : int, optional
        Workers of a local cluster (default: the number of CPU cores); ignored with an address.
    threads_per_worker : int
        Task threads per local worker (default 1: one task at a time per process).
    threads_per_task : int or None
        Threads torch and BLAS may use inside a task (default 1; see :class:`ProcessExecutor`).
    timeout : float
        Seconds to wait for the scheduler before a :class:`~scarce.errors.ScarceError`.

    Notes
    -----
    ``shared`` is broadcast to every worker with ``client.scatter(..., broadcast=True)`` once per
    distinct object; tasks receive it by reference. Dask retries a task whose worker died (up
    to ``distributed.scheduler.allowed-failures`` times), so results already handed back are
    never lost and a killed worker costs only the tasks it was running.
    """

    kind = "dask"

    def __init__(self, address: str | None = None, n_workers: int | None = None, *,
                 threads_per_worker: int = 1, threads_per_task: int | None = 1, timeout: float | None = None):
        if address is not None and not (isinstance(address, str) and address.strip()):
            raise ScarceError(f"address must be a scheduler address such as 'tcp://host:8786', "
                              f"'local' or None, got {address!r}")
        self.address = None if address in (None, "local") else address.strip()
        self.n_workers = check_positive_int("n_workers", n_workers if n_workers is not None else os.cpu_count() or 1)
        self.threads_per_worker = check_positive_int("threads_per_worker", threads_per_worker)
        self.threads_per_task = _check_threads(threads_per_task)
        self.timeout = float(DEFAULT_CONNECT_TIMEOUT if timeout is None else timeout)
        if not self.timeout > 0:
            raise ScarceError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.client: Any = None
        self._cluster: Any = None
        self._scattered: tuple[Any, Any] | None = None

    def start(self) -> DaskExecutor:
        """Connect to the scheduler (or start the local cluster); a clear error if unreachable."""
        if self.client is not None:
            return self
        try:
            from distributed import Client, LocalCluster
        except ImportError as error:
            raise ScarceError("the dask executor needs dask.distributed: pip install 'scarce[scale]'") from error
        if self.address is None:
            import logging

            import dask

            # A nanny sets its "pre-spawn" variables (OMP_NUM_THREADS=1, ...) in *this* process's
            # environment before spawning a worker; torch imported here afterwards would then
            # train with one thread and give other weights than a run without Dask. The thread
            # limits go to the workers' own environment instead. MALLOC_TRIM_THRESHOLD_ (Dask's
            # default 65536) is dropped: it turns every large numpy array into an mmap/munmap
            # pair and made Subset Simulation tasks about 1.5x slower (benchmarks/scaleout.py).
            threads = str(self.threads_per_task or self.threads_per_worker)
            limits = {name: threads for name in _THREAD_VARIABLES}
            pre_spawn = {k: v for k, v in dict(dask.config.get("distributed.nanny.pre-spawn-environ", {})).items()
                         if k not in _THREAD_VARIABLES and k != "MALLOC_TRIM_THRESHOLD_"}
            with dask.config.set({"distributed.nanny.pre-spawn-environ": pre_spawn}):
                self._cluster = LocalCluster(n_workers=self.n_workers, threads_per_worker=self.threads_per_worker,
                                             processes=True, dashboard_address=None, silence_logs=logging.WARNING,
                                             env=limits)
            self.client = Client(self._cluster, timeout=self.timeout)
            return self
        try:
            self.client = Client(self.address, timeout=self.timeout)
        except Exception as error:  # OSError/TimeoutError, or garbage from something that is no scheduler
            raise ScarceError(
                f"cannot reach a Dask scheduler at {self.address!r} within {self.timeout:g} s "
                f"({type(error).__name__}: {error}); start one (`dask scheduler`, or a dask-jobqueue "
                f"cluster) and pass its address, or use a local cluster (no address)") from None
        return self

    def _shared_future(self, shared: Any) -> Any:
        if shared is NOTHING:
            return NOTHING
        if self._scattered is not None and self._scattered[0] is shared:
            return self._scattered[1]
        future = self.client.scatter(shared, broadcast=True, hash=False)
        self._scattered = (shared, future)
        return future

    def _run(self, fn: Callable[..., Any], tasks: list[Any], shared: Any) -> Iterator[tuple[int, Any]]:
        from distributed import as_completed

        if not tasks:
            return
        self.start()
        shared_future = self._shared_future(shared)
        batch = uuid.uuid4().hex[:12]
        futures = {self.client.submit(_call, fn, task, shared_future, self.threads_per_task,
                                      key=f"scarce-{batch}-{index}", pure=False): index
                   for index, task in enumerate(tasks)}
        finished = set()
        try:
            for future in as_completed(futures):
                index = futures[future]
                finished.add(future)
                if future.status == "error":
                    outcome = future.exception()
                else:
                    try:
                        outcome = _unwrap(future.result())
                    except Exception as error:  # the result did not arrive (cancelled, lost)
                        outcome = error
                future.release()
                yield index, outcome
        finally:
            unfinished = [f for f in futures if f not in finished]
            if unfinished and self.client.status == "running":
                self.client.cancel(unfinished)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        if self._cluster is not None:
            self._cluster.close()
        self.client, self._cluster, self._scattered = None, None, None

    def __repr__(self) -> str:
        where = self.address or f"local, {self.n_workers} workers"
        return f"DaskExecutor({where})"


EXECUTORS: dict[str, type[Executor]] = {"serial": SerialExecutor, "process": ProcessExecutor, "dask": DaskExecutor}


def make_executor(kind: str = "serial", *, n_workers: int | None = None, address: str | None = None,
                  **options: Any) -> Executor:
    """An executor by name: ``serial``, ``process`` (``n_workers``) or ``dask`` (``address``, ``n_workers``).

    Examples
    --------
    >>> make_executor("serial").map(abs, [-1, 2, -3])
    [1, 2, 3]
    >>> make_executor("proces")
    Traceback (most recent call last):
    ...
    scarce.errors.ScarceError: unknown executor 'proces'. Did you mean 'process'? Available: dask, process, serial
    """
    if kind not in EXECUTORS:
        raise unknown_name_error("executor", kind, EXECUTORS)
    if kind == "serial":
        return SerialExecutor(**options)
    if address is not None and kind != "dask":
        raise ScarceError(f"a scheduler address ({address!r}) needs executor 'dask', got {kind!r}")
    if kind == "process":
        return ProcessExecutor(n_workers, **options)
    return DaskExecutor(address, n_workers, **options)


def executor_from_options(executor: str = "process", *, dask: str | None = None,
                          scheduler: str | None = None, workers: int | None = None) -> Executor:
    """The executor the command-line options ``--executor/--dask/--scheduler/--workers`` name.

    ``dask="local"`` starts a local Dask cluster; any other ``dask`` value, or ``scheduler``, is
    the address of a running one (either implies the Dask executor). Giving both is an error.
    """
    if dask is not None and scheduler is not None:
        raise ScarceError(f"give the scheduler once: --dask {dask!r} or --scheduler {scheduler!r}")
    if executor == "serial" and (dask is not None or scheduler is not None):  # "process" is the default: not a choice
        given = f"--dask {dask!r}" if dask is not None else f"--scheduler {scheduler!r}"
        raise ScarceError(f"--executor 'serial' and {given} contradict each other: {given} runs the tasks on Dask; "
                          "give one of them")
    address = scheduler if scheduler is not None else (None if dask in (None, "local") else dask)
    kind = "dask" if (dask is not None or scheduler is not None) else executor
    return make_executor(kind, n_workers=workers, address=address)


# -- the durable loop ------------------------------------------------------------------------
def run_grid(store: Any, executor: Executor | None, fn: Callable[..., Mapping[str, Any]], tasks: Mapping[str, Any], *,
             shared: Any = NOTHING, seeds: Mapping[str, Any] | None = None,
             progress: Callable[[int, int, str], None] | None = None,
             abort_on: tuple[type[BaseException], ...] = ()) -> dict[str, dict[str, Any]]:
    """Run the tasks of a grid that are not in ``store`` yet; save each result as it arrives.

    Parameters
    ----------
    store : ResultStore
    executor : Executor or None
        None runs serially.
    fn : callable
        ``fn(task[, shared]) -> payload`` (a JSON-serialisable mapping).
    tasks : mapping
        ``{key: task}``: the store key of each task and its arguments.
    shared : object, optional
        Shipped to each worker once (see :meth:`Executor.submit_all`).
    seeds : mapping, optional
        ``{key: seed record}`` saved with each result as its provenance.
    progress : callable, optional
        ``progress(done, total, key)`` after every finished (or skipped) task.
    abort_on : tuple of exception types
        A task raising one of these is recorded and then stops the grid (the error is raised;
        unfinished tasks are cancelled). Any other exception is recorded and the grid goes on.

    Returns
    -------
    dict
        ``{key: payload}`` of every finished task, stored earlier or now, in the order of
        ``tasks``; a task that raised is absent (its error is in ``store.errors()``).
    """
    executor = executor if executor is not None else SerialExecutor()
    payloads = {key: stored for key in tasks if (stored := store.load(key)) is not None}
    todo = {key: task for key, task in tasks.items() if key not in payloads}
    total, done = len(tasks), len(payloads)
    if progress is not None:
        progress(done, total, "resumed" if done else "start")
    keys = list(todo)
    outcomes = executor._run(fn, [todo[key] for key in keys], shared)
    try:
        for index, outcome in outcomes:
            key = keys[index]
            if isinstance(outcome, BaseException):
                store.save_error(key, outcome)
                if isinstance(outcome, abort_on):
                    raise outcome
            else:
                store.save(key, outcome, seed=None if seeds is None else seeds.get(key))
                payloads[key] = store.load(key) or dict(outcome)
            done += 1
            if progress is not None:
                progress(done, total, key)
    finally:
        outcomes.close()  # cancel what has not started (an abort, an interrupt, a full disk)
    return {key: payloads[key] for key in tasks if key in payloads}
