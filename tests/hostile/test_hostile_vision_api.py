"""Hostile input to the "own model" vision API (scarce.vision): one regression test per finding of the audit.

Every bad input is refused with a ScarceError naming the parameter, the value and what is allowed (or an
EvaluationError when the model or a user function misbehaves inside the run), before any expensive work;
valid inputs keep their results. The models are the small ones of ``tests/user_models.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import scarce
import scarce.vision as sv
from scarce.applications.vision.api import Harvest
from scarce.applications.vision.loading import read_input
from scarce.errors import EvaluationError, ScarceError
from user_models import X_MLP, mlp  # noqa: E402

COMMON = dict(scale=0.25, n_samples=200, device="cpu")


class Hooked(torch.nn.Module):
    """``mlp()`` with ``edit(logits, x)`` applied to its output, and a count of the inputs it was asked about."""

    def __init__(self, edit=lambda logits, x: logits) -> None:
        super().__init__()
        self.inner, self.edit, self.seen = mlp(), edit, 0

    def forward(self, x):
        self.seen += x.shape[0]
        return self.edit(self.inner(x), x)


def nan_where(mask_of_x):
    """An edit that makes every logit NaN for the inputs ``mask_of_x(x)`` selects."""
    return lambda logits, x: torch.where(mask_of_x(x)[:, None], torch.full_like(logits, float("nan")), logits)


def estimate(model=None, x0=None, **options):
    return sv.failure_probability(mlp() if model is None else model, X_MLP.copy() if x0 is None else x0,
                                  **{**COMMON, **options})


# ------------------------------------------------------------------ 1, 5: the label pass on x0 alone

def test_nan_logits_on_x0_do_not_pick_label_zero():
    with pytest.raises(ScarceError, match=r"x0 alone \(its prediction on x0 is the label\).*logits must be finite"):
        estimate(Hooked(nan_where(lambda x: torch.full((len(x),), len(x) == 1))))


@pytest.mark.parametrize("edit, message", [
    (lambda logits, x: logits[5] if len(x) == 1 else logits, r"raised IndexError on x0 alone, a batch of shape "
                                                             r"\(1, 3, 4, 4\)"),
    (lambda logits, x: logits.to("meta"), r"logits on the meta device.*not loaded \(meta device\)"),
])
def test_a_model_that_fails_on_the_label_pass_is_named(edit, message):
    with pytest.raises(ScarceError, match=message):
        estimate(Hooked(edit))


# ------------------------------------------------------------------ 2: non-finite outputs whatever the score

def test_nan_logits_are_refused_under_monte_carlo_without_a_margin():
    bright = nan_where(lambda x: x.flatten(1)[:, 0] > 0.9)
    with pytest.raises(EvaluationError, match=r"logits must be finite numbers.*NaN or inf"):
        estimate(Hooked(bright), score="none", scale=0.4, estimator=scarce.MonteCarlo(n_samples=2000))
    finite = estimate(Hooked(), score="none", scale=0.4, estimator=scarce.MonteCarlo(n_samples=2000))
    reference = estimate(mlp(), score="none", scale=0.4, estimator=scarce.MonteCarlo(n_samples=2000))
    assert finite.probability == reference.probability > 0


def test_nan_logits_are_refused_under_a_ruler_score():
    class FirstColumn:  # a fitted ruler's interface: larger is closer to failure
        def score_samples(self, z):
            return z[:, 0]

    with pytest.raises(EvaluationError, match="logits must be finite numbers"):
        estimate(Hooked(nan_where(lambda x: x.flatten(1)[:, 0] > 0.9)), score=FirstColumn(), scale=0.4)


def test_inputs_beyond_float32_are_refused_not_overflowed_to_inf():
    with pytest.raises(EvaluationError, match=r"perturbed inputs must be finite numbers in the model's precision "
                                              r"\(float32\).*clip=\(low, high\)"):
        estimate(clip=None, scale=1e38)


# ------------------------------------------------------------------ 3, 4: nothing shared with user code

def test_a_noise_function_that_edits_x0_edits_neither_the_callers_array_nor_the_seed():
    x0, kept, seeds = X_MLP.copy(), X_MLP.copy(), []

    def darken(seed, u):
        seeds.append(seed.copy())
        seed += 1e-3  # in place
        return np.clip(seed[None] + 0.25 * u.reshape(len(u), 3, 4, 4), 0, 1)

    estimate(x0=x0, noise=darken)
    assert np.array_equal(x0, kept)
    assert len(seeds) > 1 and all(np.array_equal(seed, kept) for seed in seeds)  # every call saw the seed


def test_user_functions_that_edit_their_arrays_leave_the_run_unchanged():
    def flag(logits):
        decided = logits.argmax(1) != 1
        logits[:] = 0.0  # in place, before the score reads them
        return decided

    def score(logits):
        return np.delete(logits, 1, 1).max(1) - logits[:, 1]

    edited = estimate(failure=sv.LogitsEvent(flag, score=score), label=1)
    clean = estimate(failure=sv.LogitsEvent(lambda logits: logits.argmax(1) != 1, score=score), label=1)
    assert edited.probability == clean.probability > 0

    def shifted(x0, u):
        out = np.clip(x0[None] + 0.25 * u.reshape(len(u), 3, 4, 4), 0, 1)
        u[:] = 0.0  # in place: the engine's states must not change
        return out

    def plain(x0, u):
        return np.clip(x0[None] + 0.25 * u.reshape(len(u), 3, 4, 4), 0, 1)

    custom = {"shape": (3, 4, 4), "latent_dim": 48}
    assert estimate(noise=sv.CustomNoise(shifted, **custom)).probability == \
        estimate(noise=sv.CustomNoise(plain, **custom)).probability > 0


# ------------------------------------------------------------------ 6: x0 that numpy cannot read as real numbers

@pytest.mark.parametrize("x0", ["x.png", [[0.1, 0.2], [0.3]], {"a": 1}, torch.empty(3, 4, 4, device="meta"),
                                X_MLP + 5j], ids=["str", "ragged", "dict", "meta", "complex"])
def test_an_x0_that_is_not_real_numbers_is_refused(x0):
    model = Hooked()
    with pytest.raises(ScarceError, match=r"x0 must be one input in the shape the model takes"):
        estimate(model, x0)
    assert model.seen == 0


def test_a_bfloat16_x0_is_read_as_its_values():
    x0 = torch.from_numpy(X_MLP).bfloat16()
    assert estimate(x0=x0).probability == estimate(x0=x0.float().numpy()).probability


def test_a_complex_npy_input_is_refused_by_the_cli_reader(tmp_path):
    np.save(tmp_path / "x.npy", X_MLP + 1j)
    with pytest.raises(ScarceError, match=r"holds complex128 values; the input must be an array of real numbers"):
        read_input(tmp_path / "x.npy")
    np.save(tmp_path / "real.npy", X_MLP)
    assert np.array_equal(read_input(tmp_path / "real.npy"), X_MLP)


def test_a_nan_in_the_input_file_is_blamed_on_the_input_not_on_the_noise(tmp_path):
    """A NaN in ``--input`` was reported as non-finite perturbed inputs, with advice on the noise."""
    x = np.array(X_MLP, dtype=float)
    x.ravel()[3] = np.nan
    np.save(tmp_path / "x.npy", x)
    with pytest.raises(ScarceError, match=r"--input .* holds 1 value\(s\) that are not finite .* at flat index 3"):
        read_input(tmp_path / "x.npy")


# ------------------------------------------------------------------ 7, 8, 9: failure, estimator, callback

@pytest.mark.parametrize("options, message", [
    (dict(failure=np.array([1, 2])), r"failure must be 'misclassification'.*got array\(\[1, 2\]\) \(ndarray\)"),
    (dict(estimator=scarce.MonteCarlo), r"estimator must be an estimator instance.*the class MonteCarlo itself"),
    (dict(callback=3), r"callback must be None or callable .*got 3 \(int\)"),
])
def test_a_bad_failure_estimator_or_callback_is_refused_before_any_model_pass(options, message):
    model = Hooked()
    with pytest.raises(ScarceError, match=message):
        estimate(model, **options)
    assert model.seen == 0


def test_a_monte_carlo_run_beyond_its_query_bound_is_refused():
    with pytest.raises(ScarceError, match=r"n_samples=10000000000000"):
        estimate(estimator=scarce.MonteCarlo(n_samples=10**13))


# ------------------------------------------------------------------ 10: a label-only target's answers

@pytest.mark.parametrize("answer", [lambda b: [[1]] * (len(b) - 1) + [[1, 2]],
                                    lambda b: torch.zeros(len(b), dtype=torch.long, device="meta")],
                         ids=["ragged", "meta"])
def test_a_target_answer_numpy_cannot_read_is_refused(answer):
    with pytest.raises(ScarceError, match=r"the target must return one integer label per input \(2 inputs\); it "
                                          r"returned a .* that cannot be read as an array"):
        estimate(target=answer, score="surrogate_margin")


# ------------------------------------------------------------------ 11: a noise object's attributes

def _noise_object(**attributes):
    return type("Odd", (), {**attributes, "apply": attributes.get(
        "apply", lambda self, x0, u: np.clip(x0[None] + 0.25 * u, 0, 1))})()


@pytest.mark.parametrize("attributes, message", [
    (dict(latent_dim="a"), r"the latent_dim of the noise Odd must be an integer in \[1, 100000000\], got 'a'"),
    (dict(latent_dim=1.5), r"the latent_dim of the noise Odd must be an integer .*got 1.5"),
    (dict(low="a"), r"the noise's low must be a real number .*got 'a' \(str\) on Odd"),
    (dict(low=np.nan, high=np.nan), r"the noise's low must be a real number .*got nan"),
    (dict(scale="big"), r"the noise's scale must be a real number \(NaN: none\), got 'big' \(str\)"),
    (dict(apply=3), r"noise must have a callable apply\(x0, u\)"),
])
def test_a_noise_object_with_odd_attributes_is_refused_before_any_model_pass(attributes, message):
    model = Hooked()
    with pytest.raises(ScarceError, match=message):
        estimate(model, noise=_noise_object(**attributes))
    assert model.seen == 0


def test_a_noise_object_with_good_attributes_still_runs():
    result = estimate(noise=_noise_object(latent_dim=np.int64(48), low=0, high=np.float32(1), scale=0.25))
    assert result.problem.startswith("Odd(0.25) label") and result.n_queries > 0


# ------------------------------------------------------------------ 12, 13: the model and its input shape

def test_a_model_with_meta_device_weights_is_refused():
    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 4))
    with pytest.raises(ScarceError, match=r"weights are not loaded \(meta device\): '1.weight'"):
        estimate(model)


@pytest.mark.parametrize("shape, message", [
    ("abc", r"input_shape must be a non-empty sequence of positive integers.*got 'abc' \(str\)"),
    (None, r"input_shape must be .*got None"),
    ((-3, 4, 4), r"input_shape must be .*got \(-3, 4, 4\)"),
    ((3.5, 4, 4), r"input_shape must be .*got \(3.5, 4, 4\)"),
    ((), r"input_shape must be .*got \(\)"),
    ((10**6, 10**6), r"input_shape=\(1000000, 1000000\) holds 1,000,000,000,000 values per input, above the "
                     r"100,000,000"),
])
def test_vision_model_checks_the_input_shape_before_allocating(shape, message):
    with pytest.raises(ScarceError, match=message):
        sv.vision_model(mlp(), shape, device="cpu")


def test_vision_model_takes_a_valid_shape_and_layer_names_refuses_a_non_module():
    assert sv.vision_model(mlp(), np.array([3, 4, 4]), device="cpu").image_shape == (3, 4, 4)
    assert sv.vision_model(mlp(), torch.Size([3, 4, 4]), device="cpu").n_classes == 4
    assert sv.layer_names(mlp()) == ["0", "1", "2", "3"]
    with pytest.raises(ScarceError, match=r"layer_names takes a torch.nn.Module .*got int"):
        sv.layer_names(3)


# ------------------------------------------------------------------ 14: CustomNoise's shape and output

def _brightness(x0, u):
    return np.clip(x0[None] + 0.3 * u[:, :1, None, None], 0, 1)


def test_a_custom_noise_of_another_shape_than_x0_is_refused():
    model = Hooked()
    with pytest.raises(ScarceError, match=r"the noise's shape \(4, 4, 3\) must equal x0.shape \(3, 4, 4\)"):
        estimate(model, noise=sv.CustomNoise(_brightness, shape=(4, 4, 3), latent_dim=1))
    assert model.seen == 0
    assert estimate(noise=sv.CustomNoise(_brightness, shape=[3, 4, 4], latent_dim=1)).n_queries > 0


@pytest.mark.parametrize("shape", ["abc", None, (3, 0, 4), (3, True), ()])
def test_a_custom_noise_shape_that_is_no_shape_is_refused_when_made(shape):
    with pytest.raises(ScarceError, match=r"shape must be the shape of x0, a non-empty tuple of positive integers"):
        sv.CustomNoise(_brightness, shape=shape, latent_dim=1)


@pytest.mark.parametrize("output, message", [
    (lambda x0, u: 0.5, r"the noise function returned shape \(\) for 200 latent draws; expected \(200, 3, 4, 4\)"),
    (lambda x0, u: None, r"the noise function's output must be .* of real numbers; got dtype object"),
    (lambda x0, u: _brightness(x0, u) + 5j, r"the noise function's output must be .* of real numbers; got dtype "
                                            r"complex128"),
    (lambda x0, u: _brightness(x0, u).reshape(len(u), 4, 4, 3), r"returned shape \(200, 4, 4, 3\)"),
])
def test_a_custom_noise_function_returning_no_inputs_is_named(output, message):
    with pytest.raises(EvaluationError, match=message):
        estimate(noise=sv.CustomNoise(output, shape=(3, 4, 4), latent_dim=1))


# ------------------------------------------------------------------ 15: Harvest flags and clip

@pytest.mark.parametrize("failed", [np.full(4, np.nan), np.array([0, 2, 0, 2]), np.zeros(3, bool)])
def test_a_harvest_with_flags_that_are_not_one_0_or_1_per_row_is_refused(failed):
    with pytest.raises(ScarceError, match=r"failed must "):
        Harvest(np.zeros((4, 2)), failed, np.zeros(4, int), np.zeros(4, int))


def test_a_harvest_with_0_1_flags_keeps_them_as_bools():
    harvest = Harvest(np.zeros((4, 2)), np.array([0.0, 1.0, 0.0, 1.0]), np.zeros(4, int), np.zeros(4, int))
    assert harvest.failed.dtype == bool and harvest.n_failures == 2


@pytest.mark.parametrize("clip", [(False, True), ("0", "1"), {0, 1}, (0, 1, 2), (np.bool_(False), 1.0)])
def test_clip_must_be_a_pair_of_numbers(clip):
    model = Hooked()
    with pytest.raises(ScarceError, match=r"clip must be a \(low, high\) pair of numbers or None"):
        estimate(model, clip=clip)
    assert model.seen == 0


def test_clip_as_a_list_or_array_of_two_numbers_is_the_tuple():
    reference = estimate(clip=(0, 1)).probability
    assert estimate(clip=[0.0, 1.0]).probability == estimate(clip=np.array([0, 1])).probability == reference
