"""A finished vision run's report is rebuilt from its stored results alone: no model, no ruler fit."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

pytest.importorskip("torch")

from scarce.cli import app  # noqa: E402
from report_checks import check_html_report  # noqa: E402

runner = CliRunner()


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, tiny_vision_run):
    """A copy of the session's tiny run (these tests rewrite its report)."""
    import shutil

    run_dir = tmp_path_factory.mktemp("vision") / "run"
    shutil.copytree(tiny_vision_run[0], run_dir)
    return run_dir


def test_a_finished_run_records_its_report_context(finished_run):
    stored = json.loads((finished_run / "finished.json").read_text())
    assert stored["context"]["preset"] == "tiny" and "held-out seeds" in stored["context"]
    assert (finished_run / "report" / "report.md").is_file()


def test_rerunning_a_finished_run_and_the_report_command_touch_no_model(finished_run, monkeypatch):
    import scarce.applications.vision.pipeline as pipeline

    def no_context(*args, **kwargs):
        raise AssertionError("the classifier, head or rulers were built for a finished run")

    monkeypatch.setattr(pipeline, "build_context", no_context)
    before = (finished_run / "report" / "report.md").read_text()
    again = runner.invoke(app, ["vision", "--preset", "tiny", "--executor", "serial", "--run-dir", str(finished_run)])
    assert again.exit_code == 0, again.output
    assert "finished; the report is rebuilt from its stored results" in again.output
    report = runner.invoke(app, ["vision", "report", "--run-dir", str(finished_run)])
    assert report.exit_code == 0, report.output
    assert "Step 2" in report.output and (finished_run / "report" / "report.md").read_text() == before


