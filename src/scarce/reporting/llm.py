"""Figures and the report of an LLM sweep: renders what :mod:`scarce.applications.llm.analysis`
computes from the sweep's result store (the tables arrive precomputed; nothing is recomputed here).

* :func:`write_report`: ``cells.parquet``, the figures and ``report.md`` from the dict of tables
  that ``analyse`` returns;
* :func:`write_figures`: accuracy per ruler, group, eta and N, the threshold sweep, and KL vs
  Cohen's d (PNG);
* :func:`write_transfer_report`: the leave-one-style-out transfer table;
* :func:`check_output_dir`: an output directory is checked before any work.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from scarce.reporting.markdown import markdown_table

__all__ = ["TRANSFER_MATRIX_COLUMNS", "check_output_dir", "write_figures", "write_report", "write_transfer_report"]


# --------------------------------------------------------------------------------------- figures

def _plot(ax: Any, x: Any, y: Any, *, marker: str = "o", ls: str = "-", **style: Any) -> None:
    """Finite values as a line of points; infinite or undefined ones as a triangle at the top of the
    axes (named "undefined" in the legend), never capped at an invented value."""
    from matplotlib.transforms import blended_transform_factory

    x, y = np.asarray(x, float), np.asarray(y, float)
    finite = np.isfinite(y)
    ax.plot(x[finite], y[finite], marker=marker, ls=ls, **style)
    if (~finite).any():
        top = blended_transform_factory(ax.transData, ax.transAxes)
        ax.plot(x[~finite], np.full((~finite).sum(), 0.97), marker="^", ls="none", transform=top,
                color=style.get("color"), markerfacecolor="none", label="_undefined")


def _undefined_legend(ax: Any, **options: Any) -> None:
    """The axes' legend, with one entry for the undefined-value marker when any was drawn."""
    from matplotlib.lines import Line2D

    handles, labels = ax.get_legend_handles_labels()
    if any(line.get_label() == "_undefined" for line in ax.lines):
        handles.append(Line2D([], [], marker="^", ls="none", color="grey", markerfacecolor="none"))
        labels.append("undefined: no labelled jailbreak above tau")
    ax.legend(handles, labels, **options)


def write_figures(tables: dict[str, Any], out_dir: str | Path) -> dict[str, Path]:
    """Accuracy (per ruler, group, eta; N sweep), threshold sweep, KL vs Cohen's d (PNG).

    ``tables`` is what :func:`scarce.applications.llm.analysis.analyse` returns. Every family has
    one colour in every panel and figure; errors are points (means over cells, with the range over
    cells as a line), never bars on a log axis; every eta and N of the sweep is shown.
    """
    from scarce.reporting.figures import FigureWriter, method_colours

    writer = FigureWriter(out_dir)
    families = tables["families"]
    if families.empty:
        return writer.paths
    colours = method_colours(list(families.family))
    _accuracy_figure(writer, tables, colours)
    _threshold_figure(writer, tables["thresholds"], colours)
    _selector_figure(writer, families, colours)
    return writer.paths


def _family(variant: str) -> str:
    return variant.rpartition("_p")[0]


