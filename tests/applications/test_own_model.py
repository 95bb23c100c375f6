"""scarce.vision on models that are not the demo's CNN: any nn.Module, any input shape, each event."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import scarce
import scarce.vision as sv
from scarce.errors import ScarceError
from user_models import X_CNN, X_MLP, cnn, mlp, mlp_surrogate  # noqa: E402


def test_the_one_call_on_a_sequential_mlp_reaches_the_failure_and_is_reproducible():
    model = mlp()
    first = sv.failure_probability(model, X_MLP, scale=0.25, n_samples=400, seed=3, device="cpu")
    again = sv.failure_probability(model, X_MLP, scale=0.25, n_samples=400, seed=3, device="cpu")
    assert first.reached_failure and 0 < first.probability < 0.1
    assert first.to_dict() | {"wall_time": 0} == again.to_dict() | {"wall_time": 0}
    assert "P = " in str(first) and "queries" in str(first)


def test_the_label_defaults_to_the_models_prediction_and_a_given_label_is_used():
    model = cnn()
    predicted = int(model(torch.from_numpy(X_CNN[None]).float()).argmax())
    default = sv.failure_probability(model, X_CNN, scale=0.15, n_samples=300, device="cpu")
    given = sv.failure_probability(model, X_CNN, predicted, scale=0.15, n_samples=300, device="cpu")
    assert default.probability == given.probability
    other = sv.failure_probability(model, X_CNN, (predicted + 1) % 6, scale=0.15, n_samples=300, device="cpu")
    assert other.probability > 0.5  # the model does not decide for that label: most inputs "fail"


def test_each_failure_event_kind_on_a_cnn_with_colour_inputs():
    model = cnn()
    label = int(model(torch.from_numpy(X_CNN[None]).float()).argmax())
    target = (label + 1) % 6
    common = dict(scale=0.15, n_samples=300, device="cpu", seed=0)
    missed = sv.failure_probability(model, X_CNN, **common)
    targeted = sv.failure_probability(model, X_CNN, failure=sv.Targeted(target), **common)
    assert targeted.probability <= missed.probability + 3 * missed.cov * missed.probability
    # the same targeted event written as a user function of the logits, with its own margin
    own = sv.LogitsEvent(lambda logits: logits.argmax(1) == target,
                         score=lambda logits: logits[:, target] - np.delete(logits, target, 1).max(1))
    as_user = sv.failure_probability(model, X_CNN, failure=own, **common)
    assert as_user.probability == targeted.probability
    with pytest.raises(ScarceError, match="give the event a score"):
        sv.failure_probability(model, X_CNN, failure=lambda logits: logits[:, 0] > 5, **common)


def test_a_user_transform_with_its_own_latent_dimension():
    model = mlp()

    widths = set()

    def brightness(x0, u):  # one latent value shifts every pixel
        widths.add(u.shape[1])
        assert x0.shape == (3, 4, 4)  # the seed in its own shape
        return np.clip(x0[None] + 0.3 * u[:, :, None, None], 0.0, 1.0)

    noise = sv.CustomNoise(brightness, shape=X_MLP.shape, latent_dim=1)
    result = sv.failure_probability(model, X_MLP, noise=noise, estimator=scarce.SubsetSimulation(n_samples=300),
                                    device="cpu")
    assert widths == {1} and result.reached_failure
    exact_mc = sv.failure_probability(model, X_MLP, noise=noise, device="cpu",
                                      estimator=scarce.MonteCarlo(n_samples=20_000), seed=1)
    tolerance = 4 * np.hypot(result.cov * result.probability, exact_mc.cov * exact_mc.probability)
    assert abs(result.probability - exact_mc.probability) <= tolerance


def test_features_from_a_named_layer_feed_a_conditioned_ruler_fitted_on_other_inputs():
    model = cnn()
    train = np.random.default_rng(7).uniform(0.2, 0.8, size=(6, 3, 16, 16))
    data = sv.harvest(model, train, scale=0.15, features="block2", n_samples=200, device="cpu", seed=0)
    assert data.embeddings.shape[1] == 32 and 0 < data.n_failures < len(data.failed)
    assert set(np.unique(data.groups)) <= set(range(6)) and len(data.per_input) == 6
    ruler = data.fit_ruler("fisher", by="class", fallback="pooled")
    result = sv.failure_probability(model, X_CNN, scale=0.15, score=ruler, features="block2", n_samples=300,
                                    device="cpu")
    margin = sv.failure_probability(model, X_CNN, scale=0.15, n_samples=300, device="cpu")
    assert result.reached_failure and result.problem.endswith("[FisherRuler]")
    # same event, another score: the two estimates agree within their error bars
    assert abs(np.log(result.probability / margin.probability)) <= 4 * np.hypot(result.cov, margin.cov)


def test_the_boundary_ruler_is_fitted_with_the_labels_of_the_harvested_inputs():
    from scarce.rulers import BoundaryRuler

    model = cnn()
    train = np.random.default_rng(7).uniform(0.2, 0.8, size=(6, 3, 16, 16))
    data = sv.harvest(model, train, scale=0.15, features="block2", n_samples=200, device="cpu", seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scarce.rulers.RulerFitWarning)  # groups of a few rows go to the pooled fit
        ruler = data.fit_ruler("boundary", min_failures=1, min_normals=1)
    assert isinstance(ruler, BoundaryRuler)
    assert set(ruler.groups_) | set(ruler.fallback_groups_) == {int(g) for g in np.unique(data.groups)}
    # the failures of each input's harvest score above its normal rows (within the input's label)
    assert ruler.separation_auc_ > 0.8
    result = sv.failure_probability(model, X_CNN, scale=0.15, score=ruler, features="block2", n_samples=300,
                                    device="cpu")
    assert result.reached_failure and result.problem.endswith("[BoundaryRuler]")


def test_a_hugging_face_style_output_with_logits_is_read():
    class Wrapped(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = mlp()

        def forward(self, x):  # an output object with a .logits attribute
            return type("Output", (), {"logits": self.inner(x)})()

    result = sv.failure_probability(Wrapped(), X_MLP, scale=0.25, n_samples=300, device="cpu", seed=3)
    plain = sv.failure_probability(mlp(), X_MLP, scale=0.25, n_samples=300, device="cpu", seed=3)
    assert result.probability == plain.probability


@pytest.mark.parametrize("bad, message", [
    (dict(label=4), r"label must be a class index in 0..3 of this 4-class model"),
    (dict(features="4"), r"features='4' names no layer of Sequential; its layers are: '0', '1', '2', '3'"),
    (dict(failure=sv.Targeted(9)), r"target must be a class index in 0..3"),
    (dict(clip=(0.5, 0.6)), r"image must hold finite values in the noise's range \[0.5, 0.6\]"),
    (dict(clip=(1, 0)), r"low < high"),
    (dict(noise="salt"), r"noise"),
    (dict(failure=3), r"failure must be 'misclassification'"),
    (dict(scale=-0.1), r"scale must .*got -0.1"),
    (dict(estimator=object()), r"estimator must have estimate\(problem, seed=...\)"),
])
def test_bad_arguments_name_the_parameter_and_what_is_allowed(bad, message):
    with pytest.raises(ScarceError, match=message):
        sv.failure_probability(mlp(), X_MLP, **{"scale": 0.2, "n_samples": 100, "device": "cpu", **bad})


def test_a_model_that_is_not_a_classifier_or_rejects_the_shape_is_named():
    with pytest.raises(ScarceError, match=r"2-D batch of logits .* returned shape \(2, 4, 1\)"):
        sv.failure_probability(torch.nn.Sequential(mlp(), torch.nn.Unflatten(1, (4, 1))), X_MLP, device="cpu")
    with pytest.raises(ScarceError, match=r"rejected a batch of shape \(2, 5, 5\) \(inputs of shape \(5, 5\)"):
        sv.failure_probability(mlp(), np.full((5, 5), 0.5), device="cpu")
    with pytest.raises(ScarceError, match="must be a torch.nn.Module"):
        sv.failure_probability(lambda x: x, X_MLP, device="cpu")


def test_a_noise_function_of_the_wrong_shape_is_named_when_the_engine_calls_it():
    with pytest.raises(scarce.EvaluationError, match=r"returned shape \(100, 3\) for 100 latent draws; expected "
                                                     r"\(100, 3, 4, 4\) or \(100, 48\)"):
        sv.failure_probability(mlp(), X_MLP, noise=lambda x0, u: u[:, :3], n_samples=100, device="cpu")


def test_a_misspelt_layer_gets_the_closest_names():
    with pytest.raises(ScarceError, match=r"features='blok2' names no layer of SmallColourCNN; did you mean 'block2'"):
        sv.failure_probability(cnn(), X_CNN, features="blok2", device="cpu")


def test_a_ruler_fitted_on_another_layer_is_refused_by_its_layer_or_its_width():
    from scarce.rulers import make_ruler

    model = cnn()
    data = sv.harvest(model, np.random.default_rng(7).uniform(0.2, 0.8, size=(3, 3, 16, 16)), scale=0.15,
                      features="block2", n_samples=200, device="cpu")
    ruler = data.fit_ruler("centroid")
    with pytest.raises(ScarceError, match="fitted on the features of layer 'block2'.*features='head' names another"):
        sv.failure_probability(model, X_CNN, scale=0.15, score=ruler, features="head", device="cpu")
    by_hand = make_ruler("centroid").fit(data.embeddings, data.failed.astype(int))  # knows no layer: its width
    with pytest.raises(ScarceError, match="fitted on 32-dimensional embeddings, and features='head' gives 6"):
        sv.failure_probability(model, X_CNN, scale=0.15, score=by_hand, features="head", device="cpu")
    common = dict(scale=0.15, score=ruler, n_samples=200, device="cpu", seed=1)
    left_out = sv.failure_probability(model, X_CNN, **common)  # the ruler's own layer
    assert left_out.probability == sv.failure_probability(model, X_CNN, features="block2", **common).probability


def test_the_users_module_keeps_no_hook():
    model = cnn()
    sv.failure_probability(model, X_CNN, scale=0.15, features="block1", n_samples=200, device="cpu")
    assert all(not m._forward_hooks for m in model.modules())


def test_a_model_in_training_mode_keeps_its_batch_norm_statistics():
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 6), torch.nn.BatchNorm1d(6),
                                torch.nn.Linear(6, 3))
    with torch.no_grad():
        model[2].running_var.fill_(2.0)
    sv.failure_probability(model, X_MLP, scale=0.2, n_samples=200, device="cpu")
    assert model[2].running_var.tolist() == [2.0] * 6 and int(model[2].num_batches_tracked) == 0
    assert model.training and all(m.training for m in model)  # queried in eval mode, handed back as it came


def test_each_submodule_gets_back_its_own_mode_after_a_run_and_a_harvest():
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 6), torch.nn.Dropout(0.3),
                                torch.nn.BatchNorm1d(6), torch.nn.Linear(6, 3))
    model.train()
    model[3].eval()  # a frozen batch-norm inside a model in training
    modes = [m.training for m in model.modules()]
    sv.failure_probability(model, X_MLP, scale=0.2, n_samples=200, device="cpu")
    assert [m.training for m in model.modules()] == modes
    sv.harvest(model, np.stack([X_MLP, X_MLP]), scale=0.2, n_samples=100, max_queries=1000, device="cpu")
    assert [m.training for m in model.modules()] == modes
    wrapped = sv.vision_model(model, X_MLP.shape, device="cpu")  # the wrapper, then a run through it
    assert [m.training for m in model.modules()] == modes
    sv.failure_probability(wrapped, X_MLP, scale=0.2, n_samples=200, device="cpu")
    assert [m.training for m in model.modules()] == modes
    model.eval()
    sv.failure_probability(model, X_MLP, scale=0.2, n_samples=200, device="cpu")
    assert not any(m.training for m in model.modules())


def test_a_float64_model_gets_float64_inputs():
    plain = sv.failure_probability(mlp(), X_MLP, scale=0.25, n_samples=300, device="cpu", seed=3)
    double = sv.failure_probability(mlp().double(), X_MLP, scale=0.25, n_samples=300, device="cpu", seed=3)
    assert abs(np.log(double.probability / plain.probability)) <= 4 * np.hypot(plain.cov, double.cov)


def test_a_float64_model_reads_its_inputs_unrounded():
    seen = []

    class Recording(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(4, 2).double()

        def forward(self, x):
            seen.append(x.clone())
            return self.linear(x)

    model = sv.vision_model(Recording(), (4,), device="cpu")
    x = np.array([[0.1, 0.2, 1 / 3, 0.7]])  # not representable in float32
    model.forward(x, 0)
    assert seen[-1].dtype == torch.float64 and seen[-1].numpy().tolist() == x.tolist()


def test_a_layer_whose_first_axis_is_not_the_batch_is_refused():
    class Recurrent(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gru, self.head = torch.nn.GRU(4, 5), torch.nn.Linear(5, 4)

        def forward(self, x):
            out, _ = self.gru(x.reshape(x.shape[0], 12, 4).transpose(0, 1))  # time first
            return self.head(out[-1])

    with pytest.raises(ScarceError, match=r"layer 'gru' returned \(12, 2, 5\) for a batch of 2 inputs"):
        sv.failure_probability(Recurrent(), X_MLP, features="gru", device="cpu")


def test_harvest_reads_one_seed_sequence_twice_the_same_and_refuses_fractional_labels():
    inputs = np.random.default_rng(3).uniform(size=(2, 3, 4, 4))
    seed = np.random.SeedSequence(11)
    first = sv.harvest(mlp(), inputs, scale=0.25, n_samples=100, device="cpu", seed=seed)
    second = sv.harvest(mlp(), inputs, scale=0.25, n_samples=100, device="cpu", seed=seed)
    assert np.array_equal(first.embeddings, second.embeddings)
    for bad in ([1.5, 0], [True, False], ["a", "b"], [0]):
        with pytest.raises(ScarceError, match="labels must give one integer class per input"):
            sv.harvest(mlp(), inputs, bad, scale=0.25, n_samples=100, device="cpu")


def test_clip_given_as_a_string_is_refused():
    with pytest.raises(ScarceError, match="clip must be a \\(low, high\\) pair of numbers or None, got '05'"):
        sv.failure_probability(mlp(), X_MLP, clip="05", device="cpu")


def test_a_noise_object_of_the_users_needs_only_apply():
    class Shift:  # no name, scale or value range
        latent_dim = 1

        def apply(self, x0, u):
            return x0[None, :] + 0.5 * u

    result = sv.failure_probability(mlp(), X_MLP, noise=Shift(), n_samples=200, device="cpu")
    assert result.problem.startswith("Shift label") and result.n_queries > 0


def test_a_model_that_edits_its_input_in_place_leaves_the_callers_arrays_alone():
    class Centring(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(4, 2).double()

        def forward(self, x):
            x.sub_(0.5)  # in place, as some preprocessing layers do
            return self.linear(x)

    x0 = np.array([0.1, 0.2, 0.3, 0.4])
    kept = x0.copy()
    sv.failure_probability(Centring(), x0, scale=0.2, n_samples=100, device="cpu")
    assert np.array_equal(x0, kept)


def test_the_margin_keeps_the_precision_of_the_logits():
    from scarce.applications.vision.problem import margin

    logits = np.array([[1.0, 2.5, 0.5], [3.0, 1.0, 2.0]], dtype=np.float32)
    assert margin(logits, 0).dtype == np.float32
    assert margin(logits, 0).tolist() == (np.delete(logits, 0, axis=1).max(axis=1) - logits[:, 0]).tolist()


class _Answers:
    """A deployed classifier seen through ``predict_labels`` only (numpy answers)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model, self.calls = model, 0

    def predict_labels(self, x: torch.Tensor) -> np.ndarray:
        self.calls += len(x)
        with torch.inference_mode():
            return self.model(x).argmax(1).numpy()


