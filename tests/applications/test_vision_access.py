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
    (_Stub(0, as_logits=True), r"one integer label per image.*logits\? use access='logits'"),
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
    result = CliRunner().invoke(app, ["vision", "--preset", "tiny", "--access", "labels", "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    rows = pd.read_parquet(run_dir / "report" / "rows.parquet")
    methods = set(rows[rows.stage == "eval"].method)
    assert "ss_surrogate" in methods and not {"ss_margin", "amls"} & methods
    assert any(m.startswith("scarce:") for m in methods)
    text = (run_dir / "report" / "report.md").read_text()
    assert "labels only: rulers read a surrogate network's embedding" in text
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
