"""Reports say a sentence where a number would puzzle a reader, and name what failed."""

from __future__ import annotations

import pytest

pd = pytest.importorskip("pandas")


def test_a_method_that_mostly_returned_zero_and_a_mean_far_from_the_truth_get_a_sentence():
    from scarce.reporting.vision import _surprises

    table = pd.DataFrame([
        {"name": "AMLS (Webb 2019)", "mean_p": 5.05e-3, "smc_mean_p": 3.09e-3, "median_rel_err": 1.0, "fn": 9},
        {"name": "Margin SS", "mean_p": 3.1e-3, "smc_mean_p": 3.09e-3, "median_rel_err": 0.1, "fn": 0},
        {"name": "SCARCE x", "mean_p": 9e-3, "smc_mean_p": 3e-3, "median_rel_err": 0.3, "fn": 0},
    ])
    text = _surprises(table)
    assert "AMLS (Webb 2019): a median relative error of 1.000 means at least half its runs returned 0" in text
    assert "Margin SS" not in text and "SCARCE x: its mean estimate is 3.00 x the truth's mean" in text


def test_tied_selectors_are_said_to_be_tied():
    from scarce.reporting.llm import _selector_ties

    selectors = pd.DataFrame({"rho": [0.94, 0.94, 0.94, 0.5]})
    assert "3 of the 4 selectors share the best rho (0.94)" in _selector_ties(selectors)
    assert _selector_ties(pd.DataFrame({"rho": [0.9, 0.5]})) == ""


def test_failed_tasks_are_named_in_the_report_context():
    from types import SimpleNamespace

    from scarce.applications.vision.analysis import report_context

    preset = SimpleNamespace(name="tiny", noise="gaussian", scale=0.2, access="logits", conditioning="",
                             truth_samples=0, min_truth_failures=0, n_runs=1,
                             methods=SimpleNamespace(smc_samples=1000, ss_samples=500, level_probability=0.1))
    info = {"data": "d", "test_accuracy": 0.9, "ruler_auc_heldout": {"centroid": 0.7}}
    outcome = {"eval_seeds": [1], "screen_seeds": [2], "top_rulers": ["centroid"],
               "errors": {"eval-00001-amls-r0": {"type": "RuntimeError", "message": "model exploded\nat line 3"}}}
    context = report_context(preset, info, outcome)
    assert context["task errors"] == 1
    assert context["failed tasks"] == "eval-00001-amls-r0 (RuntimeError: model exploded)"


def test_the_report_gives_each_rulers_held_out_separation_beside_its_training_separation():
    from types import SimpleNamespace

    from scarce.applications.vision.analysis import report_context

    preset = SimpleNamespace(name="tiny", noise="gaussian", scale=0.2, access="logits", conditioning="",
                             truth_samples=0, min_truth_failures=0, n_runs=1,
                             methods=SimpleNamespace(smc_samples=1000, ss_samples=500, level_probability=0.1))
    info = {"data": "d", "test_accuracy": 0.9, "ruler_auc_heldout": {"centroid": 0.7, "boundary": 0.95},
            "ruler_auc_train": {"centroid": 0.97, "boundary": 0.99}}
    outcome = {"eval_seeds": [1], "screen_seeds": [2], "top_rulers": ["centroid"], "errors": {}}
    context = report_context(preset, info, outcome)
    line = context["ruler separation on held-out seeds (in brackets: on the training seeds; AUC within a class)"]
    assert line == "boundary 0.950 (0.990), centroid 0.700 (0.970)"


def test_a_table_right_under_its_heading_hides_its_repeated_caption(tmp_path):
    """The caption repeats the heading for screen readers; on the page it shows only where text separates them."""
    from scarce.reporting.html import write_html

    report = tmp_path / "report.md"
    report.write_text("# Run\n\n## Step 1\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n## Step 2\n\nSome words.\n\n"
                      "| c |\n|---|\n| 3 |\n", encoding="utf-8")
    page = write_html(report, "run").read_text(encoding="utf-8")
    assert '<caption class="repeat">Step 1</caption>' in page
    assert "<caption>Step 2</caption>" in page
    assert "caption.repeat {" in page and "clip: rect(0 0 0 0)" in page
