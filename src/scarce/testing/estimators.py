"""The estimator contract, as checks a user runs on their own estimator.

An estimator is a class whose constructor only stores its parameters and whose
``estimate(problem, seed=...)`` returns a :class:`~scarce.results.EstimateResult`.  The checks
take the estimator as the user configured it (its ``n_samples`` and the rest) and run it on
small benchmark problems of :mod:`scarce.problems` with a known answer, in two dimensions:

* ``linear`` at ``P = 1e-3`` (:data:`PROBABILITY`): about 100 failures among the 100,000
  draws of a default :class:`~scarce.estimators.MonteCarlo`, so every rule but the budget one
  runs there;
* ``linear`` at ``P = 1e-6`` (:data:`RARE_PROBABILITY`) for the budget rule.

The checks are seeded, so an estimator passes or fails them the same way every time.  They
judge the configuration they are given: an estimator configured with too few samples to
see a failure at ``1e-3`` (``MonteCarlo(n_samples=500)``) breaks ``agrees_with_monte_carlo``,
which says so; pass a configuration that can estimate ``1e-3``.

>>> from scarce.estimators import MonteCarlo, SubsetSimulation
>>> from scarce.testing.estimators import check_estimator
>>> check_estimator(SubsetSimulation(n_samples=500))
[]
>>> check_estimator(MonteCarlo(n_samples=50_000))  # it has no query budget
['budget_gives_flagged_partial_result']
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import re
import warnings
from typing import Any

import numpy as np

from scarce.errors import ScarceWarning
from scarce.problem import RareEventProblem
from scarce.results import STATUSES, EstimateResult
from scarce.testing._base import Check, CheckSkipped, rule, run_checks

__all__ = ["check_estimator", "estimator_checks"]

DIM, PROBABILITY, RARE_PROBABILITY = 2, 1e-3, 1e-6
#: The seed of every single-run check, and the seeds whose mean ``agrees_with_monte_carlo`` judges.
SEED, AGREEMENT_SEEDS = 7, (0, 1, 2, 3)
#: How many of its own reported standard deviations the mean estimate may lie from the truth.
SIGMAS = 5.0
#: The budget rule's first ``max_queries``, in units of ``n_samples`` (one level and a bit);
#: doubled while the estimator refuses it before any model call as smaller than one level.
BUDGET_FACTOR, BUDGET_DOUBLINGS = 1.5, 12
#: Keys of ``EstimateResult.to_dict()`` (and of its ``info``) that hold timings, not results.
TIMING_KEY = re.compile(r"time|wall|second|elapsed|duration", re.IGNORECASE)


def _problem(probability: float = PROBABILITY) -> RareEventProblem:
    from scarce.problems import make_problem

    return make_problem("linear", dim=DIM, probability=probability)


class _Recorder:
    """A problem whose ``evaluate`` counts the rows it is given and hashes them, in order."""

    def __init__(self, problem: RareEventProblem) -> None:
        self.rows, self._hash = 0, hashlib.sha256()
        self.problem = RareEventProblem(problem.dim, self._evaluate, problem.transform, name=problem.name,
                                        exact_probability=problem.exact_probability)
        self._inner = problem.evaluate

    def _evaluate(self, x: Any) -> Any:
        self.rows += len(x)
        self._hash.update(np.ascontiguousarray(np.asarray(x)).tobytes())
        return self._inner(x)

    @property
    def digest(self) -> str:
        return self._hash.hexdigest()


def _estimate(estimator: Any, problem: RareEventProblem, seed: int) -> EstimateResult:
    """``estimator.estimate(problem, seed=seed)`` with ScarceWarnings silenced; it must be an EstimateResult."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScarceWarning)
        result = estimator.estimate(problem, seed=seed)
    assert isinstance(result, EstimateResult), f"estimate returned {type(result).__name__}, not an EstimateResult"
    return result


