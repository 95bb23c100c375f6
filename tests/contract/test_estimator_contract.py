"""The estimator contract (:mod:`scarce.testing.estimators`) over every registered estimator, proof
that it catches an estimator that breaks it (naming the rule), and the estimator registry."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from scarce.checks import check_positive_int
from scarce.errors import ScarceError
from scarce.estimators import AMLS, MonteCarlo, SubsetSimulation, available_estimators, make_estimator, register_estimator
from scarce.estimators import registry
from scarce.results import EstimateResult, LevelDiagnostics
from scarce.testing._base import ContractViolation
from scarce.testing.estimators import check_estimator, estimator_checks

#: Small configurations, fast enough for the test suite (each still sees failures at 1e-3).
CONFIGS = {
    "subset_simulation": {"n_samples": 500},
    "monte_carlo": {"n_samples": 50_000},
    "amls": {"n_samples": 200, "n_steps": 10, "initial_width": 0.5},
    "splitting": {"n_samples": 200, "n_killed": 100, "n_steps": 3},
}
#: Rules that do not apply to a registered estimator (everything else must run and pass).
SKIPPED = {"monte_carlo": ["budget_gives_flagged_partial_result"]}


@pytest.mark.parametrize("name", available_estimators())
def test_every_registered_estimator_keeps_the_contract(name):
    assert name in CONFIGS, f"add a small configuration of the new estimator {name!r} to CONFIGS"
    assert check_estimator(make_estimator(name, **CONFIGS[name])) == SKIPPED.get(name, [])


@pytest.mark.parametrize("name, config", [("subset_simulation", {"n_samples": 500}),
                                          ("splitting", {"n_samples": 200, "n_killed": 100, "n_steps": 1})])
def test_the_estimators_keep_the_contract_with_response_surface_sampling(name, config):
    """The contract's problem is linear: its levels are sampled by the kernel's global moves."""
    from scarce.kernels import ResponseSurfaceSampling

    assert check_estimator(make_estimator(name, kernel=ResponseSurfaceSampling(), **config)) == []


def test_the_suite_lists_its_rules_once_each():
    rules = [check.rule for check in estimator_checks(None)]
    assert rules == ["constructor_only_stores", "same_seed_same_result", "counts_queries", "json_round_trip",
                     "agrees_with_monte_carlo", "budget_gives_flagged_partial_result"]
    assert all(check.doc for check in estimator_checks(None))


def test_the_suite_leaves_the_estimator_it_checks_unchanged():
    estimator = SubsetSimulation(n_samples=500)
    before = dict(vars(estimator))
    check_estimator(estimator)
    assert vars(estimator) == before


def test_the_chunked_monte_carlo_of_experiments_keeps_the_contract_too():
    from scarce.experiments.montecarlo import ChunkedMonteCarlo

    estimator = ChunkedMonteCarlo(n_samples=50_000, chunk_size=25_000, batch_size=10_000)
    assert check_estimator(estimator) == ["budget_gives_flagged_partial_result"]


# -- the suite catches what breaks it ------------------------------------------------------------
class _ValidatingConstructor(MonteCarlo):
    """Validates n_samples when constructed, not in estimate."""

    def __init__(self, n_samples: int = 100_000, batch_size: int = 10_000, dtype: str = "float64") -> None:
        super().__init__(check_positive_int("n_samples", n_samples), batch_size, dtype)


class _DerivingConstructor(MonteCarlo):
    """Stores something it derived (a generator drawn at construction) besides its parameters."""

    def __init__(self, n_samples: int = 100_000, batch_size: int = 10_000, dtype: str = "float64") -> None:
        super().__init__(n_samples, batch_size, dtype)
        self.rng = np.random.default_rng()


class _UnderReporting(MonteCarlo):
    """Reports half the queries it made."""

    def estimate(self, problem, seed=None, callback=None):  # type: ignore[no-untyped-def]
        result = super().estimate(problem, seed, callback)
        return dataclasses.replace(result, n_queries=result.n_queries // 2)


class _UnseededGenerator(MonteCarlo):
    """Ignores the seed: a fresh unseeded generator every run."""

    def estimate(self, problem, seed=None, callback=None):  # type: ignore[no-untyped-def]
        return super().estimate(problem, None, callback)


class _GlobalState(MonteCarlo):
    """Ignores the seed: draws from np.random's global state."""

    def estimate(self, problem, seed=None, callback=None):  # type: ignore[no-untyped-def]
        n = check_positive_int("n_samples", self.n_samples)
        _, failed = problem.evaluate_latent(np.random.standard_normal((n, problem.dim)))
        k = int(failed.sum())
        cov = math.sqrt((1 - k / n) / k) if k else math.inf
        level = LevelDiagnostics(0, math.inf, k / n, k / n, k, 0.0, cov, n, k)
        return EstimateResult("global", k / n, cov, n, n, k, True, "converged", (level,), interval="clopper-pearson")


class _Biased(MonteCarlo):
    """Reports ten times the probability it measured (with the CoV it measured, and a log-normal
    interval about it: a Clopper-Pearson one would no longer be of the failed fraction, which
    reading the result back refuses)."""

    def estimate(self, problem, seed=None, callback=None):  # type: ignore[no-untyped-def]
        result = super().estimate(problem, seed, callback)
        return dataclasses.replace(result, probability=10 * result.probability, interval="lognormal")


class _OverBudget(SubsetSimulation):
    """Ignores max_queries: runs to the failure event."""

    def estimate(self, problem, seed=None, callback=None):  # type: ignore[no-untyped-def]
        return SubsetSimulation(**{**vars(self), "max_queries": None}).estimate(problem, seed, callback)