def test_the_report_command_refuses_a_run_that_has_not_finished(tmp_path, finished_run):
    import shutil

    unfinished = tmp_path / "unfinished"
    shutil.copytree(finished_run, unfinished)
    (unfinished / "finished.json").unlink()
    result = runner.invoke(app, ["vision", "report", "--run-dir", str(unfinished)])
    assert result.exit_code == 2 and "holds no finished vision run" in result.output
    missing = runner.invoke(app, ["vision", "report", "--run-dir", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2


def test_the_html_report_is_self_contained(finished_run):
    page = check_html_report(finished_run / "report" / "index.html")
    figures = list((finished_run / "report" / "figures").glob("*.png"))
    assert len(page.images) == len(figures)
    import re

    text = re.sub(r"base64,[A-Za-z0-9+/=]+", "", (finished_run / "report" / "index.html").read_text())
    assert "MC truth mean p" in text and "Terms." in text and "SMC" not in text


def test_every_figure_passes_the_checklist(finished_run, tmp_path, monkeypatch):
    from report_checks import check_every_figure

    from scarce.applications.vision.analysis import head_to_head, rank_rulers, result_rows
    from scarce.experiments.store import ResultStore
    from scarce.reporting.vision import write_figures

    problems, seen = check_every_figure(monkeypatch)
    frame = result_rows(ResultStore.open(finished_run))
    write_figures(frame, rank_rulers(frame), head_to_head(frame), tmp_path)
    assert len(seen) >= 4 and not problems, problems


def test_a_damaged_task_file_is_left_out_and_named(tmp_path, finished_run):
    import shutil

    damaged_run = tmp_path / "damaged"
    shutil.copytree(finished_run, damaged_run)
    victim = sorted((damaged_run / "tasks").glob("eval-*.json"))[0]
    victim.write_text(victim.read_text()[:50])
    result = runner.invoke(app, ["vision", "report", "--run-dir", str(damaged_run)])
    assert result.exit_code == 0, result.output
    report = (damaged_run / "report" / "report.md").read_text()
    assert "task files left out" in report and victim.name in report
    assert f"{victim} is damaged and left out of the report" in result.output


def test_a_task_file_of_another_estimator_revision_is_left_out_and_named(tmp_path, finished_run):
    import json
    import shutil

    old_run = tmp_path / "old"
    shutil.copytree(finished_run, old_run)
    victim = next(path for path in sorted((old_run / "tasks").glob("eval-*.json"))
                  if "subset_simulation" in json.loads(path.read_text())["revisions"])
    amls = next(path for path in sorted((old_run / "tasks").glob("eval-*.json")) if "amls" in path.name)
    record = json.loads(victim.read_text())
    record["revisions"] = {"subset_simulation": 1}  # as written before Subset Simulation's revision 2
    victim.write_text(json.dumps(record))
    result = runner.invoke(app, ["vision", "report", "--run-dir", str(old_run)])
    assert result.exit_code == 0, result.output
    report = (old_run / "report" / "report.md").read_text()
    assert "task files left out" in report and victim.name in report
    assert f"{victim} is of another estimator revision and left out of the report" in result.output
    assert amls.name not in report  # AMLS was not revised: its results stay in


def test_a_removed_task_file_is_named_by_the_report_command(tmp_path, finished_run):
    import shutil

    lost_run = tmp_path / "lost"
    shutil.copytree(finished_run, lost_run)
    victim = sorted((lost_run / "tasks").glob("eval-*.json"))[-1]
    victim.unlink()
    result = runner.invoke(app, ["vision", "report", "--run-dir", str(lost_run)])
    assert result.exit_code == 0, result.output
    report = (lost_run / "report" / "report.md").read_text()
    assert "missing task files" in report and victim.stem in report


def test_the_head_to_head_counts_thin_evidence_and_checks_each_interval_against_the_truth(finished_run):
    """Each run's own interval and flag, read back from its stored result, and the share of a method's
    runs whose interval holds the Monte Carlo truth."""
    from scarce.applications.vision.analysis import head_to_head, result_rows
    from scarce.experiments.store import ResultStore
    from scarce.results import EstimateResult

    store = ResultStore.open(finished_run)
    frame = result_rows(store)
    stored = [EstimateResult.from_dict(payload["result"]) for _, payload, _ in store.timed_items()]
    assert list(frame.ci_low) == [r.ci(0.95)[0] for r in stored]
    assert list(frame.thin_evidence) == [r.thin_evidence for r in stored]
    evaluated = frame[(frame.stage == "eval") & (frame.smc_p > 0)]
    assert not evaluated.empty
    held = (evaluated.ci_low <= evaluated.smc_p) & (evaluated.smc_p <= evaluated.ci_high)
    table = head_to_head(frame).set_index("method")
    for method, rows in held.groupby(evaluated.method):
        assert table.loc[method, "ci_holds"] == pytest.approx(rows.mean())
        assert (table.loc[method, "ci_holds_runs"], table.loc[method, "ci_holds_count"]) == (len(rows), rows.sum())
    flagged = frame[frame.stage == "eval"].groupby("method").thin_evidence.sum()
    assert all(table.loc[method, "thin_evidence"] == count for method, count in flagged.items())
    report = (finished_run / "report" / "report.md").read_text()
    assert "### Do the error bars hold?" in report and "| thin evidence | 95% CI holds MC truth |" in report
    assert "| of runs | Wilson 95% interval |" in report


class _Store:
    """The one method :func:`result_rows` calls on a store, over hand-made payloads."""

    def __init__(self, payloads):
        self.payloads = payloads

    def timed_items(self):
        return [(str(i), payload, {"wall": 0.1}) for i, payload in enumerate(self.payloads)]


def test_error_bars_count_flags_and_leave_out_seeds_whose_truth_saw_no_failure():
    from scarce.applications.vision.analysis import head_to_head, result_rows
    from scarce.results import EstimateResult, LevelDiagnostics

    levels = tuple(LevelDiagnostics(i, float(i), 0.1, 0.1 ** i, 50, 0.0, 0.1, 2000, 0) for i in range(4))

    def subset(p, info):
        return EstimateResult("subset_simulation", p, 0.2, 6000, 2000, 100, True, "converged", levels=levels,
                              info=info).to_dict()

    def truth(seed, p):
        result = EstimateResult("monte_carlo", p, 0.1, 10**6, 10**6, round(p * 1e6), True, "converged",
                                interval="clopper-pearson")
        return {"stage": "truth", "seed_index": seed, "label": 0, "method": "smc", "result": result.to_dict()}

    order = {"failure_lineages": 30, "failure_origin_chains": 200, "failure_origin_level": 2,
             "failures_below_boundary": 4, "failures_found": 90}
    plain = {"failure_lineages": 30, "failure_origin_chains": 2000, "failure_origin_level": 0}
    runs = [(0, 1e-3, plain), (0, 3e-3, plain), (0, 1e-3, order), (1, 1e-3, plain)]
    payloads = [truth(0, 1e-3), truth(1, 0.0)] + [
        {"stage": "eval", "seed_index": seed, "label": 0, "method": "ss_margin", "run": i, "result": subset(p, info)}
        for i, (seed, p, info) in enumerate(runs)]
    # a method run only where the truth saw no failure: nothing to judge its intervals by
    payloads.append({"stage": "eval", "seed_index": 1, "label": 0, "method": "amls", "run": 0,
                     "result": subset(1e-3, plain)})
    frame = result_rows(_Store(payloads))
    evaluated = frame[(frame.stage == "eval") & (frame.method == "ss_margin")]
    assert list(evaluated.thin_evidence) == [False, False, True, False]
    # seed 1's truth saw no failure: its run says nothing about the interval
    assert evaluated.ci_holds.isna().tolist() == [False, False, False, True]
    assert list(evaluated.ci_holds.iloc[:3]) == [1.0, 0.0, 1.0]  # 3e-3 with CoV 0.2 misses 1e-3
    row = head_to_head(frame).set_index("method").loc["ss_margin"]
    assert row.thin_evidence == 1 and row.ci_holds == pytest.approx(2 / 3)
    assert (row.ci_holds_runs, row.ci_holds_count) == (3, 2)
    from scarce.reporting.vision import error_bars_table

    table = head_to_head(frame)
    unjudged = table.set_index("method").loc["amls"]
    assert (unjudged.ci_holds_runs, unjudged.ci_holds_count) == (0, 0) and unjudged.ci_holds != unjudged.ci_holds
    line = next(x for x in error_bars_table(table).splitlines() if x.startswith(f"| {unjudged['name']} |"))
    assert line.endswith("| - | - | - |")


def test_the_error_bar_table_gives_each_share_its_count_and_wilson_interval():
    import pandas as pd

    from scarce.reporting.vision import error_bars_table

    table = pd.DataFrame([
        {"name": "Margin SS", "seeds": 6, "runs": 3.0, "not_reached": 0, "thin_evidence": 0, "ci_holds": 14 / 18,
         "ci_holds_runs": 18, "ci_holds_count": 14},
        {"name": "no truth", "seeds": 1, "runs": 3.0, "not_reached": 3, "thin_evidence": 0, "ci_holds": float("nan"),
         "ci_holds_runs": 0, "ci_holds_count": 0},
    ])
    lines = error_bars_table(table).splitlines()
    # Wilson (1927) for 14 of 18 at 95%: 0.548 to 0.910
    assert lines[2] == "| Margin SS | 6 x 3 | 0 | 0 | 0.78 | 14 of 18 | 0.55-0.91 |"
    assert lines[3].endswith("| - | - |")


# --- A hostile audit of the command line (2026-11-29) ------------------------------------------


def _copy(finished_run, tmp_path, name):
    import shutil

    target = tmp_path / name
    shutil.copytree(finished_run, target)
    return target


def test_a_run_whose_every_task_file_is_gone_is_a_clear_error(tmp_path, finished_run):
    """Every task file removed (or unreadable): the report command said nothing useful and raised
    AttributeError on an empty table; it now says the run holds no readable result."""
    empty = _copy(finished_run, tmp_path, "empty")
    for path in (empty / "tasks").glob("*.json"):
        path.unlink()
    result = runner.invoke(app, ["vision", "report", "--run-dir", str(empty)])
    assert result.exit_code == 2 and "holds no readable task result" in result.output
    assert not isinstance(result.exception, AttributeError)


def _rewrite_payload(path, change):
    """Change a task file's payload and give it the checksum the store verifies: damage a checksum misses."""
    import hashlib

    from scarce.experiments.store import _canonical

    record = json.loads(path.read_text())
    change(record["payload"])
    record["checksum"] = hashlib.sha256(_canonical(record["payload"]).encode()).hexdigest()
    path.write_text(json.dumps(record))


_PAYLOAD_DAMAGE = (lambda p: p.__setitem__("result", "x"), lambda p: p["result"].__setitem__("probability", "big"),
                   lambda p: p.pop("method"), lambda p: p.__setitem__("label", "two"))


def test_checksummed_task_files_holding_no_task_result_are_left_out_and_named(tmp_path, finished_run):
    """A result that is text, a probability that is text, no method, a label that is text: each
    in its own file, one report (each made a traceback before)."""
    damaged = _copy(finished_run, tmp_path, "checksummed")
    victims = sorted((damaged / "tasks").glob("eval-*.json"))[:len(_PAYLOAD_DAMAGE)]
    for victim, change in zip(victims, _PAYLOAD_DAMAGE):
        _rewrite_payload(victim, change)
    result = runner.invoke(app, ["vision", "report", "--run-dir", str(damaged)])
    assert result.exit_code == 0, result.output
    for victim in victims:
        assert f"{victim} is damaged and left out of the report" in result.output


@pytest.mark.parametrize("field, value", [("context", [1, 2]), ("keys", 5), ("keys", [1, 2]), ("keys", "eval"),
                                          ("context", None)])
def test_a_damaged_finished_record_is_refused_by_the_report_and_recomputed_by_a_rerun(tmp_path, finished_run,
                                                                                         field, value):
    damaged = _copy(finished_run, tmp_path, "finished")
    path = damaged / "finished.json"
    stored = json.loads(path.read_text())
    stored[field] = value
    path.write_text(json.dumps(stored))
    result = runner.invoke(app, ["vision", "report", "--run-dir", str(damaged)])
    assert result.exit_code == 2 and "finished.json is damaged" in result.output


def test_a_finished_record_written_before_it_held_the_task_keys_still_reports(tmp_path, finished_run):
    early = _copy(finished_run, tmp_path, "early")
    path = early / "finished.json"
    stored = json.loads(path.read_text())
    del stored["keys"]
    path.write_text(json.dumps(stored))
    result = runner.invoke(app, ["vision", "report", "--run-dir", str(early)])
    assert result.exit_code == 0, result.output


def test_a_finished_record_of_another_configuration_is_refused_by_the_report(tmp_path, finished_run):
    damaged = _copy(finished_run, tmp_path, "foreign")
    path = damaged / "finished.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "fingerprint": "0" * 64}))
    result = runner.invoke(app, ["vision", "report", "--run-dir", str(damaged)])
    assert result.exit_code == 2 and "another configuration" in result.output
