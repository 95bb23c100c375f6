"""Rich tables of estimate results."""

from __future__ import annotations

import math

from scarce.results import EstimateResult


def _fmt(value: float, spec: str = ".4g") -> str:
    if isinstance(value, float) and math.isnan(value):
        return "-"
    if isinstance(value, float) and math.isinf(value):
        return "failure" if value > 0 else "-inf"
    return format(value, spec)


def levels_table(result: EstimateResult):  # type: ignore[no-untyped-def]
    """A rich table with one row per level."""
    from rich.table import Table

    table = Table(title=f"{result.method} on {result.problem}: levels")
    for column in ("level", "threshold", "p_l", "P_l", "seeds", "gamma_l", "delta_l", "acceptance", "scale", "queries", "failed"):
        table.add_column(column, justify="right")
    for lv in result.levels:
        table.add_row(
            str(lv.level), _fmt(lv.threshold), _fmt(lv.probability), _fmt(lv.cumulative_probability, ".3e"),
            str(lv.n_seeds), _fmt(lv.correlation_factor, ".2f"), _fmt(lv.cov, ".3f"), _fmt(lv.acceptance_rate, ".2f"),
            _fmt(lv.kernel_scale, ".3f"), str(lv.n_queries), str(lv.n_failed) + (" (stalled)" if lv.stalled else ""),
        )
    return table


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
    table.add_row("CoV (estimated)", _fmt(result.cov, ".3f"))
    table.add_row(f"{confidence:.0%} interval", f"[{lo:.3e}, {_fmt(hi, '.3e')}]")
    table.add_row(f"anytime lower bound (delta={delta:g})", f"{result.envelope(delta).lower:.3e}")
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
