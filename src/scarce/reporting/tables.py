"""Rich tables of estimate results."""

from __future__ import annotations

import math

from scarce.results import EstimateResult


def _fmt(value: float, spec: str = ".4g") -> str:
    if isinstance(value, float) and math.isnan(value):
        return "-"
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return format(value, spec)


def _threshold(value: float) -> str:
    """A level's threshold; ``+inf`` is the failure event itself (the exact terminal event)."""
    return "failure" if isinstance(value, float) and value == math.inf else _fmt(value)


def _cov(result: EstimateResult) -> str:
    """The CoV, and why it is infinite when it is."""
    if not math.isinf(result.cov):
        return _fmt(result.cov, ".3f")
    if not result.reached_failure:
        return "inf (the failure event was not reached)"
    return "inf (no failure observed)" if result.n_failed == 0 else "inf"


def levels_table(result: EstimateResult):  # type: ignore[no-untyped-def]
    """A rich table with one row per level."""
    from rich.table import Table

    table = Table(title=f"{result.method} on {result.problem}: levels")
    for column in ("level", "threshold", "p_l", "P_l", "seeds", "gamma_l", "delta_l", "acceptance", "scale", "queries", "failed"):
        table.add_column(column, justify="right")
    for lv in result.levels:
        table.add_row(
            str(lv.level), _threshold(lv.threshold), _fmt(lv.probability), _fmt(lv.cumulative_probability, ".3e"),
            str(lv.n_seeds), _fmt(lv.correlation_factor, ".2f"), _fmt(lv.cov, ".3f"), _fmt(lv.acceptance_rate, ".2f"),
            _fmt(lv.kernel_scale, ".3f"), str(lv.n_queries), str(lv.n_failed) + (" (stalled)" if lv.stalled else ""),
        )
    return table


def _percent(level: float) -> str:
    """``level`` as a percentage with the digits it needs: 95%, 99.9%, 0.1%, never rounded to 100% or 0%."""
    value = level * 100
    for digits in range(16):  # the fewest decimals that show the value, strictly between 0 and 100
        shown = round(value, digits)
        if 0.0 < shown < 100.0 and abs(shown - value) <= 1e-9:
            return f"{value:.{digits}f}%"
    return f"{value:.3g}%"  # beyond fifteen decimals of a percent


def summary_table(result: EstimateResult, exact: float | None = None, confidence: float = 0.95, delta: float = 0.05):  # type: ignore[no-untyped-def]
    """A rich table with the estimate, its error bars and the query count."""
    from rich.table import Table

    lo, hi = result.ci(confidence)
    table = Table(title="estimate", show_header=False)
    table.add_column("quantity", style="bold")
    table.add_column("value", justify="right")
    table.add_row("P_f estimate", f"{result.probability:.4e}")
    if exact is not None:
        table.add_row("exact P_f", f"{exact:.4e}")
        table.add_row("estimate / exact", f"{result.probability / exact:.3f}")
    table.add_row("CoV (estimated)", _cov(result))
    table.add_row(f"{_percent(confidence)} interval", f"[{lo:.3e}, {_fmt(hi, '.3e')}]")
    df = result.degrees_of_freedom()
    if df is not None:  # the interval's Student t quantile; with few, the interval is the error bar
        few = " (few: the interval, not the CoV, is the error bar)" if result.few_degrees_of_freedom() else ""
        table.add_row("interval's degrees of freedom", f"{df:.3g}{few}")
    table.add_row(f"anytime lower bound (delta={float(delta)!r})", f"{result.envelope(delta).lower:.3e}")
    table.add_row("queries", f"{result.n_queries:,}")
    table.add_row("wall time", f"{result.wall_time:.3f} s")
    table.add_row("status", result.status + (f" ({'; '.join(result.flags)})" if result.flags else ""))
    return table


