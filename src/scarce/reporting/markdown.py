"""Markdown tables for reports: number formatting and a table from a pandas frame."""

from __future__ import annotations

import math
from typing import Any


def format_cell(value: Any, spec: str) -> str:
    """``value`` in ``spec``: ``-`` for NaN, ``inf`` for infinities, text as it is.

    A spec ending in ``d`` formats the value as an integer (pandas may hand over floats).
    """
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isinf(number):
        return "inf" if number > 0 else "-inf"
    if math.isnan(number):
        return "-"
    return format(int(number), spec) if spec.endswith("d") else format(number, spec)


def markdown_table(frame: Any, columns: list[tuple[str, str, str]]) -> list[str]:
    """Lines of a Markdown table: ``columns`` are ``(column, header, format spec or "")``."""
    lines = ["| " + " | ".join(h for _, h, _ in columns) + " |", "|" + "---|" * len(columns)]
    for _, row in frame.iterrows():
        lines.append("| " + " | ".join(format_cell(row[c], s) if s else str(row[c]) for c, _, s in columns) + " |")
    return lines