class _LossyJson(MonteCarlo):
    """Puts a set in info: to_json cannot write it."""

    def estimate(self, problem, seed=None, callback=None):  # type: ignore[no-untyped-def]
        result = super().estimate(problem, seed, callback)
        return dataclasses.replace(result, info={**result.info, "tags": {"a"}})


BROKEN = [
    (_ValidatingConstructor(n_samples=50_000), "constructor_only_stores"),
    (_DerivingConstructor(n_samples=50_000), "constructor_only_stores"),
    (_UnseededGenerator(n_samples=50_000), "same_seed_same_result"),
    (_GlobalState(n_samples=50_000), "same_seed_same_result"),
    (_UnderReporting(n_samples=50_000), "counts_queries"),
    (_LossyJson(n_samples=50_000), "json_round_trip"),
    (_Biased(n_samples=50_000), "agrees_with_monte_carlo"),
    (MonteCarlo(n_samples=500), "agrees_with_monte_carlo"),  # too few samples to see a failure at 1e-3
]


@pytest.mark.parametrize("estimator, rule", BROKEN, ids=lambda x: type(x).__name__.strip("_") if not isinstance(x, str) else x)
def test_the_suite_names_the_rule_an_estimator_breaks(estimator, rule):
    with pytest.raises(ContractViolation, match=rule) as info:
        check_estimator(estimator)
    assert info.value.rule == rule


def test_a_budget_that_is_ignored_breaks_the_budget_rule():
    with pytest.raises(ContractViolation, match="status 'converged', expected 'budget'") as info:
        check_estimator(_OverBudget(n_samples=500))
    assert info.value.rule == "budget_gives_flagged_partial_result"


def test_the_constructor_rule_says_what_to_fix():
    with pytest.raises(ContractViolation, match="constructor raised ScarceError for n_samples=-1"):
        check_estimator(_ValidatingConstructor(n_samples=50_000))
    with pytest.raises(ContractViolation, match=r"differs in attribute\(s\) \['rng'\]"):
        check_estimator(_DerivingConstructor(n_samples=50_000))


# -- the registry ----------------------------------------------------------------------------------
@pytest.fixture
def scratch_registry(monkeypatch):
    """The registry, restored after the test."""
    monkeypatch.setattr(registry, "ESTIMATORS", dict(registry.ESTIMATORS))
    return registry.ESTIMATORS


def test_the_registry_builds_each_estimator_by_name():
    assert available_estimators() == ["amls", "monte_carlo", "splitting", "subset_simulation"]
    assert isinstance(make_estimator("subset_simulation"), SubsetSimulation)
    assert isinstance(make_estimator("monte_carlo", n_samples=10), MonteCarlo)
    assert make_estimator("amls", n_steps=3, target_acceptance=0.2).target_acceptance == 0.2  # keyword-only too
    assert isinstance(make_estimator("amls"), AMLS)


def test_an_unknown_name_suggests_the_closest():
    with pytest.raises(ScarceError, match=r"unknown estimator 'amsl'\. Did you mean 'amls'\?.*Available: amls, "
                                          r"monte_carlo, splitting, subset_simulation"):
        make_estimator("amsl")
    with pytest.raises(ScarceError, match="Did you mean 'subset_simulation'"):
        make_estimator("subset_simulaton")
    with pytest.raises(ScarceError, match="unknown estimator 3"):
        make_estimator(3)  # type: ignore[arg-type]


def test_a_bad_parameter_lists_the_allowed_ones():
    with pytest.raises(ScarceError) as info:
        make_estimator("subset_simulation", n_sample=500, sigma=1)
    message = str(info.value)
    assert "'subset_simulation'" in message and "['n_sample', 'sigma']" in message
    assert "allowed parameters: n_samples, level_probability, kernel, max_levels, max_queries" in message


def test_a_duplicate_registration_is_refused(scratch_registry):
    with pytest.raises(ScarceError, match="estimator 'amls' is already registered as "
                                          "'scarce.estimators.amls:AMLS'; pass overwrite=True"):
        register_estimator("amls", MonteCarlo)
    assert scratch_registry["amls"] == "scarce.estimators.amls:AMLS"
    register_estimator("amls", MonteCarlo, overwrite=True)
    assert isinstance(make_estimator("amls"), MonteCarlo)


def test_a_registered_estimator_is_built_lazily_and_checked(scratch_registry):
    register_estimator("chunked", "scarce.experiments.montecarlo:ChunkedMonteCarlo")
    assert "chunked" in available_estimators()
    estimator = make_estimator("chunked", n_samples=50_000, chunk_size=50_000)
    assert type(estimator).__name__ == "ChunkedMonteCarlo"
    register_estimator("missing", "scarce.estimators.nowhere:Nothing")
    with pytest.raises(ScarceError, match="'missing' is registered as 'scarce.estimators.nowhere:Nothing', which "
                                          "cannot be imported"):
        make_estimator("missing")


@pytest.mark.parametrize("name, target, match", [
    ("", MonteCarlo, "name must be a non-empty string"),
    (None, MonteCarlo, "name must be a non-empty string"),
    ("x", "scarce.estimators.montecarlo.MonteCarlo", "'module:Class'"),
    ("x", MonteCarlo(), "target must be a class"),
])
def test_a_bad_registration_is_refused(scratch_registry, name, target, match):
    with pytest.raises(ScarceError, match=match):
        register_estimator(name, target)  # type: ignore[arg-type]
    assert "x" not in scratch_registry

