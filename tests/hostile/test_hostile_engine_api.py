"""Regression tests for hostile use of the engine's public API (issue 18, item 8): one test per reproducer.

Found by a hostile-input audit of ``SubsetSimulation``, ``AdaptiveMultilevelSplitting``,
``MonteCarlo``, the kernels, ``EstimateResult`` and ``scarce.envelope``. Each input must work
with the meaning the documentation gives it, or raise a :class:`scarce.errors.ScarceError` /
:class:`scarce.errors.EvaluationError` naming what is wrong; never a foreign exception or a
silently wrong number.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest

from scarce import (
    AdaptiveMultilevelSplitting,
    EstimateResult,
    MonteCarlo,
    RareEventProblem,
    SubsetSimulation,
    make_kernel,
)
from scarce.errors import EvaluationError, ScarceError
from scarce.kernels import ConditionalSampling, KernelParams
from scarce.problems import linear


def _quiet(call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call()


def _in_place_model(x):
    x *= 0.5  # writes into its input
    s = x.sum(1) / 2.0
    return s, s >= 1.5


def _copying_model(x):
    y = x * 0.5
    s = y.sum(1) / 2.0
    return s, s >= 1.5


def test_a_model_that_writes_into_its_input_does_not_change_the_chains():
    """It halved the engine's own states: 10x below the answer, no warning."""
    for seed in range(3):
        writes = SubsetSimulation(n_samples=500).estimate(RareEventProblem(4, _in_place_model), seed=seed)
        copies = SubsetSimulation(n_samples=500).estimate(RareEventProblem(4, _copying_model), seed=seed)
        assert writes.probability == copies.probability and writes.n_queries == copies.n_queries


def test_a_transform_that_writes_into_the_latents_does_not_change_the_chains():
    def in_place(u):
        u *= 0.5
        return u

    def evaluate(x):
        s = x.sum(1) / 2.0
        return s, s >= 1.5

    writes = SubsetSimulation(n_samples=500).estimate(RareEventProblem(4, evaluate, in_place), seed=0)
    copies = SubsetSimulation(n_samples=500).estimate(RareEventProblem(4, evaluate, lambda u: u * 0.5), seed=0)
    assert writes.probability == copies.probability and writes.n_queries == copies.n_queries


def test_ci_at_an_extreme_level_caps_at_one_instead_of_overflowing():
    # 20 chains a level (a FewChainsWarning): a CoV large enough for the upper end to pass 1
    r = _quiet(lambda: SubsetSimulation(n_samples=200, level_probability=0.1).estimate(linear(dim=3, probability=1e-3), seed=0))
    low, high = r.ci(0.99999999)
    assert 0.0 <= low <= r.probability and high == 1.0
    assert "CI" in r.summary(0.99999999)


def test_a_splitting_result_is_never_read_as_a_binomial_count():
    """Kernels that never moved a copy left two levels and no queries: the interval was the
    Clopper-Pearson one of n_failed / n_samples, (0.227, 0.542), excluding the estimate 0.094."""
    r = _quiet(lambda: AdaptiveMultilevelSplitting(n_samples=20, kernel=make_kernel("mma", initial_scale=1e6),
                                                   n_replicas=2).estimate(linear(dim=2, probability=0.1), seed=0))
    low, high = r.ci()
    assert low <= r.probability <= high


def test_the_same_seed_sequence_twice_gives_the_same_run():
    """Spawning advanced the caller's SeedSequence: two runs, one recorded seed."""
    problem, ss = linear(dim=3, probability=1e-3), np.random.SeedSequence(42)
    first = AdaptiveMultilevelSplitting(n_samples=100).estimate(problem, seed=ss)
    second = AdaptiveMultilevelSplitting(n_samples=100).estimate(problem, seed=ss)
    assert first.probability == second.probability and ss.n_children_spawned == 0


def test_a_seed_sequence_with_numpy_spawn_keys_writes_json():
    seed = np.random.SeedSequence(5, spawn_key=(np.uint32(3), np.int64(1)))
    record = json.loads(MonteCarlo(n_samples=10).estimate(linear(dim=2, probability=0.1), seed=seed).to_json())
    assert record["info"]["seed"]["spawn_key"] == [3, 1]


