"""``scarce vision estimate`` on a model factory written here, with weights saved by safetensors."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from typer.testing import CliRunner

from scarce.cli import app
from scarce.results import EstimateResult

runner = CliRunner()

FACTORY = '''
import torch


def build():
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(4 * 8 * 8, 5))


def wider():
    return torch.nn.Sequential(torch.nn.Conv2d(3, 6, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(6 * 8 * 8, 5))


NOT_A_MODEL = 3
'''


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A user's folder: their package with a factory, the weights and two input files."""
    (tmp_path / "userpkg").mkdir()
    (tmp_path / "userpkg" / "__init__.py").write_text("")
    (tmp_path / "userpkg" / "models.py").write_text(FACTORY)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the command adds the working directory; undo it after
    for name in [n for n in sys.modules if n.startswith("userpkg")]:
        monkeypatch.delitem(sys.modules, name)
    rng = np.random.default_rng(0)
    namespace: dict = {}
    exec(FACTORY, namespace)
    model = namespace["build"]()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.from_numpy(rng.normal(0, 0.3, p.shape)).float())
    save_file(model.state_dict(), str(tmp_path / "model.safetensors"))
    torch.save(model.state_dict(), tmp_path / "model.pt")
    x0 = rng.uniform(size=(3, 8, 8))
    np.save(tmp_path / "x.npy", x0)
    from PIL import Image

    Image.fromarray((np.moveaxis(x0, 0, -1) * 255).astype(np.uint8)).save(tmp_path / "x.png")
    return tmp_path


def _run(*args: str):
    return runner.invoke(app, ["vision", "estimate", "--model", "userpkg.models:build", "--device", "cpu",
                               "--n-samples", "300", *args])


def test_tables_then_json_with_weights_and_a_npy_input(project):
    shown = _run("--weights", "model.safetensors", "--input", "x.npy", "--scale", "0.3")
    assert shown.exit_code == 0, shown.output
    assert "P_f estimate" in shown.output and "95% interval" in shown.output
    written = _run("--weights", "model.safetensors", "--input", "x.npy", "--scale", "0.3", "--json")
    assert written.exit_code == 0, written.output
    result = EstimateResult.from_dict(json.loads(written.output))
    assert result.n_queries >= 300 and result.problem.startswith("gaussian(0.3) label")


def test_a_png_input_reads_as_channels_first_values_in_the_unit_interval(project):
    from_png = _run("--input", "x.png", "--weights", "model.safetensors", "--json", "--noise", "uniform", "--scale", "0.2")
    assert from_png.exit_code == 0, from_png.output
    assert json.loads(from_png.output)["problem"].startswith("uniform(0.2)")