def test_a_label_only_target_with_the_model_as_its_surrogate_gives_the_logit_runs_result():
    model = cnn()
    common = dict(scale=0.15, n_samples=300, device="cpu", seed=1)
    logits = sv.failure_probability(model, X_CNN, **common)
    answers = _Answers(model)
    labels = sv.failure_probability(model, X_CNN, target=answers, score="surrogate_margin", **common)
    # the surrogate's margin is the target's own here, so the runs are the same runs
    assert labels.probability == logits.probability and labels.cov == logits.cov
    assert labels.n_queries == logits.n_queries
    # every input the target labelled is counted: the run's queries and the setup's
    assert answers.calls == labels.n_queries + labels.info["setup_queries"]
    as_function = sv.failure_probability(model, X_CNN, target=lambda x: model(x).argmax(1),
                                         score="surrogate_margin", **common)
    assert as_function.probability == logits.probability


def test_a_label_only_target_is_refused_with_the_margin_a_logit_model_or_a_non_callable():
    model = cnn()
    common = dict(scale=0.15, n_samples=300, device="cpu")
    with pytest.raises(ScarceError, match="score='margin' reads the logits"):
        sv.failure_probability(model, X_CNN, target=_Answers(model), **common)
    with pytest.raises(ScarceError, match=r"of shape \(2, 6\) \(logits or probabilities\? .*model= in scarce.vision"):
        sv.failure_probability(model, X_CNN, target=model, score="surrogate_margin", **common)
    with pytest.raises(ScarceError, match="gives its logits: pass it as model="):
        sv.failure_probability(model, X_CNN, target=sv.vision_model(model, X_CNN.shape, device="cpu"),
                               score="surrogate_margin", **common)
    with pytest.raises(ScarceError, match="target must be callable"):
        sv.failure_probability(model, X_CNN, target="api", score="surrogate_margin", **common)
    with pytest.raises(ScarceError, match=r"the label 9, outside 0\.\.5"):
        sv.failure_probability(model, X_CNN, target=lambda x: np.full(len(x), 9), score="surrogate_margin",
                               **common)