def _init_names(estimator: Any) -> list[str]:
    """The parameters ``type(estimator).__init__`` takes by name (not ``self``, ``*args``, ``**kwargs``)."""
    params = list(inspect.signature(type(estimator).__init__).parameters.values())[1:]
    return [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _params(estimator: Any) -> dict[str, Any]:
    """The constructor parameters, read back from the attributes of the same names."""
    names = _init_names(estimator)
    missing = [name for name in names if not hasattr(estimator, name)]
    assert not missing, (f"constructor parameter(s) {missing} are not stored as attributes of the same name "
                         "(the constructor must only store its parameters)")
    return {name: getattr(estimator, name) for name in names}


def _same(a: Any, b: Any) -> bool:
    """``a`` equals ``b`` (NaN equals NaN; arrays compared by value)."""
    if a is b:
        return True
    try:
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            numeric = all(np.asarray(x).dtype.kind in "biufc" for x in (a, b))
            return bool(np.array_equal(a, b, equal_nan=numeric))
        if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
            return True
        return bool(a == b)
    except Exception:  # noqa: BLE001 - objects that cannot be compared are not equal
        return False


def _without_timing(value: Any) -> Any:
    """``value`` with every key that holds a timing (:data:`TIMING_KEY`) dropped, at any depth."""
    if isinstance(value, dict):
        return {k: _without_timing(v) for k, v in value.items() if not TIMING_KEY.search(str(k))}
    if isinstance(value, (list, tuple)):
        return [_without_timing(v) for v in value]
    return value


def _comparable(result: EstimateResult) -> str:
    """``result.to_dict()`` without timings, as canonical text (NaN written the same way each time)."""
    return json.dumps(_without_timing(result.to_dict()), sort_keys=True, default=repr)


def _clone(estimator: Any, **changes: Any) -> Any:
    """``type(estimator)(**params)`` with the parameters read from its attributes, some changed."""
    return type(estimator)(**{**_params(estimator), **changes})


# -- the rules ------------------------------------------------------------------------------------
@rule("The constructor only stores its parameters, as attributes of the same names; estimate validates them.")
def check_constructor_only_stores(estimator) -> None:  # type: ignore[no-untyped-def]
    clone = _clone(estimator)
    mine, theirs = getattr(estimator, "__dict__", {}), getattr(clone, "__dict__", {})
    differ = sorted(k for k in set(mine) | set(theirs) if k not in mine or k not in theirs
                    or not _same(mine[k], theirs[k]))
    assert not differ, (f"type(est)(**params), with params read from est's attributes, differs in attribute(s) "
                        f"{differ}: the constructor must store its parameters unchanged and derive nothing")
    if "n_samples" in _init_names(estimator):
        _check_validation_deferred(estimator, "n_samples", -1)


def _check_validation_deferred(estimator: Any, name: str, value: Any) -> None:
    """Constructing with ``name=value`` succeeds; ``estimate`` raises a ValueError naming it, before any query."""
    try:
        bad = _clone(estimator, **{name: value})
    except Exception as exc:  # noqa: BLE001 - any exception here breaks the rule
        raise AssertionError(f"the constructor raised {type(exc).__name__} for {name}={value!r} ({exc}); it must "
                             "only store its parameters and leave their validation to estimate") from exc
    recorder = _Recorder(_problem())
    try:
        _estimate(bad, recorder.problem, SEED)
    except ValueError as exc:
        assert name in str(exc), f"estimate with {name}={value!r} raised a ValueError that does not name {name}: {exc}"
    except Exception as exc:  # noqa: BLE001
        raise AssertionError(f"estimate with {name}={value!r} raised {type(exc).__name__} ({exc}), not a "
                             f"ValueError naming {name} (scarce.errors.ScarceError is one)") from exc
    else:
        raise AssertionError(f"estimate accepted {name}={value!r}; it must raise a ValueError naming {name}")
    assert recorder.rows == 0, f"estimate made {recorder.rows} model queries before refusing {name}={value!r}"


@rule("Two runs with the same seed query the same points and give the same result (timings aside).")
def check_same_seed_same_result(estimator) -> None:  # type: ignore[no-untyped-def]
    runs = []
    for _ in range(2):
        recorder = _Recorder(_problem())
        runs.append((recorder, _estimate(estimator, recorder.problem, SEED)))
    (first, a), (second, b) = runs
    assert first.digest == second.digest, (
        f"two runs with seed={SEED} evaluated different points ({first.rows} and {second.rows} rows): the "
        "estimator draws from randomness other than the seed it is given (np.random's global state, an "
        "unseeded generator)")
    da, db = json.loads(_comparable(a)), json.loads(_comparable(b))
    differ = sorted(k for k in set(da) | set(db) if da.get(k) != db.get(k))
    assert not differ, f"two runs with seed={SEED} gave results that differ in {differ}"


@rule("result.n_queries equals the number of points the estimator gave the model.")
def check_counts_queries(estimator) -> None:  # type: ignore[no-untyped-def]
    recorder = _Recorder(_problem())
    result = _estimate(estimator, recorder.problem, SEED)
    assert result.n_queries == recorder.rows, (
        f"result.n_queries is {result.n_queries!r} but the model was given {recorder.rows} points")


@rule("The result survives to_json/from_json and to_dict/from_dict unchanged, as strict JSON.")
def check_json_round_trip(estimator) -> None:  # type: ignore[no-untyped-def]
    result = _estimate(estimator, _problem(), SEED)
    assert result.status in STATUSES, f"status {result.status!r} is not one of {STATUSES}"
    text = result.to_json()

    def refuse(constant: str) -> None:
        raise AssertionError(f"to_json wrote {constant}, which strict JSON has no place for")

    json.loads(text, parse_constant=refuse)
    for how, back in (("from_json(to_json())", EstimateResult.from_json(text)),
                      ("from_dict(to_dict())", EstimateResult.from_dict(result.to_dict()))):
        for name in ("method", "probability", "cov", "n_queries", "n_samples", "n_failed", "reached_failure",
                     "status", "level_probability", "interval", "problem"):
            assert _same(getattr(back, name), getattr(result, name)), (
                f"{how} changed {name}: {getattr(result, name)!r} -> {getattr(back, name)!r}")
        assert len(back.levels) == len(result.levels), f"{how} changed the number of levels"
        assert back.to_json() == text, f"{how} does not give back the same JSON (levels or info changed)"


@rule("On linear(d=2, P=1e-3) the mean of four seeded estimates lies within 5 reported standard errors of P.")
def check_agrees_with_monte_carlo(estimator) -> None:  # type: ignore[no-untyped-def]
    problem = _problem()
    exact = problem.exact_probability
    estimates, covs = [], []
    for seed in AGREEMENT_SEEDS:
        result = _estimate(estimator, problem, seed)
        assert result.probability > 0 and math.isfinite(result.cov), (
            f"seed {seed}: estimate {result.probability!r} with cov {result.cov!r} of P = {exact:g} on "
            f"{problem.name} ({result.n_queries} queries); an estimator configured with too few samples to "
            "see a failure there cannot be checked: give it more (n_samples)")
        estimates.append(result.probability)
        covs.append(result.cov)
    mean, rms_cov = float(np.mean(estimates)), math.sqrt(float(np.mean(np.square(covs))))
    tolerance = SIGMAS * exact * rms_cov / math.sqrt(len(AGREEMENT_SEEDS))
    assert abs(mean - exact) <= tolerance, (
        f"the mean of the estimates over seeds {AGREEMENT_SEEDS}, {mean:.4g}, lies {abs(mean - exact) / exact:.1%} "
        f"from P = {exact:g}; the reported CoVs (rms {rms_cov:.3f}) allow {tolerance / exact:.1%} "
        f"({SIGMAS:g} standard errors of the mean): the estimator is biased or under-reports its CoV")


def _budget_run(estimator: Any) -> tuple[EstimateResult, int, int]:
    """A run on the rare problem under the smallest tried budget the estimator accepts: (result, budget, rows)."""
    n = getattr(estimator, "n_samples", None)
    usable = isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n > 0
    budget = math.ceil(BUDGET_FACTOR * n) if usable else 1000
    for _ in range(BUDGET_DOUBLINGS + 1):
        recorder = _Recorder(_problem(RARE_PROBABILITY))
        try:
            return _estimate(_clone(estimator, max_queries=budget), recorder.problem, SEED), budget, recorder.rows
        except ValueError as exc:  # refused as smaller than one level (AMLS: n_samples * (n_steps + 1))
            if "max_queries" not in str(exc) or recorder.rows:
                raise
            budget *= 2
    raise AssertionError(f"estimate refused every max_queries up to {budget // 2}")


@rule("With max_queries of about one level, a run stops flagged: status 'budget', failure not reached, within budget.")
def check_budget_gives_flagged_partial_result(estimator) -> None:  # type: ignore[no-untyped-def]
    if "max_queries" not in _init_names(estimator):
        raise CheckSkipped(f"{type(estimator).__name__} takes no max_queries")
    result, budget, rows = _budget_run(estimator)
    where = f"with max_queries={budget} on linear(d={DIM}, P={RARE_PROBABILITY:g})"
    assert result.status == "budget", f"{where}: status {result.status!r}, expected 'budget'"
    assert result.reached_failure is False, (
        f"{where}: reached_failure is {result.reached_failure!r} ({type(result.reached_failure).__name__}), "
        "expected False")
    assert "query budget exhausted" in result.flags, f"{where}: flags {result.flags} do not say the budget stopped it"
    assert rows <= budget and result.n_queries <= budget, (
        f"{where}: {rows} points evaluated, n_queries {result.n_queries}: over the budget")


def estimator_checks(estimator) -> list[Check]:  # type: ignore[no-untyped-def]
    """The estimator contract's checks, each ``check(estimator)``; for ``pytest.mark.parametrize``.

    Parameters
    ----------
    estimator : object
        Unused (the list is the same for every estimator); kept so the suites read alike.

    Returns
    -------
    list of Check
        In the order :func:`check_estimator` runs them.

    Examples
    --------
    >>> [check.rule for check in estimator_checks(None)][:3]
    ['constructor_only_stores', 'same_seed_same_result', 'counts_queries']
    """
    return [check_constructor_only_stores, check_same_seed_same_result, check_counts_queries,
            check_json_round_trip, check_agrees_with_monte_carlo, check_budget_gives_flagged_partial_result]


def check_estimator(estimator) -> list[str]:  # type: ignore[no-untyped-def]
    """Run the estimator contract on ``estimator`` as configured.

    Parameters
    ----------
    estimator : object
        An instance, e.g. ``SubsetSimulation(n_samples=500)``; the checks clone it (``type(est)(**params)``)
        where they change a parameter, and never modify it.

    Returns
    -------
    list of str
        The rules skipped (``budget_gives_flagged_partial_result`` for an estimator without ``max_queries``).

    Raises
    ------
    ContractViolation
        The first rule broken; its ``rule`` attribute names it and its message says how.

    Examples
    --------
    >>> from scarce.estimators import AMLS
    >>> check_estimator(AMLS(n_samples=200, n_steps=10, initial_width=0.5))
    []
    """
    return run_checks(estimator, estimator_checks(estimator))
