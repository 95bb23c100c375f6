"""The MNIST CNN: learning, bit-for-bit determinism, the safetensors cache, and bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

from scarce.applications.vision import classifier
from scarce.applications.vision.classifier import (
    ClassifierConfig,
    SmallCNN,
    accuracy,
    check_classifier,
    load_classifier,
    predict_features,
    predict_logits,
    save_classifier,
    train_classifier,
    weights_digest,
)
from scarce.datasets import EMBEDDED_SOURCE, load_mnist
from scarce.errors import ScarceError, ScarceWarning

TINY = ClassifierConfig(conv1_channels=4, conv2_channels=8, hidden=16, epochs=1, min_steps=0, batch_size=32)


@pytest.fixture(scope="module")
def digits():
    splits = load_mnist(EMBEDDED_SOURCE)   # shuffled splits: any prefix mixes the classes
    return splits.train_images[:500], splits.train_labels[:500], splits.test_images[:300], splits.test_labels[:300]


def _weights(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_trains_well_above_chance(digits):
    x, y, x_test, y_test = digits
    config = ClassifierConfig(conv1_channels=16, conv2_channels=32, hidden=64, epochs=3, min_steps=0, batch_size=32,
                              learning_rate=3e-3)
    model = train_classifier(x, y, config)   # 500 digits, 48 steps: about 85% (seeds 0-2), chance is 10%
    assert accuracy(model, x_test, y_test) > 0.6
    assert not model.training and model.from_cache is False
    info = model.training_info
    assert info["n_train"] == 500 and info["epochs_run"] == 3 and info["steps"] == 3 * 16
    assert info["config"] == config.to_dict() and 0.6 < info["train_accuracy"] <= 1.0


def test_training_records_the_weights_digest_and_the_processor(digits, tmp_path):
    x, y = digits[0][:96], digits[1][:96]
    model = train_classifier(x, y, TINY, cache_dir=tmp_path)
    info = model.training_info
    assert info["weights_sha256"] == weights_digest(model) and len(info["weights_sha256"]) == 64
    assert isinstance(info["processor"], str) and info["processor"]
    cached = train_classifier(x, y, TINY, cache_dir=tmp_path)  # from the cache: the same weights, the same digest
    assert cached.from_cache and weights_digest(cached) == info["weights_sha256"] == cached.training_info["weights_sha256"]
    with torch.no_grad():
        cached.fc2.bias[0] += 1e-7  # one weight's last bits: another model
    assert weights_digest(cached) != info["weights_sha256"]


def test_same_config_gives_identical_weights_and_leaves_global_state_alone(digits):
    x, y = digits[0][:96], digits[1][:96]
    rng_state = torch.get_rng_state()
    assert not torch.are_deterministic_algorithms_enabled()
    a, b = train_classifier(x, y, TINY), train_classifier(x, y, TINY)
    assert torch.equal(torch.get_rng_state(), rng_state)
    assert not torch.are_deterministic_algorithms_enabled()
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    c = train_classifier(x, y, ClassifierConfig(**{**TINY.to_dict(), "seed": 1}))
    assert not torch.equal(wa["fc2.weight"], c.state_dict()["fc2.weight"])


def test_deterministic_mode_is_restored_when_it_was_on(digits):
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        train_classifier(digits[0][:32], digits[1][:32], TINY)
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.is_deterministic_algorithms_warn_only_enabled()
    finally:
        torch.use_deterministic_algorithms(False)


def test_min_steps_adds_epochs_on_small_data(digits):
    config = ClassifierConfig(**{**TINY.to_dict(), "epochs": 1, "min_steps": 7})
    model = train_classifier(digits[0][:64], digits[1][:64], config)   # 2 steps per epoch -> 4 epochs
    assert model.training_info["epochs_run"] == 4 and model.training_info["steps"] == 8


def test_cache_round_trip_loads_without_training(digits, tmp_path, monkeypatch):
    x, y = digits[0][:64], digits[1][:64]
    first = train_classifier(x, y, TINY, cache_dir=tmp_path)
    fingerprint = TINY.fingerprint(x, y)
    assert first.fingerprint == fingerprint and not first.from_cache
    weights, sidecar = tmp_path / f"{fingerprint}.safetensors", tmp_path / f"{fingerprint}.json"
    assert weights.is_file() and sidecar.is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([weights.name, sidecar.name])  # no temp files
    info = json.loads(sidecar.read_text())
    assert info["config"] == TINY.to_dict() and info["fingerprint"] == fingerprint and "train_accuracy" in info

    def no_training(*args, **kwargs):
        raise AssertionError("the cached model should have been loaded")

    def no_pickle(*args, **kwargs):
        raise AssertionError("torch.load must not be used")

    monkeypatch.setattr(classifier, "_fit", no_training)
    monkeypatch.setattr(torch, "load", no_pickle)
    second = train_classifier(x, y, TINY, cache_dir=tmp_path)
    assert second.from_cache and second.fingerprint == fingerprint
    assert second.training_info["train_accuracy"] == info["train_accuracy"]
    assert all(torch.equal(v, second.state_dict()[k]) for k, v in first.state_dict().items())
    np.testing.assert_array_equal(predict_logits(first, x), predict_logits(second, x))


def test_corrupt_cache_entry_is_retrained_with_a_warning(digits, tmp_path):
    x, y = digits[0][:32], digits[1][:32]
    path = tmp_path / f"{TINY.fingerprint(x, y)}.safetensors"
    path.write_bytes(b"not a safetensors file")
    with pytest.warns(ScarceWarning, match="ignoring the cached classifier"):
        model = train_classifier(x, y, TINY, cache_dir=tmp_path)
    assert not model.from_cache
    assert load_classifier(path).architecture() == model.architecture()


def test_fingerprint_tracks_config_and_data(digits):
    x, y = digits[0][:50], digits[1][:50]
    base = TINY.fingerprint(x, y)
    assert base == TINY.fingerprint(x.reshape(50, 784), y) and len(base) == 64
    assert ClassifierConfig(**{**TINY.to_dict(), "learning_rate": 2e-3}).fingerprint(x, y) != base
    y2 = y.copy()
    y2[0] = (y2[0] + 1) % 10
    assert TINY.fingerprint(x, y2) != base
    x2 = x.copy()
    x2[0, 5, 5] = 0.5 if x2[0, 5, 5] != 0.5 else 0.25
    assert TINY.fingerprint(x2, y) != base


def test_save_and_load(tmp_path):
    model = SmallCNN(6, 10, 12, seed=3)
    path = save_classifier(model, tmp_path / "sub" / "m.safetensors", {"note": "x"})
    back = load_classifier(path)
    assert back.architecture() == {"conv1_channels": 6, "conv2_channels": 10, "hidden": 12, "n_classes": 10}
    assert all(torch.equal(v, back.state_dict()[k]) for k, v in model.state_dict().items())
    assert back.training_info == {"note": "x"} and not back.training

    from safetensors.torch import save_file
    other = tmp_path / "other.safetensors"
    save_file({"w": torch.zeros(2)}, str(other))
    with pytest.raises(ScarceError, match="not a SmallCNN checkpoint"):
        load_classifier(other)


# --------------------------------------------------------------------------- the module

def test_forward_accepts_three_layouts_and_features_have_hidden_width():
    model = SmallCNN(seed=0).eval()
    x = torch.rand(3, 28, 28, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        out = model(x)
        assert out.shape == (3, 10) and model.n_classes == 10
        assert torch.equal(out, model(x.reshape(3, 784))) and torch.equal(out, model(x.unsqueeze(1)))
        assert model.features(x).shape == (3, 128)
    with pytest.raises(ScarceError, match=r"x must have shape .*got \(3, 1, 14, 56\)"):
        model(x.reshape(3, 1, 14, 56))


def test_seeded_initialisation_is_private():
    state = torch.get_rng_state()
    a, b, c = SmallCNN(seed=0), SmallCNN(seed=0), SmallCNN(seed=1)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(a.conv1.weight, b.conv1.weight) and not torch.equal(a.conv1.weight, c.conv1.weight)
    bound = 1 / np.sqrt(9)   # kaiming_uniform(a=sqrt(5)) on a 1x3x3 fan-in: U(-1/3, 1/3)
    assert a.conv1.weight.abs().max() <= bound and a.conv1.weight.abs().max() > 0.9 * bound


def test_prediction_helpers_batch_and_restore_mode(digits):
    model = SmallCNN(seed=0).train()
    x, y = digits[2][:50], digits[3][:50]
    full, batched = predict_logits(model, x), predict_logits(model, x, batch_size=7)
    assert full.shape == (50, 10) and full.dtype == np.float32 and model.training
    np.testing.assert_allclose(full, batched, rtol=1e-5, atol=1e-6)
    assert accuracy(model, x, y) == np.mean(full.argmax(1) == y)
    assert predict_features(model, torch.from_numpy(x), batch_size=16).shape == (50, 128)
    with pytest.raises(ScarceError, match="batch_size"):
        predict_logits(model, x, batch_size=0)
    with pytest.raises(ScarceError, match="features"):
        predict_features(nn.Sequential(nn.Flatten(), nn.Linear(784, 10)), x)


@pytest.mark.parametrize(("images", "labels", "match"), [
    (np.zeros((4, 28, 28)), np.array([0, 1, 2, 10]), r"labels holds label value\(s\) \[10\]; allowed: 0..9"),
    (np.zeros((4, 28, 28)), np.array([0, 1, 2, -1]), r"labels holds label value\(s\) \[-1\]"),
    (np.zeros((4, 28, 28)), np.array([0.0, 1, 2, 3]), "labels must hold integer class labels"),
    (np.zeros((4, 28, 28)), np.array([0, 1, 2]), "1-D array of 4 labels"),
    (np.zeros((4, 27, 28)), np.array([0, 1, 2, 3]), r"images must have shape .*got \(4, 27, 28\)"),
    (np.zeros((0, 28, 28)), np.array([], dtype=int), "at least one image"),
    (np.full((4, 28, 28), np.nan), np.array([0, 1, 2, 3]), "images contains 3136 non-finite"),
    (np.full((4, 28, 28), 255.0), np.array([0, 1, 2, 3]), r"images has pixels in \[255, 255\].*divide"),
    (np.array([["a"] * 784]), np.array([0]), "images must be a numeric array"),
])
def test_bad_training_input(images, labels, match):
    with pytest.raises(ScarceError, match=match):
        train_classifier(images, labels, TINY)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"epochs": 0}, "epochs must be an integer >= 1, got 0"),
    ({"batch_size": True}, "batch_size must be an integer"),
    ({"hidden": 2.5}, "hidden must be an integer"),
    ({"learning_rate": 0.0}, "learning_rate must be a finite number > 0, got 0.0"),
    ({"weight_decay": -1e-3}, "weight_decay must be a finite number >= 0"),
    ({"min_steps": -1}, "min_steps must be an integer >= 0"),
    ({"seed": -1}, "seed must be an integer >= 0"),
])
def test_bad_config(kwargs, match):
    with pytest.raises(ScarceError, match=match):
        ClassifierConfig(**kwargs)


def test_config_dict_round_trip_and_wrong_type():
    assert ClassifierConfig.from_dict(TINY.to_dict()) == TINY
    with pytest.raises(ScarceError, match="unknown ClassifierConfig field"):
        ClassifierConfig.from_dict({"epoch": 3})
    with pytest.raises(ScarceError, match="config must be a ClassifierConfig"):
        train_classifier(np.zeros((2, 28, 28)), np.array([0, 1]), {"epochs": 1})


# --------------------------------------------------------------------------- check_classifier

class _Raises(nn.Module):
    def forward(self, x):
        raise RuntimeError("boom")


class _NaN(nn.Module):
    def forward(self, x):
        return torch.full((x.shape[0], 10), float("nan"))


def test_check_classifier():
    check_classifier(SmallCNN(seed=0))
    seven = nn.Sequential(nn.Flatten(), nn.Linear(784, 7))
    with pytest.raises(ScarceError, match=r"logits of shape \(n, 10\) \(n_classes=10\); got shape \(2, 7\)"):
        check_classifier(seven)
    check_classifier(seven, n_classes=7)
    with pytest.raises(ScarceError, match="model raised RuntimeError \\(boom\\)"):
        check_classifier(_Raises())
    with pytest.raises(ScarceError, match="finite"):
        check_classifier(_NaN())
    with pytest.raises(ScarceError, match="model must be a torch.nn.Module, got str"):
        check_classifier("cnn")
    with pytest.raises(ScarceError, match="n_classes must be an integer >= 2"):
        check_classifier(SmallCNN(seed=0), n_classes=1)


def test_inference_pooling_is_bit_identical_to_max_pool2d():
    import torch.nn.functional as F

    from scarce.applications.vision.classifier import _max_pool_2x2

    x = torch.randn(7, 5, 28, 28, generator=torch.Generator().manual_seed(0))
    x[0, 0, 0, :2] = torch.tensor([float("nan"), 1.0])  # NaN propagates as in max_pool2d
    for t in (x, torch.relu(x), x[..., :14, :14]):
        assert torch.equal(_max_pool_2x2(t).nan_to_num(-9.0), F.max_pool2d(t, 2).nan_to_num(-9.0))
    odd = torch.randn(2, 3, 7, 7)
    assert torch.equal(_max_pool_2x2(odd), F.max_pool2d(odd, 2))
