"""One run of an experiment: its store, where its tasks execute, its progress and its errors.

Both applications are a few *stages* of independent tasks over one run directory (vision:
Monte Carlo on the candidate seeds, ruler screening, the held-out head-to-head, the dense truth;
LLM: the cells of the sweep).  A :class:`Run` holds what a stage needs besides its tasks: the
:class:`~scarce.experiments.store.ResultStore` (a finished task is never recomputed; each result
is written as it arrives), the executor (serial, a process pool or Dask: same numbers on each),
progress reporting and the rule for errors (a task that raises is recorded and the others go
on; a :class:`~scarce.errors.ScarceError`, bad settings, stops the run).  An application only
says what its tasks are, their seeds and labels, and the function that runs one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from scarce.errors import ScarceError
from scarce.experiments.executors import NOTHING, Executor, run_grid
from scarce.experiments.store import ResultStore

__all__ = ["Progress", "Run"]

#: ``progress(stage, done, total, label)`` after every finished (or resumed) task of a stage.
Progress = Callable[[str, int, int, str], None]


@dataclass
class Run:
    """A run directory's store and the executor, progress and error rule its stages share.

    Parameters
    ----------
    store : ResultStore
    executor : Executor, optional
        Where tasks run (default: serially, here).
    progress : callable, optional
        ``progress(stage, done, total, label)``.
    abort_on : tuple of exception types
        A task raising one of these is recorded and stops the run; any other is recorded and the
        stage goes on (rerunning retries it).
    """

    store: ResultStore
    executor: Executor | None = None
    progress: Progress | None = None
    abort_on: tuple[type[BaseException], ...] = (ScarceError,)

    def stage(self, name: str, fn: Callable[..., Mapping[str, Any]], tasks: Mapping[str, Any], *,
              seeds: Mapping[str, Any] | None = None, labels: Mapping[str, str] | None = None,
              shared: Any = NOTHING) -> dict[str, dict[str, Any]]:
        """Run the tasks of one stage not finished yet; ``{key: payload}`` of every finished one.

        ``fn(task[, shared])`` computes one task; ``seeds`` (a record per key) is stored with each
        result as its provenance; ``labels`` name the tasks in the progress bar.
        """
        labels = labels or {}

        def progress(done: int, total: int, key: str) -> None:
            if self.progress is not None:
                self.progress(name, done, total, "done" if done == total else labels.get(key, key))

        return run_grid(self.store, self.executor, fn, tasks, shared=shared, seeds=seeds, progress=progress,
                        abort_on=self.abort_on)

    def errors(self, keys: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
        """Recorded task errors (of the given keys only, when given)."""
        errors = self.store.errors()
        return errors if keys is None else {key: error for key, error in errors.items() if key in keys}
