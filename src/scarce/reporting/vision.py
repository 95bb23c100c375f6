"""Figures and the report of a vision run, rendered from its tables.

The tables (one row per task, the Step-1 ruler ranking, the Step-2 head-to-head) are computed by
:mod:`scarce.applications.vision.analysis`, whose docstring defines the metrics; this module only
draws and writes them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from scarce.reporting.markdown import format_cell

__all__ = ["markdown_table", "write_figures", "write_report"]


def _bar(ax: Any, labels: list[str], values: list[float], title: str, ylabel: str) -> None:
    ax.bar(range(len(values)), values, color="#4c72b0")
    ax.set_xticks(range(len(values)), labels, rotation=60, ha="right", fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(ylabel)


def write_figures(frame: Any, ranking: Any, table: Any, out_dir: str | Path) -> dict[str, Path]:
    """The figures of the paper's appendix "Additional Plots", part I, as PNG files.

    ``frame``: one row per task; ``ranking``: the Step-1 ruler ranking; ``table``: the Step-2
    head-to-head (:mod:`scarce.applications.vision.analysis`).
    """
    from scarce.reporting.figures import FigureWriter

    writer = FigureWriter(out_dir)
    if not ranking.empty:
        _step1_figures(writer, ranking)
    part = frame[frame.stage == "eval"]
    if not part.empty:
        _step2_figures(writer, part, table)
    return writer.paths


def _step1_figures(writer: Any, ranking: Any) -> None:
    """Step 1 (screening): MAE, missed hits, queries, runtime per ruler, and the two Pareto plots."""
    plt, save = writer.plt, writer.save
    labels = list(ranking.ruler)
    for name, column, title, ylabel in [
        ("step1_mae", "log10_mae", "Step 1: log10 MAE per ruler", "log10 MAE"),
        ("step1_missing_hits", "missed_hits", "Step 1: missed rare-event hits", "seeds"),
        ("step1_queries", "queries", "Step 1: mean queries per seed", "queries"),
        ("step1_runtime", "runtime_calibrated", "Step 1: calibrated runtime per seed", "seconds"),
    ]:
        fig, ax = plt.subplots(figsize=(6, 3.6))
        _bar(ax, labels, [float(v) if v == v else 0.0 for v in ranking[column]], title, ylabel)
        save(fig, name)
    for name, column, xlabel in [("step1_pareto_queries", "queries", "mean queries per seed"),
                                 ("step1_pareto_runtime", "runtime_calibrated", "calibrated runtime (s)")]:
        fig, ax = plt.subplots(figsize=(5.5, 4))
        ax.scatter(ranking[column], ranking.mae)
        for _, row in ranking.iterrows():
            ax.annotate(row.ruler, (row[column], row.mae), fontsize=7)
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("MAE")
        ax.set_title(f"Step 1: {xlabel} vs MAE", fontsize=10)
        save(fig, name)


def _step2_figures(writer: Any, part: Any, table: Any) -> None:
    """Step 2 (held-out seeds): MAE and mismatches, FP and FN, and each run's absolute error."""
    plt, save = writer.plt, writer.save
    # what every Step-2 figure rests on: seeds, runs per seed, the ground truth's budget
    basis = (f"{part.seed_index.nunique()} seeds x {part.groupby(['seed_index', 'method']).size().max()} runs, "
             f"truth {int(part.smc_samples.min()):,} MC samples")
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    _bar(axes[0], list(table.name), [float(v) if v == v else 0 for v in table.mae], f"Step 2: MAE ({basis})",
         "MAE")
    _bar(axes[1], list(table.name), list((table.fp + table.fn).astype(float)),
         "Step 2: mismatches (FP + FN)", "runs")
    save(fig, "step2_accuracy_mismatch")
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    x = np.arange(len(table))
    ax.bar(x - 0.2, table.fp, width=0.4, label="FP")
    ax.bar(x + 0.2, table.fn, width=0.4, label="FN")
    ax.set_xticks(x, table.name, rotation=60, ha="right", fontsize=8)
    ax.legend()
    ax.set_ylabel("runs")
    ax.set_title(f"Step 2: false positives and false negatives\n({basis})", fontsize=10)
    save(fig, "step2_fp_fn")
    fig, ax = plt.subplots(figsize=(7, 3.8))
    data = [np.maximum(part[part.method == m].abs_err.to_numpy(), 1e-12) for m in table.method]
    ax.boxplot(data)
    ax.set_xticks(range(1, len(table) + 1), table.name, rotation=60, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("|p_hat - p_SMC| (floored at 1e-12)")
    ax.set_title(f"Step 2: absolute error of each run ({basis})", fontsize=10)
    save(fig, "step2_seedwise_box")


def markdown_table(table: Any) -> str:
    """The head-to-head table as Markdown (the paper's Table 2 columns plus ours)."""
    lines = ["| method | seeds x runs | MC truth (samples, fewest failures) | mean p_hat | MC truth mean p | MAE "
             "| log10 MAE | median rel. err | RMS rel. err | MC RMS rel. err, same queries | FP | FN | queries "
             "| runtime cal. (s) | wall (s) | level jumps |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for _, r in table.iterrows():
        lines.append(
            f"| {r['name']} | {int(r.seeds)} x {format_cell(r.runs, '.3g')} "
            f"| {format_cell(r.mc_samples, ',.0f')}, {format_cell(r.mc_min_failures, ',.0f')} "
            f"| {format_cell(r.mean_p, '.3e')} | {format_cell(r.smc_mean_p, '.3e')} | {format_cell(r.mae, '.2e')} "
            f"| {format_cell(r.log10_mae, '.2f')} | {format_cell(r.median_rel_err, '.3f')} "
            f"| {format_cell(r.rms_rel_err, '.3f')} | {format_cell(r.mc_rms_rel_err, '.3f')} | {int(r.fp)} | {int(r.fn)} "
            f"| {format_cell(r.queries, ',.0f')} | {format_cell(r.runtime_calibrated, '.1f')} | {format_cell(r.wall, '.2f')} "
            f"| {int(r.level_jumps)} |")
    return "\n".join(lines)


#: What the tables' terms mean, printed under the head-to-head.
_DEFINITIONS = (
    "**Terms.** *MC truth*: crude Monte Carlo on the same seed (the samples and the fewest failures "
    "among the seeds are given), the ground truth every error is measured against; *MC truth mean p*: "
    "its mean over the seeds. *MAE*: mean over seeds of `|p_hat - p_MC|`. *median / RMS rel. err*: of "
    "`p_hat / p_MC - 1` over every run. *MC RMS rel. err, same queries*: the relative error Monte Carlo "
    "would have with the method's mean queries, `sqrt((1 - p) / (p q))`. *runtime cal.*: the queries "
    "times the paper's reference rate `T_ref = 6.473e-4` s per query, so rows compare across machines; "
    "*wall*: measured seconds here. *FP / FN*: false positives and negatives against the truth, as "
    "defined above. *level jumps*: AMLS's jumps to the failure threshold when a level stalls.")


def _jumps_sentence(frame: Any) -> str:
    """What the level-jump column holds, for the methods this run has."""
    if not (frame.method == "amls").any():
        return ""
    jumps = int(frame[frame.method == "amls"].level_jumps.sum())
    return (f"AMLS counts its level jumps in the last column ({jumps} in this run). " if jumps else
            "AMLS counts its level jumps in the last column; none of its runs here needed one. ")


def write_report(frame: Any, ranking: Any, table: Any, out_dir: str | Path, *,
                 context: dict[str, Any] | None = None) -> Path:
    """Figures, the result rows as Parquet, ``report.md`` that shows them and ``index.html`` (the
    same, self-contained); returns the Markdown report's path.

    ``frame``, ``ranking`` and ``table`` as in :func:`write_figures`.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(out_dir / "rows.parquet", index=False)
    figures = write_figures(frame, ranking, table, out_dir / "figures")
    parts = ["# SCARCE vision run", ""]
    for key, value in (context or {}).items():
        parts.append(f"* **{key}**: {value}")
    if not ranking.empty:
        parts += ["", "## Step 1: ruler screening on flipped seeds", "",
                  "| ruler | log10 MAE | missed hits | queries | calibrated runtime (s) |", "|---|---|---|---|---|"]
        parts += [f"| {r.ruler} | {format_cell(r.log10_mae, '.2f')} | {int(r.missed_hits)} | {format_cell(r.queries, ',.0f')} "
                  f"| {format_cell(r.runtime_calibrated, '.1f')} |" for _, r in ranking.iterrows()]
    if (frame.stage == "eval").any():
        n_smc = int(frame[frame.stage == "eval"].smc_samples.min())
        parts += ["", "## Step 2: head-to-head on held-out seeds", "", markdown_table(table), "",
                  f"FP counts runs whose estimate is positive where the {n_smc:,} Monte Carlo samples saw no "
                  f"failure, FN runs that returned 0 where they saw one. Our Subset Simulation ends at the true "
                  f"misclassification (exact terminal event) and never jumps a level, so each of its positive "
                  f"estimates rests on misclassified inputs it found; a probability below about 1/{n_smc:,} is "
                  f"invisible to that Monte Carlo. "
                  + _jumps_sentence(frame)
                  + "Runs that stopped at the level limit without a failure report 0 and are flagged `max_levels`.",
                  "", _DEFINITIONS]
    parts += ["", "## Figures", ""]
    parts += [f"![{name}](figures/{path.name})" for name, path in figures.items()]
    path = out_dir / "report.md"
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    from scarce.reporting.html import run_provenance, write_html

    write_html(path, "SCARCE vision run", provenance=run_provenance())
    return path
