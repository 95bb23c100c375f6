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

from scarce.cli.common import (DASK, EXECUTOR, SCHEDULER, WORKERS, check_path_option, describe_os_error, fail,
                               pool_from_options, run_warnings, stage_progress)

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
        device = _check_embed_options(labels, encoder, model, out, device, batch_size, cache_dir)  # before the work
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
    except OSError as exc:  # a file read or written (a name too long, permissions, disk full), or a model
        fail(describe_os_error(exc, "the paths given (--input, --corpus, --data-dir, --out, --cache-dir) and "
                                    "that --model names a judge on this machine"), exc)
    from rich.console import Console

    Console().print(summarize_counts(embedded).to_string(index=False))
    typer.echo(f"embedded corpus: {path} ({len(embedded)} records, dimension "
               f"{len(embedded['embedding'].iloc[0])})")


def _check_embed_options(labels: str, encoder: str, model: Optional[str], out: str, device: Optional[str],
                         batch_size: Optional[int], cache_dir: str) -> Optional[str]:
    """Every option the embedding reads, checked before the input is read; the device resolved.

    The encoder and its model, the batch size and the cache directory are otherwise first read
    after the whole input has been read (and the output place only after the embedding).
    """
    from scarce.applications.llm.corpus import check_corpus_output
    from scarce.applications.llm.embedding import ENCODERS
    from scarce.checks import check_positive_int
    from scarce.encoders.device import check_device
    from scarce.errors import ScarceError, unknown_name_error
    from scarce.reporting.llm import check_output_dir

    if labels not in ("artifact", "judge"):
        raise unknown_name_error("labels", labels, ("artifact", "judge"))
    if encoder not in ENCODERS:
        raise unknown_name_error("encoder", encoder, ENCODERS)
    if labels == "judge" and encoder != "judge":
        raise ScarceError(f"--labels judge needs --encoder judge (p_unsafe comes from the judge), got "
                          f"--encoder {encoder!r}")
    if encoder == "judge" and not (model or "").strip():
        raise ScarceError(f"--encoder judge needs --model (the judge's name or directory), got {model!r}")
    if encoder == "minilm" and model not in (None, "minilm"):
        raise ScarceError(f"--model {model!r} is read only with --encoder judge (the judge's name or directory); "
                          "--encoder minilm uses its bundled model: leave --model out")
    if batch_size is not None:
        check_positive_int("--batch-size", batch_size)
    check_output_dir(check_path_option("--cache-dir", cache_dir), "--cache-dir", create=False)
    check_corpus_output(out)  # a directory or an unwritable place is refused now
    return check_device(device)


def _input_corpus(input_file, input_format, corpus, data_dir, method, target_model,  # type: ignore[no-untyped-def]
                  drop_unlabelled=False):
    """The records to embed: --input in its format, else --corpus, else the JailbreakBench directory."""
    from scarce.applications.llm.corpus import read_corpus
    from scarce.applications.llm.sources import infer_format, read_conversations
    from scarce.datasets import load_jailbreakbench_corpus
    from scarce.errors import ScarceError

    for option, value in (("--input", input_file), ("--corpus", corpus), ("--data-dir", data_dir)):
        check_path_option(option, value)  # an empty one would read the current directory, or fall back
    if input_file is None:
        if input_format is not None or method is not None or target_model is not None or drop_unlabelled:
            raise ScarceError("--format, --method, --target-model and --drop-unlabelled describe --input; give --input")
        return read_corpus(corpus) if corpus is not None else load_jailbreakbench_corpus(data_dir)
    if corpus is not None:
        raise ScarceError("give --input or --corpus, not both")
    chosen = infer_format(input_file) if input_format is None else input_format
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
    from scarce.experiments.store import check_run_dir

    start = time.perf_counter()
    try:
        chosen = get_preset(preset, **parse_overrides(settings or [], preset))
        try:
            check_run_dir(run_dir)  # an empty or blank name would write into the current directory
        except ScarceError as exc:
            raise ScarceError(f"--run-dir: {exc}") from None
        check_path_option("--corpus", corpus)
        if report:
            from scarce.reporting.llm import check_output_dir

            check_output_dir(Path(run_dir) / "report", "report directory", create=False)
        pool = pool_from_options(executor, dask, scheduler, workers, allow_large=chosen.allow_large)
        frame = _sweep_corpus(corpus, run_dir)
        with pool, run_warnings():
            run = LLMSweep(chosen, Path(run_dir), corpus=frame, executor=pool,
                           log=lambda m: typer.echo(m, err=True))
            with stage_progress() as progress:
                run.progress = progress
                outcome = run.run()
    except ScarceError as exc:
        fail(str(exc), exc)
    except OSError as exc:  # a name too long, permissions, a full disk
        fail(describe_os_error(exc), exc)
    typer.echo(f"sweep: {outcome['finished']}/{outcome['cells']} cells finished, "
               f"{outcome['failed']} failed, {time.perf_counter() - start:.1f} s", err=True)
    if outcome["failed"]:
        _fail_cells(outcome, report)
    if report:
        _report_or_fail(Path(run_dir))


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
    allow_large: bool = typer.Option(False, "--allow-large", help="Run beyond the bounds on --n-samples and "
                                     "--n-runs (refused otherwise, before any work)."),
) -> None:
    """Leave-one-style-out transfer: rulers fitted on one attack style applied to each other style."""
    import time

    from scarce.applications.llm.corpus import read_corpus
    from scarce.applications.llm.transfer import best_per_pair, transfer_matrix
    from scarce.errors import ScarceError
    from scarce.reporting.llm import check_output_dir, write_transfer_report

    start = time.perf_counter()
    try:
        config = _transfer_config(styles, etas, n_samples, n_runs, seed, view, allow_large)
        check_path_option("--corpus", corpus)
        out_dir = check_output_dir(out, "output directory")
        table = transfer_matrix(read_corpus(corpus), config, log=lambda m: typer.echo(m, err=True))
        path = write_transfer_report(table, best_per_pair(table), out_dir, config=vars(config))
    except ScarceError as exc:
        fail(str(exc), exc)
    except OSError as exc:  # a name too long, permissions, a full disk
        fail(describe_os_error(exc, "that --corpus is readable and --out a writable directory with a valid name"), exc)
    typer.echo(f"transfer: {len(table)} cells in {time.perf_counter() - start:.1f} s; report {path}", err=True)