def print_result(result: EstimateResult, exact: float | None = None, confidence: float = 0.95, delta: float = 0.05) -> None:
    """Print the level table (Subset Simulation) and the summary to the terminal."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal:  # logs and pipes: do not squeeze the level table into 80 columns
        console = Console(width=120)
    if len(result.levels) > 1:
        console.print(levels_table(result))
    console.print(summary_table(result, exact, confidence, delta))


def _frame_table(frame, title: str, columns: list[tuple[str, str, str]]):  # type: ignore[no-untyped-def]
    from rich.table import Table

    table = Table(title=title)
    for i, (_, header, _) in enumerate(columns):
        table.add_column(header, justify="left" if i == 0 else "right", no_wrap=i == 0)
    for _, row in frame.iterrows():
        table.add_row(*[_fmt(row[col], spec) if spec else str(row[col]) for col, _, spec in columns])
    return table


def print_vision_tables(ranking, head_to_head) -> None:  # type: ignore[no-untyped-def]
    """Print the vision run's step-1 ranking and step-2 head-to-head table (pandas frames)."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console = Console(width=200)
    if len(ranking):
        console.print(_frame_table(ranking, "Step 1: ruler screening on flipped seeds", [
            ("ruler", "ruler", ""), ("log10_mae", "log10 MAE", ".3f"), ("missed_hits", "missed hits", ""),
            ("queries", "queries", ",.0f"), ("runtime_calibrated", "runtime cal. (s)", ".1f"),
        ]))
    if len(head_to_head):
        table = head_to_head.copy()
        # what each row rests on, in two narrow columns
        table["evaluated"] = [f"{int(r.seeds)} x {r.runs:.3g}" for _, r in table.iterrows()]
        table["truth"] = [f"{r.mc_samples:,.0f} / {r.mc_min_failures:.0f}" for _, r in table.iterrows()]
        console.print(_frame_table(table, "Step 2: held-out seeds (runtime calibrated at T_ref = 6.473e-4 s/query)", [
            ("name", "method", ""), ("evaluated", "seeds x runs", ""), ("truth", "MC truth samples / fewest failures", ""),
            ("mean_p", "mean p_hat", ".2e"), ("smc_mean_p", "MC truth mean p", ".2e"),
            ("mae", "MAE", ".1e"), ("median_rel_err", "median rel err", ".3f"),
            ("rms_rel_err", "RMS rel err", ".3f"), ("mc_rms_rel_err", "MC RMS rel err, same queries", ".3f"),
            ("fp", "FP", ""), ("fn", "FN", ""), ("queries", "queries", ",.0f"),
            ("runtime_calibrated", "runtime cal. (s)", ".1f"), ("level_jumps", "level jumps", ""),
        ]))


def print_llm_tables(tables: dict) -> None:  # type: ignore[type-arg]
    """Print an LLM sweep's headline, family ranking, top selector rows and transfer table."""
    from rich.console import Console

    console = Console()
    if not console.is_terminal:
        console = Console(width=170)
    top = tables.get("headline") or {}
    if top:
        console.print(f"best ruler {top['best_variant']}: mean |r - 1| = {top['mean_error']:.1%} over "
                      f"{top['cells']} cells with eta >= {top['min_eta']:g}; reference bootstrap relative "
                      f"half-width {top['reference_rel_half_width']:.1%}")
    families = tables.get("families")
    if families is not None and len(families):
        console.print(_frame_table(families, "Ground-truth family ranking", [
            ("family", "family", ""), ("best_variant", "best variant", ""), ("mean_error", "mean |r-1|", ".3f"),
            ("noise_floor", "noise floor", ".3f"), ("worst_error", "worst |r-1|", ".3f"),
            ("worst_kl", "worst KL(good||bad)", ".3f"), ("cohens_d", "Cohen's d", ".3f"),
        ]))
    selectors = tables.get("selectors")
    if selectors is not None and len(selectors):
        top = selectors.head(8)
        tied = int((selectors.rho == top.rho.iloc[0]).sum()) if "rho" in selectors else 0
        note = f"; {tied} share the top rho {top.rho.iloc[0]:.2f}" if tied > 1 else ""
        console.print(_frame_table(top, f"Selector robustness (top 8 of {len(selectors)}{note}; all in the report)", [
            ("metric", "metric", ""), ("aggregation", "aggr.", ""), ("rho", "rho", ".2f"), ("p", "p", ".3f"),
            ("p_permutation", "p perm.", ".3f"), ("lofo_min", "LOFO min", ".2f"), ("logo_min", "LOGO min", ".2f"),
        ]))
    transfer = tables.get("transfer")
    if transfer is not None and len(transfer):
        console.print(_frame_table(transfer, "Transfer (rulers fitted on the source method)", [
            ("variant", "ruler", ""), ("eta", "eta", ".0e"), ("p_ref", "target", ".3e"),
            ("inherited_ratio", "inherited/target", ".2f"), ("refit_ratio", "refit/target", ".2f"),
            ("refit_low", "refit 95% low", ".3e"), ("refit_high", "refit 95% high", ".3e"),
            ("improvement", "inherited err / refit err", ".2f"),
        ]))
