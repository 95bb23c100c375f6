"""Label-only (black-box) access: failures from the target's labels, levels from the user's surrogate."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mlxtend")

from typer.testing import CliRunner  # noqa: E402

from scarce.applications.vision.access import LabelOnlyModel, LabelOracle  # noqa: E402
from scarce.applications.vision.problem import VisionModel, perturbation_problem  # noqa: E402
from scarce.cli import app  # noqa: E402
from scarce.errors import ScarceError  # noqa: E402


def _cnn(seed):
    from scarce.applications.vision.classifier import SmallCNN

    torch.manual_seed(seed)
    return SmallCNN(4, 8, 16)


class _Stub:
    """A black box answering a fixed label for every image."""

    def __init__(self, label, as_logits=False):
        self.label, self.as_logits = label, as_logits

    def predict_labels(self, x):
        if self.as_logits:
            return torch.zeros((x.shape[0], 10))
        return torch.full((x.shape[0],), self.label, dtype=torch.int64)


def test_failure_comes_from_the_target_labels_and_the_embedding_from_the_surrogate():
    surrogate = VisionModel(_cnn(1))
    model = LabelOnlyModel(_Stub(3), surrogate)
    x = np.random.default_rng(0).random((5, 784))
    out = model.forward(x, 3)
    assert out.predicted().tolist() == [3] * 5          # the target's answers, whatever the surrogate says
    assert np.allclose(out.embedding, surrogate.forward(x, 3).embedding)
    problem = perturbation_problem(model, x[0], 7, _noise(), score="surrogate_margin")
    _, failed = problem.evaluate(np.zeros((4, 784)))
    assert failed.all()                                  # the target says 3, the seed is a 7


def _noise():
    from scarce.applications.vision.noise import make_noise

    return make_noise("gaussian", 0.2)


def test_label_oracle_gives_the_argmax_of_the_wrapped_classifier_and_no_logits():
    cnn = _cnn(2)
    x = torch.rand((6, 1, 28, 28))
    oracle = LabelOracle(cnn)
    assert not hasattr(oracle, "logits_and_features")
    assert oracle.predict_labels(x).tolist() == cnn.logits_and_features(x)[0].argmax(1).tolist()


class _NormedNet(torch.nn.Module):
    """A classifier whose answers depend on its mode: batch norm and dropout."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.hidden = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 8), torch.nn.BatchNorm1d(8),
                                          torch.nn.Dropout(0.5))
        self.out = torch.nn.Linear(8, 10)

    def logits_and_features(self, x):
        features = self.hidden(x)
        return self.out(features), features


def test_label_oracle_answers_in_eval_mode_and_gives_each_module_its_own_mode_back():
    net = _NormedNet().train()
    net.hidden[2].eval()  # a frozen batch norm inside a network in training
    with torch.no_grad():
        net.hidden[2].running_var.fill_(2.0)
    modes = [m.training for m in net.modules()]
    x = torch.rand((6, 1, 28, 28))
    answers = [LabelOracle(net).predict_labels(x).tolist() for _ in range(3)]
    assert [m.training for m in net.modules()] == modes
    assert net.hidden[2].running_var.tolist() == [2.0] * 8  # the statistics were not updated
    with torch.no_grad():
        expected = net.eval().logits_and_features(x)[0].argmax(1).tolist()
    assert answers == [expected] * 3  # dropout off: the same answer each time


_GLOBAL_NET = None
_GLOBAL_LIST: list = []
_LAZY = None


def _labels_through_a_global(x):
    return _GLOBAL_NET.logits_and_features(x)[0].argmax(1)


def _labels_in_a_comprehension(x):  # the global is read inside the comprehension's own code
    return torch.cat([_GLOBAL_NET.logits_and_features(b)[0].argmax(1) for b in x.split(7)])


def _labels_from_a_list(x):
    return _GLOBAL_LIST[0].logits_and_features(x)[0].argmax(1)


def _labels_loaded_on_first_call(x):
    global _LAZY
    if _LAZY is None:
        _LAZY = _GLOBAL_NET
    return _LAZY.logits_and_features(x)[0].argmax(1)


class _Unreadable:
    """A client object whose attributes raise (pytest's own probes of a module's names pass)."""

    def __getattr__(self, name):
        if name.startswith(("__", "pytest")):
            raise AttributeError(name)
        raise RuntimeError("not connected")


_PROXY = _Unreadable()


def _labels_beside_an_unreadable_global(x):
    _PROXY  # noqa: B018 - read, as a client object beside the model would be
    return _GLOBAL_NET.logits_and_features(x)[0].argmax(1)


