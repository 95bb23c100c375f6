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

__all__ = ["error_bars_table", "markdown_table", "write_figures", "write_report"]


def _integer_axis(ax: Any) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def _spread(ax: Any, x: float, values: Any, color: Any, label: str | None = None) -> None:
    """A median point with a line over the range of ``values`` (on a log axis: positive values only)."""
    values = np.asarray([v for v in values if v > 0 and np.isfinite(v)], dtype=float)
    if values.size == 0:
        return
    ax.vlines(x, values.min(), values.max(), color=color, lw=2, alpha=0.6)
    ax.plot([x], [np.median(values)], "o", color=color, label=label)


def write_figures(frame: Any, ranking: Any, table: Any, out_dir: str | Path) -> dict[str, Path]:
    """The figures of the paper's appendix "Additional Plots", part I, as PNG files.

    ``frame``: one row per task; ``ranking``: the Step-1 ruler ranking; ``table``: the Step-2
    head-to-head (:mod:`scarce.applications.vision.analysis`). Every method keeps one colour in
    every figure; spreads are over seeds (points at the median, lines over the range); counts
    are drawn on integer axes with their denominator; errors are relative errors on seeds whose
    Monte Carlo truth saw a failure, the other seeds counted apart.
    """
    from scarce.reporting.figures import FigureWriter, method_colours

    writer = FigureWriter(out_dir)
    colours = method_colours(list(dict.fromkeys([*table.method, *("scarce:" + r for r in ranking.ruler)])))
    if not ranking.empty:
        _step1_figures(writer, ranking, frame[frame.stage == "screen"], colours)
    part = frame[frame.stage == "eval"]
    if not part.empty:
        _step2_figures(writer, part, table, colours)
    return writer.paths


def _step1_figures(writer: Any, ranking: Any, screen: Any, colours: dict[str, Any]) -> None:
    """Step 1 (screening): each ruler's error and queries over the seeds, missed hits, the Pareto front."""
    plt, save = writer.plt, writer.save
    n_seeds = int(screen.seed_index.nunique()) if len(screen) else 0
    rulers = list(ranking.ruler)
    x = np.arange(len(rulers))
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.5, 6), sharex=True)
    for i, ruler in enumerate(rulers):
        rows = screen[screen.method == f"scarce:{ruler}"]
        per_seed = rows.groupby("seed_index").abs_err.mean()
        _spread(top, i, per_seed, colours[f"scarce:{ruler}"])
        _spread(bottom, i, rows.groupby("seed_index").n_queries.mean(), colours[f"scarce:{ruler}"])
    top.set_yscale("log")
    top.set_ylabel("|p_hat - p_MC| per seed")
    top.set_title(f"Step 1: error and queries of each ruler over {n_seeds} screening seeds "
                  "(point: median, line: range)", fontsize=10)
    bottom.set_ylabel("queries per run")
    bottom.set_xticks(x, rulers, rotation=60, ha="right", fontsize=8)
    save(fig, "step1_error_queries")
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    ax.bar(x, ranking.missed_hits, color=[colours[f"scarce:{r}"] for r in rulers])
    _integer_axis(ax)
    ax.set_ylim(0, max(1, n_seeds))
    ax.set_ylabel(f"seeds missed (out of {n_seeds})")
    ax.set_xticks(x, rulers, rotation=60, ha="right", fontsize=8)
    ax.set_title("Step 1: seeds whose failure a ruler's runs never found", fontsize=10)
    save(fig, "step1_missed_hits")
    _pareto(writer, ranking, colours)