def _transfer_config(styles: str, etas: str, n_samples: int, n_runs: int, seed: int,  # type: ignore[no-untyped-def]
                     view: str, allow_large: bool):
    """The transfer's configuration, every option checked before the corpus is read.

    ``--etas`` must list distinct fractions (a repeated one would run its cells twice), ``--seed``
    must be a seed, and the sample sizes must give a seed per level and stay within the sweep's
    bounds (:data:`~scarce.applications.llm.sweep.MAX_SAMPLES` and its kin) unless
    ``--allow-large``: the cells would otherwise fail, or exhaust memory, after every ruler is fitted.
    """
    from scarce.applications.llm.fleet import check_eta
    from scarce.applications.llm.sweep import MAX_CELL_SAMPLES, MAX_RUNS, MAX_SAMPLES
    from scarce.applications.llm.transfer import TransferConfig
    from scarce.checks import check_positive_int
    from scarce.errors import ScarceError

    texts = [e.strip() for e in etas.split(",") if e.strip()]
    try:
        values = [check_eta(float(text)) for text in texts]
    except (ValueError, ScarceError) as exc:
        raise ScarceError(f"--etas takes comma-separated numbers (adversarial fractions in (0, 1]), got {etas!r} "
                          f"({exc})") from None
    if not values or len(set(values)) != len(values):
        raise ScarceError(f"--etas must list at least one adversarial fraction in (0, 1], each once, got {etas!r}")
    check_positive_int("--seed", seed, minimum=0)
    for option, value, bound in (("--n-samples", n_samples, MAX_SAMPLES), ("--n-runs", n_runs, MAX_RUNS)):
        if check_positive_int(option, value) > bound and not allow_large:
            raise ScarceError(f"{option} {value:,} is above the bound of {bound:,}; lower it, or pass --allow-large")
    if not allow_large and n_samples * n_runs > MAX_CELL_SAMPLES:
        raise ScarceError(f"--n-runs x --n-samples = {n_runs:,} x {n_samples:,} is more than the {MAX_CELL_SAMPLES:,} "
                          "samples per level a cell may draw; lower one, or pass --allow-large")
    p0 = TransferConfig.level_probability  # checked here too, so the message names --n-samples
    if n_samples * p0 < 1:
        raise ScarceError(f"--n-samples {n_samples} keeps {n_samples * p0:g} seeds per level at "
                          f"level probability {p0}; at least one is needed")
    return TransferConfig(styles=tuple(s.strip() for s in styles.split(",") if s.strip()), etas=tuple(values),
                          n_samples=n_samples, n_runs=n_runs, seed=seed, view=view)


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
    from scarce.experiments.store import check_run_dir

    try:
        check_run_dir(run_dir)  # an empty name would read, and write the report into, the current directory
    except ScarceError as exc:
        fail(f"--run-dir: {exc}", exc)
    _report_or_fail(Path(run_dir), out, show=tables)


def _report_or_fail(run_dir: Path, out: str | None = None, *, show: bool = True) -> None:
    """The report of ``run_dir``, or a clean error (a damaged run directory, an unwritable output)."""
    from scarce.errors import ScarceError

    try:
        _report(run_dir, out, show=show)
    except ScarceError as exc:
        fail(str(exc), exc)
    except OSError as exc:
        fail(describe_os_error(exc, "that --run-dir is a sweep's run directory and the report directory is "
                                    "writable with a valid name"), exc)


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