def test_a_label_only_harvest_flags_rows_by_the_targets_decisions():
    model = cnn()
    train = np.random.default_rng(7).uniform(0.2, 0.8, size=(3, 3, 16, 16))
    common = dict(scale=0.15, features="block2", n_samples=200, device="cpu", seed=0)
    logits = sv.harvest(model, train, **common)
    same = sv.harvest(model, train, target=_Answers(model), **common)
    assert np.array_equal(same.embeddings, logits.embeddings) and np.array_equal(same.failed, logits.failed)
    # a target that always answers class 2: the labels default to it, and no row fails
    constant = sv.harvest(model, train, target=lambda x: np.full(len(x), 2), **common)
    assert constant.n_failures == 0 and set(constant.groups) == {2}
    assert constant.embeddings.shape[1] == logits.embeddings.shape[1]


def test_monte_carlo_through_a_label_only_target_counts_the_targets_failures_not_the_surrogates():
    x = X_MLP
    target, surrogate = mlp(), mlp_surrogate(relative=0.3)
    common = dict(scale=0.6, device="cpu", seed=4, estimator=scarce.MonteCarlo(n_samples=4000))
    direct = sv.failure_probability(target, x, **common)
    through = sv.failure_probability(surrogate, x, target=lambda b: target(b).argmax(1), score="none",
                                     label=int(target(torch.from_numpy(x[None]).float()).argmax()), **common)
    own = sv.failure_probability(surrogate, x, **common)
    assert through.n_failed == direct.n_failed and own.n_failed != direct.n_failed


