"""MkDocs hooks: the docstrings' reStructuredText habits rendered as Markdown.

The package's docstrings are numpydoc, written to read well in a terminal and under Sphinx:
runnable examples as plain ``>>>`` lines (they run as doctests under pytest), Sphinx roles
(``:func:`name```), ``.. math::`` directives and doctest flags. A preprocessor, applied to the
pages and to every docstring mkdocstrings renders, turns each run of ``>>>`` lines (through its
outputs, up to a blank line) into a ``pycon`` code block without its ``# doctest:`` flags, a role
into inline code (``~a.b.c`` shows ``c``), and a math directive into a display formula.

Formulas (``\\( ... \\)`` inline, ``\\[ ... \\]`` displayed, as ``pymdownx.arithmatex`` marks
them) are converted to MathML when the site is built (latex2mathml), so the pages show maths
offline and load no script; browsers render MathML natively. A formula the converter cannot read
(a syntax error, a command it does not know) fails the build, naming the page and the formula.
"""

from __future__ import annotations

import html
import re

from markdown import Extension
from markdown.preprocessors import Preprocessor


_ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|obj|exc|ref|py:\w+):`~?([^`]+)`")
_DOCTEST_FLAG = re.compile(r"\s*# doctest: [+-][A-Z_, +-]+$")
_MATH = re.compile(r"^(\s*)\.\. math::\s*(.*)$")


def _role(match: re.Match[str]) -> str:
    text = match.group(0)
    target = match.group(1)
    return f"`{target.rsplit('.', 1)[-1] if '`~' in text else target}`"


def _math(lines: list[str]) -> list[str]:
    """``.. math:: expr`` (and its indented continuation lines) as a display formula."""
    out, i = [], 0
    while i < len(lines):
        match = _MATH.match(lines[i])
        if not match:
            out.append(lines[i])
            i += 1
            continue
        indent, body = match.group(1), [match.group(2)]
        i += 1
        while i < len(lines) and lines[i].strip() and len(lines[i]) - len(lines[i].lstrip()) > len(indent):
            body.append(lines[i].strip())
            i += 1
        out += ["", indent + "\\[", *(indent + b for b in body if b), indent + "\\]", ""]
    return out


class _DoctestBlocks(Preprocessor):
    def run(self, lines: list[str]) -> list[str]:
        lines = _math([_ROLE.sub(_role, line) for line in lines])
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
                line = lines[i][len(indent):] if lines[i].startswith(indent) else lines[i]
                block.append(_DOCTEST_FLAG.sub("", line))
                i += 1
            out += ["", indent + "```pycon", *(indent + b for b in block), indent + "```", ""]
        return out


class DoctestBlocks(Extension):
    def extendMarkdown(self, md):  # noqa: N802 - the Markdown API's name
        md.preprocessors.register(_DoctestBlocks(md), "doctest_blocks", 27)


def on_config(config):  # noqa: ANN001, ANN201 - MkDocs hook signature
    config.markdown_extensions.append(DoctestBlocks())
    return config


# an inline formula is \( ... \), a displayed one \[ ... \]: each opener with its own closer
_FORMULA = re.compile(r'<(span|div) class="arithmatex">(?:\\\((.*?)\\\)|\\\[(.*?)\\\])</\1>', re.S)


def _mathml(match: re.Match[str], page: str) -> str:
    from latex2mathml.converter import convert

    tex = html.unescape(match.group(2) if match.group(2) is not None else match.group(3)).strip()
    try:
        mathml = convert(tex, display="block" if match.group(1) == "div" else "inline")
    except Exception as exc:  # noqa: BLE001 - reported with the page and the formula
        raise ValueError(f"{page}: latex2mathml cannot convert the formula {tex!r}: {exc}") from exc
    unknown = sorted(set(re.findall(r">(\\[A-Za-z]+)<", mathml)))  # the converter shows these as text
    if unknown:
        raise ValueError(f"{page}: latex2mathml does not know {', '.join(unknown)} in the formula {tex!r}")
    # a hat as the modifier circumflex, not stretched: a stretched "^" needs a math font to draw
    return mathml.replace("<mo>&#x0005E;</mo></mover>", '<mo stretchy="false">&#x002C6;</mo></mover>')


def on_page_content(html_text, page, config, files):  # noqa: ANN001, ANN201, ARG001 - MkDocs hook signature
    out = _FORMULA.sub(lambda m: _mathml(m, page.file.src_uri), html_text)
    left = re.search(r'class="arithmatex">(.{0,60})', out, re.S)
    if left:  # a formula whose delimiters do not pair (\( ... \] say) would reach the reader as raw TeX
        raise ValueError(f"{page.file.src_uri}: a formula's delimiters do not pair: {left.group(1)!r}")
    return out
