"""End-to-end CLI smoke tests (Typer's runner, no subprocess)."""

import json

import pytest

from typer.testing import CliRunner

from scarce.cli import app

runner = CliRunner()


def test_estimate_prints_tables():
    result = runner.invoke(app, ["estimate", "--problem", "linear", "--dim", "20", "--pf", "1e-4", "--n-samples", "500"])
    assert result.exit_code == 0, result.output
    assert "P_f estimate" in result.output and "anytime lower bound" in result.output
    assert "levels" in result.output


@pytest.mark.parametrize("options, message", [
    (["--k", "nan"], "--k does not apply to --problem linear, which takes --dim and --pf"),
    (["--problem", "chi_square", "--k", "5"], "--k does not apply to --problem chi_square"),
    (["--problem", "four_branch", "--dim", "3"], "--dim does not apply to --problem four_branch, which takes --k"),
    (["--problem", "four_branch", "--pf", "0.1", "--dim", "4"], "--dim/--pf do not apply to --problem four_branch"),
    (["--method", "mc", "--kernel", "surface"], "--kernel applies to --method ss only"),
    (["--method", "mc", "--max-queries", "100", "--stop-factor", "1"], "--max-queries/--stop-factor apply to --method ss"),
    (["--method", "mc", "--level-probability", "0.2"], "--level-probability applies to --method ss only"),
    (["--method", "mc", "--count-seeds", "always"], "--count-seeds applies to --method ss only"),
    (["--problem", "lineer", "--k", "3"], "unknown problem 'lineer'"),
])
def test_estimate_refuses_options_the_run_would_ignore(options, message):
    result = runner.invoke(app, ["estimate", *options])
    assert result.exit_code == 2 and message in result.output, result.output


def test_estimate_takes_k_for_four_branch_and_its_default_without_it():
    given = runner.invoke(app, ["estimate", "--problem", "four_branch", "--k", "6", "--n-samples", "500", "--json"])
    default = runner.invoke(app, ["estimate", "--problem", "four_branch", "--n-samples", "500", "--json"])
    assert given.exit_code == 0 and default.exit_code == 0, (given.output, default.output)
    assert json.loads(given.output)["problem"] != json.loads(default.output)["problem"]