def _pareto(writer: Any, ranking: Any, colours: dict[str, Any]) -> None:
    """Queries against MAE, numbered points with their names in a legend, the Pareto front drawn."""
    plt, save = writer.plt, writer.save
    fig, ax = plt.subplots(figsize=(8.5, 4.5))
    points = ranking[ranking.mae > 0].sort_values("queries")
    for k, (_, row) in enumerate(points.iterrows(), start=1):
        ax.scatter(row.queries, row.mae, color=colours[f"scarce:{row.ruler}"], s=40,
                   label=f"{k}: {row.ruler}", zorder=3)
    ax.set_yscale("log")
    _number_points(ax, list(zip(points.queries, points.mae)))
    best, front = np.inf, []
    for _, row in points.iterrows():  # sorted by queries: a point is on the front if its MAE beats all cheaper ones
        if row.mae < best:
            best = row.mae
            front.append((row.queries, row.mae))
    if front:
        fx, fy = zip(*front)
        ax.step(fx, fy, where="post", color="black", lw=1, ls="--", label="Pareto front", zorder=2)
    ax.set_xlabel("mean queries per seed (calibrated runtime = queries x T_ref)")
    ax.set_ylabel("MAE")
    ax.set_title("Step 1: queries against error", fontsize=10)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    save(fig, "step1_pareto")


def _number_points(ax: Any, points: list[tuple[float, float]]) -> None:
    """Label the points 1, 2, ... beside them, each where it overlaps no label placed before it."""
    ax.figure.canvas.draw()  # fixes the limits, so data map to display coordinates
    placed: list[Any] = []
    renderer = ax.figure.canvas.get_renderer()
    for k, point in enumerate(points, start=1):
        for offset in ((4, 4), (4, -11), (-11, 4), (-11, -11), (8, 12), (8, -18)):
            text = ax.annotate(str(k), point, textcoords="offset points", xytext=offset, fontsize=7)
            box = text.get_window_extent(renderer)
            if not any(box.overlaps(other) for other in placed):
                placed.append(box)
                break
            text.remove()
        else:
            placed.append(ax.annotate(str(k), point, textcoords="offset points", xytext=(4, 4),
                                      fontsize=7).get_window_extent(renderer))


