"""What a result says about itself: strict JSON that round-trips, an infinite CoV with its reason,
Monte Carlo without a failure flagged with the rule of three."""

from __future__ import annotations

import dataclasses
import json
import math
import warnings

import pytest

import scarce
from scarce.problems import linear


def _budget_result():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scarce.ScarceWarning)
        return scarce.SubsetSimulation(n_samples=500, max_queries=1200).estimate(linear(dim=10, probability=1e-6), seed=0)


def test_json_is_strict_and_round_trips_the_non_finite_values():
    result = _budget_result()
    text = result.to_json()
    data = json.loads(text, parse_constant=lambda name: pytest.fail(f"non-standard JSON constant {name}"))
    assert data["cov"] is None and data["nonfinite"]["cov"] == "inf"
    assert data["levels"][0]["threshold"] is None and data["nonfinite"]["levels/0/threshold"] == "-inf"
    assert not any(isinstance(v, str) and v in ("inf", "-inf", "nan") for v in (data["cov"], data["probability"]))
    back = scarce.EstimateResult.from_json(text)
    assert math.isinf(back.cov) and back.levels[0].threshold == -math.inf and math.isnan(back.levels[0].acceptance_rate)
    assert back.to_json() == text
    assert scarce.EstimateResult.from_dict(json.loads(text)).to_json() == text  # the parsed form reads too


def test_older_json_with_strings_still_reads():
    old = json.loads(_budget_result().to_json())
    for path, value in old.pop("nonfinite").items():
        target = old
        *parents, last = path.split("/")
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        target[int(last) if isinstance(target, list) else last] = value
    assert math.isinf(scarce.EstimateResult.from_dict(old).cov)


def test_an_infinite_cov_says_why_and_monte_carlo_without_failure_is_flagged():
    from scarce.reporting.tables import _cov

    assert _cov(_budget_result()) == "inf (the failure event was not reached)"
    mc = scarce.MonteCarlo(n_samples=1000).estimate(linear(dim=3, probability=1e-6), seed=0)
    assert mc.n_failed == 0 and _cov(mc) == "inf (no failure observed)"
    assert any("no failure in 1,000 samples: P <= 0.00299 at 95%, one-sided (about 3 / N, the rule of three" in flag
               for flag in mc.flags)
    tiny = scarce.MonteCarlo(n_samples=2).estimate(linear(dim=3, probability=1e-6), seed=0)
    assert any("P <= 0.776 at 95%" in flag for flag in tiny.flags)  # 1 - 0.05^(1/2), not 3 / 2
    hit = scarce.MonteCarlo(n_samples=1000).estimate(linear(dim=3, probability=0.05), seed=0)
    assert hit.n_failed > 0 and not any("rule of three" in flag for flag in hit.flags)


@pytest.mark.parametrize("name", ["nan", "inf", "-inf"])
def test_a_string_field_reading_nan_or_inf_round_trips_as_the_string(name):
    problem = scarce.RareEventProblem.from_score(lambda u: u.sum(axis=1), 2, threshold=3.0, name=name)
    result = scarce.SubsetSimulation(n_samples=200).estimate(problem, seed=0)
    result = dataclasses.replace(result, info={**result.info, "note": name})
    back = scarce.EstimateResult.from_json(result.to_json())
    assert back.problem == name and back.info["note"] == name
    assert back.to_json() == result.to_json()


def _weak70(seed):
    """An unflagged run of a score that orders the failures only partly (engine page's weak70)."""
    angle = math.radians(70)
    problem = scarce.RareEventProblem(
        2, lambda u: (math.cos(angle) * u[:, 0] + math.sin(angle) * u[:, 1], u[:, 0] >= 3.5), name="weak70")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", scarce.ScarceWarning)
        return scarce.SubsetSimulation(n_samples=2000).estimate(problem, seed=seed)


def test_few_degrees_of_freedom_are_named_beside_the_cov(capsys):
    """The interval's t quantile on few lineages: the summary and the CLI table say how few."""
    from scipy.stats import t

    from scarce.reporting.tables import print_result

    result = _weak70(4)  # unflagged, its failures in about two effective lineages
    df = result.degrees_of_freedom()
    assert not result.flags and df == result.info["cov_degrees_of_freedom"] and 1.0 <= df < 3.0
    assert f"CoV {result.cov:.3g} on {df:.3g} degrees of freedom" in result.summary()
    # the interval is the log-normal one of the t quantile with those degrees of freedom
    s = math.sqrt(math.log1p(result.cov**2))
    centre = math.log(result.probability) + 0.5 * s * s
    assert result.ci()[0] == pytest.approx(math.exp(centre - t.ppf(0.975, df) * s), rel=1e-9)
    print_result(result)
    assert "few: the interval, not the CoV, is the error bar" in capsys.readouterr().out


def test_a_thin_runs_upper_end_takes_the_t_quantile_of_its_degrees_of_freedom():
    """Its interval is ``[0, u]``, ``u`` the larger of the log-normal upper end on its degrees of
    freedom and level 0's Clopper-Pearson bound: here the former, which the summary explains."""
    from scarce.envelope import clopper_pearson, lognormal_interval

    thin = _weak70(0)
    df = thin.degrees_of_freedom()
    assert thin.thin_evidence and df == thin.info["cov_degrees_of_freedom"] and df < 2.0
    upper = lognormal_interval(thin.probability, thin.cov, 0.95, df=df)[1]
    assert upper > clopper_pearson(thin.levels[0].n_failed, thin.n_samples)[1]
    assert thin.ci() == (0.0, pytest.approx(upper, rel=1e-12))
    assert f"on {df:.3g} degrees of freedom" in thin.summary()


@pytest.mark.parametrize("df, shown", [(1.0004, "1 degree of freedom"), (1.84, "1.84 degrees of freedom"),
                                       (4.994, "4.99 degrees of freedom"), (4.9996, None), (30.0, None)])
def test_the_degrees_of_freedom_shown_are_those_printed(df, shown):
    result = _weak70(4)
    result.info["cov_degrees_of_freedom"] = df
    assert result.few_degrees_of_freedom() == shown
    assert ("degree" in result.summary()) == (shown is not None)


def test_degrees_of_freedom_are_none_where_the_interval_takes_no_t_quantile():
    assert scarce.MonteCarlo(n_samples=10_000).estimate(linear(dim=2, probability=1e-2), seed=0).degrees_of_freedom() is None
    assert _budget_result().degrees_of_freedom() is None  # not reached: Clopper-Pearson
    many = scarce.SubsetSimulation(n_samples=2000).estimate(linear(dim=20, probability=1e-6), seed=0)
    assert many.degrees_of_freedom() > 100 and "degrees of freedom" not in many.summary()
