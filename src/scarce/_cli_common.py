"""Pieces the command-line apps share: the executor options and the per-stage progress bars."""

from __future__ import annotations

import typer

EXECUTOR = typer.Option("process", help="Where tasks run: process (a local process pool, the default), "
                        "serial (here) or dask (a local Dask cluster, or the one at --scheduler). "
                        "Same numbers on each.")
DASK = typer.Option(None, help="'local' starts a local Dask cluster; an address (tcp://host:8786) joins a "
                    "running one. Implies --executor dask.")
WORKERS = typer.Option(None, help="Workers of the process pool or local Dask cluster (default: CPU cores).")
SCHEDULER = typer.Option(None, help="Address of a running Dask scheduler (tcp://host:8786); implies "
                         "--executor dask.")


class stage_progress:
    """A rich progress bar per stage of a run: ``progress(stage, done, total, label)``."""

    def __enter__(self):  # type: ignore[no-untyped-def]
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), transient=False)
        self.progress.__enter__()
        self.tasks: dict[str, object] = {}
        return self

    def __call__(self, stage: str, done: int, total: int, label: str) -> None:
        if stage not in self.tasks:
            self.tasks[stage] = self.progress.add_task(stage, total=total)
        self.progress.update(self.tasks[stage], completed=done, description=f"{stage}: {label}")

    def __exit__(self, *exc):  # type: ignore[no-untyped-def]
        return self.progress.__exit__(*exc)