def test_splitting_takes_a_generator_without_a_spawnable_seed():
    def legacy():
        return np.random.Generator(np.random.RandomState(0)._bit_generator)

    problem = linear(dim=3, probability=1e-3)
    a = AdaptiveMultilevelSplitting(n_samples=50).estimate(problem, seed=legacy())
    b = AdaptiveMultilevelSplitting(n_samples=50).estimate(problem, seed=legacy())
    assert a.probability == b.probability > 0


@pytest.mark.parametrize("setting", [dict(first_level=np.array(["lhs"])), dict(count_seeds=np.array(["always"])),
                                     dict(first_level=np.array(["lhs", "mc"]))])
def test_array_valued_choices_are_refused(setting):
    """np.array(['lhs']) passed `in` and was stored as the string "['lhs']": level 0 silently Monte Carlo."""
    name = next(iter(setting))
    with pytest.raises(ScarceError, match=name):
        SubsetSimulation(**setting).estimate(linear(dim=2, probability=0.1), seed=0)


@pytest.mark.parametrize("estimator", [AdaptiveMultilevelSplitting(n_samples=10**13),
                                       AdaptiveMultilevelSplitting(n_steps=2**62),
                                       MonteCarlo(n_samples=10**13), MonteCarlo(n_samples=10**9, batch_size=10**9)])
def test_splitting_and_monte_carlo_refuse_huge_runs_before_work(estimator):
    with pytest.raises(ScarceError, match="allow_large"):
        estimator.estimate(linear(dim=1000, probability=1e-3), seed=0)


@pytest.mark.parametrize("estimator", [SubsetSimulation(n_samples=200), MonteCarlo(n_samples=100)])
def test_a_callback_that_cannot_be_called_is_refused_before_any_model_call(estimator):
    calls = []

    def model(x):
        calls.append(len(x))
        return x[:, 0], x[:, 0] > 3

    with pytest.raises(ScarceError, match="callback"):
        estimator.estimate(RareEventProblem(2, model), seed=0, callback=5)
    assert calls == []


def _stored() -> dict:
    return json.loads(SubsetSimulation(n_samples=300).estimate(linear(dim=3, probability=1e-3), seed=0).to_json())


@pytest.mark.parametrize("text, what", [
    ("{}", "missing keys"),
    ("not json", "not valid JSON"),
    ("5", "expected a dict"),
    ("[" * 100_000 + "]" * 100_000, "not valid JSON"),
])
def test_from_json_refuses_what_is_not_a_result(text, what):
    with pytest.raises(ScarceError, match=what):
        EstimateResult.from_json(text)


@pytest.mark.parametrize("change, what", [
    ({"probability": 5.0}, "probability"),
    ({"probability": -1.0}, "probability"),
    ({"cov": -1.0}, "cov"),
    ({"n_queries": -3}, "n_queries"),
    ({"info": None}, "info"),
    ({"bogus": 1}, "unknown keys"),
    ({"nonfinite": {"levels/9/threshold": "inf"}}, "names no field"),
    ({"nonfinite": {"a/b/c": "inf"}}, "names no field"),
    ({"nonfinite": {"cov": "big"}}, "nonfinite"),
])
def test_from_dict_refuses_fields_no_estimator_writes(change, what):
    with pytest.raises(ScarceError, match=what):
        EstimateResult.from_dict({**_stored(), **change})


def test_to_json_refuses_allow_nan_by_name():
    with pytest.raises(ScarceError, match="allow_nan"):
        EstimateResult.from_dict(_stored()).to_json(allow_nan=True)


class _WideKernel(ConditionalSampling):
    def propose(self, u, params, rng):
        return np.zeros((u.shape[0], u.shape[1] + 1))


class _NaNKernel(ConditionalSampling):
    def propose(self, u, params, rng):
        return np.full(u.shape, np.nan)


class _ListKernel(ConditionalSampling):
    def propose(self, u, params, rng):
        return u.tolist()


