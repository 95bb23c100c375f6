"""The layering of docs/architecture.md, held by the code itself.

* The import contracts in ``pyproject.toml`` (``[tool.importlinter]``): layers point down
  (cli -> applications | reporting -> experiments -> estimators -> kernels -> core); rulers,
  selection, calibration, encoders and datasets never import estimators, experiments,
  applications, reporting or the CLI; no import cycle between the subpackages of any package.
* ``import scarce`` stays light: none of the heavy libraries is imported with it.
* No function in ``src/`` is longer than 60 lines, its signature and docstring included.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT

ROOT = REPO_ROOT
SRC = ROOT / "src" / "scarce"
HEAVY = ("torch", "transformers", "dask", "distributed", "matplotlib", "pandas", "sklearn", "pyarrow")
MAX_LINES = 60
#: Functions allowed past MAX_LINES (path:function -> lines): none; one that must grow is listed here, with why.
LONG_FUNCTIONS: dict[str, int] = {}


def test_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    if not lint.exists():
        pytest.skip("import-linter is not installed (it comes with the dev extra)")
    out = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert "0 broken" in out.stdout


@pytest.mark.parametrize("module", ["scarce", "scarce.vision", "scarce.llm"])
def test_import_scarce_imports_no_heavy_library(module):
    code = f"import sys, {module}; print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def _function_lengths() -> dict[str, int]:
    lengths = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                key = f"{path.relative_to(SRC).as_posix()}:{node.name}"
                lengths[key] = max(lengths.get(key, 0), node.end_lineno - node.lineno + 1)
    return lengths


def test_no_function_grows_past_sixty_lines():
    lengths = _function_lengths()
    new = {k: n for k, n in lengths.items() if n > MAX_LINES and k not in LONG_FUNCTIONS}
    assert not new, f"functions over {MAX_LINES} lines: {new}; split them"
    grown = {k: (LONG_FUNCTIONS[k], lengths.get(k, 0)) for k in LONG_FUNCTIONS if lengths.get(k, 0) > LONG_FUNCTIONS[k]}
    assert not grown, f"listed long functions grew (listed, now): {grown}"
    shrunk = [k for k in LONG_FUNCTIONS if lengths.get(k, 0) <= MAX_LINES]
    assert not shrunk, f"now at most {MAX_LINES} lines: remove {shrunk} from LONG_FUNCTIONS"


def test_recording_provenance_imports_no_heavy_library():
    code = ("import sys; from scarce.experiments.store import provenance; v = provenance()['versions']; "
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules), 'numpy' in v and 'scarce' in v)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True"]
