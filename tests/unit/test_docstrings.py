"""Docstrings say what the code does and why; measured figures and their history live on the
documentation's benchmark pages, and every reference in a docstring points to something that exists."""

from __future__ import annotations

import ast
import re

import pytest

from conftest import REPO_ROOT

SRC = REPO_ROOT / "src" / "scarce"
#: What a measurement record looks like: a date, "Measured ...", a seed range, a timing per item,
#: a speed-up factor.
RECORD = re.compile(r"\b20\d\d-\d\d-\d\d\b|\bMeasured\b|\bseeds? \d{3,}-\d+|\d(?:\.\d+)? us per\b|\d(?:-\d+)?x faster\b")
#: References that do not resolve for a user: the design notes outside the package, issue numbers.
DANGLING = re.compile(r"DESIGN\.md|\bissue \d+\b|\bissue-\d+\b")


def docstrings():
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    first = node.body[0].lineno if node.body else 1
                    for offset, line in enumerate(doc.splitlines()):
                        yield f"{path.relative_to(REPO_ROOT)}:{first + offset}", line


@pytest.mark.parametrize("pattern, what", [(RECORD, "measurement records (move them to docs/benchmarks/)"),
                                           (DANGLING, "references a user cannot follow")])
def test_docstrings_hold_no(pattern, what):
    found = [f"{where}: {line.strip()}" for where, line in docstrings() if pattern.search(line)]
    assert not found, f"{what}:\n" + "\n".join(found)


def test_comments_point_to_nothing_outside_the_package():
    found = [f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}"
             for path in sorted(SRC.rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), start=1)
             if line.lstrip().startswith("#") and DANGLING.search(line)]
    assert not found, "\n".join(found)