class _NoParamsKernel(ConditionalSampling):
    def tune(self, seeds, scale):
        return None


@pytest.mark.parametrize("kernel, what", [(_WideKernel(), "shape"), (_NaNKernel(), "non-finite"),
                                          (_ListKernel(), "float array"), (_NoParamsKernel(), "KernelParams")])
@pytest.mark.parametrize("engine", [SubsetSimulation, AdaptiveMultilevelSplitting])
def test_a_user_kernels_bad_proposal_names_the_kernel(kernel, what, engine):
    with pytest.raises(ScarceError, match=f"{type(kernel).__name__}.*{what}"):
        engine(n_samples=100, kernel=kernel).estimate(linear(dim=2, probability=1e-2), seed=0)


class _AheadKernel(ConditionalSampling):
    """An independence sampler drawn ahead (the prior as proposal), with one output spoiled by ``spoil``."""

    spoil = ""

    def draws_ahead(self, params, n_chains, n_steps, dim, dtype, rng):
        candidates, weights = rng.standard_normal((n_steps, n_chains, dim)), np.zeros((n_steps, n_chains))
        if self.spoil == "wide":
            candidates = np.zeros((n_steps, n_chains, dim + 1))
        elif self.spoil == "nan":
            candidates[0, 0, 0] = np.nan
        elif self.spoil == "weights":
            weights = np.zeros(n_chains)
        elif self.spoil == "float32":
            candidates = candidates.astype(np.float32)
        elif self.spoil == "single":
            return (candidates,)
        return candidates, weights

    def state_log_weights(self, params, u):
        return np.zeros(u.shape[0] + (self.spoil == "states"))


class _UnweighedKernel(ConditionalSampling):
    def draws_ahead(self, params, n_chains, n_steps, dim, dtype, rng):
        return rng.standard_normal((n_steps, n_chains, dim)), np.zeros((n_steps, n_chains))


@pytest.mark.parametrize("spoil, what", [("wide", "draws_ahead must return candidates of shape"),
                                         ("float32", "dtype float64"), ("nan", "draws_ahead returned non-finite"),
                                         ("weights", "log weights of shape"),
                                         ("states", "state_log_weights must return one log weight a state"),
                                         ("single", "must return None or a pair")])
def test_a_user_kernels_bad_draws_ahead_names_the_kernel(spoil, what):
    kernel = type("_Spoilt", (_AheadKernel,), {"spoil": spoil})()
    with pytest.raises(ScarceError, match=f"_Spoilt.*{what}"):
        SubsetSimulation(n_samples=100, kernel=kernel).estimate(linear(dim=2, probability=1e-2), seed=0)


def test_a_kernel_drawing_ahead_without_weighing_its_states_is_named():
    with pytest.raises(ScarceError, match="_UnweighedKernel must override state_log_weights"):
        SubsetSimulation(n_samples=100, kernel=_UnweighedKernel()).estimate(linear(dim=2, probability=1e-2), seed=0)


@pytest.mark.filterwarnings("ignore::scarce.LowAcceptanceWarning")  # the prior as proposal: a level's share accepted
def test_an_unspoilt_kernel_drawing_ahead_runs():
    result = SubsetSimulation(n_samples=1000, kernel=_AheadKernel()).estimate(linear(dim=2, probability=1e-2), seed=0)
    assert result.reached_failure and result.status == "converged"
    assert abs(result.probability / 1e-2 - 1.0) <= 3.0 * result.cov  # within three of its own standard errors


@pytest.mark.parametrize("dim", [3.0, -1, np.int8(3)])
def test_a_problem_dim_changed_after_construction_is_checked_again(dim):
    problem = linear(dim=3, probability=1e-3)
    problem.dim = dim
    if isinstance(dim, np.integer):  # a valid value, kept as a Python int: no overflow in int8 arithmetic
        result = SubsetSimulation(n_samples=200).estimate(problem, seed=0)
        assert type(problem.dim) is int and result.n_queries > 0
    else:
        with pytest.raises(ScarceError, match="problem.dim"):
            SubsetSimulation(n_samples=200).estimate(problem, seed=0)


