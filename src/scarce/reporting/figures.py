"""Writing a report's figures: matplotlib off-screen, one PNG per figure, paths collected."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class FigureWriter:
    """``save(fig, name)`` writes ``<out_dir>/<name>.png`` and closes the figure.

    ``plt`` is :mod:`matplotlib.pyplot` with the non-interactive Agg backend (imported on
    construction, so reports that draw nothing never import matplotlib); ``paths`` maps each
    saved name to its file.
    """

    def __init__(self, out_dir: str | Path, *, dpi: int = 110):
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        self.plt = plt
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for stale in self.out_dir.glob("*.png"):  # a figure an earlier version drew must not linger
            stale.unlink()
        self.dpi = dpi
        self.paths: dict[str, Path] = {}

    def save(self, fig: Any, name: str) -> None:
        """Lay the figure out at the saving resolution and write it through an Agg canvas.

        ``savefig`` after ``tight_layout`` would draw the whole figure twice (a layout pass, then
        the picture) on top of the layout's own pass; printing the canvas draws it once.
        """
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        fig.set_dpi(self.dpi)
        fig.tight_layout()
        path = self.out_dir / f"{name}.png"
        FigureCanvasAgg(fig).print_png(path)
        self.plt.close(fig)
        self.paths[name] = path


def method_colours(names: list[str]) -> dict[str, Any]:
    """One colour per method or ruler, the same in every figure of a report (tab20, then cycled)."""
    import matplotlib

    palette = matplotlib.colormaps["tab20"].colors
    return {name: palette[i % len(palette)] for i, name in enumerate(sorted(names))}
