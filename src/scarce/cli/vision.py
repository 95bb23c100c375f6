"""``scarce vision``: the paper's vision protocol (rulers vs margin Subset Simulation, AMLS and Monte
Carlo) run in a run directory, then its tables and report; ``scarce vision estimate``: your own
model on your own input (:mod:`scarce.cli.vision_estimate`).
"""

from __future__ import annotations

from typing import Optional

import typer

from scarce.cli.common import (DASK, EXECUTOR, SCHEDULER, WORKERS, check_path_option, cli_message, describe_os_error,
                               fail, pool_from_options, run_warnings, stage_progress)
from scarce.cli.vision_estimate import estimate as estimate_own

app = typer.Typer(no_args_is_help=False, help="MNIST misclassification under perturbation (the paper's protocol), "
                  "or `scarce vision estimate` on your own model.")


@app.callback(invoke_without_command=True)
def vision(
    ctx: typer.Context,
    preset: str = typer.Option("quick", help="quick (embedded 5k digits; the demo), paper (full MNIST), tiny (smoke test)."),
    run_dir: str = typer.Option("runs/vision-quick", help="Run directory: results, caches, report; an interrupted run resumes here."),
    data_dir: Optional[str] = typer.Option(None, help="MNIST IDX directory for preset paper (default $SCARCE_DATA_DIR)."),
    scale: Optional[float] = typer.Option(None, help="Override the noise scale (sigma or eps) of the preset."),
    noise: Optional[str] = typer.Option(None, help="Override the noise: gaussian or uniform."),
    seed: Optional[int] = typer.Option(None, help="Override the preset's seed."),
    access: Optional[str] = typer.Option(None, help="How the classifier is queried: logits (default), or labels "
                                         "only (a black box: rulers on a surrogate network set the levels)."),
    settings: Optional[list[str]] = typer.Option(None, "--set", help="Override any preset setting, repeatable: "
                                                 "n_eval=20, methods.smc_samples=1e5, classifier.epochs=2, rulers=centroid,mah_bad."),
    device: str = typer.Option("cpu", help="Where forward passes run: cpu (bit-reproducible), cuda, cuda:<i> or auto."),
    executor: str = EXECUTOR,
    dask: Optional[str] = DASK,
    workers: Optional[int] = WORKERS,
    scheduler: Optional[str] = SCHEDULER,
) -> None:
    """MNIST misclassification under perturbation: SCARCE rulers vs margin SS, AMLS and Monte Carlo.

    Without a command, runs the paper's protocol in --run-dir; `scarce vision estimate` runs your own model.
    """
    if ctx.invoked_subcommand is not None:
        return
    from pathlib import Path

    from scarce.applications.vision.problem import resolve_device
    from scarce.errors import ScarceError
    from scarce.experiments.store import check_run_dir

    options = {k: v for k, v in {"scale": scale, "noise": noise, "seed": seed, "access": access}.items()
               if v is not None}
    try:
        check_run_dir(run_dir)
        if (Path(run_dir) / FINISHED).is_dir():  # found now, not after the whole run when the record is written
            raise ScarceError(f"run directory {run_dir!r} holds a directory named {FINISHED}, where a finished run "
                              "records its report's context: move it away or pass another run directory")
        chosen = _chosen_preset(preset, settings or [], options, data_dir)  # every setting and the resource bounds
        resolve_device(device)  # before anything is written
        pool = pool_from_options(executor, dask, scheduler, workers, allow_large=chosen.allow_large)
        finished, errors = _finished(run_dir, chosen.config()), {}
        if finished is None:
            store, context, errors = _run_protocol(chosen, run_dir, data_dir, device, pool)
        else:  # a finished run: the report comes from its stored results, with no model and no ruler fit
            from scarce.experiments.store import ResultStore

            typer.echo(f"{run_dir}: finished; the report is rebuilt from its stored results", err=True)
            store, context = ResultStore(run_dir, chosen.config()), finished
    except ScarceError as exc:
        fail(str(exc), exc)
    except OSError as exc:  # a file the run reads or writes (disk full, permissions, a bad name)
        fail(describe_os_error(exc), exc)
    _report_or_fail(store, context, run_dir)
    if errors:
        _fail_tasks(errors, run_dir)