def test_from_score_checks_its_arguments_when_called():
    with pytest.raises(ScarceError, match="score must be callable"):
        RareEventProblem.from_score(5, dim=2)
    with pytest.raises(ScarceError, match="bogus"):
        RareEventProblem.from_score(lambda u: u[:, 0], 2, bogus=1)


def test_a_masked_score_is_refused():
    def model(x):
        s = np.ma.masked_array(x[:, 0], mask=np.ones(len(x), bool))
        return s, np.zeros(len(x), bool)

    with pytest.raises(EvaluationError, match="masked"):
        SubsetSimulation(n_samples=100).estimate(RareEventProblem(2, model), seed=0)


def test_a_masked_array_without_masked_entries_is_read_as_its_data():
    problem = RareEventProblem(2, lambda x: (np.ma.masked_array(x[:, 0]), x[:, 0] > 2.5))
    plain = RareEventProblem(2, lambda x: (x[:, 0], x[:, 0] > 2.5))
    assert SubsetSimulation(n_samples=300).estimate(problem, seed=1).probability == \
        SubsetSimulation(n_samples=300).estimate(plain, seed=1).probability


def test_the_mean_centred_interval_keeps_the_estimate_inside_at_any_level():
    r = SubsetSimulation(n_samples=300).estimate(linear(dim=3, probability=1e-4), seed=2)
    for level in (0.01, 0.3, 0.5, 0.95, 0.999999):
        low, high = r.ci(level)
        assert low <= r.probability <= high and not math.isnan(high)


# -- a kernel changed after construction, and a user's kernel inside the surface kernel ----------


def _changed(kernel, **settings):
    for name, value in settings.items():
        setattr(kernel, name, value)
    return kernel


@pytest.mark.parametrize("kernel, message", [
    (_changed(make_kernel("acs"), initial_scale=-0.5), r"ConditionalSampling.initial_scale must be in \[0.0001, 1e\+06\]"),
    (_changed(make_kernel("acs"), initial_scale=math.nan), "ConditionalSampling.initial_scale must be a finite"),
    (_changed(make_kernel("acs"), initial_scale="0.5"), "ConditionalSampling.initial_scale must be a number"),
    (_changed(make_kernel("mma"), initial_scale=math.inf), "ModifiedMetropolis.initial_scale must be a finite"),
    (_changed(make_kernel("acs"), spread="bogus"), "ConditionalSampling.spread"),
    (_changed(make_kernel("mma"), proposal="bogus"), "ModifiedMetropolis.proposal"),
    (_changed(make_kernel("acs"), adapt="yes"), "ConditionalSampling.adapt must be True or False"),
    (_changed(make_kernel("surface"), local=None), "ResponseSurfaceSampling.local must be a scarce.kernels.Kernel"),
    (_changed(make_kernel("surface"), min_agreement=2), r"ResponseSurfaceSampling.min_agreement must be in \(0, 1\]"),
])
@pytest.mark.parametrize("estimator", [SubsetSimulation, AdaptiveMultilevelSplitting])
def test_a_kernel_setting_changed_after_construction_is_checked_before_the_run(kernel, message, estimator):
    calls = []
    problem = RareEventProblem.from_score(lambda u: calls.append(1) or u.sum(axis=1), 3, threshold=4.0)
    with pytest.raises(ScarceError, match=message):
        estimator(n_samples=100, kernel=kernel).estimate(problem, seed=0)
    assert not calls


class _NaNCandidates(ConditionalSampling):
    def propose(self, u, params, rng):
        return np.full_like(u, np.nan)


class _NoTune(ConditionalSampling):
    def tune(self, seeds, scale):
        return None


class _BadAdapted(ConditionalSampling):
    def adapted(self, params, acceptance, step):
        return "x"


class _NegativeScale(ConditionalSampling):
    def tune(self, seeds, scale):
        return KernelParams(scale=-1.0, spread=np.ones(seeds.shape[1]))


class _TextFactors(ConditionalSampling):
    def propose_weighted(self, u, params, rng):
        return self.propose(u, params, rng), np.array(["a"] * u.shape[0])


