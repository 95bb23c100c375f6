"""What every command shares: the executor options, the per-stage progress bars and how errors end a command."""

from __future__ import annotations

import os
import warnings
from typing import NoReturn, Optional

import typer

#: Pool workers per CPU core a command may start without the run's ``allow_large`` override: a
#: task runs on one thread, so workers beyond the cores add a process's memory each and no speed.
WORKERS_PER_CORE = 4

EXECUTOR = typer.Option("process", help="Where tasks run: process (a local process pool, the default), "
                        "serial (here) or dask (a local Dask cluster, or the one at --scheduler). "
                        "Same numbers on each.")
DASK = typer.Option(None, help="'local' starts a local Dask cluster; an address (tcp://host:8786) joins a "
                    "running one. Implies --executor dask.")
WORKERS = typer.Option(None, help="Workers of the process pool or local Dask cluster (default: CPU cores; at most "
                       f"{WORKERS_PER_CORE} per core without --set allow_large=true).")
SCHEDULER = typer.Option(None, help="Address of a running Dask scheduler (tcp://host:8786); implies "
                         "--executor dask.")


#: Help of ``--level-probability`` (Subset Simulation's ``p0``), shared by the commands that take it.
LEVEL_PROBABILITY_HELP = ("Target conditional probability p0 in (0, 0.5], or auto: 0.1 from --n-samples 1000 on, "
                          "100/N below it up to 0.5 (100 Markov chains a level from N = 200 on).")


def level_probability_option(text: str) -> float | str:
    """``--level-probability`` as SubsetSimulation takes it: ``"auto"`` or a number (checked there)."""
    from scarce.errors import ScarceError

    if text.strip().lower() == "auto":
        return "auto"
    try:
        return float(text)
    except ValueError:
        raise ScarceError(f"--level-probability must be a number in (0, 0.5] or auto, got {text!r}") from None


def check_path_option(option: str, value: Optional[str]) -> Optional[str]:
    """``value`` of a path option (None when not given), checked by :func:`scarce.checks.check_path`:
    the empty path means the current directory, so a typo or an unset shell variable would read or
    write there instead."""
    from scarce.checks import check_path

    if value is not None:
        check_path(option, value)
    return value


def pool_from_options(executor: str, dask: Optional[str], scheduler: Optional[str], workers: Optional[int],
                      *, allow_large: bool = False):  # type: ignore[no-untyped-def]
    """The executor ``--executor/--dask/--scheduler/--workers`` name, ``--workers`` checked first.

    ``--workers`` sizes a pool started here (a process pool or a local Dask cluster): with
    ``--executor serial`` or a running scheduler's address it would be ignored, so it is refused;
    beyond :data:`WORKERS_PER_CORE` workers per core it needs the run's ``allow_large`` override.
    """
    from scarce.checks import check_positive_int
    from scarce.errors import ScarceError
    from scarce.experiments.executors import executor_from_options

    pool = executor_from_options(executor, dask=dask, scheduler=scheduler)  # the kind and address only
    if workers is None:
        return pool
    if pool.kind == "serial" or getattr(pool, "address", None) is not None:
        where = "--executor serial runs every task here" if pool.kind == "serial" else \
            f"the running scheduler at {pool.address!r} has its own workers"
        raise ScarceError(f"--workers {workers} sizes a process pool or a local Dask cluster started here; {where}: "
                          "leave --workers out")
    bound = WORKERS_PER_CORE * (os.cpu_count() or 1)
    workers = check_positive_int("--workers", workers)
    if workers > bound and not allow_large:
        raise ScarceError(f"--workers {workers} is above the bound of {bound} ({WORKERS_PER_CORE} per CPU core here: "
                          "each worker is a process with its own memory, and more than the cores add no speed); "
                          "lower it, or pass --set allow_large=true to start them")
    return executor_from_options(executor, dask=dask, scheduler=scheduler, workers=workers)


CONFIDENCE = typer.Option(0.95, help="Confidence level of the interval.")
ALLOW_LARGE = typer.Option(False, "--allow-large", help="Run a configuration beyond the memory or query bounds "
                           "(refused otherwise, before any work).")
DELTA = typer.Option(0.05, help="Error budget of the anytime-valid envelope.")
JSON_OUTPUT = typer.Option(False, "--json", help="Print the result as JSON instead of tables.")


def check_report_options(confidence: float, delta: float) -> None:
    """--confidence and --delta checked before the run (they are used only to report it)."""
    from scarce.checks import check_in_interval

    check_in_interval("--confidence", confidence, 0.0, 1.0, high_open=True)
    check_in_interval("--delta", delta, 0.0, 1.0, high_open=True)


def show_estimate(result, caught, *, json_output: bool, confidence: float, delta: float,  # type: ignore[no-untyped-def]
                  exact: float | None = None) -> None:
    """The result as JSON, or its level table and summary then the warnings the run raised."""
    if json_output:
        typer.echo(result.to_json(indent=2))
        return
    from scarce.reporting.tables import print_result

    print_result(result, exact=exact, confidence=confidence, delta=delta)
    for w in caught:
        typer.echo(f"warning: {w.message}", err=True)


