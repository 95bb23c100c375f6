"""Property-based hostile-input suite over the numeric public API.

Every property has the same shape: a public call on generated hostile input (NumPy scalars of every
width, bools, strings, NaN/inf, huge and tiny magnitudes, ragged lists, torch tensors of several
dtypes, mismatched lengths, a single class...) either succeeds with a finite, valid result, or
raises :class:`scarce.errors.ScarceError` / :class:`scarce.errors.EvaluationError` (a
:class:`scarce.errors.ScarceWarning` may be issued). Any other exception is a failure, and so is a
NumPy ``RuntimeWarning`` (overflow, invalid value: where silent NaNs and infinities begin) and a
success whose result is not finite or not of the documented type.

The number of examples per property is ``SCARCE_HYPOTHESIS_EXAMPLES`` (default 20, which keeps the
file to a few seconds); a long run, ``SCARCE_HYPOTHESIS_EXAMPLES=500`` (that many cases for each of
the properties below, over 10,000 in all), is a release check. Examples are derandomised, so a run
is reproducible.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from scarce.envelope import lognormal_interval
from scarce.estimators import AdaptiveMultilevelSplitting, MonteCarlo, SubsetSimulation
from scarce.results import EstimateResult
from scarce.checks import check_in_interval, check_positive_int
from scarce.errors import EvaluationError, ScarceError
from scarce.kernels import KERNELS, make_kernel
from scarce.normals import check_dtype
from scarce.problem import RareEventProblem
from scarce.problems import linear
from scarce.rulers import available_rulers, make_ruler
from scarce.seeding import as_generator
from scarce.selection import (
    aggregate,
    available_metrics,
    bootstrap_interval,
    compute_metrics,
    knn_kl_divergence,
    leakage_masses,
    leakage_relative_bias,
    leave_one_out_min,
    permutation_pvalue,
    shared_grid_densities,
    spearman,
)

torch = pytest.importorskip("torch")

EXAMPLES = int(os.environ.get("SCARCE_HYPOTHESIS_EXAMPLES", "20"))
ALLOWED = (ScarceError, EvaluationError)
hostile = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                   suppress_health_check=list(HealthCheck))

# -- strategies ---------------------------------------------------------------------------------
NUMPY_SCALAR_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint64",
                       "float16", "float32", "float64", "bool")
numpy_scalars = st.one_of(
    st.sampled_from(NUMPY_SCALAR_DTYPES).flatmap(lambda d: hnp.from_dtype(np.dtype(d))),
    st.tuples(st.sampled_from(NUMPY_SCALAR_DTYPES),
              st.one_of(st.integers(0, 127), st.floats(0.01, 0.99))).map(
        lambda t: np.dtype(t[0]).type(t[1] if t[0].startswith("float") else int(t[1]))),
)
special_floats = st.sampled_from([0.0, -0.0, 1e-300, 5e-324, 1e300, 1.7e308, -1e300, math.nan,
                                  math.inf, -math.inf, 0.5, 1.0, 2.0, 500.0])
hostile_scalars = st.one_of(
    numpy_scalars,
    special_floats,
    st.integers(-(2**70), 2**70),
    st.integers(-3, 3000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=4),
    st.sampled_from([[1], (2,), {"a": 1}, 1 + 2j, np.array([1, 2]), np.array(3.0)]),
)


def mixed(valid, hostile=hostile_scalars):
    """Half valid, half hostile values (``one_of`` would flatten ``hostile``'s many branches)."""
    return st.booleans().flatmap(lambda ok: valid if ok else hostile)


SCALES = (1.0, 0.0, 1e-310, 1e-300, 1e-150, 1e-20, 1e20, 1e150, 1e300, 1.7e308)
TORCH_DTYPES = ("bfloat16", "float16", "float32", "float64", "int64", "uint8", "bool",
                "complex64")


def _finite_array(shape, elements=None):
    return hnp.arrays(np.float64, shape, elements=elements or st.floats(-10, 10, width=64))


def _expect_ok_or_scarce(call):
    """Run ``call``; return its result, or None when it raised an allowed error.

    Warnings are silenced except ``RuntimeWarning``, which is raised (and so fails the property).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.simplefilter("error", RuntimeWarning)  # overflow/invalid: where silent NaNs begin
        try:
            out = call()
        except ALLOWED as exc:
            event(f"rejected: {type(exc).__name__}")
            return None
    event("accepted")
    return out


# -- validators and seeds -----------------------------------------------------------------------
@hostile
@given(value=hostile_scalars, minimum=st.integers(0, 2))
def test_check_positive_int_returns_python_int_or_scarce_error(value, minimum):
    out = _expect_ok_or_scarce(lambda: check_positive_int("n", value, minimum=minimum))
    if out is not None:
        assert type(out) is int and out >= minimum and out == int(value)


@hostile
@given(value=hostile_scalars)
def test_check_in_interval_returns_python_float_or_scarce_error(value):
    out = _expect_ok_or_scarce(lambda: check_in_interval("x", value, 0.0, 1.0))
    if out is not None:
        assert type(out) is float and 0.0 < out <= 1.0


@hostile
@given(seed=hostile_scalars)
def test_as_generator_accepts_or_names_the_parameter(seed):
    try:
        rng = as_generator(seed, name="random_state")
    except ScarceError as exc:
        assert str(exc).startswith("random_state must be")
        return
    assert isinstance(rng, np.random.Generator)


@hostile
@given(dtype=st.one_of(hostile_scalars, st.sampled_from(["float32", "float16", "f8", "int", "U3",
                                                          np.float32, object, "i4,i4"])))
def test_check_dtype_accepts_float64_float32_only(dtype):
    out = _expect_ok_or_scarce(lambda: check_dtype(dtype))
    if out is not None:
        assert out.name in ("float64", "float32")


# -- problems -----------------------------------------------------------------------------------
def _torch_or_numpy_output(n):
    lengths = st.sampled_from([n, n, n, n - 1, n + 1, 0])
    numeric = st.tuples(lengths, st.sampled_from(SCALES), st.sampled_from(TORCH_DTYPES),
                        st.booleans(), st.integers(0, 2**31)).map(_make_array)
    ragged = st.lists(st.one_of(st.floats(), st.lists(st.floats(), max_size=2)), min_size=n,
                      max_size=n)
    odd = st.sampled_from([None, 1.0, "x", {"a": 1}, [[0.0]] * n, np.zeros((n, 1)),
                           np.array([None] * n, dtype=object), np.array(["a"] * n)])
    return st.one_of(numeric, ragged, odd, hostile_scalars)


def _make_array(spec):
    length, scale, dtype, as_torch, seed = spec
    with np.errstate(over="ignore"):
        values = np.random.default_rng(seed).normal(size=length) * scale
    if dtype in ("bool", "uint8", "int64"):
        values = np.random.default_rng(seed).integers(0, 2, size=length)
    if as_torch:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.as_tensor(values).to(getattr(torch, dtype))
    if dtype in ("bfloat16",):
        with np.errstate(over="ignore"):  # a value beyond float32 is inf, as for float16 below
            return values.astype(np.float32)
    with np.errstate(over="ignore"):
        return values.astype(np.dtype(dtype))


def _zero_one(spec):
    dtype, as_torch, seed = spec
    values = np.random.default_rng(seed).integers(0, 2, size=4)
    if as_torch:
        return torch.as_tensor(values).to(getattr(torch, dtype))
    return values.astype(np.float32 if dtype == "bfloat16" else np.dtype(dtype))


valid_scores = st.tuples(st.just(4), st.sampled_from([1.0, 1e-300, 1e30]),
                         st.sampled_from(["bfloat16", "float16", "float32", "float64", "int64"]),
                         st.booleans(), st.integers(0, 2**31)).map(_make_array)
valid_failed = st.tuples(st.sampled_from(["bool", "uint8", "int64", "float32", "bfloat16"]),
                         st.booleans(), st.integers(0, 2**31)).map(_zero_one)


def _exact(value):
    """What the model returned, as exact float64 numbers (every real torch dtype fits)."""
    if isinstance(value, torch.Tensor):
        return value.to(torch.float64).numpy()
    return np.asarray(value).astype(np.float64)


@hostile
@given(score=mixed(valid_scores, _torch_or_numpy_output(4)),
       failed=mixed(valid_failed, _torch_or_numpy_output(4)),
       pair=st.sampled_from(["tuple", "tuple", "tuple", "list", "triple", "single"]))
def test_evaluate_latent_validates_any_output(score, failed, pair):
    out = {"tuple": (score, failed), "list": [score, failed], "triple": (score, failed, failed),
           "single": score}[pair]
    problem = RareEventProblem(3, lambda x: out, name="hostile")
    result = _expect_ok_or_scarce(lambda: problem.evaluate_latent(np.zeros((4, 3))))
    if result is None:
        return
    s, f = result
    assert s.dtype == np.float64 and s.shape == (4,) and np.isfinite(s).all()
    assert f.dtype == np.bool_ and f.shape == (4,)
    np.testing.assert_array_equal(s, _exact(score))
    np.testing.assert_array_equal(f, _exact(failed) == 1.0)


@hostile
@given(dim=mixed(st.integers(1, 10)), name=mixed(st.text(max_size=3)),
       exact=mixed(st.one_of(st.none(), st.floats(0, 1))),
       transform=st.sampled_from([None, 1, "x", lambda u: u]))
def test_rare_event_problem_constructor(dim, name, exact, transform):
    problem = _expect_ok_or_scarce(lambda: RareEventProblem(dim, lambda x: (x, x), transform,
                                                            name=name, exact_probability=exact))
    if problem is not None:
        assert type(problem.dim) is int and isinstance(problem.name, str)
        assert problem.exact_probability is None or 0.0 <= problem.exact_probability <= 1.0


@hostile
@given(u=st.one_of(hostile_scalars, hnp.arrays(st.sampled_from([np.float64, np.float32, np.int64]),
                                               hnp.array_shapes(max_dims=3, max_side=4))))
def test_evaluate_latent_rejects_bad_latent_arrays(u):
    problem = RareEventProblem.from_score(lambda x: np.asarray(x).sum(axis=-1), 2)
    out = _expect_ok_or_scarce(lambda: problem.evaluate_latent(u))
    if out is not None:
        assert out[0].shape == (u.shape[0],) and np.isfinite(out[0]).all()


# -- estimators ---------------------------------------------------------------------------------
def _parameters(cls) -> list[str]:
    return [p for p in inspect.signature(cls.__init__).parameters if p != "self"]


SUBSET_PARAMS = _parameters(SubsetSimulation)
MONTE_CARLO_PARAMS = _parameters(MonteCarlo)
small_or_hostile = st.one_of(
    st.integers(-2, 400), st.integers(2**62, 2**70),
    numpy_scalars.filter(lambda v: not (np.issubdtype(type(v), np.integer) and 400 < v)),
    special_floats, st.booleans(), st.none(), st.text(max_size=3),
    st.sampled_from(["lhs", "iid", "float32", "independent", [1], 1 + 2j]),
)


def _estimate_with(estimator_class, base, budgets, param, value, seed):
    """One hostile constructor value: a valid result (probability in [0, 1], strict JSON) or a ScarceError."""
    if param in budgets and isinstance(value, (int, np.integer)) and 400 < value < 2**63:
        return  # a valid but expensive budget: resource bounds are not this property's subject
    estimator = estimator_class(**{**base, param: value})
    result = _expect_ok_or_scarce(lambda: estimator.estimate(linear(dim=2, probability=1e-2), seed=seed))
    if result is not None:
        assert 0.0 <= result.probability <= 1.0
        json.loads(result.to_json())


@hostile
@given(param=st.sampled_from(SUBSET_PARAMS), value=small_or_hostile,
       seed=mixed(st.integers(0, 3)))
def test_subset_simulation_parameters(param, value, seed):
    _estimate_with(SubsetSimulation, {"n_samples": 100, "max_levels": 6}, ("n_samples", "max_queries"),
                   param, value, seed)


@hostile
@given(param=st.sampled_from(MONTE_CARLO_PARAMS), value=small_or_hostile,
       seed=mixed(st.integers(0, 3)))
def test_monte_carlo_parameters(param, value, seed):
    _estimate_with(MonteCarlo, {"n_samples": 200, "batch_size": 64}, ("n_samples",), param, value, seed)


@hostile
@given(name=st.sampled_from(sorted(KERNELS)),
       param=st.sampled_from(["initial_scale", "target_acceptance", "adapt", "spread",
                              "proposal", "bogus"]),
       value=mixed(st.one_of(st.floats(0.01, 0.99), st.booleans(),
                             st.sampled_from(["unit", "seeds", "uniform", "normal"]))))
def test_kernel_constructors(name, param, value):
    kernel = _expect_ok_or_scarce(lambda: make_kernel(name, **{param: value}))
    if kernel is None:
        return
    u = np.random.default_rng(0).normal(size=(5, 3))
    v = kernel.propose(u, kernel.tune(u, kernel.initial_scale), np.random.default_rng(1))
    assert v.shape == u.shape and np.isfinite(v).all()


SPLITTING_PARAMS = [p for p in _parameters(AdaptiveMultilevelSplitting) if p != "kernel"]


@hostile
@given(param=st.sampled_from(SPLITTING_PARAMS), value=small_or_hostile, seed=mixed(st.integers(0, 3)))
def test_splitting_parameters(param, value, seed):
    _estimate_with(AdaptiveMultilevelSplitting, {"n_samples": 40, "n_replicas": 2, "max_iterations": 60},
                   ("n_samples", "max_iterations", "max_queries", "n_replicas"), param, value, seed)


STORED = json.loads(SubsetSimulation(n_samples=200).estimate(linear(dim=2, probability=1e-3), seed=0).to_json())
json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                                     st.floats(allow_nan=False), st.text(max_size=4)),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                                     max_size=3), max_leaves=8)


@hostile
@given(field=st.sampled_from(sorted(STORED) + ["nonfinite", "bogus"]), value=json_values,
       as_text=st.booleans())
def test_a_stored_result_with_one_hostile_field_loads_valid_or_is_refused(field, value, as_text):
    """A result file edited or corrupted anywhere: a ScarceError on loading, or a result whose interval
    (never an error: a loaded result must be able to state one) holds its estimate."""
    data = {**STORED, field: value}
    load = (lambda: EstimateResult.from_json(json.dumps(data))) if as_text else \
        (lambda: EstimateResult.from_dict(data))
    result = _expect_ok_or_scarce(load)
    if result is None:
        return
    assert 0.0 <= result.probability <= 1.0
    low, high = result.ci(0.95)
    assert 0.0 <= low <= high <= 1.0 and (not result.reached_failure or low <= result.probability <= high)
    json.loads(result.to_json())


def _stored_results() -> list[dict]:
    """Results of each kind as files hold them: Subset Simulation reached and stopped short,
    splitting flagged for few particles, Monte Carlo."""
    problem = linear(dim=2, probability=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        made = [SubsetSimulation(n_samples=200).estimate(problem, seed=0),
                SubsetSimulation(n_samples=200, max_levels=3).estimate(problem, seed=0),
                AdaptiveMultilevelSplitting(n_samples=50, n_replicas=2).estimate(problem, seed=0),
                MonteCarlo(n_samples=4000).estimate(problem, seed=0)]
    return [json.loads(result.to_json()) for result in made]


STORED_KINDS = _stored_results()
nested_values = st.one_of(json_values, st.integers(-(10**400), 10**400), st.sampled_from(["inf", "-inf", "nan"]))


@st.composite
def one_nested_field_changed(draw):
    """A stored result with one field of a level record or of ``info`` replaced, added or removed."""
    data = json.loads(json.dumps(draw(st.sampled_from(STORED_KINDS))))
    if draw(st.booleans()) and data["levels"]:
        record = data["levels"][draw(st.integers(0, len(data["levels"]) - 1))]
    else:
        record = data["info"]
    key = draw(st.sampled_from(sorted(record) + ["bogus"]))
    if draw(st.integers(0, 5)) == 0:
        record.pop(key, None)
    else:
        record[key] = draw(nested_values)
    return data


@hostile
@given(data=one_nested_field_changed())
def test_a_stored_result_with_one_hostile_nested_field_loads_usable_or_is_refused(data):
    """A level record or an ``info`` entry edited or corrupted: refused on loading, or a result
    whose interval, flags, summary and degrees of freedom all answer without a foreign exception
    (a loaded result must be able to state them), with an interval inside [0, 1]."""
    result = _expect_ok_or_scarce(lambda: EstimateResult.from_json(json.dumps(data)))
    if result is None:
        return
    low, high = result.ci(0.95)
    assert 0.0 <= low <= high <= 1.0
    assert isinstance(result.summary(), str) and isinstance(result.flags, tuple)
    df = result.degrees_of_freedom()
    assert df is None or df >= 1.0
    result.few_degrees_of_freedom()
    json.loads(result.to_json())


@hostile
@given(probability=mixed(st.floats(1e-300, 1.0)), cov=mixed(st.floats(0.0, 1e6)),
       level=mixed(st.floats(0.01, 0.999999)), df=mixed(st.one_of(st.none(), st.floats(0.5, 1e6))))
def test_lognormal_interval_holds_the_estimate_or_names_the_argument(probability, cov, level, df):
    out = _expect_ok_or_scarce(lambda: lognormal_interval(probability, cov, level, df))
    if out is None or not (isinstance(probability, float) and probability > 0 and math.isfinite(cov)):
        return
    low, high = out
    assert 0.0 <= low <= probability <= high and not math.isnan(high)


# -- rulers -------------------------------------------------------------------------------------
RULERS = tuple(n for n in available_rulers() if "_p" not in n) + ("pc1_p75",)


@st.composite
def labelled_embeddings(draw):
    n = draw(st.integers(1, 24))
    d = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, d))
    y = (np.arange(n) % 2).astype(int)
    Z[y == 1] += draw(st.sampled_from([0.0, 0.5, 3.0]))
    with np.errstate(over="ignore"):  # 1.7e308 * a normal draw may overflow to inf: hostile too
        Z = Z * draw(st.sampled_from(SCALES))
    mode = draw(st.sampled_from(["plain", "plain", "nan", "inf", "constant", "one_class",
                                 "short_labels", "float_labels", "bool_labels", "string_labels",
                                 "huge_row", "ragged", "int_embeddings", "torch"]))
    if mode == "nan" and n:
        Z[draw(st.integers(0, n - 1)), 0] = np.nan
    elif mode == "inf" and n:
        Z[draw(st.integers(0, n - 1)), 0] = np.inf
    elif mode == "constant":
        Z[:] = Z[0] if n else 0.0
    elif mode == "one_class":
        y[:] = 1
    elif mode == "short_labels":
        y = y[:-1]
    elif mode == "float_labels":
        y = y.astype(float) + draw(st.sampled_from([0.0, 0.5]))
    elif mode == "bool_labels":
        y = y.astype(bool)
    elif mode == "string_labels":
        y = y.astype(str)
    elif mode == "huge_row" and n:
        Z[0] = 1e300
    elif mode == "int_embeddings":
        Z = np.round(Z).astype(np.int64) if np.isfinite(Z).all() and np.abs(Z).max() < 1e18 else Z
    elif mode == "ragged":
        return [list(row) for row in Z] + [[1.0]], y
    elif mode == "torch":
        Z = torch.as_tensor(Z).to(draw(st.sampled_from([torch.bfloat16, torch.float32])))
    return Z, y


@hostile
@given(name=st.sampled_from(RULERS), data=labelled_embeddings())
def test_rulers_on_hostile_embeddings(name, data):
    Z, y = data
    params = {"random_state": 0} if "random_state" in make_ruler(name).get_params() else {}
    ruler = make_ruler(name, **params)
    fitted = _expect_ok_or_scarce(lambda: ruler.fit(Z, y))
    if fitted is None:
        return
    scores = _expect_ok_or_scarce(lambda: fitted.score_samples(Z))
    if scores is not None:
        assert scores.dtype == np.float64 and scores.shape == (len(y),) and np.isfinite(scores).all()
    assert math.isfinite(fitted.threshold(50)) and 0.0 <= fitted.separation_auc_ <= 1.0


@hostile
@given(data=labelled_embeddings(), groups=st.sampled_from(["none", "two", "str", "nan", "short", "one_each"]))
def test_the_boundary_ruler_on_hostile_embeddings_and_groups(data, groups):
    """The ruler that takes the groups: NaN, strings, a wrong length or one row per group give a
    clear error or a fit whose scores are finite."""
    Z, y = data
    n = len(y)
    g = {"none": None, "two": np.arange(n) % 3 // 2, "str": np.array(["a", "b"] * n)[:n],
         "nan": np.where(np.arange(n) == 0, np.nan, 1.0), "short": np.zeros(max(n - 1, 0)),
         "one_each": np.arange(n)}[groups]
    fitted = _expect_ok_or_scarce(lambda: make_ruler("boundary", min_failures=1, min_normals=1).fit(Z, y, groups=g))
    if fitted is None:
        return
    scores = _expect_ok_or_scarce(lambda: fitted.score_samples(Z, groups=g))
    if scores is not None:
        assert scores.dtype == np.float64 and scores.shape == (n,) and np.isfinite(scores).all()
    assert math.isfinite(fitted.threshold(50))


@hostile
@given(name=st.sampled_from(RULERS), value=hostile_scalars, which=st.integers(0, 10))
def test_ruler_parameters(name, value, which):
    params = sorted(make_ruler(name).get_params())
    param = params[which % len(params)]
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(24, 3))
    y = np.arange(24) % 2
    Z[y == 1] += 2.0
    ruler = _expect_ok_or_scarce(lambda: make_ruler(name, **{param: value}).fit(Z, y))
    if ruler is not None:
        assert np.isfinite(ruler.score_samples(Z)).all()


# -- selection ----------------------------------------------------------------------------------
@st.composite
def score_samples(draw):
    n = draw(st.integers(0, 30))
    kind = draw(st.sampled_from(["normal"] * 6 + ["constant", "ties", "nan", "list", "ragged",
                                 "strings", "two_d", "object"]))
    scale = draw(st.sampled_from(SCALES))
    with np.errstate(over="ignore"):
        values = np.random.default_rng(draw(st.integers(0, 2**31))).normal(size=n) * scale
    if kind == "constant":
        values[:] = scale
    elif kind == "ties":
        values = np.round(values / max(scale, 1e-300)) * scale
    elif kind == "nan" and n:
        values[0] = np.nan
    elif kind == "list":
        return values.tolist()
    elif kind == "ragged":
        return [values.tolist(), [1.0]]
    elif kind == "strings":
        return values.astype(str)
    elif kind == "two_d":
        return values.reshape(-1, 1)
    elif kind == "object":
        return np.array(values.tolist() + [None], dtype=object)
    return values


BOUNDED = {"overlap": (0.0, 1.0), "hellinger": (0.0, 1.0), "auc": (0.0, 1.0), "ks": (0.0, 1.0),
           "jensen_shannon": (0.0, math.log(2.0)), "bhattacharyya": (0.0, math.inf),
           "mutual_information": (0.0, math.inf), "wasserstein": (0.0, math.inf),
           "energy": (0.0, math.inf)}


@hostile
@given(good=score_samples(), bad=score_samples(),
       option=st.sampled_from(["k", "bandwidth", "floor", "n_grid", "none"]),
       value=mixed(st.one_of(st.sampled_from(["scott", "silverman"]), st.floats(0.01, 10))))
def test_selection_metrics(good, bad, option, value):
    options = {} if option == "none" else {option: value}
    out = _expect_ok_or_scarce(lambda: compute_metrics(available_metrics(), good, bad, **options))
    if out is None:
        return
    for name, v in out.items():
        assert isinstance(v, float), name
        if name in ("cohens_d", "fisher_ratio"):  # documented: +-inf when both have zero spread
            assert not math.isnan(v), name
            continue
        assert math.isfinite(v), (name, v)
        low, high = BOUNDED.get(name, (-math.inf, math.inf))
        assert low <= v <= high, (name, v)


@hostile
@given(p=score_samples(), q=score_samples(), k=mixed(st.integers(1, 4)))
def test_knn_kl_divergence(p, q, k):
    out = _expect_ok_or_scarce(lambda: knn_kl_divergence(p, q, k))
    if out is not None:
        assert isinstance(out, float) and math.isfinite(out)


@hostile
@given(good=score_samples(), bad=score_samples(),
       bandwidth=mixed(st.one_of(st.sampled_from(["scott", "silverman"]), st.floats(0.01, 10))))
def test_shared_grid_densities(good, bad, bandwidth):
    d = _expect_ok_or_scarce(lambda: shared_grid_densities(good, bad, bandwidth=bandwidth))
    if d is not None:
        assert np.isfinite(d.grid).all() and abs(d.good.sum() - 1) < 1e-9 and abs(d.bad.sum() - 1) < 1e-9


@hostile
@given(x=score_samples(), y=score_samples(), level=mixed(st.floats(0.5, 0.99)),
       n=mixed(st.integers(1, 200)),
       alternative=mixed(st.sampled_from(["greater", "less", "two-sided"])))
def test_rank_statistics(x, y, level, n, alternative):
    for call in (lambda: spearman(x, y), lambda: leave_one_out_min(x, y),
                 lambda: permutation_pvalue(x, y, alternative=alternative, seed=0,
                                            n_resamples=n if isinstance(n, int) and n < 500 else 99),
                 lambda: bootstrap_interval(x, y, level=level, seed=0, n_resamples=50)):
        out = _expect_ok_or_scarce(call)
        if out is not None:
            values = out if isinstance(out, tuple) else (out,)
            assert all(isinstance(v, float) and (math.isnan(v) or -1.0 <= v <= 1.0) for v in values)


@hostile
@given(values=st.one_of(score_samples(), st.dictionaries(st.integers(), hostile_scalars, max_size=3)),
       metric=mixed(st.sampled_from(available_metrics())),
       how=mixed(st.sampled_from(["worst", "mean"])))
def test_aggregate(values, metric, how):
    out = _expect_ok_or_scarce(lambda: aggregate(values, metric, how))
    if out is not None:  # an infinite group value (cohens_d of constant groups) may carry through
        given_values = list(values.values()) if isinstance(values, dict) else values
        assert isinstance(out, float) and not math.isnan(out)
        assert math.isfinite(out) or not np.isfinite(np.asarray(given_values, dtype=float)).all()


@hostile
@given(eta=mixed(st.floats(1e-6, 1)), benign=mixed(st.floats(0, 1)),
       harmful=mixed(st.floats(1e-6, 1)), good=score_samples(), threshold=mixed(st.floats(-3, 3)))
@example(eta=5e-324, benign=0.0, harmful=1.0, good=np.array([]), threshold=0.0)  # inf * 0 warned: no benign mass is 0
def test_leakage(eta, benign, harmful, good, threshold):
    out = _expect_ok_or_scarce(lambda: leakage_relative_bias(eta, benign, harmful))
    if out is not None:
        assert np.all(np.isfinite(out)) and np.all(np.asarray(out) >= 0)
    masses = _expect_ok_or_scarce(lambda: leakage_masses(good, good, threshold))
    if masses is not None:
        assert all(0.0 <= m <= 1.0 for m in masses)


@hostile
@given(sample=score_samples())
def test_identical_samples_show_no_separation(sample):
    out = _expect_ok_or_scarce(lambda: compute_metrics(available_metrics(), sample, sample))
    if out is None:
        return
    assert out["cohens_d"] == 0.0 and out["fisher_ratio"] == 0.0
    assert out["auc"] == 0.5 and out["ks"] == 0.0
    assert out["wasserstein"] == 0.0 and out["energy"] == 0.0
    assert out["overlap"] > 0.99 and out["hellinger"] < 0.01


columns = st.one_of(score_samples(), st.lists(st.one_of(st.integers(0, 2), st.text(max_size=1)),
                                               min_size=0, max_size=8), hostile_scalars)


@st.composite
def long_table(draw):
    """Four equal-length columns: family, group, label 0/1, score."""
    n = draw(st.integers(1, 12))
    column = lambda elements: draw(st.lists(elements, min_size=n, max_size=n))  # noqa: E731
    return (column(st.sampled_from("ab")), column(st.integers(0, 2)), column(st.integers(0, 1)),
            column(st.floats(-5, 5)))


@hostile
@given(table=mixed(long_table(), st.tuples(columns, columns, columns, columns)))
def test_long_format_tables(table):
    family, group, label, score = table
    from scarce.selection import family_ranking, group_scores

    out = _expect_ok_or_scarce(lambda: group_scores(family, group, label, score))
    if out is not None:
        assert all(isinstance(pair, tuple) and len(pair) == 2 for g in out.values() for pair in g.values())
    rows = _expect_ok_or_scarce(lambda: family_ranking(family, group, score))
    if rows is not None:
        assert all(not math.isnan(r.mean_error) for r in rows)


@st.composite
def family_values(draw):
    """``family -> group -> value`` with every family on the same groups, and errors."""
    families = draw(st.lists(st.sampled_from("abcdef"), min_size=3, max_size=6, unique=True))
    groups = draw(st.lists(st.integers(0, 3), min_size=1, max_size=3, unique=True))
    number = st.floats(-10, 10)
    values = {f: {g: draw(number) for g in groups} for f in families}
    return values, {f: draw(st.floats(0, 5)) for f in families}


@hostile
@given(values=mixed(family_values().map(lambda t: t[0]),
                    st.dictionaries(st.sampled_from("abcdef"),
                                    st.dictionaries(st.integers(0, 2), hostile_scalars, max_size=3),
                                    max_size=6)),
       errors=mixed(st.dictionaries(st.sampled_from("abcdef"), st.floats(0, 5), min_size=6),
                    st.dictionaries(st.sampled_from("abcdef"), hostile_scalars, max_size=6)),
       metric=mixed(st.sampled_from(available_metrics())))
def test_validate_selector(values, errors, metric):
    from scarce.selection import validate_selector

    out = _expect_ok_or_scarce(lambda: validate_selector(values, errors, metric=metric,
                                                         n_resamples=20, n_permutations=20, seed=0))
    if out is not None:
        assert math.isnan(out.rho) or -1.0 <= out.rho <= 1.0


@hostile
@given(name=st.sampled_from(RULERS), percentile=mixed(st.floats(1, 99)),
       metrics=mixed(st.lists(st.sampled_from(available_metrics()), max_size=3)),
       columns=st.integers(1, 5))
def test_fitted_ruler_threshold_diagnostics_and_scoring(name, percentile, metrics, columns):
    from scarce.rulers import percentile_threshold

    Z, y = np.random.default_rng(0).normal(size=(24, 3)), np.arange(24) % 2
    Z[y == 1] += 2.0
    ruler = make_ruler(name).fit(Z, y)
    tau = _expect_ok_or_scarce(lambda: ruler.threshold(percentile))
    if tau is not None:
        assert math.isfinite(tau)
    tau = _expect_ok_or_scarce(lambda: percentile_threshold(ruler.bad_scores_, percentile))
    if tau is not None:
        assert ruler.bad_scores_.min() <= tau <= ruler.bad_scores_.max()
    out = _expect_ok_or_scarce(lambda: ruler.diagnostics(Z, y, metrics=metrics))
    if out is not None:
        assert all(not math.isnan(v) for v in out.values())
    scores = _expect_ok_or_scarce(lambda: ruler.score_samples(np.ones((2, columns))))
    if scores is not None:
        assert columns == 3 and np.isfinite(scores).all()


SCALE_FREE_RULERS = ("centroid", "centroid_rot_045deg", "pc1", "fisher", "mah_bad", "mah_good",
                     "mah_contrast", "ocsvm_bad", "ocsvm_good", "ocsvm_contrast")


@hostile
@given(name=st.sampled_from(SCALE_FREE_RULERS), exponent=st.integers(-1000, 1000),
       seed=st.integers(0, 2**16))
def test_scale_free_rulers_rank_the_same_at_any_magnitude(name, exponent, seed):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(30, 3))
    y = np.arange(30) % 2
    Z[y == 1] += 1.5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = make_ruler(name).fit(Z, y)
        scaled = make_ruler(name).fit(Z * 2.0**exponent, y)
    scores = scaled.score_samples(Z * 2.0**exponent)
    assert np.isfinite(scores).all()
    assert scaled.separation_auc_ == pytest.approx(reference.separation_auc_, abs=0.03)


@hostile
@given(good=score_samples(), bad=score_samples())
def test_auc_and_cohens_d_direct_calls(good, bad):
    from scarce.selection import auc, cohens_d

    a = _expect_ok_or_scarce(lambda: auc(good, bad))
    if a is not None:
        assert 0.0 <= a <= 1.0
    d = _expect_ok_or_scarce(lambda: cohens_d(good, bad))
    if d is not None:
        assert not math.isnan(d)


@hostile
@given(name=st.sampled_from(["linear", "four_branch", "chi_square", "two_regions"]),
       param=st.sampled_from(["dim", "probability", "k", "bogus"]),
       value=st.one_of(hostile_scalars, st.sampled_from([5e-324, 1e-320, 1e-300, 1 - 1e-16, 1e8])))
def test_benchmark_problems(name, param, value):
    from scarce.problems import make_problem

    if param == "dim" and isinstance(value, (int, np.integer)) and 10_000 < value:
        value = 10**9  # a valid large dimension would only cost memory here: take a rejected one
    problem = _expect_ok_or_scarce(lambda: make_problem(name, **{param: value}))
    if problem is None:
        return
    assert 0.0 < problem.exact_probability <= 1.0
    score, failed = problem.evaluate_latent(np.zeros((3, problem.dim)))
    assert np.isfinite(score).all()


EVIDENCE_KEYS = ("failure_lineages", "failure_origin_chains", "failure_origin_level", "failure_lineages_effective",
                 "failures_found", "failures_below_boundary", "cov_degrees_of_freedom")


@hostile
@given(values=st.fixed_dictionaries({}, optional={key: st.one_of(hostile_scalars, st.sampled_from([10**400, -(10**400)]))
                                                  for key in EVIDENCE_KEYS}),
       cov=st.sampled_from([0.0, 0.3, 2.0, math.inf, math.nan]), n_levels=st.integers(0, 5))
@example(values={"failure_lineages": np.float64(math.inf)}, cov=0.3, n_levels=1)  # df was inf: ci() raised
@example(values={"cov_degrees_of_freedom": math.inf, "failure_lineages": 5}, cov=0.3, n_levels=2)
def test_a_result_read_back_with_hostile_evidence_counts_still_gives_flags_and_an_interval(values, cov, n_levels):
    """A result file edited by hand (or by another version) may carry anything where the engine's
    counts were: flags, the interval and the summary must still come out, within [0, 1]."""
    from scarce.results import EstimateResult, LevelDiagnostics

    levels = tuple(LevelDiagnostics(i, float(i), 0.1, 0.1 ** i, 50, 0.0, 0.1, 500, 0) for i in range(n_levels))
    result = EstimateResult("subset_simulation", 1e-4, cov, 2000, 500, 30, True, "converged",
                            levels=levels, info=dict(values))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        flags, reason = result.flags, result.thin_evidence_reason
        lo, hi = result.ci(0.95)
        result.summary()
    assert reason in (None, "lineages", "order") and result.thin_evidence is (reason is not None)
    assert any(f.startswith("thin evidence") for f in flags) is (reason is not None)
    assert 0.0 <= lo <= 1.0 and (math.isnan(hi) or lo <= hi <= 1.0)


# -- a label-only target of the own-model API -----------------------------------------------------
LABEL_KINDS = ("labels", "labels", "labels", "column", "list", "torch", "floats", "logits", "grad logits",
               "short", "long", "out of range", "huge", "negative", "bools", "strings", "objects", "scalar",
               "none", "raises")


def _answer(kind: str, n: int, rng: np.random.Generator):  # type: ignore[no-untyped-def]
    """What a target answers a batch of ``n`` with, for each kind of (mis)behaviour."""
    labels = rng.integers(0, 4, size=n)
    if kind == "raises":
        raise RuntimeError("the service is down")
    return {
        "labels": labels, "column": labels[:, None], "list": labels.tolist(), "torch": torch.as_tensor(labels),
        "floats": labels.astype(np.float64), "logits": rng.normal(size=(n, 4)),
        "grad logits": torch.zeros((n, 4), requires_grad=True), "short": labels[:-1], "long": np.append(labels, 0),
        "out of range": labels + 4, "huge": np.full(n, 2**40), "negative": -labels - 1,
        "bools": labels > 1, "strings": labels.astype(str), "objects": np.array([None] * n, dtype=object),
        "scalar": 1, "none": None,
    }[kind]


@hostile
@given(kind=st.sampled_from(LABEL_KINDS), later=st.sampled_from(LABEL_KINDS), switch=st.integers(0, 3),
       seed=st.integers(0, 2**31), as_object=st.booleans())
def test_a_label_only_target_answering_anything_gives_a_result_or_a_scarce_error(kind, later, switch, seed,
                                                                                  as_object):
    """The first ``switch`` answers are of one kind and the rest of another, so a target that passes
    the probe and misbehaves mid-run is covered; a valid run must give a probability in [0, 1]."""
    import scarce.vision as sv
    from user_models import X_MLP, mlp

    rng, calls = np.random.default_rng(seed), [0]

    def answers(x):  # type: ignore[no-untyped-def]
        calls[0] += 1
        return _answer(kind if calls[0] <= switch else later, len(x), rng)

    target = type("Deployed", (), {"predict_labels": lambda self, x: answers(x)})() if as_object else answers
    result = _expect_ok_or_scarce(lambda: sv.failure_probability(
        mlp(), X_MLP, target=target, score="surrogate_margin", scale=0.25, n_samples=100, device="cpu"))
    if result is not None:
        assert 0.0 <= result.probability <= 1.0 and result.n_queries > 0


# -- response-surface sampling under hostile scores ----------------------------------------------
_SURFACE_SCORES = ("linear", "quadratic", "constant", "steps", "sign", "abs", "tiny_noise")


@st.composite
def _hostile_score_problems(draw):
    """A small problem whose score is linear, quadratic, tied, signed or noisy, at any scale."""
    dim = draw(st.integers(1, 6))
    shape = draw(st.sampled_from(_SURFACE_SCORES))
    scale = draw(st.sampled_from(SCALES))
    threshold = draw(st.sampled_from([0.5, 2.0, 3.5]))
    direction = np.random.default_rng(draw(st.integers(0, 2**31))).normal(size=dim)
    direction /= np.linalg.norm(direction)

    def raw(u):
        t = u @ direction
        values = {"linear": t, "quadratic": (u * u).sum(1) - dim, "constant": np.zeros(len(u)),
                  "steps": np.floor(2 * t) / 2, "sign": np.sign(t), "abs": np.abs(t),
                  "tiny_noise": t + 1e-12 * np.sin(1e6 * u[:, 0])}[shape]
        return values

    def evaluate(u):
        with np.errstate(over="ignore"):
            return raw(u) * scale, raw(u) >= threshold

    event(f"{shape} x {scale:g}")
    return RareEventProblem(dim, evaluate, name=f"{shape}x{scale:g}")


@hostile
@given(problem=_hostile_score_problems(), n=st.sampled_from([100, 160]), seed=st.integers(0, 3))
def test_response_surface_sampling_gives_a_result_or_a_clean_error_on_any_score(problem, n, seed):
    from scarce.kernels import ResponseSurfaceSampling

    estimator = SubsetSimulation(n_samples=n, max_levels=6, kernel=ResponseSurfaceSampling())
    result = _expect_ok_or_scarce(lambda: estimator.estimate(problem, seed=seed))
    if result is not None:
        assert 0.0 <= result.probability <= 1.0 and result.n_queries > 0
        low, high = result.ci(0.95)
        assert 0.0 <= low <= high <= 1.0


@hostile
@given(n=st.integers(0, 80), dim=st.integers(1, 4), scale=st.sampled_from(SCALES),
       threshold=st.sampled_from([-math.inf, -1.0, 0.0, 1.0, math.inf, math.nan]),
       failed=st.integers(0, 5), seed=st.integers(0, 2**31))
def test_fit_surface_returns_a_surface_or_none_for_any_sample(n, dim, scale, threshold, failed, seed):
    from scarce.kernels.response_surface import fit_surface
    from scarce.kernels.surface import global_move

    rng = np.random.default_rng(seed)
    u = rng.normal(size=(n, dim))
    with np.errstate(over="ignore"):
        score = (u.sum(axis=1) + 0.3 * (u * u).sum(axis=1)) * scale
    score[:min(failed, n)] = math.inf
    surface = _expect_ok_or_scarce(lambda: fit_surface(u, score, threshold, 0.9))
    if surface is not None:
        state = u[np.isposinf(score) | (score >= threshold)]
        moved = _expect_ok_or_scarce(lambda: global_move(surface, state, rng))
        assert moved is not None
        candidate, log_factor = moved
        assert candidate.shape == state.shape and np.isfinite(candidate).all()
        assert not np.isnan(log_factor).any()


@hostile
@given(n=st.integers(0, 80), dim=st.integers(1, 4), scale=st.sampled_from(SCALES),
       new_scale=st.sampled_from(SCALES), threshold=st.sampled_from([-math.inf, -1.0, 0.0, 1.0, math.inf, math.nan]),
       failed=st.integers(0, 5), seeds=st.integers(0, 40), seed=st.integers(0, 2**31))
def test_a_reused_fit_gives_surfaces_or_none_for_any_new_level(n, dim, scale, new_scale, threshold, failed, seeds,
                                                                seed):
    """A fit made on one sample, reused on another scored at another scale and threshold: surfaces or None."""
    from scarce.kernels.response_surface import cross_fitted_surfaces, reused_surfaces
    from scarce.kernels.surface import global_move

    rng = np.random.default_rng(seed)
    u = rng.normal(size=(max(n, 40), dim))
    with np.errstate(over="ignore"):
        score = (u.sum(axis=1) + 0.3 * (u * u).sum(axis=1)) * scale
    fitted = _expect_ok_or_scarce(lambda: cross_fitted_surfaces(u[score >= 0.0], u, score, 0.0, 0.9))
    basis = None if fitted is None else fitted[1]
    if basis is None:
        return
    new = np.concatenate([u[:seeds], rng.normal(size=(n, dim))])  # some rows of the fit among the new points
    with np.errstate(over="ignore"):
        new_score = (new.sum(axis=1) + 0.3 * (new * new).sum(axis=1)) * new_scale
    new_score[:min(failed, n)] = math.inf
    reused = _expect_ok_or_scarce(lambda: reused_surfaces(basis, new[:seeds], new, new_score, threshold, 0.9))
    if reused is not None:
        state = new[np.isposinf(new_score) | (new_score >= threshold)]
        moved = _expect_ok_or_scarce(lambda: global_move(reused[0], state, rng))
        assert moved is not None
        candidate, log_factor = moved
        assert candidate.shape == state.shape and np.isfinite(candidate).all()
        assert not np.isnan(log_factor).any()
