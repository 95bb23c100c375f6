"""Command-line interface: a thin Typer app that composes configuration -> run -> report.

``scarce estimate --problem linear --dim 100 --pf 1e-6 --n-samples 2000 --seed 0``

One module per command (:mod:`~scarce.cli.estimate`, :mod:`~scarce.cli.vision`,
:mod:`~scarce.cli.llm`); :mod:`~scarce.cli.common` holds the options, progress bars and error
handling they share. Applications and reporting never import this package: a command runs an
application, hands its rows to the analysis and the analysis' tables to reporting.
"""

from __future__ import annotations

import typer

from scarce.cli.estimate import estimate
from scarce.cli.llm import app as llm_app
from scarce.cli.vision import app as vision_app

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Rare-failure probabilities with Subset Simulation (SCARCE).")


@app.callback()
def main() -> None:
    """scarce: estimate rare failure probabilities with far fewer model queries than Monte Carlo."""


app.command()(estimate)
app.add_typer(vision_app, name="vision")
app.add_typer(llm_app, name="llm")

__all__ = ["app"]


if __name__ == "__main__":  # pragma: no cover
    app()
