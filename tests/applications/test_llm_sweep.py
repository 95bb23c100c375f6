"""The LLM sweep: set-up, cells, resume, executors, bad input, and the report from the store."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("sklearn")

from scarce.applications.llm.sweep import (  # noqa: E402
    LLMSweep,
    SweepConfig,
    build_setup,
    get_preset,
    parse_overrides,
)
from conftest import with_bad_embedding  # noqa: E402
from scarce.errors import ScarceError  # noqa: E402
from scarce.experiments.executors import make_executor  # noqa: E402
from scarce.experiments.store import ResultStore  # noqa: E402

TINY = get_preset("tiny")


def run_sweep(corpus, run_dir, config=TINY, executor=None):
    sweep = LLMSweep(config, run_dir, corpus=corpus, executor=executor)
    return sweep, sweep.run()


def cell_payloads(run_dir):
    store = ResultStore.open(run_dir)
    return {k: v for k, v in store.items() if v.get("kind") == "cell"}


def test_setup_skips_groups_without_jailbreaks_and_scores_every_group(llm_corpus):
    setup = build_setup(llm_corpus, TINY)
    assert setup["groups"] == ["PAIR/model-a", "PAIR/model-b"]
    assert "PAIR/model-c" in setup["info"]["skipped_groups"]
    assert setup["info"]["fit_records"] == 40 + 30 + 25 + 4
    for family in TINY.families:
        assert len(setup["benign"][family]) == 40
        assert len(setup["group_scores"][family]["PAIR/model-b"]) == 25
        assert set(setup["thresholds"][family]) == {"75"}
    assert len(setup["transfer"]["labels"]) == 30
    json.dumps(setup)  # the set-up ships as JSON


def test_tiny_sweep_cells_hold_calibrated_runs(tmp_path, llm_corpus):
    sweep, outcome = run_sweep(llm_corpus, tmp_path / "run")
    assert outcome["finished"] == outcome["cells"] == len(sweep.tasks()) == 26
    assert not outcome["errors"]
    cells = cell_payloads(tmp_path / "run")
    cell = cells["cell-centroid_p75-PAIR~model-a-eta1e-03-N300"]
    assert cell["p_ref"] == pytest.approx(1e-3 * 20 / 30)
    assert len(cell["runs"]) == TINY.n_runs
    # the calibrated estimate's exact value: surrogate_exact * factor = p_ref * (1 + leakage bias)
    bias = (1 - cell["eta"]) / cell["eta"] * cell["benign_mass"] / cell["harmful_mass"]
    assert cell["surrogate_exact"] * cell["factor"] == pytest.approx(cell["p_ref"] * (1 + bias))
    transfer = cells["transfer-pc1_p75-GCG-eta1e-03-N300"]
    assert transfer["group"] == "GCG" and math.isfinite(transfer["factor_inherited"])


def test_resume_recomputes_only_missing_cells(tmp_path, llm_corpus):
    run_sweep(llm_corpus, tmp_path / "run")
    tasks = tmp_path / "run" / "tasks"
    before = {p.name: p.stat().st_mtime_ns for p in tasks.glob("*.json")}
    removed = "cell-mah_bad_p75-PAIR~model-b-eta1e-01-N300.json"
    (tasks / removed).unlink()
    (tasks / "cell-pc1_p75-PAIR~model-a-eta1e-03-N200.json").write_text("{ partial")
    with pytest.warns(Warning, match="corrupted or partial"):
        _, outcome = run_sweep(None, tmp_path / "run")  # no corpus needed: the set-up is stored
    assert outcome["finished"] == 26
    after = {p.name: p.stat().st_mtime_ns for p in tasks.glob("*.json")}
    changed = {name for name in after if after[name] != before.get(name)}
    assert changed == {removed, "cell-pc1_p75-PAIR~model-a-eta1e-03-N200.json"}


def test_serial_and_process_pool_give_identical_numbers(tmp_path, llm_corpus):
    config = get_preset("tiny", n_grid=(300,), transfer_method="")
    run_sweep(llm_corpus, tmp_path / "serial", config)
    with make_executor("process", n_workers=2) as pool:
        run_sweep(llm_corpus, tmp_path / "pool", config, executor=pool)
    serial, pooled = cell_payloads(tmp_path / "serial"), cell_payloads(tmp_path / "pool")
    assert serial.keys() == pooled.keys() and len(serial) == 12
    for key in serial:
        assert [r["p"] for r in serial[key]["runs"]] == [r["p"] for r in pooled[key]["runs"]], key


def test_a_run_directory_of_another_corpus_or_config_is_refused(tmp_path, llm_corpus):
    run_sweep(llm_corpus, tmp_path / "run")
    other = llm_corpus.copy()
    other.at[0, "embedding"] = other.embedding.iloc[0] + 1
    with pytest.raises(ScarceError, match="different configuration.*corpus"):
        LLMSweep(TINY, tmp_path / "run", corpus=other)
    with pytest.raises(ScarceError, match="different configuration.*n_runs"):
        LLMSweep(get_preset("tiny", n_runs=3), tmp_path / "run", corpus=llm_corpus)


def test_a_run_made_before_the_tie_break_is_refused_under_it_and_resumes_without_it(tmp_path, llm_corpus):
    """Old run directories stored no tie_break and their cells ran on the record score alone."""
    plateau = get_preset("tiny", tie_break=False)
    assert "tie_break" not in plateau.config() and TINY.config()["tie_break"] is True
    run_sweep(llm_corpus, tmp_path / "run", plateau)
    with pytest.raises(ScarceError, match="different configuration.*tie_break"):
        LLMSweep(TINY, tmp_path / "run", corpus=llm_corpus)
    tasks = tmp_path / "run" / "tasks"
    removed = "cell-mah_bad_p75-PAIR~model-b-eta1e-01-N300.json"
    kept = cell_payloads(tmp_path / "run")[removed.removesuffix(".json")]
    (tasks / removed).unlink()
    run_sweep(None, tmp_path / "run", plateau)  # resumes: the missing cell again on the record score
    again = cell_payloads(tmp_path / "run")[removed.removesuffix(".json")]
    assert [r["p"] for r in again["runs"]] == [r["p"] for r in kept["runs"]]


def test_the_tie_break_changes_the_cascade_not_the_target(tmp_path, llm_corpus):
    run_sweep(llm_corpus, tmp_path / "plateau", get_preset("tiny", tie_break=False))
    run_sweep(llm_corpus, tmp_path / "broken", TINY)
    plateau, broken = cell_payloads(tmp_path / "plateau"), cell_payloads(tmp_path / "broken")
    assert plateau.keys() == broken.keys()
    differ = 0
    for key in plateau:
        assert plateau[key]["surrogate_exact"] == broken[key]["surrogate_exact"]
        differ += [r["p"] for r in plateau[key]["runs"]] != [r["p"] for r in broken[key]["runs"]]
    assert differ > len(plateau) // 2


def test_a_chosen_group_without_jailbreaks_is_refused(llm_corpus):
    with pytest.raises(ScarceError, match="PAIR/model-c.*no jailbreak"):
        build_setup(llm_corpus, get_preset("tiny", groups=("PAIR/model-c",)))
    with pytest.raises(ScarceError, match="unknown group 'PAIR/model-x'. Did you mean"):
        build_setup(llm_corpus, get_preset("tiny", groups=("PAIR/model-x",)))


def test_corpus_problems_are_refused_before_any_fit(llm_corpus):
    bad = with_bad_embedding(llm_corpus, row=5, column=0, value=np.inf)
    with pytest.raises(ScarceError, match="NaN or inf"):
        build_setup(bad, TINY)
    with pytest.raises(ScarceError, match="no benign records"):
        build_setup(llm_corpus[llm_corpus.method != "none"], TINY)
    with pytest.raises(ScarceError, match="Did you mean 'PAIR'"):
        build_setup(llm_corpus, get_preset("tiny", method="PAIRS"))
    with pytest.raises(ScarceError, match="no 'embedding' column; embed the corpus first"):
        build_setup(llm_corpus.drop(columns="embedding"), TINY)


@pytest.mark.parametrize("kwargs, message", [
    ({"families": ("pc1", "centriod")}, "Did you mean 'centroid'"),
    ({"etas": (0.0,)}, r"eta must lie in \(0, 1\]"),
    ({"etas": (1e-3, 2.0)}, "eta must lie"),
    ({"percentiles": (100,)}, "percentiles"),
    ({"n_runs": 0}, "n_runs"),
    ({"level_probability": 0.7}, "level_probability"),
    ({"stop_factor": 0.0}, r"stop_factor must lie in \(0, 1\]"),
    ({"count_seeds": "sometimes"}, "unknown count_seeds 'sometimes'"),
    ({"transfer_variants": ("pc1_p76",)}, "Did you mean"),
])
def test_config_errors_name_the_setting(kwargs, message):
    with pytest.raises(ScarceError, match=message):
        SweepConfig(name="x", **kwargs)


def test_presets_and_overrides():
    with pytest.raises(ScarceError, match="Did you mean 'quick'"):
        get_preset("quik")
    assert parse_overrides(["n_runs=5", "etas=1e-3,1e-2", "families=pc1,centroid", "head=true"]) == {
        "n_runs": 5, "etas": (1e-3, 1e-2), "families": ("pc1", "centroid"), "head": True}
    with pytest.raises(ScarceError, match="Did you mean 'n_runs'"):
        parse_overrides(["n_run=5"])
    with pytest.raises(ScarceError, match="takes a value like"):
        parse_overrides(["n_runs=2.5"])


def test_report_is_built_from_the_store_alone(tmp_path, llm_corpus):
    from scarce.applications.llm.analysis import analyse
    from scarce.reporting.llm import write_report

    run_sweep(llm_corpus, tmp_path / "run")
    tables = analyse(ResultStore.open(tmp_path / "run"))
    path = write_report(tables, tmp_path / "report")
    text = path.read_text()
    for title in ("Ground-truth family ranking", "Selector robustness", "Transfer to GCG", "N sweep",
                  "Threshold-percentile sweep", "figures/accuracy.png", "figures/threshold_sweep.png",
                  "figures/selector_kl_vs_cohens_d.png"):
        assert title in text
    families = tables["families"]
    assert sorted(families.family) == sorted(TINY.families)
    assert (np.diff(families.mean_error.to_numpy()) >= 0).all()
    assert len(tables["selectors"]) == 2 * 14  # every metric x {worst, mean}
    for name in ("accuracy", "threshold_sweep", "selector_kl_vs_cohens_d"):
        assert (tmp_path / "report" / "figures" / f"{name}.png").stat().st_size > 1000
    cells = pd.read_parquet(tmp_path / "report" / "cells.parquet")
    assert len(cells) == 26
    # the error of a cell from its stored runs: mean |p * factor / p_ref - 1|
    row = cells[cells.key == "cell-centroid_p75-PAIR~model-a-eta1e-01-N300"].iloc[0]
    payload = ResultStore.open(tmp_path / "run").load(row.key)
    r = np.array([run["p"] for run in payload["runs"]]) * payload["factor"] / payload["p_ref"]
    assert row.error == pytest.approx(np.abs(r - 1).mean())
    assert tables["headline"]["reference_rel_half_width"] > 0


def test_report_of_an_empty_directory_says_what_to_run(tmp_path):
    from scarce.applications.llm.analysis import analyse

    with pytest.raises(ScarceError, match="no config.json"):
        ResultStore.open(tmp_path / "nothing")
    ResultStore(tmp_path / "empty", {"name": "x"})
    with pytest.raises(ScarceError, match="scarce llm sweep"):
        analyse(ResultStore.open(tmp_path / "empty"))


@pytest.mark.parametrize("family", TINY.families)
def test_a_corpus_of_another_embedding_dimension_is_refused_by_a_fitted_ruler(llm_corpus, family):
    from scarce.applications.llm.embedding import embedding_matrix
    from scarce.rulers import make_ruler
    from conftest import synthetic_corpus

    ruler = make_ruler(family).fit(embedding_matrix(llm_corpus), llm_corpus.jailbroken.to_numpy())
    other = embedding_matrix(synthetic_corpus(dim=6))
    with pytest.raises(ScarceError, match="8") as info:
        ruler.score_samples(other)
    assert "6" in str(info.value)