class stage_progress:
    """A rich progress bar per stage of a run: ``progress(stage, done, total, label)``.

    Off a terminal (a CI log, ``| tee``) a live bar draws nothing until the run ends, so there
    each stage prints a plain line to stderr instead: at its first unit, at every tenth of its
    total and when it completes.
    """

    def __enter__(self):  # type: ignore[no-untyped-def]
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.live = Console().is_terminal
        if self.live:  # off a terminal no bar is made: plain lines only
            self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), transient=False)
            self.progress.__enter__()
        self.tasks: dict[str, object] = {}
        self.shown: dict[str, int] = {}  # off a terminal: the last tenth printed of each stage
        return self

    def __call__(self, stage: str, done: int, total: int, label: str) -> None:
        if not self.live:
            self._line(stage, done, total, label)
            return
        if stage not in self.tasks:
            self.tasks[stage] = self.progress.add_task(stage, total=total)
        self.progress.update(self.tasks[stage], completed=done, description=f"{stage}: {label}")

    def _line(self, stage: str, done: int, total: int, label: str) -> None:
        tenth = 10 * done // total if total > 0 else 10
        if stage in self.shown and tenth <= self.shown[stage]:
            return
        self.shown[stage] = tenth
        typer.echo(f"{stage}: {done}/{total} {label}", err=True)

    def __exit__(self, *exc):  # type: ignore[no-untyped-def]
        return self.progress.__exit__(*exc) if self.live else None


class level_progress:
    """A transient progress bar over the levels of one estimate; the context gives the callback."""

    def __init__(self, name: str, expected: int | None = None) -> None:
        self.name, self.expected = name, expected

    def __enter__(self):  # type: ignore[no-untyped-def]
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                 TextColumn("{task.completed}/{task.total} levels"), TimeElapsedColumn(), transient=True)
        self.progress.__enter__()
        task = self.progress.add_task(self.name, total=self.expected)

        def on_level(diag) -> None:  # type: ignore[no-untyped-def]
            if diag.level > 0:
                self.progress.update(task, advance=1, description=f"{self.name}: level {diag.level}, threshold "
                                     f"{diag.threshold:.4g}, {diag.n_failed} failed")

        return on_level

    def __exit__(self, *exc):  # type: ignore[no-untyped-def]
        return self.progress.__exit__(*exc)


def cli_message(error: BaseException, options: dict[str, str] | None = None) -> str:
    """``error``'s message in the command line's words: the library's ``allow_large=True``
    override of a resource bound is the ``--allow-large`` option of the command, and a message
    that begins with a library parameter ``options`` maps to an option (``n_samples`` ->
    ``--n-samples``) is introduced by that option."""
    message = str(error).replace("allow_large=True", "--allow-large")
    for name, option in (options or {}).items():
        if message.startswith((f"{name} ", f"{name}=")):
            return f"{option}: {message}"
    return message


def fail(message: str, cause: BaseException) -> NoReturn:
    """Print ``error: <message>`` on stderr and exit with status 2 (a usage or input error)."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code=2) from cause


def describe_os_error(error: OSError, check: str = "that the run directory is a writable directory with free "
                      "space and a valid name") -> str:
    """One line for a file-system error: the path, the reason and what to ``check``.

    A :class:`~scarce.experiments.store.RunDirectoryError` (an ``OSError`` and a
    :class:`~scarce.errors.ScarceError`) already says what was attempted, on which path and why,
    naming the original error's type: its own message is kept, not wrapped again under its own
    class name.
    """
    from scarce.errors import ScarceError

    if isinstance(error, ScarceError):
        return str(error)
    where = f" {str(error.filename)!r}" if error.filename is not None else ""
    reason = error.strerror or str(error) or type(error).__name__
    return f"cannot access{where}: {reason} ({type(error).__name__}); check {check}"


class run_warnings:
    """Around a run: the library's statistical warnings stay quiet (the report carries them as
    flags), but every damaged, partial or stale file that is recomputed is said on stderr."""

    def __enter__(self):  # type: ignore[no-untyped-def]
        from scarce.errors import ScarceWarning
        from scarce.experiments.store import CorruptResultWarning

        self._catch = warnings.catch_warnings(record=True)
        self.caught = self._catch.__enter__()
        warnings.simplefilter("ignore", ScarceWarning)
        warnings.simplefilter("always", CorruptResultWarning)
        self._category = CorruptResultWarning
        return self

    #: Task files of another estimator revision named one by one before the rest are counted.
    STALE_SHOWN = 3

    def __exit__(self, *exc):  # type: ignore[no-untyped-def]
        from scarce.experiments.store import StaleResultWarning

        self._catch.__exit__(*exc)
        said: set[str] = set()  # a file read twice (resumed, then reported) is named once
        stale = 0
        for caught in self.caught:
            message = str(caught.message)
            if not issubclass(caught.category, self._category) or message in said:
                continue
            said.add(message)
            if issubclass(caught.category, StaleResultWarning):  # after an upgrade: every task of a run
                stale += 1
                if stale > self.STALE_SHOWN:
                    continue
            typer.echo(f"warning: {message}", err=True)
        if stale > self.STALE_SHOWN:
            typer.echo(f"warning: {stale - self.STALE_SHOWN} more task files of another estimator revision were "
                       "recomputed", err=True)
        return False