def test_a_label_function_answers_through_its_models_in_eval_mode_and_gives_their_modes_back():
    """A function over a network in training mode (closure, module-level name, comprehension,
    list, bound method, partial, callable object, beside a global that raises when read): the
    network answers in eval mode, so dropout does not change the labels from call to call, and
    each module gets its own flag back."""
    import functools

    from scarce.applications.vision.access import LabelFunction, reachable_modules

    global _GLOBAL_NET
    net = _GLOBAL_NET = _NormedNet().train()
    _GLOBAL_LIST[:] = [net]
    net.hidden[2].eval()
    modes = [m.training for m in net.modules()]

    class Caller:
        def __init__(self, model):
            self.model = model

        def __call__(self, x):
            return self.model.logits_and_features(x)[0].argmax(1)

        def predict(self, x):
            return self(x)

    targets = [lambda x: net.logits_and_features(x)[0].argmax(1), _labels_through_a_global, Caller(net),
               Caller(net).__call__, Caller(net).predict, _labels_in_a_comprehension, _labels_from_a_list,
               _labels_beside_an_unreadable_global,
               functools.partial(lambda m, x: m.logits_and_features(x)[0].argmax(1), net)]
    x = torch.rand((40, 1, 28, 28))
    with torch.no_grad():
        expected = _NormedNet().eval().logits_and_features(x)[0].argmax(1).tolist()  # the same weights
    for fn in targets:
        target = LabelFunction(fn)
        assert [target.predict_labels(x).tolist() for _ in range(3)] == [expected] * 3, fn
        assert [m.training for m in net.modules()] == modes
    lazy = LabelFunction(_labels_loaded_on_first_call)  # seen from the call after the one that loads it
    assert [lazy.predict_labels(x).tolist() for _ in range(3)][1:] == [expected] * 2
    assert reachable_modules(lambda x: np.zeros(len(x), dtype=int)) == []


def test_margin_methods_are_refused_without_logits():
    from scarce.applications.vision.methods import MethodSettings, run_method

    model = LabelOnlyModel(LabelOracle(_cnn(0)), VisionModel(_cnn(1)))
    image = np.full(784, 0.5)
    for key in ("ss_margin", "amls"):
        with pytest.raises(ScarceError, match="labels only"):
            run_method(key, model, image, 3, _noise(), MethodSettings(ss_samples=100, amls_samples=100))
    with pytest.raises(ScarceError, match="surrogate_margin.*needs a label-only model"):
        run_method("ss_surrogate", VisionModel(_cnn(0)), image, 3, _noise(), MethodSettings(ss_samples=100))


@pytest.mark.parametrize("target, message", [
    (_cnn(0), "returns logits; give it as LabelOracle"),
    (_Stub(0, as_logits=True), r"one integer label per input.*logits or probabilities\? .*access='logits'"),
    (object(), "must provide predict_labels"),
])
def test_a_target_that_is_not_a_label_oracle_is_refused(target, message):
    with pytest.raises(ScarceError, match=message):
        LabelOnlyModel(target, VisionModel(_cnn(1)))


def test_a_label_oracle_given_as_a_logit_model_is_refused_with_the_way_out():
    with pytest.raises(ScarceError, match="answers with labels only.*LabelOnlyModel"):
        VisionModel(LabelOracle(_cnn(0)))


