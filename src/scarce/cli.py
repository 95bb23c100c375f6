"""Command-line interface: a thin Typer app over the library.

``scarce estimate --problem linear --dim 100 --pf 1e-6 --n-samples 2000 --seed 0``
"""

from __future__ import annotations

import math
from enum import Enum
from typing import NoReturn, Optional

import typer

from scarce._cli_common import DASK, EXECUTOR, SCHEDULER, WORKERS, stage_progress

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Rare-failure probabilities with Subset Simulation (SCARCE).")


class Method(str, Enum):
    ss = "ss"
    mc = "mc"


@app.callback()
def main() -> None:
    """scarce: estimate rare failure probabilities with far fewer model queries than Monte Carlo."""


@app.command()
def estimate(
    problem: str = typer.Option("linear", help="Benchmark problem: linear, four_branch, chi_square, two_regions."),
    dim: Optional[int] = typer.Option(None, help="Latent dimension (linear: 100, chi_square: 50, two_regions: 10)."),
    pf: Optional[float] = typer.Option(None, help="Exact failure probability of the problem (linear, chi_square, two_regions)."),
    k: float = typer.Option(7.0, help="four_branch: branch offset k."),
    method: Method = typer.Option(Method.ss, help="ss: Subset Simulation; mc: crude Monte Carlo."),
    n_samples: int = typer.Option(2000, help="Samples per level (Monte Carlo: total samples)."),
    level_probability: float = typer.Option(0.1, help="Target conditional probability p0 in (0, 0.5]."),
    kernel: str = typer.Option("acs", help="MCMC kernel: acs (adaptive conditional sampling) or mma (modified Metropolis)."),
    max_queries: Optional[int] = typer.Option(None, help="Query budget; a partial, flagged result when exhausted."),
    stop_factor: float = typer.Option(
        0.5, help="Stop at the first level where stop_factor * p0 * N samples failed, in (0, 1]; 1 is the classic rule."
    ),
    count_seeds: str = typer.Option(
        "independent", help="Whether seeds count among a level's samples: independent (only draws of level 0), always, never."
    ),
    seed: int = typer.Option(0, help="Random seed."),
    confidence: float = typer.Option(0.95, help="Confidence level of the interval."),
    delta: float = typer.Option(0.05, help="Error budget of the anytime-valid envelope."),
    json_output: bool = typer.Option(False, "--json", help="Print the result as JSON instead of tables."),
) -> None:
    """Estimate the failure probability of a benchmark problem with a known answer."""
    import warnings

    from scarce.errors import ScarceError, ScarceWarning
    from scarce.estimators import MonteCarlo, SubsetSimulation
    from scarce.kernels import make_kernel
    from scarce.problems import make_problem

    try:
        _check_report_options(confidence, delta)
    except ScarceError as exc:
        _fail(str(exc), exc)
    params: dict[str, object] = {}
    if problem == "four_branch":
        params["k"] = k
    else:
        if dim is not None:
            params["dim"] = dim
        if pf is not None:
            params["probability"] = pf
    try:
        rare = make_problem(problem, **params)
        if method is Method.ss:
            estimator = SubsetSimulation(
                n_samples=n_samples, level_probability=level_probability, kernel=make_kernel(kernel), max_queries=max_queries,
                stop_factor=stop_factor, count_seeds=count_seeds,
            )
        else:
            estimator = MonteCarlo(n_samples=n_samples)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ScarceWarning)
            if json_output:
                result = estimator.estimate(rare, seed=seed)
            else:
                result = _with_progress(estimator, rare, seed)
    except (ScarceError, TypeError) as exc:
        _fail(str(exc), exc)
    if json_output:
        typer.echo(result.to_json(indent=2))
        return
    from scarce.reporting.tables import print_result

    print_result(result, exact=rare.exact_probability, confidence=confidence, delta=delta)
    for w in caught:
        typer.echo(f"warning: {w.message}", err=True)


def _check_report_options(confidence: float, delta: float) -> None:
    """--confidence and --delta checked before the run (they are used only to report it)."""
    from scarce.errors import check_in_interval

    check_in_interval("--confidence", confidence, 0.0, 1.0, high_open=True)
    check_in_interval("--delta", delta, 0.0, 1.0, high_open=True)


def _with_progress(estimator, problem, seed):  # type: ignore[no-untyped-def]
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    expected = None
    exact, p0 = problem.exact_probability, getattr(estimator, "level_probability", None)
    # only a guess for the bar's length: bad values are the estimator's to report, not a crash here
    if isinstance(exact, float) and isinstance(p0, (int, float)) and 0 < exact < 1 and 0 < p0 < 1:
        expected = max(1, math.ceil(math.log(exact) / math.log(p0)))
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total} levels"),
        TimeElapsedColumn(), transient=True,
    ) as progress:
        task = progress.add_task(f"{problem.name}", total=expected)

        def on_level(diag) -> None:  # type: ignore[no-untyped-def]
            if diag.level > 0:
                progress.update(task, advance=1, description=f"{problem.name}: level {diag.level}, threshold {diag.threshold:.4g}")

        return estimator.estimate(problem, seed=seed, callback=on_level)


