"""MkDocs hooks: doctest examples in docstrings rendered as code.

The package's docstrings carry runnable examples as plain ``>>>`` lines (they run as doctests
under pytest). Markdown would render them as a paragraph, so a preprocessor turns every run of
lines that starts with ``>>>`` (through its outputs, up to a blank line) into a ``pycon`` code
block, for the pages and for the docstrings mkdocstrings renders.
"""

from __future__ import annotations

from markdown import Extension
from markdown.preprocessors import Preprocessor


class _DoctestBlocks(Preprocessor):
    def run(self, lines: list[str]) -> list[str]:
        out: list[str] = []
        fenced, i = False, 0
        while i < len(lines):
            line = lines[i]
            if line.lstrip().startswith(("```", "~~~")):
                fenced = not fenced
            if fenced or not line.lstrip().startswith(">>> "):
                out.append(line)
                i += 1
                continue
            indent = line[: len(line) - len(line.lstrip())]
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
                i += 1
            out += ["", indent + "```pycon", *(indent + b for b in block), indent + "```", ""]
        return out


class DoctestBlocks(Extension):
    def extendMarkdown(self, md):  # noqa: N802 - the Markdown API's name
        md.preprocessors.register(_DoctestBlocks(md), "doctest_blocks", 27)


def on_config(config):  # noqa: ANN001, ANN201 - MkDocs hook signature
    config.markdown_extensions.append(DoctestBlocks())
    return config