def test_cli_access_labels_runs_the_tiny_protocol_without_the_margin(tmp_path):
    import pandas as pd

    run_dir = tmp_path / "run"
    result = CliRunner().invoke(app, ["vision", "--preset", "tiny", "--executor", "serial", "--access", "labels", "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    rows = pd.read_parquet(run_dir / "report" / "rows.parquet")
    methods = set(rows[rows.stage == "eval"].method)
    assert "ss_surrogate" in methods and not {"ss_margin", "amls"} & methods
    assert any(m.startswith("scarce:") for m in methods)
    text = (run_dir / "report" / "report.md").read_text()
    assert "labels only: rulers read a surrogate network's embedding" in text
    assert "learnt from the training set and 2,000 perturbed training images labelled by the target" in text

    assert "MC RMS rel. err, same queries" in text
    # a second classifier, the surrogate, was trained and cached beside the target
    assert len(list((run_dir / "cache").glob("*.safetensors"))) >= 3  # target, surrogate, head


def test_cli_access_must_be_logits_or_labels(tmp_path):
    result = CliRunner().invoke(app, ["vision", "--preset", "tiny", "--access", "scores", "--run-dir", str(tmp_path)])
    assert result.exit_code != 0 and "access must be one of logits, labels, got 'scores'" in result.output


def test_monte_carlo_of_a_label_only_model_skips_the_surrogate_and_matches_the_full_pass():
    """Monte Carlo reads only the failure flag: the target's labels, without the surrogate's pass."""
    from scarce.applications.vision.methods import MethodSettings, run_method

    class Counting(LabelOracle):
        calls = 0

        def predict_labels(self, x):
            Counting.calls += x.shape[0]
            return super().predict_labels(x)

    surrogate = VisionModel(_cnn(1))
    model = LabelOnlyModel(Counting(_cnn(0)), surrogate)
    image = np.random.default_rng(3).random(784)
    Counting.calls = 0

    def no_surrogate_pass(*args, **kwargs):
        raise AssertionError("Monte Carlo ran the surrogate")

    surrogate.forward = no_surrogate_pass
    fast, _ = run_method("smc", model, image, 3, _noise(), MethodSettings(smc_samples=600, smc_batch=200), seed=5)
    assert Counting.calls == 600 and surrogate.timer.points == 600  # the target's queries, counted
    del surrogate.forward  # the class's method again, for the full pass
    problem = perturbation_problem(model, image, 3, _noise(), score="surrogate_margin")
    from scarce.estimators import MonteCarlo

    full = MonteCarlo(n_samples=600, batch_size=200, dtype="float32").estimate(problem, seed=5)
    assert fast.n_failed == full.n_failed and fast.probability == full.probability


class _Nearest:
    """A black box answering the index of the nearest of a few reference images."""

    def __init__(self, references):
        self.references = torch.as_tensor(references, dtype=torch.float32).reshape(len(references), -1)
        self.seen = 0

    def predict_labels(self, x):
        self.seen += x.shape[0]
        return torch.cdist(x.reshape(x.shape[0], -1), self.references).argmin(dim=1)


def _references():
    rng = np.random.default_rng(0)
    return (rng.random((4, 28, 28)) < 0.5).astype(np.float32)  # far apart: small noise keeps the nearest


def test_distillation_set_labels_every_copy_by_the_target_and_spreads_copies_over_the_images():
    from scarce.applications.vision.access import distillation_set

    images = _references()
    target = _Nearest(images)
    x, labels = distillation_set(target, images, "gaussian", 0.05, (1.0,), 1002, seed=3, batch_size=256)
    assert x.shape == (1002, 28, 28) and x.dtype == np.float32 and labels.dtype == np.int64
    assert target.seen == 1002                                  # one label query per copy
    assert np.array_equal(labels, target.predict_labels(torch.from_numpy(x)[:, None]).numpy())
    assert sorted(np.bincount(labels, minlength=4).tolist()) == [250, 250, 251, 251]  # 1002 // 4 or one more
    assert x.min() >= 0 and x.max() <= 1                        # the noise's clipping
    noise = x - images[labels]
    inside = (images[labels] == 0) & (x > 0)                    # unclipped draws of a black pixel
    assert 0.03 < noise[inside].mean() < 0.05                   # E|N(0, 0.05)| = 0.04 on the positive side


def test_distillation_set_scales_the_noise_by_the_multiples_and_repeats_with_its_seed():
    from scarce.applications.vision.access import distillation_set

    images = np.full((2, 28, 28), 0.5, dtype=np.float32)
    target = _Stub(1)
    x1, _ = distillation_set(target, images, "gaussian", 0.02, (1.0,), 400, seed=7)
    x3, _ = distillation_set(target, images, "gaussian", 0.02, (3.0,), 400, seed=7)
    mixed, _ = distillation_set(target, images, "gaussian", 0.02, (1.0, 3.0), 400, seed=7)
    again, _ = distillation_set(target, images, "gaussian", 0.02, (1.0, 3.0), 400, seed=7)
    spread = [float(np.std(a - 0.5)) for a in (x1, x3, mixed)]
    assert spread[0] == pytest.approx(0.02, rel=0.02) and spread[1] == pytest.approx(0.06, rel=0.02)
    assert spread[2] == pytest.approx(np.sqrt((0.02 ** 2 + 0.06 ** 2) / 2), rel=0.05)
    assert np.array_equal(mixed, again)
    assert not np.array_equal(mixed, distillation_set(target, images, "gaussian", 0.02, (1.0, 3.0), 400, seed=8)[0])


@pytest.mark.parametrize("noise", ["gaussian", "uniform"])
def test_distillation_set_with_more_scales_than_copies_draws_each_copy_once(noise):
    from scarce.applications.vision.access import distillation_set

    x, labels = distillation_set(_Stub(4), np.full((5, 28, 28), 0.5), noise, 0.2, (1, 1.5, 2, 2.5, 3, 4, 5), 3, seed=1)
    assert x.shape == (3, 28, 28) and labels.tolist() == [4, 4, 4]
    assert np.all(np.abs(x - 0.5).reshape(3, -1).max(axis=1) > 0)  # every copy perturbed


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"multiples": ()}, "multiples must be a non-empty list of positive finite numbers \\(factors of the noise scale\\), got \\(\\)"),
    ({"multiples": ("a",)}, "multiples must be a non-empty list"),
    ({"multiples": 1.0}, "multiples must be a non-empty list"),
    ({"batch_size": 0}, "batch_size"),
    ({"scale": -0.2}, "noise='gaussian', scale=-0.2 at multiples \\[1.0\\]"),
    ({"images": np.full((2, 28, 28), 255.0)}, r"images must be finite pixels in the noise's range \[0, 1\]; got values in \[255"),
    ({"images": np.full((2, 28, 28), np.nan)}, r"images must be finite pixels.*got non-finite values"),
    ({"multiples": (1.0, -2.0)}, "multiples must be a non-empty list of positive finite numbers"),
    ({"multiples": (float("nan"),)}, "multiples must be a non-empty list of positive finite numbers"),
    ({"n_queries": 0}, "n_queries"),
    ({"images": np.zeros((3, 784))}, r"images must have shape \(m, height, width\) with m >= 1, got \(3, 784\)"),
    ({"target": _Stub(0, as_logits=True)}, r"one integer label per input, shape \(10,\); it returned float32"),
])
def test_distillation_set_refuses_bad_input_by_name(kwargs, message):
    from scarce.applications.vision.access import distillation_set

    args = {"target": _Stub(0), "images": np.zeros((2, 28, 28)), "noise": "gaussian", "scale": 0.2,
            "multiples": (1.0,), "n_queries": 10} | kwargs
    with pytest.raises(ScarceError, match=message):
        distillation_set(**args)


