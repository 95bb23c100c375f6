"""Perturbations, the misclassification problem, the SupCon head and the result store."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from scarce.applications.vision.noise import GaussianNoise, UniformNoise, make_noise  # noqa: E402
from scarce.applications.vision.problem import VisionModel, margin, perturbation_problem  # noqa: E402
from scarce.errors import ScarceError  # noqa: E402
from scarce.estimators import MonteCarlo, SubsetSimulation  # noqa: E402
from scarce.experiments.store import CorruptResultWarning, ResultStore  # noqa: E402


class ThresholdClassifier(torch.nn.Module):
    """Two classes decided by the mean pixel: label 1 when mean(x) > 0.5 (a known answer)."""

    n_classes = 2

    def logits_and_features(self, x):
        mean = x.reshape(x.shape[0], -1).mean(dim=1, keepdim=True)
        logits = torch.cat([0.5 - mean, mean - 0.5], dim=1) * 10.0
        return logits, torch.cat([mean, mean**2], dim=1)

    def forward(self, x):
        return self.logits_and_features(x)[0]


def _model(**kwargs):
    return VisionModel(ThresholdClassifier(), n_classes=2, image_shape=(1, 4, 4), **kwargs)


def test_gaussian_and_uniform_noise_are_standard_normal_maps():
    rng = np.random.default_rng(0)
    x0 = np.full(16, 0.5)
    u = rng.standard_normal((20000, 16))
    x = GaussianNoise(0.1).apply(x0, u)
    assert abs(x.std() - 0.1) < 0.005 and x.min() >= 0 and x.max() <= 1
    y = UniformNoise(0.2).apply(x0, u) - 0.5
    # U(-eps, eps): std eps / sqrt(3)
    assert abs(y.std() - 0.2 / math.sqrt(3)) < 0.003 and np.abs(y).max() <= 0.2


@pytest.mark.parametrize("noise", [GaussianNoise(0.3), UniformNoise(0.2)], ids=["gaussian", "uniform"])
def test_noise_keeps_float32_latents_in_float32_with_the_same_values(noise):
    rng = np.random.default_rng(0)
    x0, u = rng.random(16), rng.standard_normal((50, 16)).astype(np.float32)
    x = noise.apply(x0, u)
    assert x.dtype == np.float32
    np.testing.assert_allclose(x, noise.apply(x0, u.astype(np.float64)), atol=1e-6)


def test_forward_batches_default_by_device_and_split_without_changing_outputs():
    assert _model().batch_size == 256  # CPU: larger batches outgrow the allocator's mmap threshold
    x = np.random.default_rng(0).random((10, 16))
    whole, split = _model().forward(x, 0), _model(batch_size=3).forward(x, 0)
    np.testing.assert_array_equal(whole.logits, split.logits)
    np.testing.assert_array_equal(whole.embedding, split.embedding)
    with pytest.raises(ScarceError, match="batch_size must be an integer >= 1, got 0"):
        _model(batch_size=0)


@pytest.mark.parametrize("bad", [0.0, -0.1, float("nan"), "0.1"])
def test_noise_scale_must_be_positive(bad):
    with pytest.raises(ScarceError, match="sigma"):
        GaussianNoise(bad)
    with pytest.raises(ScarceError, match="eps"):
        UniformNoise(bad)


def test_unknown_noise_suggests_a_name():
    with pytest.raises(ScarceError, match="Did you mean 'gaussian'"):
        make_noise("gausian", 0.1)


def test_margin_is_positive_exactly_when_misclassified():
    logits = np.array([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0]])
    assert margin(logits, 0).tolist() == [-1.0, 3.0]


def test_problem_agrees_with_the_exact_answer():
    # mean of 16 pixels of 0.45 + 0.2 u is N(0.45, 0.05^2) before clipping (clip is inactive
    # at +-4.5 sigma): P(mean > 0.5) = P(Z > 1).
    from scipy.stats import norm

    problem = perturbation_problem(_model(), np.full(16, 0.45), 0, GaussianNoise(0.2))
    mc = MonteCarlo(n_samples=200_000, batch_size=50_000).estimate(problem, seed=1)
    exact = norm.sf(1.0)
    se = math.sqrt(exact * (1 - exact) / 200_000)
    assert abs(mc.probability - exact) < 4 * se
    ss = SubsetSimulation(n_samples=2000).estimate(perturbation_problem(_model(), np.full(16, 0.3), 0, GaussianNoise(0.2)), seed=2)
    exact_ss = norm.sf(0.2 / 0.05)
    assert ss.reached_failure and abs(math.log(ss.probability / exact_ss)) < 4 * ss.cov


def test_records_every_forward_pass_and_counts_queries():
    seen = []
    problem = perturbation_problem(_model(), np.full(16, 0.45), 0, GaussianNoise(0.2),
                                   record=lambda out, failed: seen.append((out.features.shape, failed.sum())))
    result = MonteCarlo(n_samples=3000, batch_size=1000).estimate(problem, seed=0)
    assert len(seen) == 3 and seen[0][0] == (1000, 4)  # 2 features + one-hot of 2 classes
    assert sum(s[1] for s in seen) == result.n_failed


def test_bad_inputs_name_the_parameter():
    model = _model()
    with pytest.raises(ScarceError, match="image must have 16 pixels"):
        perturbation_problem(model, np.zeros(15), 0, GaussianNoise(0.1))
    with pytest.raises(ScarceError, match="label must be an integer in 0..1"):
        perturbation_problem(model, np.zeros(16), 2, GaussianNoise(0.1))
    with pytest.raises(ScarceError, match=r"\[0, 1\]"):
        perturbation_problem(model, np.full(16, 2.0), 0, GaussianNoise(0.1))
    with pytest.raises(ScarceError, match="score must be one of margin, surrogate_margin, none or a fitted ruler"):
        perturbation_problem(model, np.zeros(16), 0, GaussianNoise(0.1), score="ruler")
    with pytest.raises(ScarceError, match=r"model rejected a batch of shape \(2, 1, 28, 28\).*mat1 and mat2"):
        VisionModel(torch.nn.Linear(2, 2))  # any module is taken; the shape it refuses is named
    with pytest.raises(ScarceError, match="must be a torch.nn.Module mapping a batch to logits"):
        VisionModel(object())


def test_wrong_number_of_classes_is_caught():
    with pytest.raises(ScarceError, match=r"expected \(2, 10\)"):
        VisionModel(ThresholdClassifier(), n_classes=10, image_shape=(1, 4, 4))


def test_supcon_head_separates_and_is_deterministic():
    from scarce.encoders.supcon import HeadConfig, supcon_loss, train_projection_head

    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(0, 1, (300, 6)), rng.normal(0, 1, (60, 6)) + [2.5, 0, 0, 0, 0, 0]])
    y = np.r_[np.zeros(300), np.ones(60)]
    config = HeadConfig(hidden=16, out_dim=4, steps=200, batch_size=64)
    a = train_projection_head(X, y, config, seed=3)
    b = train_projection_head(X, y, config, seed=3)
    Za, Zb = a.transform(X), b.transform(X)
    assert np.array_equal(Za, Zb) and np.allclose(np.linalg.norm(Za, axis=1), 1.0)
    from sklearn.metrics import roc_auc_score

    direction = Za[y == 1].mean(0) - Za[y == 0].mean(0)
    assert roc_auc_score(y, Za @ direction) > 0.9
    # the loss is lower for the separated embedding than for a random one
    z = torch.nn.functional.normalize(torch.randn(40, 4), dim=1)
    labels = torch.arange(40) % 2
    aligned = torch.nn.functional.normalize(torch.stack([labels.float(), 1 - labels.float(), torch.zeros(40), torch.zeros(40)], 1), dim=1)
    assert supcon_loss(aligned, labels, 0.1) < supcon_loss(z, labels, 0.1)
    with pytest.raises(ScarceError, match="at least 2 failures"):
        train_projection_head(X, np.r_[np.zeros(359), np.ones(1)], config)


def test_store_saves_atomically_resumes_and_refuses_other_configs(tmp_path):
    store = ResultStore(tmp_path, {"a": 1})
    store.save("task-1", {"value": 1.5, "nan": float("nan")}, seed=7)
    assert store.load("task-1")["value"] == 1.5 and store.keys() == ["task-1"]
    again = ResultStore(tmp_path, {"a": 1})
    assert again.has("task-1")
    with pytest.raises(ScarceError, match="different configuration.*a"):
        ResultStore(tmp_path, {"a": 2})
    assert not [p for p in os.listdir(tmp_path / "tasks") if p.endswith(".tmp")]


def test_store_detects_corrupted_files_and_records_errors(tmp_path):
    store = ResultStore(tmp_path, {"a": 1})
    store.save("t", {"value": 1})
    path = tmp_path / "tasks" / "t.json"
    data = json.loads(path.read_text())
    data["payload"]["value"] = 2  # checksum no longer matches
    path.write_text(json.dumps(data))
    with pytest.warns(CorruptResultWarning):
        assert store.load("t") is None
    path.write_text(path.read_text()[:20])  # truncated
    with pytest.warns(CorruptResultWarning):
        assert not store.has("t")
    try:
        raise RuntimeError("boom")
    except RuntimeError as exc:
        store.save_error("t2", exc)
    assert store.errors()["t2"]["message"] == "boom" and "RuntimeError" in store.errors()["t2"]["traceback"]
    with pytest.raises(ScarceError, match="task key"):
        store.save("../x", {})


def test_store_keeps_earlier_results_when_a_write_fails(tmp_path, monkeypatch):
    store = ResultStore(tmp_path, {"a": 1})
    store.save("t", {"value": 1})

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        store.save("t", {"value": 2})
    monkeypatch.undo()
    assert store.load("t") == {"value": 1}
    assert not [p for p in os.listdir(tmp_path / "tasks") if p.endswith(".tmp")]


def test_fit_rulers_needs_enough_failures_and_seed_index_is_checked():
    from scarce.applications.vision.offline import fit_rulers
    from scarce.applications.vision.pipeline import VisionContext

    rng = np.random.default_rng(0)
    Z = rng.standard_normal((200, 4))
    failed = np.zeros(200, dtype=bool)
    failed[:5] = True
    with pytest.raises(ScarceError, match="5 failure.*min_failures=20"):
        fit_rulers(["centroid"], Z, failed)
    failed[:40] = True
    assert set(fit_rulers(["centroid", "mah_bad"], Z, failed)) == {"centroid", "mah_bad"}
    context = VisionContext(model=None, noise=None, rulers={}, seed_images=np.zeros((3, 4, 4)),
                            seed_labels=np.array([1, 2, 3]))
    assert context.seed(2)[1] == 3 and context.seed(0)[0].shape == (16,)
    for bad in (3, -1, 1.0, True):
        with pytest.raises(ScarceError, match=r"seed index must be an integer in 0..2"):
            context.seed(bad)


def test_set_overrides_are_typed_and_checked():
    from scarce.applications.vision.protocol import get_preset, parse_overrides

    out = parse_overrides(["n_eval=4", "methods.smc_samples=1e5", "classifier.epochs=2",
                           "rulers=centroid,mah_bad", "top_k=2"], "paper")
    preset = get_preset("paper", **out)
    assert (preset.n_eval, preset.methods.smc_samples, preset.rulers) == (4, 100_000, ("centroid", "mah_bad"))
    assert preset.classifier["epochs"] == 2 and preset.methods.ss_samples == 2000  # the rest kept
    with pytest.raises(ScarceError, match="Did you mean 'n_eval'"):
        parse_overrides(["n_evl=3"])
    with pytest.raises(ScarceError, match="key=value"):
        parse_overrides(["n_eval"])
    with pytest.raises(ScarceError, match=r"scale takes a value like 0.2 \(a finite number\)"):
        parse_overrides(["scale=abc"])
    with pytest.raises(ScarceError, match=r"scale takes a value like"):
        parse_overrides(["scale=nan"])  # one set of typing rules: no NaN or inf for a number
    with pytest.raises(ScarceError, match=r"takes a value like 10000 \(an integer\)"):
        parse_overrides(["methods.smc_samples=1.5"])
    with pytest.raises(ScarceError, match="given twice"):
        parse_overrides(["n_eval=3", "n_eval=4"])
    with pytest.raises(ScarceError, match="unknown ruler in rulers 'centriod'"):
        get_preset("quick", **parse_overrides(["rulers=centriod"]))


def test_device_names_are_checked():
    from scarce.applications.vision.problem import resolve_device

    assert resolve_device("cpu") == "cpu"
    assert resolve_device("AUTO") == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ScarceError, match="device must be 'cpu', 'cuda'"):
        resolve_device("gpu")
    if not torch.cuda.is_available():
        with pytest.raises(ScarceError, match="asks for CUDA"):
            resolve_device("cuda:0")


def test_vision_subset_simulation_runs_in_float32_latents_and_agrees_with_the_exact_answer():
    from scipy.stats import norm

    from scarce.applications.vision.methods import MethodSettings, run_method

    settings = MethodSettings(ss_samples=2000, max_levels=10)
    result, timing = run_method("ss_margin", _model(), np.full(16, 0.3), 0, GaussianNoise(0.2), settings, seed=3)
    assert result.info["dtype"] == "float32" and timing["forward"] > 0
    exact = norm.sf(0.2 / 0.05)
    assert result.reached_failure and abs(math.log(result.probability / exact)) < 4 * result.cov


def test_another_engine_runs_on_the_same_margin_problem_and_agrees_with_the_exact_answer():
    """run_method(estimator=...): adaptive multilevel splitting on the margin, as the vision benchmark compares."""
    from scipy.stats import norm

    from scarce import AdaptiveMultilevelSplitting
    from scarce.applications.vision.methods import MethodSettings, run_method

    engine = AdaptiveMultilevelSplitting(n_samples=200, n_killed=100, n_steps=3, n_replicas=4)
    result, timing = run_method("ss_margin", _model(), np.full(16, 0.3), 0, GaussianNoise(0.2), MethodSettings(),
                                seed=3, estimator=engine)
    assert result.method == "adaptive_multilevel_splitting" and timing["forward"] > 0
    exact = norm.sf(0.2 / 0.05)
    assert result.reached_failure and abs(math.log(result.probability / exact)) < 4 * result.cov


@pytest.mark.parametrize("kwargs, message", [
    ({"stop_factor": 0.0}, r"stop_factor must be in \(0, 1\]"),
    ({"count_seeds": "indpendent"}, "Did you mean 'independent'"),
])
def test_bad_subset_settings_fail_when_the_method_settings_are_built(kwargs, message):
    from scarce.applications.vision.methods import MethodSettings

    with pytest.raises(ValueError, match=message):
        MethodSettings(**kwargs)
