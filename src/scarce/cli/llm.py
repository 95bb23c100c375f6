"""``scarce llm``: embed a JailbreakBench corpus, run the ruler sweep, write its report.

::

    scarce llm embed  --data-dir ../shared/data --out runs/llm/corpus.parquet
    scarce llm sweep  --corpus runs/llm/corpus.parquet --run-dir runs/llm/paper --preset paper
    scarce llm report --run-dir runs/llm/paper

Each stage reads what the previous one wrote, so a stage can be rerun alone; the sweep resumes
in its run directory and the report is built from the run directory alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from scarce.cli.common import DASK, EXECUTOR, SCHEDULER, WORKERS, fail, run_warnings, stage_progress

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Fleet-level jailbreak probability from embeddings of LLM conversations (paper section 6).")


@app.command()
def embed(
    out: str = typer.Option("runs/llm/corpus.parquet", help="Where the embedded corpus is written (Parquet)."),
    data_dir: Optional[str] = typer.Option(None, help="JailbreakBench directory, or a data directory holding "
                                           "jailbreakbench/ (default $SCARCE_DATA_DIR). Ignored with --corpus."),
    corpus: Optional[str] = typer.Option(None, help="Embed this corpus table (.parquet or .jsonl) instead of "
                                         "reading the JailbreakBench artifacts."),
    input_file: Optional[str] = typer.Option(None, "--input", help="Embed the records of this file (or JailbreakBench "
                                             "directory): a HarmBench result .json, a garak report.jsonl, plain "
                                             ".jsonl/.csv with prompt, response, label, or a corpus table."),
    input_format: Optional[str] = typer.Option(None, "--format", help="Format of --input: jailbreakbench, harmbench, "
                                               "garak, jsonl, csv or corpus (default: inferred from the file)."),
    method: Optional[str] = typer.Option(None, help="HarmBench: the attack method that made the test cases "
                                         "(default 'harmbench')."),
    target_model: Optional[str] = typer.Option(None, help="HarmBench, garak: the model under test (default: the "
                                               "file name, or the one the garak report names)."),
    drop_unlabelled: bool = typer.Option(False, "--drop-unlabelled", help="HarmBench, jsonl, csv: leave out records "
                                         "without a label (counted) instead of refusing the file."),
    encoder: str = typer.Option("minilm", help="minilm (bundled sentence encoder, CPU) or judge (a Llama-Guard "
                                "style judge's hidden states; needs --model)."),
    model: Optional[str] = typer.Option(None, help="Judge model name or directory (encoder judge)."),
    labels: str = typer.Option("artifact", help="Jailbreak labels: artifact (the records' own flags) or judge "
                               "(p_unsafe > the judge's threshold; encoder judge only)."),
    cache_dir: str = typer.Option("runs/llm/cache", help="Embedding cache: a rerun or an interrupted run "
                                  "does not recompute."),
    batch_size: Optional[int] = typer.Option(None, help="Records per forward pass (default 32 minilm, 8 judge)."),
    device: Optional[str] = typer.Option(None, help="cpu, cuda or cuda:<i> (default: a GPU when present)."),
) -> None:
    """Embed every record of the corpus and write it as Parquet."""
    from scarce.applications.llm.corpus import write_corpus
    from scarce.applications.llm.embedding import embed_corpus
    from scarce.datasets import summarize_counts
    from scarce.errors import ScarceError

    try:
        device = _check_embed_options(labels, encoder, out, device)  # before the work
        frame = _input_corpus(input_file, input_format, corpus, data_dir, method, target_model, drop_unlabelled)
        typer.echo(f"corpus: {len(frame)} records", err=True)
        with _text_progress(f"embedding with {encoder}") as progress:
            embedded = embed_corpus(frame, encoder, model=model, cache_dir=cache_dir, batch_size=batch_size,
                                    device=device, progress=progress)
        if labels == "judge":
            from scarce.encoders.judge import DEFAULT_THRESHOLD

            embedded["jailbroken"] = embedded["judge_score"] > DEFAULT_THRESHOLD
        path = write_corpus(embedded, out)
    except ScarceError as exc:
        fail(str(exc), exc)
    from rich.console import Console

    Console().print(summarize_counts(embedded).to_string(index=False))
    typer.echo(f"embedded corpus: {path} ({len(embedded)} records, dimension "
               f"{len(embedded['embedding'].iloc[0])})")


def _check_embed_options(labels: str, encoder: str, out: str, device: Optional[str]) -> Optional[str]:
    """The label source, its encoder and the output place checked; the device resolved."""
    from scarce.applications.llm.corpus import check_corpus_output
    from scarce.encoders.device import check_device
    from scarce.errors import ScarceError, unknown_name_error

    if labels not in ("artifact", "judge"):
        raise unknown_name_error("labels", labels, ("artifact", "judge"))
    if labels == "judge" and encoder != "judge":
        raise ScarceError(f"--labels judge needs --encoder judge (p_unsafe comes from the judge), got "
                          f"--encoder {encoder!r}")
    check_corpus_output(out)  # a directory or an unwritable place is refused now
    return check_device(device)


def _input_corpus(input_file, input_format, corpus, data_dir, method, target_model,  # type: ignore[no-untyped-def]
                  drop_unlabelled=False):
    """The records to embed: --input in its format, else --corpus, else the JailbreakBench directory."""
    from scarce.applications.llm.corpus import read_corpus
    from scarce.applications.llm.sources import infer_format, read_conversations
    from scarce.datasets import load_jailbreakbench_corpus
    from scarce.errors import ScarceError

    if input_file is None:
        if input_format is not None or method is not None or target_model is not None or drop_unlabelled:
            raise ScarceError("--format, --method, --target-model and --drop-unlabelled describe --input; give --input")
        return read_corpus(corpus) if corpus else load_jailbreakbench_corpus(data_dir)
    if corpus is not None:
        raise ScarceError("give --input or --corpus, not both")
    chosen = input_format or infer_format(input_file)
    options = {"harmbench": {"method": method, "target_model": target_model},
               "garak": {"target_model": target_model}}.get(chosen, {})
    given = {k: v for k, v in options.items() if v is not None}
    if drop_unlabelled:
        if chosen not in ("harmbench", "jsonl", "csv"):
            raise ScarceError(f"--drop-unlabelled does not apply to the {chosen} format (its records all carry labels)")
        given["unlabelled"] = "drop"
    extra = {"method": method, "target_model": target_model}.keys() - options.keys()
    if any({"method": method, "target_model": target_model}[k] is not None for k in extra):
        raise ScarceError(f"--method/--target-model do not apply to the {chosen} format")
    frame = read_conversations(input_file, chosen, **given)
    typer.echo(f"read {len(frame)} records from {input_file} ({chosen})", err=True)
    return frame


class _text_progress:
    """A progress bar over the distinct texts being embedded (``progress(done, total)``)."""

    def __init__(self, description: str):
        self.description = description

    def __enter__(self):  # type: ignore[no-untyped-def]
        self.bar = stage_progress().__enter__()
        return lambda done, total: self.bar(self.description, done, total, f"{done}/{total} texts")

    def __exit__(self, *exc):  # type: ignore[no-untyped-def]
        return self.bar.__exit__(*exc)


@app.command()
def sweep(
    corpus: Optional[str] = typer.Option("runs/llm/corpus.parquet", help="The embedded corpus (from 'scarce llm "
                                         "embed'); not needed to resume a run whose set-up is stored."),
    run_dir: str = typer.Option("runs/llm/paper", help="Run directory: one file per finished cell; a rerun resumes."),
    preset: str = typer.Option("paper", help="paper (the paper's grid), quick (minutes), tiny (smoke test)."),
    settings: Optional[list[str]] = typer.Option(None, "--set", help="Override a preset setting, repeatable: "
                                                 "n_runs=5, etas=1e-3,1e-2, families=pc1,centroid, head=true."),
    executor: str = EXECUTOR,
    dask: Optional[str] = DASK,
    workers: Optional[int] = WORKERS,
    scheduler: Optional[str] = SCHEDULER,
    report: bool = typer.Option(True, help="Write the report when the sweep is done."),
) -> None:
    """Ruler families x percentiles x groups x eta x N, 20 cascade runs per cell, and the transfer."""
    import time

    from scarce.applications.llm.sweep import LLMSweep, get_preset, parse_overrides
    from scarce.errors import ScarceError
    from scarce.experiments.executors import executor_from_options
    from scarce.experiments.store import check_run_dir

    start = time.perf_counter()
    try:
        chosen = get_preset(preset, **parse_overrides(settings or [], preset))
        try:
            check_run_dir(run_dir)  # an empty or blank name would write into the current directory
        except ScarceError as exc:
            raise ScarceError(f"--run-dir: {exc}") from None
        if report:
            from scarce.reporting.llm import check_output_dir

            check_output_dir(Path(run_dir) / "report", "report directory", create=False)
        pool = executor_from_options(executor, dask=dask, scheduler=scheduler, workers=workers)
        frame = _sweep_corpus(corpus, run_dir)
        with pool, run_warnings():
            run = LLMSweep(chosen, Path(run_dir), corpus=frame, executor=pool,
                           log=lambda m: typer.echo(m, err=True))
            with stage_progress() as progress:
                run.progress = progress
                outcome = run.run()
    except ScarceError as exc:
        fail(str(exc), exc)
    typer.echo(f"sweep: {outcome['finished']}/{outcome['cells']} cells finished, "
               f"{outcome['failed']} failed, {time.perf_counter() - start:.1f} s", err=True)
    if outcome["failed"]:
        _fail_cells(outcome, report)
    if report:
        _report(Path(run_dir))


@app.command()
def transfer(
    corpus: str = typer.Option("runs/llm/corpus.parquet", help="The embedded corpus (from 'scarce llm embed')."),
    out: str = typer.Option("runs/llm/transfer", help="Output directory: transfer.parquet (every cell) and "
                            "transfer.md (the table)."),
    styles: str = typer.Option("PAIR,GCG,JBC,DSN", help="Attack styles, each fitted in turn and applied to the others."),
    etas: str = typer.Option("1e-3", help="Adversarial fractions, comma separated."),
    n_samples: int = typer.Option(20_000, help="Subset Simulation samples per level."),
    n_runs: int = typer.Option(20, help="Cascade runs per cell."),
    seed: int = typer.Option(0, help="Seed of every cell's runs."),
    view: str = typer.Option("auto", help="What the rulers see: 'response' (the response half of a corpus "
                             "embedded in two parts), 'conversation' (the whole vector), or 'auto' (the "
                             "response where the corpus has it)."),
) -> None:
    """Leave-one-style-out transfer: rulers fitted on one attack style applied to each other style."""
    import time

    from scarce.applications.llm.corpus import read_corpus
    from scarce.applications.llm.transfer import TransferConfig, best_per_pair, transfer_matrix
    from scarce.errors import ScarceError
    from scarce.reporting.llm import check_output_dir, write_transfer_report

    start = time.perf_counter()
    try:
        eta_values = tuple(float(e) for e in etas.split(",") if e.strip())
    except ValueError as exc:
        fail(f"--etas takes comma-separated numbers, got {etas!r} ({exc})", exc)
    try:
        config = TransferConfig(styles=tuple(s.strip() for s in styles.split(",") if s.strip()), etas=eta_values,
                                n_samples=n_samples, n_runs=n_runs, seed=seed, view=view)
        out_dir = check_output_dir(out, "output directory")
        table = transfer_matrix(read_corpus(corpus), config, log=lambda m: typer.echo(m, err=True))
    except ScarceError as exc:
        fail(str(exc), exc)
    path = write_transfer_report(table, best_per_pair(table), out_dir, config=vars(config))
    typer.echo(f"transfer: {len(table)} cells in {time.perf_counter() - start:.1f} s; report {path}", err=True)


def _sweep_corpus(corpus: str | None, run_dir: str):  # type: ignore[no-untyped-def]
    """The corpus to pass to the sweep: read from ``corpus``, or None to resume ``run_dir``."""
    from scarce.applications.llm.corpus import read_corpus
    from scarce.errors import ScarceError

    if corpus is not None and Path(corpus).is_file():
        return read_corpus(corpus)  # checked against the run directory's corpus fingerprint
    if (Path(run_dir) / "config.json").is_file():
        return None  # resume; LLMSweep says so if the run directory has no set-up yet
    if corpus is None:
        raise ScarceError("--corpus is required for a new run directory (an embedded corpus from "
                          "'scarce llm embed')")
    return read_corpus(corpus)  # raises: the file does not exist


def _fail_cells(outcome: dict, report: bool) -> None:
    """Say how many cells failed and where their errors are, and exit with status 1."""
    first_key, first = next(iter(outcome["errors"].items()), ("?", {}))
    typer.echo(f"error: {outcome['failed']} of {outcome['cells']} cells failed; their errors "
               f"(message and traceback) are in {outcome['errors_dir']}; first: {first_key}: "
               f"{first.get('type', '?')}: {first.get('message', '?')}. A rerun retries only them"
               + ("; the report is not written" if report else ""), err=True)
    raise typer.Exit(code=1)


@app.command()
def report(
    run_dir: str = typer.Option("runs/llm/paper", help="The sweep's run directory."),
    out: Optional[str] = typer.Option(None, help="Report directory (default <run-dir>/report)."),
    tables: bool = typer.Option(False, "--tables", help="Also print the tables (the sweep printed them when it ran)."),
) -> None:
    """Rebuild the report (tables and figures) of a sweep from its run directory alone."""
    from scarce.errors import ScarceError

    try:
        _report(Path(run_dir), None if out is None else out, show=tables)
    except ScarceError as exc:
        fail(str(exc), exc)


def _report(run_dir: Path, out: str | Path | None = None, *, show: bool = True) -> None:
    from scarce.applications.llm.analysis import analyse
    from scarce.experiments.store import ResultStore
    from scarce.reporting.llm import check_output_dir, write_report
    from scarce.reporting.tables import print_llm_tables

    store = ResultStore.open(run_dir)
    target = check_output_dir(run_dir / "report" if out is None else out, "report directory")
    tables = analyse(store)
    path = write_report(tables, target)
    if show:
        print_llm_tables(tables)
    typer.echo(f"report: {path}")