@app.command()
def vision(
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
    """MNIST misclassification under perturbation: SCARCE rulers vs margin SS, AMLS and Monte Carlo."""
    import warnings
    from pathlib import Path

    from scarce.applications.vision.pipeline import build_context
    from scarce.applications.vision.problem import resolve_device
    from scarce.applications.vision.protocol import VisionRun, get_preset, parse_overrides
    from scarce.errors import ScarceError, ScarceWarning
    from scarce.experiments.executors import executor_from_options
    from scarce.experiments.store import ResultStore, check_run_dir

    overrides = {k: v for k, v in {"scale": scale, "noise": noise, "seed": seed, "access": access}.items()
                 if v is not None}
    try:
        check_run_dir(run_dir)
        overrides = {**parse_overrides(settings or [], preset), **overrides}
        chosen = get_preset(preset, **overrides)  # checks every setting and the resource bounds
        resolve_device(device)  # before anything is written
        pool = executor_from_options(executor, dask=dask, scheduler=scheduler, workers=workers)
        # connect first: an unreachable scheduler is an error before anything is written
        with pool, warnings.catch_warnings():
            ResultStore(run_dir, chosen.config())  # refuse a run directory of another configuration first
            warnings.simplefilter("ignore", ScarceWarning)
            context = build_context(chosen, run_dir, data_dir=data_dir, log=lambda m: typer.echo(m, err=True),
                                    device=device)
            with stage_progress() as progress:
                run = VisionRun(chosen, Path(run_dir), context, progress=progress, executor=pool)
                outcome = run.run()
    except ScarceError as exc:
        _fail(str(exc), exc)
    except OSError as exc:  # a file the run reads or writes (disk full, permissions, a bad name)
        _fail(_describe_os_error(exc), exc)
    try:
        _vision_report(run, chosen, context.info, outcome, Path(run_dir))
    except OSError as exc:
        _fail(_describe_os_error(exc), exc)


def _vision_report(run, chosen, info, outcome, run_dir) -> None:  # type: ignore[no-untyped-def]
    """Tables and the report folder of a finished vision run."""
    from scarce.applications.vision.analysis import head_to_head, rank_rulers, result_rows
    from scarce.reporting.tables import print_vision_tables
    from scarce.reporting.vision import write_report

    frame = result_rows(run.store)
    ranking, table = rank_rulers(frame), head_to_head(frame)
    held = info["ruler_auc_heldout"]
    context = {
        "preset": chosen.name, "noise": f"{chosen.noise} {chosen.scale}", "data": info["data"],
        "classifier test accuracy": f"{info['test_accuracy']:.4f}",
        "classifier access": ("labels only: rulers read a surrogate network's embedding (test accuracy "
                              f"{info['surrogate_test_accuracy']:.4f}); no margin, so no margin Subset Simulation "
                              "or AMLS" if chosen.access == "labels" else "logits"),
        "rulers": "one per class of the seed" if chosen.conditioning == "class" else "pooled over all classes",
        "ruler separation on held-out seeds (AUC within a class)": ", ".join(
            f"{k} {v:.3f}" for k, v in sorted(held.items(), key=lambda kv: -kv[1])),
    }
    if info.get("ruler_auc_heldout_pooled"):
        pooled = info["ruler_auc_heldout_pooled"]
        context["the same rulers pooled over all classes, held-out AUC within a class"] = ", ".join(
            f"{k} {pooled[k]:.3f}" for k in sorted(held, key=lambda k: -held[k]))
    truth = chosen.truth_samples or chosen.methods.smc_samples
    context["held-out evaluation"] = (
        f"{len(outcome['eval_seeds'])} seeds x {chosen.n_runs} run(s) of every method; ground truth "
        f"{truth:,} Monte Carlo samples per seed"
        + (f", seeds with at least {chosen.min_truth_failures} failures in it" if chosen.min_truth_failures else ""))
    context.update({"screening seeds": outcome["screen_seeds"], "held-out seeds": outcome["eval_seeds"],
                    "top rulers": ", ".join(outcome["top_rulers"]), "task errors": len(outcome["errors"])})
    report = write_report(frame, ranking, table, run_dir / "report", context=context)
    print_vision_tables(ranking, table)
    typer.echo(f"report: {report}")


def _fail(message: str, cause: BaseException) -> NoReturn:
    """Print ``error: <message>`` on stderr and exit with status 2 (a usage or input error)."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code=2) from cause


def _describe_os_error(error: OSError) -> str:
    """One line for a file-system error: the path, the reason and what to check."""
    where = f" {str(error.filename)!r}" if error.filename is not None else ""
    reason = error.strerror or str(error) or type(error).__name__
    return (f"cannot access{where}: {reason} ({type(error).__name__}); check that the run directory is a "
            "writable directory with free space and a valid name")


def _add_subcommands() -> None:
    from scarce.applications.llm.commands import app as llm_app

    app.add_typer(llm_app, name="llm")


_add_subcommands()


if __name__ == "__main__":  # pragma: no cover
    app()