def test_estimate_json_round_trips():
    from scarce.results import EstimateResult

    result = runner.invoke(app, ["estimate", "--problem", "four_branch", "--n-samples", "500", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["reached_failure"] is True
    assert EstimateResult.from_dict(data).n_queries == data["n_queries"]


def test_estimate_takes_the_response_surface_kernel_and_names_a_wrong_kernel():
    result = runner.invoke(app, ["estimate", "--problem", "linear", "--dim", "20", "--pf", "1e-4", "--n-samples", "500",
                                 "--kernel", "surface", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert "ResponseSurfaceSampling" in data["info"]["kernel"] and data["reached_failure"] is True
    assert min(level["acceptance_rate"] for level in data["levels"][1:-1]) > 0.9  # the linear level is sampled exactly
    wrong = runner.invoke(app, ["estimate", "--kernel", "surfce"])
    assert wrong.exit_code == 2 and "Did you mean 'surface'" in wrong.output


def test_monte_carlo_method():
    result = runner.invoke(app, ["estimate", "--problem", "linear", "--dim", "3", "--pf", "1e-2", "--method", "mc", "--n-samples", "5000", "--json"])
    assert result.exit_code == 0
    assert json.loads(result.output)["method"] == "monte_carlo"


def test_unknown_problem_says_did_you_mean():
    result = runner.invoke(app, ["estimate", "--problem", "lineer"])
    assert result.exit_code == 2
    assert "Did you mean 'linear'" in result.output


def test_bad_level_probability_is_a_clean_error():
    result = runner.invoke(app, ["estimate", "--level-probability", "0.7"])
    assert result.exit_code == 2
    assert "level_probability must be in (0, 0.5]" in result.output


def test_stop_factor_reaches_the_estimator_and_bad_values_are_clean_errors():
    ok = runner.invoke(app, ["estimate", "--problem", "four_branch", "--n-samples", "500", "--stop-factor", "1", "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["info"]["stop_factor"] == 1.0
    bad = runner.invoke(app, ["estimate", "--stop-factor", "0"])
    assert bad.exit_code == 2
    assert "stop_factor must be in (0, 1]" in bad.output


def test_count_seeds_reaches_the_estimator_and_bad_values_are_clean_errors():
    ok = runner.invoke(app, ["estimate", "--problem", "four_branch", "--n-samples", "500", "--count-seeds", "never", "--json"])
    assert ok.exit_code == 0, ok.output
    payload = json.loads(ok.output)
    assert payload["info"]["count_seeds"] == "never"
    assert all(level["n_queries"] in (0, 500) for level in payload["levels"][1:])
    bad = runner.invoke(app, ["estimate", "--count-seeds", "allways"])
    assert bad.exit_code == 2
    assert "unknown count_seeds 'allways'. Did you mean 'always'?" in bad.output


def test_version_prints_the_package_version():
    import scarce

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"scarce {scarce.__version__}"


@pytest.mark.parametrize("argv, blocked, extra", [
    (["vision", "--preset", "tiny"], "torch", "vision"),
    (["llm", "embed", "--out", "o.parquet"], "pandas", "llm"),
    (["vision", "estimate", "--model", "m:f", "--input", "x.npy"], "torch", "vision"),
    (["estimate", "--problem", "linear"], "dask", "scale"),
])
def test_a_missing_extra_is_named_instead_of_a_traceback(tmp_path, argv, blocked, extra):
    import subprocess
    import sys

    code = (f"import sys; sys.modules[{blocked!r}] = None; sys.argv = ['scarce', *{argv!r}]; "
            "from scarce.cli import run, missing_extra; "
            f"assert missing_extra({blocked!r}, {argv!r}) == {extra!r}; run()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    if blocked == "dask":  # estimate needs no optional module: it runs; the mapping alone is checked
        assert out.returncode == 0, out.stderr
        return
    assert out.returncode == 2, out.stderr
    assert f"needs the '{extra}' extra (the module '{blocked}' is not installed): pip install 'scarce[{extra}]'" \
        in out.stderr
    assert "Traceback" not in out.stderr


def test_stage_progress_off_a_terminal_prints_a_line_a_tenth_to_stderr(capsys):
    from scarce.cli.common import stage_progress

    # under pytest's capture stdout is no terminal: a live bar would show nothing until the end
    with stage_progress() as progress:
        for done in range(1, 41):
            progress("harvest", done, 40, "done" if done == 40 else f"task {done}")
        progress("fit", 0, 0, "done")
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and lines[0] == "harvest: 1/40 task 1" and lines[1] == "harvest: 4/40 task 4"
    assert lines[-2:] == ["harvest: 40/40 done", "fit: 0/0 done"] and len(lines) == 12


def test_run_warnings_name_a_few_stale_task_files_and_count_the_rest(capsys):
    """After an upgrade every task of a run is of another estimator revision: the first few are
    named, the rest counted in one line; a damaged file is always named."""
    from scarce.checks import warn_user
    from scarce.cli.common import run_warnings
    from scarce.experiments.store import CorruptResultWarning, StaleResultWarning

    with run_warnings():
        for i in list(range(10)) + [4]:  # a file read twice is counted once
            warn_user(f"result file t{i}.json holds results of subset_simulation at revision 1", StaleResultWarning)
        warn_user("result file bad.json is corrupted or partial", CorruptResultWarning)
    err = capsys.readouterr().err
    assert [f"t{i}.json" in err for i in range(10)] == [True] * 3 + [False] * 7
    assert "7 more task files of another estimator revision were recomputed" in err and "bad.json" in err


# --- A hostile audit of the command line (2026-11-29) ------------------------------------------


def test_estimate_with_no_samples_is_a_clear_error():
    """``--n-samples 0`` divided by zero while sizing the progress bar, before the estimator's check."""
    result = runner.invoke(app, ["estimate", "--n-samples", "0"])
    assert result.exit_code == 2 and "n_samples must be an integer" in result.output


def test_a_failure_beyond_the_level_limit_is_refused_before_the_run_with_the_option_that_reaches_it():
    result = runner.invoke(app, ["estimate", "--pf", "1e-300", "--n-samples", "200"])
    assert result.exit_code == 2 and "raise --max-levels to at least" in result.output
    deep = runner.invoke(app, ["estimate", "--pf", "1e-20", "--dim", "10", "--n-samples", "200", "--max-levels", "80",
                               "--json"])
    assert deep.exit_code == 0, deep.output
    assert json.loads(deep.output)["status"] == "converged"
    mc = runner.invoke(app, ["estimate", "--method", "mc", "--max-levels", "80"])
    assert mc.exit_code == 2 and "--max-levels applies to --method ss only" in mc.output
    # near the bound the run is left to try (a last level needs only stop_factor p0 of its samples
    # to fail), and a problem without --pf is named by its own name
    for args in (["--pf", "1e-49", "--dim", "10"], ["--pf", "5e-3", "--dim", "10", "--max-levels", "3"],
                 ["--problem", "four_branch", "--max-levels", "3"]):
        near = runner.invoke(app, ["estimate", *args, "--n-samples", "1000", "--json"])
        assert near.exit_code == 0, (args, near.output)
    far = runner.invoke(app, ["estimate", "--problem", "four_branch", "--max-levels", "1"])
    assert far.exit_code == 2 and "--problem four_branch's probability" in far.output, far.output


@pytest.mark.parametrize("confidence, label", [("0.999", "99.9% interval"), ("0.001", "0.1% interval"),
                                               ("0.95", "95% interval")])
def test_the_interval_is_labelled_with_its_own_confidence(confidence, label):
    result = runner.invoke(app, ["estimate", "--dim", "10", "--pf", "1e-3", "--n-samples", "500",
                                 "--confidence", confidence])
    assert result.exit_code == 0 and label in result.output, result.output


def test_the_anytime_bound_is_labelled_with_the_delta_given():
    result = runner.invoke(app, ["estimate", "--dim", "10", "--pf", "1e-3", "--n-samples", "500",
                                 "--delta", "0.9999999999999999"])
    assert result.exit_code == 0 and "delta=0.9999999999999999" in result.output, result.output


def test_serial_and_a_dask_scheduler_together_are_refused():
    from scarce.errors import ScarceError
    from scarce.experiments.executors import executor_from_options

    for options in ({"dask": "local"}, {"scheduler": "tcp://127.0.0.1:1"}):
        with pytest.raises(ScarceError, match="contradict each other"):
            executor_from_options("serial", **options)


def test_a_run_directory_name_that_is_not_utf8_is_refused_before_any_work(tmp_path):
    import os

    from scarce.errors import ScarceError
    from scarce.experiments.store import check_run_dir

    odd = os.fsdecode(os.fsencode(str(tmp_path)) + b"/bad\xffname")
    with pytest.raises(ScarceError, match="run directory must be a name in UTF-8"):
        check_run_dir(odd)
    assert not os.path.exists(os.fsencode(odd))