def _chosen_preset(preset: str, settings: list[str], options: dict,  # type: ignore[no-untyped-def, type-arg]
                   data_dir: Optional[str]):
    """The preset with its ``--set`` items and the options ``--scale/--noise/--seed/--access``.

    An option and a ``--set`` of the same key that disagree, or ``--data-dir`` for a preset that
    reads no MNIST files, are refused: either would otherwise be silently ignored.
    """
    from scarce.applications.vision.protocol import get_preset, parse_overrides
    from scarce.errors import ScarceError

    overrides = parse_overrides(settings, preset)
    for key, value in options.items():
        if key in overrides and overrides[key] != value:
            raise ScarceError(f"--{key} {value!r} and --set {key}={overrides[key]!r} disagree; give {key} once")
    try:
        chosen = get_preset(preset, **{**overrides, **options})
    except ScarceError as exc:  # named as given: --set key=value, or the option
        given = {**{key: f"--set {key}" for key in overrides}, **{key: f"--{key}" for key in options}}
        raise ScarceError(cli_message(exc, given)) from exc
    check_path_option("--data-dir", data_dir)
    if data_dir is not None and chosen.data != "mnist":
        raise ScarceError(f"--data-dir {data_dir!r} is read only by a run on the MNIST IDX files (preset paper, or "
                          f"--set data=mnist); preset {preset!r} reads data={chosen.data!r}: leave --data-dir out")
    if chosen.data == "mnist":  # said before the run directory is made, not when the digits are read
        import os

        if data_dir is None and not os.environ.get("SCARCE_DATA_DIR"):  # the loader resolves and checks a given one
            raise ScarceError(f"preset {preset!r} reads the MNIST IDX files: give --data-dir (or set SCARCE_DATA_DIR) "
                              "to the directory that holds them")
    return chosen


def _fail_tasks(errors: dict, run_dir: str) -> None:  # type: ignore[type-arg]
    """Say how many tasks failed and where their errors are, and exit with status 1."""
    from pathlib import Path

    first_key, first = next(iter(errors.items()))
    typer.echo(f"error: {len(errors)} task(s) of the run failed and are left out of the report; their errors "
               f"(message and traceback) are in {Path(run_dir) / 'errors'}; first: {first_key}: "
               f"{first.get('type', '?')}: {first.get('message', '?')}. A rerun retries only them", err=True)
    raise typer.Exit(code=1)


#: In a run directory: the report's context, written once every task of the run has finished.
FINISHED = "finished.json"


def _finished(run_dir: str, config: dict) -> Optional[dict]:  # type: ignore[type-arg]
    """The stored report context of a run of ``config`` that finished without errors and whose
    every task file is still there and readable, or None (then the run resumes and recomputes)."""
    import json
    import warnings
    from pathlib import Path

    from scarce.experiments.store import ResultStore, config_fingerprint

    path = Path(run_dir) / FINISHED
    try:
        stored = _finished_record(json.loads(path.read_text()))
    except (OSError, ValueError):  # ScarceError is a ValueError: a damaged record, and the run recomputes
        return None
    if stored["fingerprint"] != config_fingerprint(config):
        return None
    store = ResultStore(run_dir, config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the run that follows says which file is damaged
        if any(store.load(key) is None for key in stored["keys"]):
            return None
    return stored["context"]


def _finished_record(stored: object) -> dict:  # type: ignore[type-arg]
    """``stored`` (what :data:`FINISHED` holds) if it is a record this command writes, else a :class:`ScarceError`:
    a fingerprint, a context of named values and the task keys, all strings."""
    from scarce.errors import ScarceError

    ok = (isinstance(stored, dict) and isinstance(stored.get("fingerprint"), str)
          and isinstance(stored.get("context"), dict)  # JSON: its keys are strings
          and isinstance(stored.get("keys", []), list) and all(isinstance(k, str) for k in stored.get("keys", [])))
    if not ok:
        raise ScarceError(f"{FINISHED} is damaged (it must hold a fingerprint, a context and the task keys); rerun "
                          "scarce vision with the same settings to finish the run again")
    return {**stored, "keys": stored.get("keys", [])}  # an early record holds no keys


def _run_protocol(chosen, run_dir, data_dir, device, pool):  # type: ignore[no-untyped-def]
    """Build the context (classifier, head, rulers), run every stage, and record a clean finish.

    Returns the store, the report's context and the errors of the tasks that failed."""
    import json
    from pathlib import Path

    from scarce._atomic import atomic_write_text
    from scarce.applications.vision.analysis import report_context
    from scarce.applications.vision.pipeline import build_context
    from scarce.applications.vision.protocol import VisionRun
    from scarce.experiments.store import ResultStore, config_fingerprint

    # connect first: an unreachable scheduler is an error before anything is written
    with pool, run_warnings():
        store = ResultStore(run_dir, chosen.config())  # refuse a run directory of another configuration first
        built = build_context(chosen, run_dir, data_dir=data_dir, log=lambda m: typer.echo(m, err=True), device=device)
        with stage_progress() as progress:
            outcome = VisionRun(chosen, Path(run_dir), built, progress=progress, executor=pool, store=store).run()
    context = report_context(chosen, built.info, outcome)
    if not outcome["errors"]:  # the task keys too: a file removed or damaged later makes the run unfinished
        atomic_write_text(Path(run_dir) / FINISHED, json.dumps(
            {"fingerprint": config_fingerprint(chosen.config()), "context": context, "keys": store.keys()},
            indent=1, default=str))
    return store, context, outcome["errors"]


def _report_or_fail(store, context, run_dir) -> None:  # type: ignore[no-untyped-def]
    from scarce.errors import ScarceError

    try:
        _vision_report(store, context, run_dir)
    except OSError as exc:
        fail(describe_os_error(exc), exc)
    except ScarceError as exc:
        fail(str(exc), exc)


def _readable_rows(store, result_rows):  # type: ignore[no-untyped-def]
    """The store's result rows, and ``(path, why)`` of each task file left out of them."""
    import warnings

    from scarce.experiments.store import CorruptResultWarning, StaleResultWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CorruptResultWarning)
        frame = result_rows(store)
    left_out = []
    for w in caught:
        path = getattr(w.message, "path", None)  # a CorruptResultWarning about one task file
        if isinstance(w.message, CorruptResultWarning) and path is not None:
            stale = isinstance(w.message, StaleResultWarning)
            left_out.append((path, "of another estimator revision" if stale else "damaged"))
    return frame, left_out