def test_the_label_target_and_clip_options_reach_the_problem(project):
    out = _run("--input", "x.npy", "--label", "2", "--target", "4", "--clip", "none", "--json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["problem"].startswith("gaussian(0.2) label 2 targeted(4)")


@pytest.mark.parametrize("args, message", [
    (("--weights", "model.pt"), "looks like a pickle checkpoint (.pt)"),
    (("--weights", "x.npy"), "is not a readable safetensors file"),
    (("--weights", "missing.safetensors"), "is not a file"),
    (("--input", "x.txt"), "is not a file"),
    (("--shape", "3,9,9"), "--shape (3, 9, 9) holds 243 values; the input has 192"),
    (("--shape", "3,x"), "--shape must be comma-separated ints"),
    (("--clip", "1"), "clip must be a (low, high) pair"),
    (("--label", "7"), "label must be a class index in 0..4"),
])
def test_bad_files_and_options_name_what_is_wrong(project, args, message):
    defaults = {"--input": "x.npy"}
    given = dict(zip(args[::2], args[1::2]))
    flat = [item for pair in {**defaults, **given}.items() for item in pair]
    out = _run(*flat)
    assert out.exit_code == 2, out.output
    assert message in " ".join(out.output.split())


def test_weights_of_another_architecture_name_the_mismatching_keys(project):
    out = runner.invoke(app, ["vision", "estimate", "--model", "userpkg.models:wider", "--weights", "model.safetensors",
                              "--input", "x.npy", "--device", "cpu"])
    assert out.exit_code == 2
    text = " ".join(out.output.split())
    assert "does not match the model" in text and "0.weight (4, 3, 3, 3) (model: (6, 3, 3, 3))" in text


@pytest.mark.parametrize("factory, message", [
    ("userpkg.models", "must be 'package.module:factory'"),
    ("userpkg.nowhere:build", "cannot import 'userpkg.nowhere'"),
    ("userpkg.models:buld", "has no attribute 'buld'; did you mean build?"),
    ("userpkg.models:NOT_A_MODEL", "must name a torch.nn.Module or a function returning one; it gave int"),
])
def test_a_bad_factory_path_is_named(project, factory, message):
    out = runner.invoke(app, ["vision", "estimate", "--model", factory, "--input", "x.npy", "--device", "cpu"])
    assert out.exit_code == 2
    assert message in " ".join(out.output.split())


def test_a_factory_that_raises_and_a_model_that_fails_mid_run_are_named(project):
    (project / "userpkg" / "broken.py").write_text(
        "import torch\n"
        "def needs_args(width):\n    return torch.nn.Linear(width, 2)\n"
        "class NaNAfterProbe(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        out = torch.zeros(x.shape[0], 3)\n"
        "        return out if x.shape[0] <= 2 else out + float('nan')\n"
        "def nan_model():\n    return NaNAfterProbe()\n")
    raised = runner.invoke(app, ["vision", "estimate", "--model", "userpkg.broken:needs_args", "--input", "x.npy"])
    assert raised.exit_code == 2 and "calling the factory with no arguments raised TypeError" in raised.output
    nan = runner.invoke(app, ["vision", "estimate", "--model", "userpkg.broken:nan_model", "--input", "x.npy",
                              "--device", "cpu", "--n-samples", "100"])
    assert nan.exit_code == 2, nan.output
    assert "error:" in nan.output and "Traceback" not in nan.output


def test_a_sixteen_bit_png_reads_to_its_true_values(project):
    from PIL import Image

    from scarce.applications.vision.loading import read_input

    Image.fromarray(np.full((8, 8), 32768, dtype=np.uint16)).save(project / "deep.png")
    assert abs(read_input(project / "deep.png").max() - 0.5) < 1e-4 and read_input(project / "deep.png").shape == (1, 8, 8)


LABELS = '''
import torch

from userpkg.models import build

_deployed = build()


def answers(x):
    return _deployed(x).argmax(1)


def logits(x):
    return _deployed(x)


NOT_CALLABLE = 3


class _Weird:
    @property
    def boom(self):
        raise RuntimeError("not today")


weird = _Weird()
'''


def test_a_label_only_classifier_named_by_labels_from_gives_the_logit_runs_result(project):
    """The deployed model is the factory's own network with the same weights, seen through its labels:
    with --model as its own surrogate, the run is the logit run."""
    (project / "userpkg" / "deployed.py").write_text(LABELS + 'from safetensors.torch import load_file\n'
                                                     '_deployed.load_state_dict(load_file("model.safetensors"))\n')
    common = ["--model", "userpkg.models:build", "--weights", "model.safetensors", "--input", "x.npy",
              "--device", "cpu", "--scale", "0.3", "--n-samples", "300", "--json"]
    logit = runner.invoke(app, ["vision", "estimate", *common])
    label = runner.invoke(app, ["vision", "estimate", *common, "--labels-from", "userpkg.deployed:answers"])
    assert logit.exit_code == 0 and label.exit_code == 0, label.output
    first, second = (json.loads(out.stdout) for out in (logit, label))
    assert second["probability"] == first["probability"] and second["n_queries"] == first["n_queries"]


@pytest.mark.parametrize("path, message", [
    ("userpkg.deployed", "--labels-from must be 'package.module:function'"),
    ("userpkg.deployed:answer", "has no attribute 'answer'; did you mean answers?"),
    ("userpkg.deployed:NOT_CALLABLE", "must name a function from a batch to labels"),
    ("userpkg.deployed:logits", "of shape (2, 5) (logits or probabilities?"),
    ("userpkg.deployed:weird.boom", "reading 'boom' of userpkg.deployed.weird raised RuntimeError: not today"),
    ("userpkg.deployed:NOT_CALLABLE.real.x", "userpkg.deployed.NOT_CALLABLE.real has no attribute 'x'"),
    (".deployed:answers", "must be an absolute import path"),
])
def test_a_bad_labels_from_path_is_named(project, path, message):
    (project / "userpkg" / "deployed.py").write_text(LABELS)
    out = runner.invoke(app, ["vision", "estimate", "--model", "userpkg.models:build", "--input", "x.npy",
                              "--device", "cpu", "--labels-from", path])
    assert out.exit_code == 2, out.output
    assert message in " ".join(out.output.split())
