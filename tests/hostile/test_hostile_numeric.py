"""Regression tests for hostile numeric inputs (issue 18, item 8): one test per reproducer.

Each input must either work with the meaning the documentation gives it, or raise a
:class:`scarce.errors.ScarceError` / :class:`scarce.errors.EvaluationError` naming the parameter,
the value and what is allowed; never a foreign exception or a silently wrong number.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest

from scarce.checks import check_in_interval, check_positive_int, check_shape
from scarce.errors import EvaluationError, ScarceError
from scarce.problem import RareEventProblem
from scarce.problems import linear
from scarce.rulers import RulerFitWarning, make_ruler
from scarce.seeding import as_generator
from scarce.selection import compute_metric, compute_metrics, knn_kl_divergence, shared_grid_densities


def _labelled(seed: int = 0, n: int = 40, d: int = 3):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, d))
    y = np.arange(n) % 2
    Z[y == 1] += 2.0
    return Z, y


# -- validators -----------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [np.int64(500), np.int16(500), np.uint8(200), 500])
def test_check_positive_int_returns_a_python_int(value):
    out = check_positive_int("n_samples", value)
    assert type(out) is int and out == int(value)


@pytest.mark.parametrize("value", [np.float16(0.5), np.float32(0.25), np.int8(1), 0.75])
def test_check_in_interval_returns_a_python_float(value):
    out = check_in_interval("stop_factor", value, 0.0, 1.0)
    assert type(out) is float and out == float(value)


@pytest.mark.parametrize("value", [(3, 4), [3, 4], np.array([3, 4]), (np.int64(3), np.int16(4)), range(3, 5)])
def test_check_shape_returns_python_ints(value):
    shape = check_shape("shape", value, "a shape")
    assert shape == tuple(int(n) for n in value) and all(type(n) is int for n in shape)


@pytest.mark.parametrize("value", [(), [], "34", b"34", bytearray(b"\x03\x04"), memoryview(b"\x03\x04"),
                                   (3, 0), (3, -1), (3.0, 4), (True, 4), np.ones((2, 2), int), None, 3, {3: 4}])
def test_check_shape_refuses_what_is_not_a_shape(value):
    with pytest.raises(ScarceError, match=r"shape must be a shape, got"):
        check_shape("shape", value, "a shape")


def test_vision_input_shape_message_names_the_value_and_what_is_allowed():
    from scarce.applications.vision.api import _input_shape

    with pytest.raises(ScarceError) as info:
        _input_shape((3, -1))
    assert str(info.value) == ("input_shape must be a non-empty sequence of positive integers, one input's shape "
                               "without the batch axis, e.g. (3, 32, 32), got (3, -1) (tuple)")


def test_check_shape_takes_one_integer_as_one_axis_only_when_asked():
    assert check_shape("shape", np.int32(5), "a shape", one_int=True) == (5,)
    with pytest.raises(ScarceError, match="shape must be a shape"):
        check_shape("shape", True, "a shape", one_int=True)


def test_integral_float_count_is_rejected_with_a_hint():
    expected = r"n_samples must be an integer >= 1, got 500\.0 \(float\); write it as an int"
    with pytest.raises(ScarceError, match=expected):
        check_positive_int("n_samples", 500.0)


@pytest.mark.parametrize("value", [True, np.bool_(False)])
def test_bool_count_is_rejected(value):
    with pytest.raises(ScarceError, match="n_samples must be an integer"):
        check_positive_int("n_samples", value)


def test_count_beyond_int64_is_rejected_with_the_limit():
    with pytest.raises(ScarceError, match=r"at most 9223372036854775807, the int64 limit"):
        check_positive_int("n_samples", 10**30)


def test_huge_value_is_shortened_in_the_message():
    with pytest.raises(ScarceError) as info:
        check_in_interval("p", 10**400, 0.0, 1.0)
    assert len(str(info.value)) < 200 and "401 characters" in str(info.value)


def test_seed_error_names_random_state():
    with pytest.raises(ScarceError, match=r"^random_state must be a non-negative integer.*got -1"):
        as_generator(-1, name="random_state")
    with pytest.raises(ScarceError, match=r"^seed must be .*got True \(bool\)"):
        as_generator(True)


def test_ruler_random_state_error_names_random_state():
    Z, y = _labelled()
    with pytest.raises(ScarceError, match=r"random_state must be None, an int in \[0, 2\*\*32\).*got -1"):
        make_ruler("pc1", random_state=-1).fit(Z, y)


# -- estimators with numpy scalar parameters (the estimators must keep the validated values) --------
def _subset(**params):
    from scarce.estimators import SubsetSimulation

    return SubsetSimulation(**{"n_samples": 200, **params}).estimate(linear(dim=2, probability=1e-2), seed=0)


def test_numpy_int64_n_samples_serialises():
    result = _subset(n_samples=np.int64(200))
    assert json.loads(result.to_json())["n_samples"] == 200


def test_numpy_int16_n_samples_does_not_overflow():
    assert 0.0 < _subset(n_samples=np.int16(200)).probability < 1.0


def test_float16_stop_factor_is_accepted():
    assert 0.0 < _subset(stop_factor=np.float16(0.5)).probability < 1.0


# -- model outputs ------------------------------------------------------------------------------
def test_bfloat16_score_tensor_is_converted():
    torch = pytest.importorskip("torch")
    values = torch.tensor([0.5, -1.25, 3.0], dtype=torch.bfloat16)
    problem = RareEventProblem(2, lambda x: (values, torch.tensor([0.0, 1.0, 0.0], dtype=torch.bfloat16)))
    score, failed = problem.evaluate_latent(np.zeros((3, 2)))
    assert score.dtype == np.float64 and score.tolist() == [0.5, -1.25, 3.0]
    assert failed.tolist() == [False, True, False]


def test_ragged_score_list_raises_evaluation_error():
    problem = RareEventProblem(2, lambda x: ([1.0, [2.0, 3.0], 4.0], [0, 0, 0]), name="ragged")
    with pytest.raises(EvaluationError, match=r"ragged: score must be an array of numbers of shape \(n,\)"):
        problem.evaluate_latent(np.zeros((3, 2)))


def test_failed_flags_other_than_zero_one_are_located():
    problem = RareEventProblem(2, lambda x: (np.zeros(3), np.array([0.0, 1.0, 0.5])), name="flags")
    with pytest.raises(EvaluationError, match=r"failed must be boolean .* at 1 point\(s\), at index 2"):
        problem.evaluate_latent(np.zeros((3, 2)))


def test_latent_of_the_wrong_shape_is_a_scarce_error():
    problem = linear(dim=2, probability=1e-2)
    with pytest.raises(ScarceError, match=r"u must be a float array of shape \(n, 2\), got shape \(3, 5\)"):
        problem.evaluate_latent(np.zeros((3, 5)))


def test_from_score_threshold_must_be_a_finite_number():
    with pytest.raises(ScarceError, match="threshold must be a finite number"):
        RareEventProblem.from_score(lambda x: x.sum(1), 2, threshold=float("nan"))


# -- rulers at extreme magnitudes ---------------------------------------------------------------
SCALE_FREE = ("centroid", "centroid_rot_030deg", "pc1", "fisher", "mah_bad", "mah_contrast",
              "ocsvm_bad", "ocsvm_contrast")


@pytest.mark.parametrize("name", SCALE_FREE)
@pytest.mark.parametrize("scale", [2.0**-1000, 2.0**500, 2.0**1000])
def test_rulers_fit_embeddings_scaled_by_extreme_powers(name, scale):
    Z, y = _labelled()
    reference = make_ruler(name).fit(Z, y)
    ruler = make_ruler(name).fit(Z * scale, y)
    scores = ruler.score_samples(Z * scale)
    assert np.isfinite(scores).all() and np.ptp(scores) > 0
    assert ruler.separation_auc_ == pytest.approx(reference.separation_auc_, abs=0.02)


def test_centroid_on_small_ordinary_magnitudes_is_not_called_coincident():
    Z, y = _labelled()
    ruler = make_ruler("centroid").fit(Z * 2.0**-60, y)
    assert ruler.separation_auc_ > 0.9


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_scoring_far_beyond_the_fitted_range_raises():
    Z, y = _labelled()
    ruler = make_ruler("mah_bad").fit(Z, y)
    with pytest.raises(ScarceError, match=r"Z: MahalanobisRuler gives \d+ non-finite score"):
        ruler.score_samples(Z * 1e300)


@pytest.mark.parametrize("error_state", ["numpy_raise", "warnings_error"])
def test_scoring_gives_the_same_scores_and_errors_in_any_floating_point_error_state(error_state):
    # scoring runs under the caller's error state (no np.errstate on the hot path)
    Z, y = _labelled()
    ruler = make_ruler("mah_bad").fit(Z, y)
    expected = ruler.score_samples(Z)
    with np.errstate(all="raise" if error_state == "numpy_raise" else "warn"), warnings.catch_warnings():
        warnings.simplefilter("error" if error_state == "warnings_error" else "default")
        np.testing.assert_array_equal(ruler.score_samples(Z), expected)
        with pytest.raises(ScarceError, match=r"Z: MahalanobisRuler gives \d+ non-finite score"):
            ruler.score_samples(Z * 1e300)


def test_constant_ruler_warns():
    Z, y = _labelled()
    with pytest.warns(RulerFitWarning, match="same score"):
        make_ruler("logreg", C=1e-300).fit(Z, y)


def test_complex_embeddings_are_rejected_not_truncated():
    Z, y = _labelled()
    with pytest.raises(ScarceError, match="Z must be .* real numbers; got dtype complex128"):
        make_ruler("centroid").fit(Z + 1j, y)


# -- selection metrics --------------------------------------------------------------------------
def test_knn_kl_is_finite_and_scale_free_on_extreme_scores():
    rng = np.random.default_rng(3)
    p, q = rng.normal(0, 1, 200), rng.normal(1, 1, 200)
    reference = knn_kl_divergence(p, q)
    for scale in (2.0**1000, 2.0**-1000):
        assert knn_kl_divergence(p * scale, q * scale) == reference


def test_overlap_never_exceeds_one():
    x = np.random.default_rng(0).normal(size=37)
    assert 0.0 <= compute_metric("overlap", x, x.copy()) <= 1.0


def test_identical_constant_samples_have_zero_effect_size():
    out = compute_metrics(["cohens_d", "fisher_ratio"], np.full(5, 1.1), np.full(7, 1.1))
    assert out == {"cohens_d": 0.0, "fisher_ratio": 0.0}


def test_constant_samples_at_tiny_magnitude_get_densities():
    d = shared_grid_densities(np.full(2, 1e-300), np.full(11, 1e-300), bandwidth=0.5)
    assert np.isfinite(d.grid).all() and d.good.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("bandwidth", [1e-300, 1e300, float("inf"), float("nan")])
def test_density_bandwidth_outside_the_allowed_range_is_rejected(bandwidth):
    x = np.random.default_rng(0).normal(size=20)
    with pytest.raises(ScarceError, match=r"bandwidth must be 'scott', 'silverman' or a factor in \[0\.0001, 10000\]"):
        compute_metric("overlap", x, x + 1, bandwidth=bandwidth)


def test_metric_k_error_names_k_not_an_internal_name():
    x = np.arange(3.0)
    with pytest.raises(ScarceError, match=r"^k=3 is too large for kl_good_bad: it needs at least 4 good and "
                                          r"3 bad scores, got 3 good and 3 bad"):
        compute_metric("kl_good_bad", x, x + 1, k=3)


def test_knn_metrics_accept_exactly_the_sample_sizes_their_estimator_needs():
    # KL(P || Q) needs k + 1 samples of P and k of Q, so n_bad == k is enough for kl_good_bad
    rng = np.random.default_rng(3)
    good, bad = rng.normal(0, 1, 4), rng.normal(2, 1, 3)
    assert compute_metric("kl_good_bad", good, bad, k=3) == knn_kl_divergence(good, bad, 3)
    assert compute_metric("kl_bad_good", bad, good, k=3) == knn_kl_divergence(good, bad, 3)
    for name, g, b in (("kl_bad_good", good, bad), ("kl_good_bad", bad, good), ("jeffreys", good, bad)):
        with pytest.raises(ScarceError, match=rf"^k=3 is too large for {name}: it needs at least"):
            compute_metric(name, g, b, k=3)
    assert np.isfinite(compute_metrics(["jeffreys", "energy"], good, rng.normal(2, 1, 4), k=3)["jeffreys"])


def test_energy_of_scores_beyond_2_64_grows_with_the_square_root_of_the_scale():
    # scipy's energy distance is sqrt(2 E|X-Y| - E|X-X'| - E|Y-Y'|): scaling scores by s scales it by sqrt(s)
    rng = np.random.default_rng(4)
    good, bad = rng.normal(0, 1, 40), rng.normal(1, 1, 30)
    base = compute_metric("energy", good, bad)
    assert compute_metric("energy", good * 2.0**70, bad * 2.0**70) == pytest.approx(base * 2.0**35, rel=1e-12)
    below, above = (compute_metric("energy", good * 2.0**e, bad * 2.0**e) / base for e in (62, 66))
    assert below == pytest.approx(2.0**31, rel=1e-12) and above == pytest.approx(2.0**33, rel=1e-12)
    assert compute_metric("wasserstein", good * 2.0**70, bad * 2.0**70) == pytest.approx(
        compute_metric("wasserstein", good, bad) * 2.0**70, rel=1e-12)


def test_extreme_scores_give_finite_metrics():
    rng = np.random.default_rng(1)
    good, bad = rng.normal(0, 1, 50) * 1e300, rng.normal(1, 1, 50) * 1e300
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = compute_metrics(["cohens_d", "jensen_shannon", "kl_good_bad", "energy"], good, bad)
    assert all(np.isfinite(v) for v in out.values())


# -- benchmark problems -------------------------------------------------------------------------
def test_two_regions_probability_below_float64_is_rejected():
    from scarce.problems import two_regions

    with pytest.raises(ScarceError, match=r"probability=5e-324 is too small for float64"):
        two_regions(dim=2, probability=5e-324)


def test_unknown_problem_parameter_is_a_scarce_error():
    from scarce.problems import make_problem

    with pytest.raises(ScarceError, match=r"problem 'linear' takes no parameter\(s\) \['bogus'\]"):
        make_problem("linear", bogus=1)


def test_kernel_flag_must_be_a_bool():
    from scarce.kernels import make_kernel

    with pytest.raises(ScarceError, match=r"adapt must be True or False, got 'no' \(str\)"):
        make_kernel("acs", adapt="no")


@pytest.mark.parametrize("name", ["ocsvm_good", "ocsvm_bad", "ocsvm_contrast"])
@pytest.mark.parametrize("solver", ["exact", "nystroem"])
def test_an_ocsvm_gamma_near_the_largest_double_scores_without_numpys_overflow_warning(name, solver):
    """``-gamma ||z - c||^2`` overflows to -inf there, and ``exp`` gives the kernel's limit, 0: the
    ruler scores, finite, and no RuntimeWarning from scikit-learn's kernel reaches the user
    (found by the property suite at 10,000 examples a property)."""
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(24, 3))
    y = np.arange(24) % 2
    Z[y == 1] += 2.0
    extra = {} if solver == "exact" else {"max_exact_samples": 1, "n_components": 8}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # as a user sees them (made errors, the scoring retries quietly)
        scores = make_ruler(name, gamma=1e308, **extra).fit(Z, y).score_samples(Z)
    assert np.isfinite(scores).all()
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in caught]


def test_as_double_gives_a_float_or_none_never_an_overflow():
    from scarce.checks import as_double

    assert as_double(np.float16(0.5)) == 0.5 and as_double(np.int64(3)) == 3.0 and as_double(-math.inf) == -math.inf
    assert math.isnan(as_double(math.nan))
    for value in (10**400, -(10**400), True, "0.5", 1 + 2j, None):
        assert as_double(value) is None