def test_the_surrogate_trains_on_the_training_set_and_the_targets_answers(monkeypatch, tmp_path):
    """Label-only access: the surrogate's training data hold the target's labels for perturbed copies."""
    from types import SimpleNamespace

    from scarce.applications.vision import classifier as classifier_module
    from scarce.applications.vision import pipeline
    from scarce.applications.vision.classifier import ClassifierConfig
    from scarce.applications.vision.protocol import get_preset

    seen = {}

    def fake_train(images, labels, config, cache_dir=None):
        seen.update(images=np.asarray(images), labels=np.asarray(labels), seed=config.seed)
        return _cnn(0)

    monkeypatch.setattr(classifier_module, "train_classifier", fake_train)
    images = _references()
    splits = SimpleNamespace(train_images=images, train_labels=np.array([5, 5, 5, 5]),
                             test_images=images, test_labels=np.zeros(4, dtype=np.int64))
    target = _cnn(2)
    preset = get_preset("tiny", access="labels", surrogate_queries=30, surrogate_scales=[1.0, 2.0])
    pipeline._surrogate(preset, splits, ClassifierConfig(seed=4), target, tmp_path, lambda *_: None)
    assert seen["images"].shape == (34, 28, 28) and seen["seed"] == 5
    assert seen["labels"][:4].tolist() == [5, 5, 5, 5]                     # the training labels
    answered = LabelOracle(target).predict_labels(torch.from_numpy(seen["images"][4:])[:, None]).numpy()
    assert np.array_equal(seen["labels"][4:], answered)                     # then the target's answers
    pipeline._surrogate(replace_queries(preset, 0), splits, ClassifierConfig(seed=4), target, tmp_path, lambda *_: None)
    assert seen["images"].shape == (4, 28, 28)                              # 0: the training set alone