@pytest.mark.parametrize("failure", ["misclassification", "targeted"])
def test_monte_carlo_through_a_label_only_target_runs_no_surrogate_pass(failure):
    """The flags of a built-in event are the target's decisions: Monte Carlo needs its labels alone."""
    x = X_MLP
    target, surrogate = mlp(), mlp_surrogate(relative=0.3)
    label = int(target(torch.from_numpy(x[None]).float()).argmax())
    rows = []
    surrogate.register_forward_hook(lambda module, inputs, output: rows.append(len(output)))
    common = dict(scale=0.6, device="cpu", seed=4, estimator=scarce.MonteCarlo(n_samples=4000), label=label)
    for event in (["misclassification"] if failure == "misclassification" else [sv.Targeted(c) for c in range(4)
                                                                                if c != label]):
        rows.clear()
        through = sv.failure_probability(surrogate, x, target=lambda b: target(b).argmax(1), score="none",
                                         failure=event, **common)
        direct = sv.failure_probability(target, x, failure=event, **common)
        assert through.n_failed == direct.n_failed > 0
        assert sum(rows) <= 4 < through.n_queries  # the set-up's probes only, never a Monte Carlo batch


class _ConfidentMistake(sv.Misclassification):
    """A user's event built on the built-in one whose flag reads the logits: misclassified with a clear gap."""

    def failed(self, logits, label, predicted=None):
        top2 = np.sort(logits, axis=1)[:, -2:]
        return super().failed(logits, label, predicted) & (top2[:, 1] - top2[:, 0] > 0.5)