@pytest.mark.parametrize("kernel, message", [
    (make_kernel("surface", local=_NaNCandidates()), "returned non-finite candidates"),
    (make_kernel("surface", local=_NoTune()), r"_NoTune.tune\(\) \(the local kernel of ResponseSurfaceSampling\)"),
    (_BadAdapted(), r"_BadAdapted.adapted\(\) must return a KernelParams, got str"),
    (_NegativeScale(), r"_NegativeScale.tune\(\) must return a KernelParams whose scale is a finite number > 0"),
    (_TextFactors(), "log factors must be None or a real array"),
])
def test_a_users_kernel_is_named_for_what_it_returned_even_inside_the_surface_kernel(kernel, message):
    # d = 50 at N = 200: too few points for a surface, so the local kernel moves every chain
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ScarceError, match=message):
            SubsetSimulation(n_samples=200, kernel=kernel).estimate(linear(dim=50, probability=1e-3), seed=0)


# --- A second audit (2026-11-29) ---------------------------------------------------------------


def _small_result():
    return _quiet(lambda: SubsetSimulation(n_samples=200).estimate(linear(dim=2, probability=1e-3), seed=0))


def _tampered(change):
    data = json.loads(_small_result().to_json())
    change(data)
    return json.dumps(data)


@pytest.mark.parametrize("change, field", [
    (lambda d: d.__setitem__("cov", 10**400), "cov must be a number"),
    (lambda d: d.__setitem__("probability", 10**400), "probability must be a number"),
    (lambda d: d["levels"][1].__setitem__("n_queries", "x"), r"levels\[1\].n_queries must be an integer"),
    (lambda d: d["levels"][0].__setitem__("stalled", "yes"), r"levels\[0\].stalled must be true or false"),
    (lambda d: d["levels"][2].__setitem__("threshold", "high"), r"levels\[2\].threshold must be a number"),
    (lambda d: d["levels"].__setitem__(1, [1, 2]), r"levels\[1\] must be a level record"),
    (lambda d: d.__setitem__("level_probability", "0.1"), "level_probability must be a number"),
    (lambda d: d.__setitem__("interval", "foo"), "interval must be one of"),
    (lambda d: d.__setitem__("status", "whatever"), "status must be one of"),
    (lambda d: d.__setitem__("problem", 5), "problem must be a string"),
    (lambda d: d.__setitem__("interval", "clopper-pearson"), "is not the failed fraction"),
])
def test_from_json_refuses_a_field_no_estimator_writes(change, field):
    """A huge integer, a level record of the wrong types, an unknown interval or status, and a
    Clopper-Pearson interval around an estimate that is not the failed fraction are refused
    when read, not loaded to break ``summary()`` or exclude the estimate from ``ci()`` later."""
    with pytest.raises(ScarceError, match=field):
        EstimateResult.from_json(_tampered(change))


def test_a_replica_count_that_is_not_a_number_does_not_break_the_flags():
    data = json.loads(_small_result().to_json())
    data["info"].update(few_particles=True, n_replicas="two", n_killed=5)
    flags = EstimateResult.from_json(json.dumps(data)).flags
    assert any(flag.startswith("few particles: N = 200 a replica") for flag in flags)


def test_a_product_of_levels_with_a_cov_of_0_keeps_its_estimate_inside_its_interval():
    """A CoV of 0 is read as the failed fraction's only where the estimate is that fraction; a
    product of levels with no spread measured gets the first level's bound, which holds it."""
    result = _small_result()
    zero = EstimateResult.from_dict({**result.to_dict(), "cov": 0.0})
    low, high = zero.ci(0.95)
    assert low == 0.0 and high >= zero.probability > 0.0


def test_summary_takes_the_confidence_ci_takes():
    from fractions import Fraction

    result = _small_result()
    assert "95% CI" in result.summary(Fraction(19, 20))
    with pytest.raises(ScarceError, match="confidence"):
        result.summary(2)