def test_a_resumed_run_loads_the_surrogate_without_asking_the_target_again(monkeypatch, tmp_path):
    """The pointer file names the surrogate by what its data follow from; a changed network file, or a
    pointer redirected to another network, is not trusted."""
    import json
    from types import SimpleNamespace

    from scarce.applications.vision import access, pipeline
    from scarce.applications.vision.classifier import ClassifierConfig, load_classifier, save_classifier
    from scarce.applications.vision.protocol import get_preset
    from scarce.errors import ScarceWarning

    calls = []
    real = access.distillation_set
    monkeypatch.setattr(access, "distillation_set", lambda *a, **k: calls.append(1) or real(*a, **k))
    images = _references()
    splits = SimpleNamespace(train_images=images, train_labels=np.array([5, 5, 5, 5]),
                             test_images=images, test_labels=np.zeros(4, dtype=np.int64))
    target = _cnn(2)
    target.fingerprint = "0" * 64
    config = ClassifierConfig(conv1_channels=2, conv2_channels=2, hidden=4, epochs=1, min_steps=2, seed=4)
    preset = get_preset("tiny", access="labels", surrogate_queries=30, surrogate_scales=[1.0, 2.0])

    def build(p=preset):
        return pipeline._surrogate(p, splits, config, target, tmp_path, lambda *_: None)

    def weights(model):
        return [t.clone() for t in model.state_dict().values()]

    def same(a, b):
        return all(torch.equal(x, y) for x, y in zip(a, b))

    first = weights(build())
    (pointer,) = tmp_path.glob("surrogate-*.json")
    second = build()                                              # resumed: no label query, the same network
    assert len(calls) == 1 and second.from_cache and same(weights(second), first)
    build(replace_queries(preset, 20))                            # other distillation settings: their own
    assert len(calls) == 2 and len(list(tmp_path.glob("surrogate-*.json"))) == 2

    entry = json.loads(pointer.read_text())                       # a changed network file
    network = tmp_path / f"{entry['fingerprint']}.safetensors"
    changed = load_classifier(network)
    with torch.no_grad():
        next(changed.parameters()).add_(1.0)
    save_classifier(changed, network, changed.training_info)
    with pytest.warns(ScarceWarning, match="does not hold the bytes"):
        rebuilt = build()
    assert len(calls) == 3 and same(weights(rebuilt), first)     # relabelled and retrained, not reloaded

    other = next(q for q in tmp_path.glob("surrogate-*.json") if q != pointer)
    elsewhere = json.loads(other.read_text())                     # redirected to the 20-query network
    redirected = json.loads(pointer.read_text()) | {k: elsewhere[k] for k in ("fingerprint", "sha256")}
    pointer.write_text(json.dumps(redirected))
    with pytest.warns(ScarceWarning, match="training-set size"):
        build()
    assert len(calls) == 4 and (tmp_path / f"{elsewhere['fingerprint']}.safetensors").is_file()

    target.fingerprint = None                                     # no fingerprint: nothing reused
    build()
    assert len(calls) == 5


def replace_queries(preset, n):
    from dataclasses import replace

    return replace(preset, surrogate_queries=n)


@pytest.mark.parametrize(("setting", "message"), [
    (["surrogate_scales=1,-1"], "surrogate_scales must be a non-empty list of positive finite numbers \\(factors of the noise scale\\)"),
    (["surrogate_scales=nan"], "surrogate_scales takes a value like 1.0,1.5,2.0,2.5"),
    (["surrogate_queries=-1"], "surrogate_queries"),
    (["surrogate_queries=1e9", "access=labels"], "surrogate training data \\(surrogate_queries\\).*allow_large"),
])
def test_surrogate_settings_are_checked_by_name(setting, message):
    from scarce.applications.vision.protocol import get_preset, parse_overrides

    with pytest.raises(ScarceError, match=message):
        get_preset("quick", **parse_overrides(setting))


@pytest.mark.parametrize("scales", [[], [float("nan")], [0.0], "2", [1, "x"]])
def test_surrogate_scales_given_in_python_are_checked_too(scales):
    from scarce.applications.vision.protocol import get_preset

    with pytest.raises(ScarceError, match="surrogate_scales must be a non-empty list of positive finite numbers \\(factors of the noise scale\\)"):
        get_preset("quick", surrogate_scales=scales)


def test_surrogate_settings_belong_to_a_label_only_runs_configuration_alone():
    """A logits run trains no surrogate: its configuration (and fingerprint) does not hold those settings."""
    from scarce.applications.vision.limits import estimate_resources
    from scarce.applications.vision.protocol import get_preset

    logits, labels = get_preset("quick"), get_preset("quick", access="labels")
    assert "surrogate_queries" not in logits.config() and "surrogate_scales" not in logits.config()
    assert labels.config()["surrogate_queries"] == 300_000 and labels.config()["surrogate_scales"] == [1, 1.5, 2, 2.5]
    assert get_preset("quick", surrogate_queries=5).config() == logits.config()
    part = "surrogate training data (surrogate_queries)"
    assert estimate_resources(logits)["query_parts"][part] == 0
    assert estimate_resources(labels)["query_parts"][part] == 300_000
    assert estimate_resources(labels)["memory_parts"][part] == (300_000 + 3500) * 784 * 20
    # a label-only run made before the surrogate learnt from the target: the same configuration
    before = get_preset("quick", access="labels", surrogate_queries=0, surrogate_scales=[3.0])
    assert "surrogate_queries" not in before.config() and "surrogate_scales" not in before.config()