def _step2_figures(writer: Any, part: Any, table: Any, colours: dict[str, Any]) -> None:
    """Step 2 (held-out seeds): relative error per seed with a truth, FP and FN with their denominators."""
    plt, save = writer.plt, writer.save
    seeds = int(part.seed_index.nunique())
    runs = int(part.groupby(["seed_index", "method"]).size().max())
    basis = f"{seeds} seeds x {runs} runs, truth {int(part.smc_samples.min()):,} MC samples"
    positive = part[part.smc_p > 0]
    fig, ax = plt.subplots(figsize=(8, 4))
    for i, method in enumerate(table.method):
        rows = positive[positive.method == method]
        rel = (rows.p_hat / rows.smc_p - 1.0).to_numpy()
        ax.scatter(np.full(rel.size, i) + np.linspace(-0.25, 0.25, rel.size), rel, s=10, color=colours[method])
        if rel.size:
            ax.plot([i - 0.3, i + 0.3], [np.median(rel)] * 2, color="black", lw=1.5)
    ax.axhline(0.0, color="grey", lw=0.8)
    ax.set_xticks(range(len(table)), table.name, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("p_hat / p_MC - 1 (each run)")
    n_zero = seeds - int(positive.seed_index.nunique())
    ax.set_title(f"Step 2: relative error on the {seeds - n_zero} seeds with a Monte Carlo failure "
                 f"(black: median)\n{basis}" + (f"; {n_zero} seed(s) without one: see FP" if n_zero else ""),
                 fontsize=9)
    save(fig, "step2_relative_error")
    fig, ax = plt.subplots(figsize=(8, 3.6))
    x = np.arange(len(table))
    ax.bar(x - 0.2, table.fp, width=0.4, label="FP: positive estimate, no Monte Carlo failure", color="#d95f02")
    ax.bar(x + 0.2, table.fn, width=0.4, label="FN: estimate 0, Monte Carlo saw a failure", color="#7570b3")
    _integer_axis(ax)
    ax.set_ylim(0, max(1, seeds * runs))
    ax.set_xticks(x, table.name, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel(f"runs (out of {seeds * runs})")
    ax.legend(fontsize=7)
    ax.set_title(f"Step 2: false positives and false negatives ({basis})", fontsize=10)
    save(fig, "step2_fp_fn")


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


def error_bars_table(table: Any) -> str:
    """Whether each method's error bars held: its flagged runs, and how often its 95% interval held the truth.

    Beside the share goes the count it is made of and Wilson's 95% interval for the share, so that
    a reader sees what a few runs can say: 14 of 18 is 0.78, and also anything from 0.55 to 0.91.
    """
    lines = ["| method | seeds x runs | not reached | thin evidence | 95% CI holds MC truth | of runs | "
             "Wilson 95% interval |", "|---|---|---|---|---|---|---|"]
    for _, r in table.iterrows():
        runs, held = _cell_count(r.get("ci_holds_runs")), _cell_count(r.get("ci_holds_count"))
        lines.append(f"| {r['name']} | {int(r.seeds)} x {format_cell(r.runs, '.3g')} | {int(r.not_reached)} "
                     f"| {int(r.thin_evidence)} | {format_cell(r.ci_holds, '.2f')} | "
                     f"{f'{held} of {runs}' if runs else '-'} | {_wilson(held, runs)} |")
    return "\n".join(lines)


def _cell_count(value: Any) -> int:
    """A count cell as an int: 0 where a table lacks it (an older one) or holds NaN."""
    return 0 if value is None or value != value else int(value)


def _wilson(held: int, runs: int) -> str:
    """Wilson's 95% interval for a share ``held / runs`` (Wilson 1927), as text; ``-`` without runs."""
    if runs <= 0:
        return "-"
    from scipy.stats import binomtest

    interval = binomtest(held, runs).proportion_ci(confidence_level=0.95, method="wilson")
    return f"{interval.low:.2f}-{interval.high:.2f}"


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

#: What the error-bar table's terms mean.
_ERROR_BAR_TERMS = (
    "*not reached*: runs that ended before the failure event (their interval is the first level's "
    "bound). *thin evidence*: runs flagged because their error cannot be measured from the run "
    "(failures from one or two chains, or a score that does not order the failures); their interval "
    "reaches down to 0. *95% CI holds MC truth*: the share of runs whose 95% interval contains the "
    "Monte Carlo truth, itself an estimate with its own error; *of runs*: the runs it counts (those "
    "whose seed's truth saw a failure); *Wilson 95% interval*: the shares of all runs of the method that "
    "these runs are consistent with, wide when the runs are few.")


def _surprises(table: Any) -> str:
    """A sentence for each method whose numbers would puzzle a reader without one."""
    notes = []
    for _, row in table.iterrows():
        ratio = row.mean_p / row.smc_mean_p if row.smc_mean_p > 0 else float("nan")
        if row.median_rel_err >= 0.99 and row.fn > 0:
            notes.append(f"{row['name']}: a median relative error of {row.median_rel_err:.3f} means at least half "
                         f"its runs returned 0 (no failure found)"
                         + (f", while a few large estimates pull its mean to {ratio:.2f} x the truth's"
                            if ratio == ratio and ratio > 1.5 else "") + ".")
        elif ratio == ratio and not 0.5 <= ratio <= 2.0:
            notes.append(f"{row['name']}: its mean estimate is {ratio:.2f} x the truth's mean, driven by a few runs "
                         f"far from it (see the relative-error figure).")
    return "".join(n + " " for n in notes)


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
                  + _jumps_sentence(frame) + _surprises(table)
                  + "Runs that stopped at the level limit without a failure report 0 and are flagged `max_levels`.",
                  "", _DEFINITIONS, "", "### Do the error bars hold?", "", error_bars_table(table), "",
                  _ERROR_BAR_TERMS]
    parts += ["", "## Figures", ""]
    parts += [f"![{name}](figures/{path.name})" for name, path in figures.items()]
    path = out_dir / "report.md"
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    from scarce.reporting.html import run_provenance, write_html

    write_html(path, "SCARCE vision run", provenance=run_provenance())
    return path