def test_a_users_event_that_reads_the_logits_keeps_the_full_pass_through_a_label_only_target():
    x = X_MLP
    target, surrogate = mlp(), mlp_surrogate(relative=0.3)
    label = int(target(torch.from_numpy(x[None]).float()).argmax())
    assert not _ConfidentMistake.reads_decisions_only and sv.Misclassification.reads_decisions_only
    common = dict(scale=0.6, device="cpu", seed=4, estimator=scarce.MonteCarlo(n_samples=4000), label=label)
    through = sv.failure_probability(surrogate, x, target=lambda b: target(b).argmax(1), score="none",
                                     failure=_ConfidentMistake(), **common)
    plain = sv.failure_probability(surrogate, x, target=lambda b: target(b).argmax(1), score="none", **common)
    assert 0 < through.n_failed < plain.n_failed  # the gap, read from the surrogate's logits, removes some


@pytest.mark.parametrize("target, message", [
    (lambda x: 0, "returned a single value"),
    (lambda x: np.zeros((len(x), 1), dtype=np.int64) + 9, "the label 9, outside 0..5: the surrogate network has 6"),
    (type("Grad", (), {"predict_labels": lambda self, x: torch.nn.Linear(768, 6)(x.flatten(1))})(),
     "logits or probabilities"),
    (type("Broken", (), {"predict_labels": 3})(), "predict_labels must be callable"),
    (lambda x: torch.nn.Linear(5, 2)(x),
     r"the target raised RuntimeError on a batch of shape \(2, 3, 16, 16\), float32"),
])
def test_a_target_that_answers_wrongly_is_named_with_what_it_returned(target, message):
    with pytest.raises(ScarceError, match=message):
        sv.failure_probability(cnn(), X_CNN, target=target, score="surrogate_margin", scale=0.15, n_samples=300,
                               device="cpu")