def _vision_report(store, context, run_dir) -> None:  # type: ignore[no-untyped-def]
    """Tables and the report folder of a finished vision run, from its store alone."""
    from pathlib import Path

    from scarce.applications.vision.analysis import head_to_head, rank_rulers, result_rows
    from scarce.errors import ScarceError
    from scarce.reporting.tables import print_vision_tables
    from scarce.reporting.vision import write_report

    frame, left_out = _readable_rows(store, result_rows)
    if frame.empty:
        raise ScarceError(f"run directory {str(run_dir)!r} holds no readable task result ({len(left_out)} damaged "
                          f"or of another estimator revision); delete them and rerun scarce vision with the same "
                          f"settings to recompute them")
    if left_out:  # the report renders what exists and says what it could not use
        context = {**context, "task files left out (damaged, or of another estimator revision; delete them "
                              "and rerun scarce vision to recompute them)": f"{len(left_out)}: " + ", ".join(
                                  Path(path).name for path, _ in left_out[:20])}
        for path, why in left_out:
            typer.echo(f"warning: {path} is {why} and left out of the report", err=True)
    ranking, table = rank_rulers(frame), head_to_head(frame)
    report = write_report(frame, ranking, table, Path(run_dir) / "report", context=context)
    print_vision_tables(ranking, table)
    typer.echo(f"report: {report}")


@app.command("report")
def report(run_dir: str = typer.Option("runs/vision-quick", help="A finished run directory of scarce vision.")) -> None:
    """Rebuild the tables and report of a finished vision run from its stored results (no model, no fit)."""
    import json
    from pathlib import Path

    from scarce.errors import ScarceError
    from scarce.experiments.store import ResultStore

    try:
        store = ResultStore.open(run_dir)
        stored = json.loads((Path(run_dir) / FINISHED).read_text()) if (Path(run_dir) / FINISHED).is_file() else None
        if stored is None:
            raise ScarceError(f"{run_dir!r} holds no finished vision run ({FINISHED} is written when every task has "
                              f"finished without an error); run scarce vision with the same settings to finish it")
        stored = _finished_record(stored)
        if stored["fingerprint"] != store.fingerprint:
            raise ScarceError(f"{FINISHED} in {run_dir!r} was written for another configuration than the run "
                              f"directory's; rerun scarce vision with the same settings to finish the run again")
        if store.errors():  # a rerun after finishing recorded errors: the report says so
            stored["context"]["task errors"] = len(store.errors())
        missing = sorted(set(stored["keys"]) - set(store.keys()))
        if missing:  # task files removed since the run finished: named, and the report renders the rest
            stored["context"]["missing task files (rerun scarce vision to recompute them)"] = (
                f"{len(missing)}: " + ", ".join(missing[:20]) + (" ..." if len(missing) > 20 else ""))
    except ScarceError as exc:
        fail(str(exc), exc)
    except (OSError, ValueError) as exc:
        fail(f"cannot read the run directory {run_dir!r}: {exc}", exc)
    _report_or_fail(store, stored["context"], run_dir)


app.command("estimate")(estimate_own)