@pytest.mark.parametrize("make", [lambda: SubsetSimulation(n_samples=200), lambda: MonteCarlo(n_samples=1000)])
def test_a_callback_that_raises_is_reported_as_the_callbacks_error(make):
    problem = linear(dim=2, probability=1e-2)
    with pytest.raises(EvaluationError, match="callback raised ZeroDivisionError on level 0") as caught:
        _quiet(lambda: make().estimate(problem, seed=0, callback=lambda level: 1 / 0))
    assert isinstance(caught.value.__cause__, ZeroDivisionError)


def test_a_callback_is_checked_as_it_is_called_not_as_a_decorator_wraps_it():
    import functools

    def inject(function):
        @functools.wraps(function)
        def wrapper(level):
            return function(level, "context")
        return wrapper

    seen = []

    @inject
    def callback(level, context):
        seen.append((level.level, context))

    _quiet(lambda: SubsetSimulation(n_samples=200).estimate(linear(dim=2, probability=1e-2), seed=0,
                                                            callback=callback))
    assert seen and seen[0] == (0, "context")


def test_a_numpy_string_still_names_a_dtype():
    result = _quiet(lambda: SubsetSimulation(n_samples=200, dtype=np.str_("float32")).estimate(
        linear(dim=2, probability=1e-2), seed=0))
    assert result.info["dtype"] == "float32"


def test_a_callback_that_takes_no_argument_is_refused_before_any_model_call():
    calls = []

    def model(u):
        calls.append(len(u))
        return u[:, 0] - 2.0

    problem = RareEventProblem.from_score(model, dim=2, name="counted")
    with pytest.raises(ScarceError, match="callback must take one argument"):
        SubsetSimulation(n_samples=200).estimate(problem, seed=0, callback=lambda: None)
    assert calls == []


@pytest.mark.parametrize("dtype", [np.float32(7.5), np.float64(0.2), np.array([1.0], dtype=np.float32)])
def test_a_numpy_number_is_not_a_dtype(dtype):
    """``np.dtype(np.float32(7.5))`` is float32: the value's own dtype. A number is refused instead."""
    with pytest.raises(ScarceError, match="dtype must be one of"):
        SubsetSimulation(dtype=dtype).estimate(linear(dim=2, probability=1e-2), seed=0)


def test_too_large_an_initial_scale_is_refused_without_the_small_scale_reason():
    with pytest.raises(ScarceError) as caught:
        ConditionalSampling(initial_scale=1e7)
    assert "1e+06" in str(caught.value) and "smaller first step" not in str(caught.value)
    with pytest.raises(ScarceError, match="smaller first step"):
        ConditionalSampling(initial_scale=1e-7)


@pytest.mark.parametrize("probability", [5e-324, 1e-320, 1e-301])
def test_a_problem_rarer_than_1e_300_is_refused(probability):
    from scarce.problems import chi_square

    for make in (linear, chi_square):
        with pytest.raises(ScarceError, match="at least 1e-300"):
            make(dim=2, probability=probability)


def _beyond_float64(u):
    return u[:, 0] - 40.0  # P(u1 >= 40) is about 4e-350: no float64 holds it


def test_levels_that_would_fall_below_the_smallest_probability_stop_the_run_flagged():
    """A run whose levels would reach below ``MIN_PROBABILITY`` used to multiply them down to 0
    and report a reached failure with the estimate 0; it now stops before, flagged, with a
    warning that says why."""
    from scarce.errors import BudgetExhaustedWarning
    from scarce.levels import MIN_PROBABILITY

    problem = RareEventProblem.from_score(_beyond_float64, dim=2, name="beyond")
    with pytest.warns(BudgetExhaustedWarning, match="smallest probability this engine represents"):
        result = SubsetSimulation(n_samples=100, max_levels=1000).estimate(problem, seed=0)
    assert result.status == "max_levels" and not result.reached_failure
    assert all(level.cumulative_probability >= MIN_PROBABILITY for level in result.levels)
    with pytest.warns(BudgetExhaustedWarning, match="smallest probability this engine represents"):
        split = AdaptiveMultilevelSplitting(n_samples=100, n_killed=90, n_steps=1, n_replicas=2).estimate(
            problem, seed=0)
    assert split.status == "max_levels" and not split.reached_failure