def test_a_column_of_labels_is_read_as_labels():
    model = cnn()
    common = dict(scale=0.15, n_samples=300, device="cpu", seed=1, score="surrogate_margin")
    flat = sv.failure_probability(model, X_CNN, target=lambda x: model(x).argmax(1), **common)
    column = sv.failure_probability(model, X_CNN, target=lambda x: model(x).argmax(1, keepdim=True), **common)
    assert column.probability == flat.probability


def test_a_label_loaded_as_a_one_element_integer_array_or_tensor_is_that_class():
    model = mlp()
    common = dict(scale=0.25, n_samples=200, seed=3, device="cpu")
    plain = sv.failure_probability(model, X_MLP, 1, **common).probability
    for label in (np.array(1), np.array([1]), torch.tensor(1), np.int64(1)):
        assert sv.failure_probability(model, X_MLP, label, **common).probability == plain
    for label in (1.0, torch.tensor(1.0), np.array(True), torch.tensor([1, 1])):
        with pytest.raises(ScarceError, match="label must be a class index"):
            sv.failure_probability(model, X_MLP, label, **common)


def test_an_input_given_with_a_batch_axis_of_one_is_told_to_drop_it():
    with pytest.raises(ScarceError, match=r"carry a batch axis of its own: pass one input without it \(x0\[0\]\)"):
        sv.failure_probability(torch.nn.Linear(48, 4), X_MLP.reshape(1, 48), scale=0.25, n_samples=200, device="cpu")