def _accuracy_figure(writer: Any, tables: dict[str, Any], colours: dict[str, Any]) -> None:
    """Accuracy per ruler, per group, per fleet (eta) and against N, as one 2 x 2 figure."""
    families, config, main = tables["families"], tables["config"], tables["main"]
    best = list(families.best_variant)
    part = main[main.eta >= config["ranking_min_eta"]]
    fig, axes = writer.plt.subplots(2, 2, figsize=(12, 8.5))
    ax = axes[0, 0]
    for i, variant in enumerate(best):
        errors = part[part.variant == variant].error.to_numpy(float)
        finite = errors[np.isfinite(errors)]
        colour = colours[_family(variant)]
        if finite.size:
            ax.vlines(i, finite.min(), finite.max(), color=colour, lw=2, alpha=0.5)
        _plot(ax, [i], [errors.mean() if errors.size else np.nan], color=colour, ls="none")
        floor = part[part.variant == variant].noise_floor.mean()
        ax.plot([i], [floor], marker="_", ms=14, color="black")
    ax.set_xticks(range(len(best)), best, rotation=40, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel(f"|r - 1| (cells with eta >= {config['ranking_min_eta']:g})")
    ax.set_title("(a) per ruler: mean over cells (point), range (line), noise floor (dash)", fontsize=9)
    ax = axes[0, 1]
    groups = sorted(main.group.unique())
    for i, variant in enumerate(best):
        errors = part[part.variant == variant].groupby("group").error.mean().reindex(groups)
        _plot(ax, np.arange(len(groups)) + (i - len(best) / 2) * 0.08, errors, color=colours[_family(variant)],
              ls="none", label=variant)
    ax.set_xticks(range(len(groups)), groups, rotation=20, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("mean |r - 1| over eta")
    ax.set_title("(b) per attack group", fontsize=10)
    _undefined_legend(ax, fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax = axes[1, 0]
    for variant in best:
        by_eta = main[main.variant == variant].groupby("eta").error.mean()
        _plot(ax, by_eta.index, by_eta, color=colours[_family(variant)], label=variant)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(config["etas"], [f"{e:g}" for e in config["etas"]], fontsize=8)
    ax.minorticks_off()
    ax.set_xlabel("eta (adversarial fraction of the fleet)")
    ax.set_ylabel("mean |r - 1| over groups")
    ax.set_title("(c) per fleet", fontsize=10)
    _undefined_legend(ax, fontsize=7)
    _n_sweep_panel(axes[1, 1], tables["n_sweep"], config, colours)
    writer.save(fig, "accuracy")


def _n_sweep_panel(ax: Any, sweep: Any, config: dict[str, Any], colours: dict[str, Any]) -> None:
    for family, part in sweep.groupby("family"):
        _plot(ax, part.n_samples, part.error, color=colours.get(family), label=f"{family}_p{config['n_grid_percentile']}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(config["n_grid"], [f"{n:,}" for n in config["n_grid"]], fontsize=8)
    ax.minorticks_off()
    ax.set_xlabel("N (samples per level)")
    ax.set_ylabel("mean |r - 1| over cells")
    ax.set_title(f"(d) N sweep (every N of the sweep: {', '.join(f'{n:,}' for n in config['n_grid'])})", fontsize=9)
    _undefined_legend(ax, fontsize=7)


#: One marker per threshold percentile of the sweep.
_PERCENTILE_MARKERS = {50: "o", 75: "s", 90: "D", 95: "v"}


def _threshold_figure(writer: Any, table: Any, colours: dict[str, Any]) -> None:
    """Error against time per run over the threshold percentiles, one panel per eta of the sweep."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import LogLocator

    etas = sorted(table.eta.unique())
    columns = min(3, len(etas) + 1)
    rows = -(-(len(etas) + 1) // columns)  # one more slot: the legend
    fig, grid = writer.plt.subplots(rows, columns, figsize=(4.2 * columns, 3.4 * rows), squeeze=False)
    slots = list(grid.flat)
    for ax, eta in zip(slots, etas):
        panel = table[table.eta == eta]
        for family, part in panel.groupby("family"):  # undefined errors: a triangle from _plot
            part = part.sort_values("percentile")
            _plot(ax, part.seconds * 1e3, part.error, color=colours.get(family), marker="", ls="-")
        for percentile, part in panel[np.isfinite(panel.error.to_numpy(float))].groupby("percentile"):
            ax.scatter(part.seconds * 1e3, part.error, c=[colours.get(f, "grey") for f in part.family], s=30,
                       marker=_PERCENTILE_MARKERS.get(int(percentile), "o"), zorder=3)
        ax.set_yscale("log")
        ax.yaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))  # 2 and 5 per decade: readable, half the ticks to lay out
        ax.set_xlabel("ms per cascade run")
        ax.set_ylabel("mean |r - 1| over groups")
        ax.set_title(f"eta = {eta:g}", fontsize=10)
    handles = [Line2D([], [], color=colours[f], lw=2, label=f) for f in sorted(table.family.unique())]
    handles += [Line2D([], [], marker=m, ls="none", color="grey", label=f"p{p}") for p, m in _PERCENTILE_MARKERS.items()
                if p in set(table.percentile)]
    handles.append(Line2D([], [], marker="^", ls="none", color="grey", markerfacecolor="none",
                          label="undefined: no labelled\njailbreak above tau"))
    legend_slot = slots[len(etas)]
    legend_slot.axis("off")
    legend_slot.legend(handles=handles, fontsize=8, loc="center", ncol=2)
    for ax in slots[len(etas) + 1:]:
        ax.axis("off")
    fig.suptitle("Threshold-percentile sweep: error against cost, per fleet fraction", fontsize=10)
    writer.save(fig, "threshold_sweep")


def _selector_figure(writer: Any, families: Any, colours: dict[str, Any]) -> None:
    """Family error against worst-group directional KL and against Cohen's d (one colour per family)."""
    fig, axes = writer.plt.subplots(1, 2, figsize=(11, 4))
    for ax, column, label in [(axes[0], "worst_kl", "worst-group KL(p_good || p_bad)"),
                              (axes[1], "cohens_d", "Cohen's d (mean over groups)")]:
        for _, row in families.iterrows():
            _plot(ax, [row[column]], [row.mean_error], color=colours[row.family], ls="none", label=row.family)
        ax.set_yscale("log")
        ax.set_xlabel(label)
        ax.set_ylabel("family mean |r - 1|")
    axes[0].set_title("directional KL against downstream error", fontsize=10)
    axes[1].set_title("Cohen's d against downstream error", fontsize=10)
    _undefined_legend(axes[1], fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    writer.save(fig, "selector_kl_vs_cohens_d")


# ---------------------------------------------------------------------------------------- report

FAMILY_COLUMNS = [("family", "family", ""), ("best_variant", "best variant", ""),
                  ("mean_error", "mean abs(r-1)", ".3f"), ("noise_floor", "noise floor", ".3f"),
                  ("worst_error", "worst abs(r-1)", ".3f"), ("worst_group", "worst group", ""), ("worst_kl", "worst KL(good ‖ bad)", ".3f"),
                  ("cohens_d", "Cohen's d", ".3f"), ("seconds", "s / run", ".3f")]
SELECTOR_COLUMNS = [("metric", "metric", ""), ("aggregation", "aggr.", ""), ("rho", "rho", ".2f"),
                    ("p", "p", ".3f"), ("p_permutation", "p perm. (one-sided)", ".3f"),
                    ("lofo_min", "LOFO min", ".2f"), ("logo_min", "LOGO min", ".2f"),
                    ("selected", "selects", "")]
TRANSFER_COLUMNS = [("eta", "eta", ".0e"), ("n_samples", "N", ",d"), ("n_runs", "runs", "d"),
                    ("variant", "ruler", ""), ("p_ref", "target", ".3e"),
                    ("inherited_p", "inherited", ".3e"), ("inherited_ratio", "inherited/target", ".2f"),
                    ("refit_p", "refit", ".3e"), ("refit_low", "refit 95% low", ".3e"),
                    ("refit_high", "refit 95% high", ".3e"), ("refit_ratio", "refit/target", ".2f"),
                    ("inherited_error", "inherited abs(r-1)", ".3f"), ("error", "refit abs(r-1)", ".3f"),
                    ("improvement", "inherited err / refit err", ".2f")]

N_SWEEP_COLUMNS = [("family", "family", ""), ("n_samples", "N", ",d"), ("error", "mean abs(r-1)", ".3f"),
                   ("bias", "abs(mean r - 1)", ".3f"), ("seconds", "s / run", ".3f"), ("queries", "queries", ",.0f")]
THRESHOLD_COLUMNS = [("family", "family", ""), ("percentile", "percentile", "d"), ("eta", "eta", ".0e"),
                     ("error", "mean abs(r-1)", ".3f"), ("seconds", "s / run", ".3f"),
                     ("benign_mass", "benign leakage P_b", ".3f"), ("leakage_bias", "(1-eta)/eta P_b/P_h", ".3g")]


def _selector_ties(selectors: Any) -> str:
    """A sentence when several selectors share the best rho (then their order in the table says nothing)."""
    if "rho" not in selectors or selectors.empty:
        return ""
    best = selectors.rho.max()
    tied = int((selectors.rho == best).sum())
    return (f" {tied} of the {len(selectors)} selectors share the best rho ({best:.2f}): their order among "
            "themselves carries no information." if tied > 1 else "")


def check_output_dir(path: str | Path, what: str = "output directory", *, create: bool = True) -> Path:
    """Check that ``path`` can be an output directory (and create it); returns it as a Path.

    Called before any work, so that an output path that is a file (or lies under a file, or
    cannot be created) is refused at once rather than after the work is done. With
    ``create=False`` only the checks that need no change on disk are made.

    Raises
    ------
    ScarceError
        An empty path, a path that is (or lies under) an existing non-directory, or a directory
        that cannot be created or written.
    """
    from scarce.checks import check_path
    from scarce.errors import ScarceError

    path = check_path(what, path)
    for ancestor in (path, *path.parents):
        try:
            exists, is_dir = ancestor.exists(), ancestor.is_dir()
        except OSError as exc:  # a name longer than the file system allows
            raise ScarceError(f"{what} {str(path)!r} cannot be used: {exc.strerror or exc}; allowed: a "
                              "directory path whose every name the file system accepts") from None
        if exists and not is_dir:
            raise ScarceError(f"{what} {str(path)!r}: {str(ancestor)!r} exists and is not a directory; "
                              "choose another path")
        if exists:
            if not os.access(ancestor, os.W_OK):
                raise ScarceError(f"{what} {str(path)!r}: {str(ancestor)!r} is not writable")
            break
    if create:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ScarceError(f"{what} {str(path)!r} cannot be created: {exc.strerror or exc}") from None
    return path


def _summary_lines(tables: dict[str, Any]) -> list[str]:
    """The report's title, run summary and headline."""
    config, info, cells, top = tables["config"], tables["info"], tables["cells"], tables["headline"]
    parts = ["# SCARCE LLM sweep", "",
             f"* **preset**: {config['name']}; method {config['method']}; groups "
             f"{', '.join(tables['groups'])}",
             f"* **corpus**: {info['records']} records ({info['benign_records']} benign), embedding "
             f"dimension {info['embedding_dim']}, fingerprint {info['corpus']}",
             f"* **fit**: {info['fit_records']} records ({info['fit_jailbreaks']} jailbreaks); "
             f"separation AUC " + ", ".join(f"{f} {a:.3f}" for f, a in info['fit_auc'].items()),
             f"* **cells**: {len(cells)} finished; {config['n_runs']} cascade runs each; "
             f"N = {config['n_samples']:,}; p0 = {config['level_probability']}"]
    missing = tables.get("missing") or []
    if missing:  # the report renders what exists and names what it lacks
        parts.append(f"* **cells missing or unreadable** ({len(missing)} of the grid; rerun `scarce llm sweep` to "
                     f"compute them): " + ", ".join(missing[:20]) + (" ..." if len(missing) > 20 else ""))
    if info.get("skipped_groups"):
        parts.append("* **skipped groups** (no jailbreak, so p_ref = 0): " + "; ".join(
            f"{g} ({why})" for g, why in info["skipped_groups"].items()))
    if top:
        parts += ["", "## Headline", "",
                  f"The best family's best variant **{top['best_variant']}** has mean relative error "
                  f"**{top['mean_error']:.1%}** (worst cell {top['worst_error']:.1%}) against `p_ref` over "
                  f"{top['cells']} cells with eta >= {top['min_eta']:g}; the references' own 95% bootstrap "
                  f"intervals have mean relative half-width **{top['reference_rel_half_width']:.1%}** over "
                  "the same cells."]
    return parts


def write_report(tables: dict[str, Any], out_dir: str | Path) -> Path:
    """``cells.parquet``, figures, ``report.md`` and the self-contained ``index.html`` from a sweep's
    tables; returns the Markdown report's path.

    ``tables`` is what :func:`scarce.applications.llm.analysis.analyse` returns.
    """
    out_dir = check_output_dir(out_dir, "report directory")
    config, families = tables["config"], tables["families"]
    selectors, transfer = tables["selectors"], tables["transfer"]
    tables["cells"].to_parquet(out_dir / "cells.parquet", index=False)
    figures = write_figures(tables, out_dir / "figures")
    parts = _summary_lines(tables)
    parts += ["", "## Ground-truth family ranking", "", *markdown_table(families, FAMILY_COLUMNS), "",
              "Error: mean over groups x eta of the cell's mean `|r - 1|` over its cascade runs, "
              "`r = P_hat(A_tau) * C_tau / p_ref`. Noise floor: `sqrt(2/pi) * sd(r)` over the runs, the "
              "error an unbiased estimate with the observed spread would show; an error close to it is "
              "cascade noise, not ruler bias. `inf`: calibration undefined (no labelled jailbreak "
              "above tau) in some cell."]
    if not selectors.empty:
        parts += ["", "## Selector robustness", "", *markdown_table(selectors, SELECTOR_COLUMNS), "",
                  "rho: Spearman between the oriented selector value and the negative family error "
                  "(> 0: agreement). p: asymptotic; p perm.: exact permutation over the families "
                  "(pre-specified positive direction). LOFO / LOGO: leave-one-family-out and "
                  "leave-one-group-out minima of rho." + _selector_ties(selectors)]
    if not transfer.empty:
        parts += ["", f"## Transfer to {config['transfer_method']}", "",
                  *markdown_table(transfer, TRANSFER_COLUMNS), "",
                  f"Rulers and thresholds fitted on {config['method']}. Inherited: `C_tau` from the "
                  f"{config['method']} records; refit: `C_tau` from the {config['transfer_method']} records. "
                  "The interval is that of the mean over runs (cascade uncertainty only, not the "
                  "calibration's)."]
    if len(tables["n_sweep"]):
        parts += ["", "## N sweep", "", *markdown_table(tables["n_sweep"], N_SWEEP_COLUMNS)]
    parts += ["", "## Threshold-percentile sweep", "", *markdown_table(tables["thresholds"], THRESHOLD_COLUMNS)]
    parts += ["", "## Figures", ""]
    parts += [f"![{name}](figures/{path.name})" for name, path in figures.items()]
    path = out_dir / "report.md"
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    from scarce.reporting.html import run_provenance, write_html

    write_html(path, "SCARCE LLM sweep", provenance=run_provenance())
    return path


#: Columns of the leave-one-style-out table (one row per fitted -> applied pair and eta).
TRANSFER_MATRIX_COLUMNS = [
    ("fitted", "fitted on", ""), ("applied", "applied to", ""), ("eta", "eta", ".0e"),
    ("jailbreaks", "jailbreaks", "d"), ("best", "best ruler (refit)", ""), ("recall", "recall at tau", ".3f"),
    ("best_error_refit", "refit abs(r-1)", ".3f"), ("best_bias_refit", "refit abs(mean r - 1)", ".3f"),
    ("best_error_inherited", "inherited abs(r-1)", ".3f"), ("exact_refit", "exact P(A)C/p_ref refit", ".3g"),
    ("exact_inherited", "exact P(A)C/p_ref inherited", ".3g"), ("recall_zero", "rulers with recall 0", ""),
]


def _view_words(table: Any) -> str:
    view = str(table["view"].iloc[0]) if "view" in table and len(table) else "conversation"
    return ("the response half of each embedding (the prompt carries the attack style)" if view == "response"
            else "the whole embedding")


def write_transfer_report(table: Any, summary: Any, out_dir: str | Path, *, config: dict[str, Any]) -> Path:
    """``transfer.parquet`` (every cell) and ``transfer.md`` (the best ruler per pair); returns the latter."""
    from scarce._atomic import atomic_write_text

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    table.to_parquet(out_dir / "transfer.parquet", index=False)
    parts = ["# Leave-one-style-out transfer", "",
             f"Rulers and thresholds fitted on one attack style plus the benign records, applied to each other "
             f"style (pooled, and per target model with at least {config['min_records']} records and "
             f"{config['min_jailbreaks']} jailbreaks); {config['n_runs']} cascade runs of N = {config['n_samples']:,} "
             f"per cell. The rulers see {_view_words(table)}. "
             "Inherited: `C_tau` from the fitting style's records; refit: from the applied records. "
             "`exact` is `P(A_tau) C_tau / p_ref` with the exact fleet probability: 1 means the calibration "
             "and the benign leakage cost nothing, and what remains is the cascade's own error.", "",
             *markdown_table(summary, TRANSFER_MATRIX_COLUMNS)]
    path = out_dir / "transfer.md"
    atomic_write_text(path, "\n".join(parts) + "\n")
    return path
